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

/// The only parts of a GeoIP2/GeoLite2 Country or City record read.
#[derive(Deserialize)]
struct CountryRecord<'a> {
    #[serde(borrow, default)]
    country: Option<IsoCode<'a>>,
    /// City databases only.
    #[serde(default)]
    location: Option<Coordinates>,
}

#[derive(Deserialize)]
struct Coordinates {
    latitude: Option<f64>,
    longitude: Option<f64>,
}

/// Where a client is: its location (an upper-case ISO country code, or a configured
/// label) and, from a City database, its coordinates.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Place {
    /// Its location, if any source knows it.
    pub geo: Option<String>,
    /// Latitude and longitude, when the database has them.
    pub at: Option<(f64, f64)>,
}

impl Place {
    /// Where to measure distances from: the client's coordinates, else its country's
    /// centre.
    pub fn position(&self) -> Option<(f64, f64)> {
        self.at
            .or_else(|| ho_engine::sink::geo::coordinates(self.geo.as_deref()?))
    }
}

#[derive(Deserialize)]
struct IsoCode<'a> {
    #[serde(default)]
    iso_code: Option<&'a str>,
}

/// The GeoIP database cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("geo.geoip_db: cannot load {}: {source}", path.display())]
pub struct GeoDbError {
    path: std::path::PathBuf,
    #[source]
    source: maxminddb::MaxMindDbError,
}

impl Locator {
    /// Loads `config` (reads the database file, if any); errors name the file.
    pub fn load(config: &GeoConfig) -> Result<Locator, GeoDbError> {
        let mut networks: Vec<(IpNet, String)> = config
            .networks
            .iter()
            .filter_map(|(net, geo)| Some((net.parse::<IpNet>().ok()?.trunc(), geo.clone())))
            .collect();
        networks.sort_by_key(|(net, _)| std::cmp::Reverse(net.prefix_len()));
        let db = match &config.geoip_db {
            None => None,
            Some(path) => {
                Some(
                    maxminddb::Reader::open_readfile(path).map_err(|source| GeoDbError {
                        path: path.clone(),
                        source,
                    })?,
                )
            }
        };
        Ok(Locator { networks, db })
    }

    /// Where `ip` is, as far as any source knows.
    pub fn locate(&self, ip: IpAddr) -> Place {
        if let Some((_, geo)) = self.networks.iter().find(|(net, _)| net.contains(&ip)) {
            return Place {
                geo: Some(geo.clone()),
                at: None,
            };
        }
        let record = self.db.as_ref().and_then(|db| {
            let found = db.lookup(ip).ok()?;
            found.decode::<CountryRecord<'_>>().ok()?
        });
        let Some(record) = record else {
            return Place::default();
        };
        Place {
            geo: record
                .country
                .and_then(|c| c.iso_code)
                .map(str::to_ascii_uppercase),
            at: record
                .location
                .and_then(|l| Some((l.latitude?, l.longitude?))),
        }
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
        let geo = |ip: &str| l.locate(ip.parse().unwrap()).geo;
        assert_eq!(geo("10.1.2.3").as_deref(), Some("IE"));
        assert_eq!(geo("10.2.2.3").as_deref(), Some("US"));
        assert_eq!(geo("2001:db8::5").as_deref(), Some("DE"));
        assert_eq!(geo("192.0.2.1"), None);
        let place = l.locate("10.1.2.3".parse().unwrap());
        assert!(place.position().is_some(), "a country's centre");
    }

    #[test]
    fn a_missing_database_is_an_error_naming_the_file() {
        let config = GeoConfig {
            networks: Default::default(),
            geoip_db: Some("/nonexistent/GeoLite2-Country.mmdb".into()),
        };
        let e = Locator::load(&config).err().unwrap().to_string();
        assert!(e.contains("/nonexistent/GeoLite2-Country.mmdb"), "{e}");
    }
}
