//! A client's location for `geo` answers: configured networks first (longest prefix
//! wins), then a MaxMind-format database.

use std::net::IpAddr;

use ipnet::IpNet;
use serde::Deserialize;

use super::config::GeoConfig;

/// Maps client addresses to locations (upper-case ISO country codes).
pub struct Locator {
    /// Longest prefix first.
    networks: Vec<(IpNet, String)>,
    db: Option<maxminddb::Reader<Vec<u8>>>,
}

/// The only part of a GeoIP2/GeoLite2 Country or City record read.
#[derive(Deserialize)]
struct CountryRecord<'a> {
    #[serde(borrow, default)]
    country: Option<IsoCode<'a>>,
}

#[derive(Deserialize)]
struct IsoCode<'a> {
    #[serde(default)]
    iso_code: Option<&'a str>,
}

impl Locator {
    /// Loads `config` (reads the database file, if any); errors name the file.
    pub fn load(config: &GeoConfig) -> Result<Locator, String> {
        let mut networks: Vec<(IpNet, String)> = config
            .networks
            .iter()
            .filter_map(|(net, geo)| Some((net.parse::<IpNet>().ok()?.trunc(), geo.clone())))
            .collect();
        networks.sort_by_key(|(net, _)| std::cmp::Reverse(net.prefix_len()));
        let db = match &config.geoip_db {
            None => None,
            Some(path) => Some(
                maxminddb::Reader::open_readfile(path)
                    .map_err(|e| format!("geo.geoip_db: cannot load {}: {e}", path.display()))?,
            ),
        };
        Ok(Locator { networks, db })
    }

    /// The location of `ip`, if any source knows it.
    pub fn locate(&self, ip: IpAddr) -> Option<String> {
        if let Some((_, geo)) = self.networks.iter().find(|(net, _)| net.contains(&ip)) {
            return Some(geo.clone());
        }
        let db = self.db.as_ref()?;
        let found = db.lookup(ip).ok()?;
        let record: CountryRecord<'_> = found.decode().ok()??;
        record
            .country
            .and_then(|c| c.iso_code)
            .map(str::to_ascii_uppercase)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_configured_prefix_wins() {
        let config = GeoConfig {
            networks: [
                ("10.0.0.0/8".to_string(), "US".to_string()),
                ("10.1.0.0/16".to_string(), "IE".to_string()),
                ("2001:db8::/32".to_string(), "DE".to_string()),
            ]
            .into(),
            geoip_db: None,
        };
        let l = Locator::load(&config).unwrap();
        assert_eq!(l.locate("10.1.2.3".parse().unwrap()).as_deref(), Some("IE"));
        assert_eq!(l.locate("10.2.2.3".parse().unwrap()).as_deref(), Some("US"));
        assert_eq!(
            l.locate("2001:db8::5".parse().unwrap()).as_deref(),
            Some("DE")
        );
        assert_eq!(l.locate("192.0.2.1".parse().unwrap()), None);
    }

    #[test]
    fn a_missing_database_is_an_error_naming_the_file() {
        let config = GeoConfig {
            networks: Default::default(),
            geoip_db: Some("/nonexistent/GeoLite2-Country.mmdb".into()),
        };
        let e = Locator::load(&config).err().unwrap();
        assert!(e.contains("/nonexistent/GeoLite2-Country.mmdb"), "{e}");
    }
}
