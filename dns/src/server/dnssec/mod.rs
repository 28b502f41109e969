//! DNSSEC online signing for the embedded server: answers are signed as they are made,
//! because they are made per query (rotation, weighted draws, locations) from a set that
//! changes within milliseconds of a verdict. PowerDNS signs its Lua records the same way.
//!
//! - [`keys`]: key files (BIND's format) and `dnssec keygen`.
//! - [`keyring`]: which keys publish and sign now; rollovers by key times.
//! - [`cache`]: signatures kept per RRset content, so a query seldom signs.
//!
//! Denial of existence is compact (RFC 9824, "black lies"): a name that does not exist,
//! or lacks the type asked, is answered NOERROR with one NSEC at the name itself listing
//! what exists there (`NXNAME` for nothing), next name `\000.<name>`. That proves only
//! what was asked and names no other record, so the zone cannot be walked, and it needs
//! one signature per answer rather than a signed chain over the whole zone.
//!
//! Only a query with the DO bit gets signatures and NSEC records; others are answered as
//! from an unsigned zone (NXDOMAIN where a name does not exist).

pub mod cache;
mod error;
pub mod keyring;
pub mod keys;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, Weak};

use hickory_proto::dnssec::rdata::sig::SigInput;
use hickory_proto::dnssec::rdata::{DNSSECRData, NSEC, RRSIG};
use hickory_proto::dnssec::TBS;
use hickory_proto::op::Message;
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType, SerialNumber};
use ho_engine::clock::unix_now;
use tracing::{error, info};

use super::config::DnssecConfig;
use cache::SignatureCache;
use keyring::{KeyState, Keyring, ZoneKeys};
use keys::ZoneKey;

pub use error::{DnssecError, TimeError};

/// RFC 9824's NXNAME pseudo-type: in an NSEC's type bitmap, "this name does not exist".
const NXNAME: u16 = 128;
/// Signatures start this long before they are made, for validators whose clock is behind.
const INCEPTION_BEFORE: u64 = 3600;
/// Signatures last this long after they are made.
const VALIDITY: u64 = 7 * 86_400;

/// The signing half of a `dns_server` sink.
pub struct Signer {
    zones: Vec<String>,
    dnskey_ttl: u32,
    /// TTL of denial NSEC records: the SOA's negative-caching TTL (RFC 9077).
    negative_ttl: u32,
    keyring: RwLock<Keyring>,
    state: RwLock<Arc<KeyState>>,
    cache: SignatureCache,
    /// Moves on whenever the signing keys change: answers kept before are stale.
    generation: AtomicU64,
}

impl Signer {
    /// Reads the keys of `config` for `zones` (every zone must have one that signs now)
    /// and starts the thread that follows key times and new key files; denials live
    /// `negative_ttl` seconds.
    pub fn start(
        config: &DnssecConfig,
        zones: &[String],
        negative_ttl: u32,
    ) -> Result<Arc<Signer>, DnssecError> {
        let now = unix_now();
        let keyring = Keyring::load(&config.keys, zones, now)?;
        let state = keyring.state(zones, now);
        let signer = Arc::new(Signer {
            zones: zones.to_vec(),
            dnskey_ttl: config.dnskey_ttl,
            negative_ttl,
            keyring: RwLock::new(keyring),
            state: RwLock::new(Arc::new(state)),
            cache: SignatureCache::default(),
            generation: AtomicU64::new(0),
        });
        let weak = Arc::downgrade(&signer);
        std::thread::Builder::new()
            .name("dnssec-keys".into())
            .spawn(move || follow_keys(&weak))
            .map_err(|e| DnssecError::Crypto(format!("cannot start the DNSSEC key thread: {e}")))?;
        info!(keys = %config.keys.display(), zones = zones.join(", "), "DNSSEC signing");
        Ok(signer)
    }

    /// Checks that `dir` holds a key that signs now for every zone (for `check-config`).
    pub fn preflight(dir: &Path, zones: &[String]) -> Result<(), DnssecError> {
        Keyring::load(dir, zones, unix_now()).map(|_| ())
    }

    /// Reads the key times and files again; true when the keys that publish or sign
    /// changed (answers made before are stale; signatures too when signing keys changed). The key thread calls it; tests call it with their own `now`.
    pub fn refresh(&self, now: u64) -> bool {
        let reread = self.keyring.read().expect("not poisoned").reread();
        if let Some(ring) = reread {
            info!("DNSSEC key files changed; keys read again");
            *self.keyring.write().expect("not poisoned") = ring;
        }
        let state = self
            .keyring
            .read()
            .expect("not poisoned")
            .state(&self.zones, now);
        let mut current = self.state.write().expect("not poisoned");
        let resign = !current.signs_like(&state);
        let changed = resign || !current.publishes_like(&state);
        *current = Arc::new(state);
        if resign {
            info!("DNSSEC signing keys changed; signatures are made again");
            self.cache.clear();
        }
        if changed {
            self.generation.fetch_add(1, Ordering::Release);
        }
        changed
    }

    /// Moves on whenever the keys change (see [`Signer::refresh`]).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    fn keys(&self) -> Arc<KeyState> {
        self.state.read().expect("not poisoned").clone()
    }

    /// The DNSKEY records of `zone` (its published keys) owned by `apex`.
    pub fn dnskeys(&self, zone: &str, apex: &Name) -> Vec<Record> {
        let state = self.keys();
        state.zones.get(zone).map_or_else(Vec::new, |k| {
            k.published
                .iter()
                .map(|key| {
                    Record::from_rdata(
                        apex.clone(),
                        self.dnskey_ttl,
                        RData::DNSSEC(DNSSECRData::DNSKEY(key.clone())),
                    )
                })
                .collect()
        })
    }

    /// Signs every RRset of `response`'s answer and authority sections with `zone`'s keys;
    /// a negative answer first gets its compact NSEC (at `qname`, listing `types`, or
    /// NXNAME when `exists` is false) and becomes NOERROR.
    pub fn sign(
        &self,
        response: &mut Message,
        zone: &str,
        apex: &Name,
        qname: &Name,
        exists: bool,
        types: &[RecordType],
    ) {
        let state = self.keys();
        let Some(keys) = state.zones.get(zone) else {
            return;
        };
        if response.answers.is_empty() {
            response.metadata.response_code = hickory_proto::op::ResponseCode::NoError;
            response
                .authorities
                .push(denial(qname, exists, types, self.negative_ttl));
        }
        let now = unix_now();
        for section in [&mut response.answers, &mut response.authorities] {
            let mut signatures = Vec::new();
            for rrset in section
                .chunk_by(|a, b| a.record_type() == b.record_type() && a.name.eq_case(&b.name))
            {
                signatures.extend(self.signatures(rrset, keys, apex, now));
            }
            section.extend(signatures);
        }
    }

    /// The RRSIGs of one RRset, from the cache or made now.
    fn signatures(&self, rrset: &[Record], keys: &ZoneKeys, apex: &Name, now: u64) -> Vec<Record> {
        let owner = &rrset[0].name;
        let signers = if rrset[0].record_type() == RecordType::DNSKEY {
            &keys.key_signers
        } else {
            &keys.zone_signers
        };
        let cached = self.cache.get_or_make(rrset, now, || {
            signers
                .iter()
                .filter_map(|key| match rrsig(rrset, key, apex, now) {
                    Ok(r) => Some(r),
                    Err(e) => {
                        error!(key = %key.path.display(), error = %e, "DNSSEC signing failed");
                        None
                    }
                })
                .collect()
        });
        cached
            .iter()
            .map(|r| {
                let mut r = r.clone();
                r.name.clone_from(owner);
                r
            })
            .collect()
    }
}

/// The RRSIG of `rrset` by `key`.
fn rrsig(rrset: &[Record], key: &ZoneKey, apex: &Name, now: u64) -> Result<Record, String> {
    let first = &rrset[0];
    let as_serial = |t: u64| SerialNumber::new(u32::try_from(t).unwrap_or(u32::MAX));
    let owner = first.name.to_lowercase();
    let input = SigInput {
        type_covered: first.record_type(),
        algorithm: key.signer.algorithm(),
        num_labels: owner.num_labels(),
        original_ttl: first.ttl,
        sig_expiration: as_serial(now + VALIDITY),
        sig_inception: as_serial(now.saturating_sub(INCEPTION_BEFORE)),
        key_tag: key.tag,
        signer_name: apex.to_lowercase(),
    };
    let tbs =
        TBS::from_input(&owner, DNSClass::IN, &input, rrset.iter()).map_err(|e| e.to_string())?;
    let signature = key.signer.sign(&tbs).map_err(|e| e.to_string())?;
    Ok(Record::from_rdata(
        owner,
        first.ttl,
        RData::DNSSEC(DNSSECRData::RRSIG(RRSIG::from_sig(input, signature))),
    ))
}

/// The compact denial of `qname` (RFC 9824): an NSEC at the name, next name `\000.name`,
/// listing the types that exist there (NXNAME when the name does not exist).
fn denial(qname: &Name, exists: bool, types: &[RecordType], ttl: u32) -> Record {
    let owner = qname.to_lowercase();
    let next = owner
        .prepend_label(&[0u8][..])
        .unwrap_or_else(|_| owner.clone());
    let listed: Vec<RecordType> = if exists {
        types.to_vec()
    } else {
        vec![RecordType::from(NXNAME)]
    };
    let nsec = NSEC::new_cover_self(next, listed);
    Record::from_rdata(owner, ttl, RData::DNSSEC(DNSSECRData::NSEC(nsec)))
}

/// Follows key times and key files while the signer exists: wakes at the next key time
/// or after [`keyring::RESCAN`], whichever is first.
fn follow_keys(signer: &Weak<Signer>) {
    loop {
        let wait = {
            let Some(s) = signer.upgrade() else { return };
            let now = unix_now();
            let next = s.keys().next_change.map(|t| t.saturating_sub(now));
            next.map_or(keyring::RESCAN, |secs| {
                keyring::RESCAN.min(std::time::Duration::from_secs(secs))
            })
        };
        // Key times are whole seconds: wake just after the second turns.
        std::thread::sleep(wait.max(std::time::Duration::from_millis(50)));
        let Some(s) = signer.upgrade() else { return };
        s.refresh(unix_now());
    }
}
