//! What each zone held at each recent serial, so a secondary asking IXFR from one of them
//! gets only what changed since (RFC 1995), and one whose serial is older than the
//! journal gets the whole zone.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// Versions kept per zone: a secondary more than this many changes behind gets the whole
/// zone (a few KB to a few MB; as cheap as a long journal would be to diff).
const VERSIONS: usize = 64;

/// One record of a tenant's name in a zone: the data a transfer carries besides the apex's
/// and the static records.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ZoneRecord {
    /// Owner (lower case, no trailing dot).
    pub name: String,
    /// TTL, seconds.
    pub ttl: u32,
    /// What it holds.
    pub data: Data,
}

/// The data of a [`ZoneRecord`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Data {
    /// An A or AAAA record.
    Address(IpAddr),
    /// A CNAME to this host name (lower case, no trailing dot).
    Cname(String),
    /// A TXT record of one string (an ACME challenge).
    Text(String),
}

/// A zone's tenant records at one serial.
pub type Content = Arc<BTreeSet<ZoneRecord>>;

/// The recent versions of every zone.
#[derive(Default)]
pub struct Journal {
    zones: Mutex<HashMap<String, VecDeque<(u32, Content)>>>,
}

impl Journal {
    /// Notes that `zone` holds `content` at `serial`; true when the content differs from
    /// the last version noted (secondaries have something to fetch).
    pub fn record(&self, zone: &str, serial: u32, content: BTreeSet<ZoneRecord>) -> bool {
        let mut zones = self.zones.lock().expect("not poisoned");
        let versions = zones.entry(zone.to_owned()).or_default();
        let changed = versions.back().is_none_or(|(_, last)| **last != content);
        let content = match versions.back() {
            Some((_, last)) if !changed => last.clone(),
            _ => Arc::new(content),
        };
        if versions.back().is_some_and(|(s, _)| *s == serial) {
            versions.pop_back();
        }
        versions.push_back((serial, content));
        while versions.len() > VERSIONS {
            versions.pop_front();
        }
        changed
    }

    /// What `zone` held at `serial`, if that version is still kept.
    pub fn at(&self, zone: &str, serial: u32) -> Option<Content> {
        let zones = self.zones.lock().expect("not poisoned");
        zones
            .get(zone)?
            .iter()
            .find(|(s, _)| *s == serial)
            .map(|(_, c)| c.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn content(ips: &[&str]) -> BTreeSet<ZoneRecord> {
        ips.iter()
            .map(|ip| ZoneRecord {
                name: "api.example.org".into(),
                ttl: 30,
                data: Data::Address(ip.parse().unwrap()),
            })
            .collect()
    }

    #[test]
    fn versions_are_kept_by_serial_and_bounded() {
        let j = Journal::default();
        assert!(j.record("example.org", 1, content(&["10.0.0.1"])));
        assert!(
            !j.record("example.org", 2, content(&["10.0.0.1"])),
            "same content"
        );
        assert!(j.record("example.org", 3, content(&["10.0.0.2"])));
        assert_eq!(*j.at("example.org", 2).unwrap(), content(&["10.0.0.1"]));
        assert_eq!(*j.at("example.org", 3).unwrap(), content(&["10.0.0.2"]));
        assert!(j.at("example.net", 3).is_none());
        for serial in 4..(4 + VERSIONS as u32) {
            j.record("example.org", serial, content(&["10.0.0.3"]));
        }
        assert!(j.at("example.org", 3).is_none(), "too old: the whole zone");
    }
}
