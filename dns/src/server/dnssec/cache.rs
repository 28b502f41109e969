//! Signatures kept per RRset content: a query whose RRset was signed before is answered
//! with that signature, so signing costs once per distinct answer, not once per query.
//!
//! The key is the RRset itself (owner in lower case, type, TTL and every record's data,
//! sorted: rotation reorders an answer, it does not make a new RRset). Weighted draws,
//! locations and negative answers for many names make many distinct RRsets, so the cache
//! is bounded: 16 shards of [`PER_SHARD`] entries, a full shard emptied before it takes
//! one more. A signature is made again after [`RESIGN_AFTER`], well before it expires.

use std::sync::Arc;

use hickory_proto::rr::Record;
use hickory_proto::serialize::binary::{BinEncodable, BinEncoder};

use crate::server::sharded::Sharded;

/// RRsets per shard: 65,536 in all, a few tens of MB at most.
const PER_SHARD: usize = 4096;
/// Seconds a signature is served before it is made again (it is valid for a week).
pub const RESIGN_AFTER: u64 = 86_400;

/// The signatures of one RRset and when they were made.
struct Entry {
    made: u64,
    signatures: Arc<[Record]>,
}

/// The cache of one signer.
pub struct SignatureCache(Sharded<Entry>);

impl Default for SignatureCache {
    fn default() -> Self {
        SignatureCache(Sharded::new(PER_SHARD))
    }
}

impl SignatureCache {
    /// The signatures of `rrset`: kept ones if made within [`RESIGN_AFTER`] of `now`, else
    /// `make`'s, kept for the next query.
    pub fn get_or_make(
        &self,
        rrset: &[Record],
        now: u64,
        make: impl FnOnce() -> Vec<Record>,
    ) -> Arc<[Record]> {
        let Some(key) = content_key(rrset) else {
            return make().into();
        };
        if let Some(e) = self.0.shard(&key).get(&key) {
            if now.saturating_sub(e.made) < RESIGN_AFTER {
                return e.signatures.clone();
            }
        }
        // Signed outside the lock: the other threads of this shard go on meanwhile.
        let signatures: Arc<[Record]> = make().into();
        let mut map = self.0.shard(&key);
        self.0.make_room(&mut map);
        map.insert(
            key,
            Entry {
                made: now,
                signatures: signatures.clone(),
            },
        );
        signatures
    }

    /// Forgets every signature (the signing keys changed).
    pub fn clear(&self) {
        self.0.clear();
    }
}

/// The RRset as a key: owner (lower case), type, TTL, then each record's data, sorted.
fn content_key(rrset: &[Record]) -> Option<Vec<u8>> {
    let first = rrset.first()?;
    let mut datas: Vec<Vec<u8>> = rrset
        .iter()
        .map(|r| {
            let mut buf = Vec::with_capacity(32);
            let mut encoder = BinEncoder::new(&mut buf);
            encoder.set_canonical_form(true);
            r.data.emit(&mut encoder).ok()?;
            Some(buf)
        })
        .collect::<Option<_>>()?;
    datas.sort_unstable();
    let mut key = Vec::with_capacity(64);
    for label in first.name.iter() {
        key.push(u8::try_from(label.len()).ok()?);
        key.extend(label.iter().map(u8::to_ascii_lowercase));
    }
    key.push(0);
    key.extend_from_slice(&u16::from(first.record_type()).to_be_bytes());
    key.extend_from_slice(&first.ttl.to_be_bytes());
    for d in datas {
        key.extend_from_slice(&u16::try_from(d.len()).ok()?.to_be_bytes());
        key.extend_from_slice(&d);
    }
    Some(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::rdata::A;
    use hickory_proto::rr::{Name, RData};
    use std::str::FromStr;

    fn a(name: &str, ip: [u8; 4]) -> Record {
        Record::from_rdata(
            Name::from_str(name).unwrap(),
            30,
            RData::A(A::from(std::net::Ipv4Addr::from(ip))),
        )
    }

    #[test]
    fn one_signature_per_rrset_content_whatever_the_order_and_case() {
        let cache = SignatureCache::default();
        let made = std::cell::Cell::new(0);
        let sign = || {
            made.set(made.get() + 1);
            vec![a("sig.example.", [0, 0, 0, 0])]
        };
        let one = [
            a("api.example.", [10, 0, 0, 1]),
            a("api.example.", [10, 0, 0, 2]),
        ];
        let rotated = [
            a("API.Example.", [10, 0, 0, 2]),
            a("api.example.", [10, 0, 0, 1]),
        ];
        cache.get_or_make(&one, 1000, sign);
        cache.get_or_make(&rotated, 1000, sign);
        assert_eq!(made.get(), 1, "same content: signed once");
        cache.get_or_make(&one[..1], 1000, sign);
        assert_eq!(made.get(), 2, "another RRset: signed");
        cache.get_or_make(&one, 1000 + RESIGN_AFTER, sign);
        assert_eq!(made.get(), 3, "signed again after a day");
        cache.clear();
        assert!(cache.0.is_empty());
    }

    #[test]
    fn the_cache_is_bounded() {
        let cache = SignatureCache::default();
        for i in 0..(cache.0.capacity() * 2) {
            let [_, _, b, c] = u32::try_from(i).unwrap().to_be_bytes();
            cache.get_or_make(&[a(&format!("n{i}.example."), [10, 0, b, c])], 0, Vec::new);
        }
        assert!(cache.0.len() <= cache.0.capacity());
    }
}
