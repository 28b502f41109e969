//! The keys of a signing server and which of them publish and sign at a given time.
//!
//! The key directory is read when the sink starts (every zone must then have a key that
//! signs, or the sink does not start) and again whenever its files change (checked every
//! [`RESCAN`]), so a key added for a rollover is taken without a restart; a key's timing
//! takes effect at its second without anything being read.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use hickory_proto::dnssec::rdata::DNSKEY;
use tracing::{error, warn};

use super::error::DnssecError;
use super::keys::{self, ZoneKey};

/// How often the key directory is looked at for new, changed or removed files.
pub const RESCAN: Duration = Duration::from_secs(10);

/// Every key of the directory, as last read.
pub struct Keyring {
    dir: PathBuf,
    keys: Vec<Arc<ZoneKey>>,
    /// Names, sizes and modification times of the files read: what a rescan compares.
    fingerprint: Vec<(PathBuf, u64, Option<SystemTime>)>,
}

/// A zone's keys at one time.
#[derive(Clone, Default)]
pub struct ZoneKeys {
    /// The DNSKEY set: every published key.
    pub published: Vec<DNSKEY>,
    /// Keys that sign the DNSKEY set: the active KSKs (the active ZSKs when there is none).
    pub key_signers: Vec<Arc<ZoneKey>>,
    /// Keys that sign everything else: the active ZSKs (the active KSKs when there is
    /// none: a combined signing key).
    pub zone_signers: Vec<Arc<ZoneKey>>,
}

impl ZoneKeys {
    /// The key tags that sign, to see whether a change of state changes signatures.
    fn signing_tags(&self) -> Vec<u16> {
        let mut tags: Vec<u16> = self
            .key_signers
            .iter()
            .chain(&self.zone_signers)
            .map(|k| k.tag)
            .collect();
        tags.sort_unstable();
        tags
    }
}

/// Every zone's keys at one time, and when that may next change.
#[derive(Clone, Default)]
pub struct KeyState {
    /// By zone apex (lower case, no trailing dot).
    pub zones: HashMap<String, ZoneKeys>,
    /// The next key time after the one this state was made for.
    pub next_change: Option<u64>,
}

impl KeyState {
    /// Whether signatures made under `self` stay right under `other` (same signing keys).
    pub fn signs_like(&self, other: &KeyState) -> bool {
        self.zones.len() == other.zones.len()
            && self.zones.iter().all(|(zone, keys)| {
                other
                    .zones
                    .get(zone)
                    .is_some_and(|o| o.signing_tags() == keys.signing_tags())
            })
    }
}

impl KeyState {
    /// Whether the DNSKEY sets under `self` and `other` are the same.
    pub fn publishes_like(&self, other: &KeyState) -> bool {
        self.zones.len() == other.zones.len()
            && self.zones.iter().all(|(zone, keys)| {
                other
                    .zones
                    .get(zone)
                    .is_some_and(|o| o.published == keys.published)
            })
    }
}

impl Keyring {
    /// Reads `dir`; every zone of `zones` must have a key that signs at `now`.
    pub fn load(dir: &Path, zones: &[String], now: u64) -> Result<Keyring, DnssecError> {
        let ring = Keyring::read(dir)?;
        let state = ring.state(zones, now);
        let unsigned: Vec<String> = zones
            .iter()
            .filter(|z| {
                state
                    .zones
                    .get(*z)
                    .is_none_or(|k| k.zone_signers.is_empty())
            })
            .cloned()
            .collect();
        if !unsigned.is_empty() {
            return Err(DnssecError::Unsigned {
                dir: dir.to_owned(),
                zones: unsigned,
            });
        }
        Ok(ring)
    }

    fn read(dir: &Path) -> Result<Keyring, DnssecError> {
        Ok(Keyring {
            dir: dir.to_owned(),
            keys: keys::read_dir(dir)?.into_iter().map(Arc::new).collect(),
            fingerprint: fingerprint(dir),
        })
    }

    /// The directory read again if its files changed; `None` when they did not. A
    /// directory that no longer reads keeps the keys last read (and says why).
    pub fn reread(&self) -> Option<Keyring> {
        if fingerprint(&self.dir) == self.fingerprint {
            return None;
        }
        match Keyring::read(&self.dir) {
            Ok(ring) => Some(ring),
            Err(e) => {
                error!(error = %e, "DNSSEC keys not reread; signing with the keys read before");
                None
            }
        }
    }

    /// Which keys of `zones` publish and sign at `now`. A zone left with no active key
    /// (every key past `Inactive`) is signed by its published keys, whose signatures still
    /// validate, rather than served unsigned (bogus to every validating resolver).
    pub fn state(&self, zones: &[String], now: u64) -> KeyState {
        let mut state = KeyState::default();
        for zone in zones {
            let of_zone: Vec<&Arc<ZoneKey>> = self
                .keys
                .iter()
                .filter(|k| &k.zone == zone && k.timing.published(now))
                .collect();
            let mut signing: Vec<&Arc<ZoneKey>> = of_zone
                .iter()
                .copied()
                .filter(|k| k.timing.active(now))
                .collect();
            if signing.is_empty() && !of_zone.is_empty() {
                warn!(
                    zone,
                    "no DNSSEC key of the zone is active now; its published keys sign until \
                     a key is activated"
                );
                signing.clone_from(&of_zone);
            }
            let (ksks, zsks): (Vec<_>, Vec<_>) = signing.into_iter().partition(|k| k.is_ksk());
            let pick = |first: &Vec<&Arc<ZoneKey>>, second: &Vec<&Arc<ZoneKey>>| {
                let chosen = if first.is_empty() { second } else { first };
                chosen.iter().map(|k| Arc::clone(k)).collect::<Vec<_>>()
            };
            state.zones.insert(
                zone.clone(),
                ZoneKeys {
                    published: of_zone.iter().map(|k| k.dnskey.clone()).collect(),
                    key_signers: pick(&ksks, &zsks),
                    zone_signers: pick(&zsks, &ksks),
                },
            );
        }
        state.next_change = self
            .keys
            .iter()
            .filter(|k| zones.contains(&k.zone))
            .filter_map(|k| k.timing.next_change(now))
            .min();
        state
    }
}

/// What a rescan compares: each key file's name, size and modification time.
fn fingerprint(dir: &Path) -> Vec<(PathBuf, u64, Option<SystemTime>)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<_> = entries
        .filter_map(Result::ok)
        .filter(|e| {
            e.path()
                .extension()
                .is_some_and(|x| x == "key" || x == "private")
        })
        .filter_map(|e| {
            let meta = e.metadata().ok()?;
            Some((e.path(), meta.len(), meta.modified().ok()))
        })
        .collect();
    files.sort();
    files
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::dnssec::keys::{generate, NewKey, Timing};
    use hickory_proto::dnssec::Algorithm;

    fn key(dir: &Path, ksk: bool, timing: Timing) -> u16 {
        let new = NewKey {
            zone: "example.org".into(),
            algorithm: Algorithm::ED25519,
            ksk,
            timing,
        };
        let path = generate(&new, dir, SystemTime::UNIX_EPOCH).unwrap();
        keys::read_key(&path).unwrap().tag
    }

    fn tags(keys: &[Arc<ZoneKey>]) -> Vec<u16> {
        keys.iter().map(|k| k.tag).collect()
    }

    /// A pre-published ZSK rollover (RFC 6781 4.1.1.1) in key times: the new key is in the
    /// DNSKEY set before it signs, the old one stays there after it stops.
    #[test]
    fn a_zsk_rollover_publishes_before_signing_and_keeps_the_old_key_after() {
        let dir = tempfile::tempdir().unwrap();
        let zones = vec!["example.org".to_owned()];
        let ksk = key(dir.path(), true, Timing::default());
        let old = key(
            dir.path(),
            false,
            Timing {
                inactive: Some(200),
                delete: Some(300),
                ..Timing::default()
            },
        );
        let new = key(
            dir.path(),
            false,
            Timing {
                publish: Some(100),
                activate: Some(200),
                ..Timing::default()
            },
        );
        let ring = Keyring::load(dir.path(), &zones, 0).unwrap();
        let at = |t| ring.state(&zones, t).zones["example.org"].clone();
        assert_eq!(at(0).published.len(), 2);
        assert_eq!(tags(&at(0).zone_signers), vec![old]);
        assert_eq!(tags(&at(0).key_signers), vec![ksk]);
        assert_eq!(ring.state(&zones, 0).next_change, Some(100));
        assert_eq!(at(100).published.len(), 3, "the new key pre-published");
        assert_eq!(tags(&at(100).zone_signers), vec![old]);
        assert_eq!(tags(&at(200).zone_signers), vec![new]);
        assert_eq!(at(200).published.len(), 3, "the old key still published");
        assert_eq!(at(300).published.len(), 2);
        assert!(!ring.state(&zones, 0).signs_like(&ring.state(&zones, 200)));
        assert!(ring.state(&zones, 0).signs_like(&ring.state(&zones, 100)));
    }

    #[test]
    fn one_key_signs_everything_and_a_zone_without_keys_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let zones = vec!["example.org".to_owned(), "example.net".to_owned()];
        let err = Keyring::load(dir.path(), &zones, 0)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("example.org, example.net"), "{err}");
        let csk = key(dir.path(), true, Timing::default());
        let err = Keyring::load(dir.path(), &zones, 0)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("zone example.net"), "{err}");
        let ring = Keyring::load(dir.path(), &zones[..1], 0).unwrap();
        let keys = ring.state(&zones[..1], 0).zones["example.org"].clone();
        assert_eq!(tags(&keys.zone_signers), vec![csk]);
        assert_eq!(tags(&keys.key_signers), vec![csk]);
        assert!(ring.reread().is_none(), "nothing changed");
        key(dir.path(), false, Timing::default());
        let ring = ring.reread().expect("a key was added");
        assert_eq!(
            ring.state(&zones[..1], 0).zones["example.org"]
                .published
                .len(),
            2
        );
    }
}
