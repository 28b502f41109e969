//! Whole answers kept by query: a query asked before is answered by copying the answer
//! made then, with the new query's ID and question, instead of parsing, resolving,
//! signing and encoding again (what PowerDNS's packet cache does).
//!
//! Only answers that depend on nothing but the query's bytes are kept: not a weighted draw
//! or a location (they change per query or per client), not a query with a COOKIE option
//! (its answer carries a cookie made for that client). A rotated answer (`all`,
//! `failover`) is kept once per rotation, so rotation goes on from the cache. The key is
//! the query from its flags on, the name in lower case (a resolver that randomises the
//! case of names still hits), and the transport (UDP answers may be truncated).
//!
//! Every change of what the server answers (a snapshot, a signing key) moves a
//! generation on; an answer kept under an older generation is never served. Answers are
//! also dropped after [`MAX_AGE`], and the cache is bounded like the signature cache.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::sharded::Sharded;

/// Queries per shard: 16,384 in all.
const PER_SHARD: usize = 1024;
/// An answer kept longer than this is made again (signatures in it stay fresh).
pub const MAX_AGE: Duration = Duration::from_secs(60);
/// Queries longer than this are not kept (no real query for one name is).
const MAX_QUERY: usize = 512;

/// A query that may be answered from the cache: its key and where its question lies.
pub struct Key {
    bytes: Vec<u8>,
    question_end: usize,
}

impl Key {
    /// The key of `request`, or `None` when its answer is never kept: not a plain query
    /// with one question and at most an OPT record, or carrying a COOKIE option.
    pub fn of(request: &[u8], udp: bool) -> Option<Key> {
        if request.len() < 17 || request.len() > MAX_QUERY {
            return None;
        }
        // QR = 0 (a query) and opcode 0 (QUERY).
        if request[2] & 0xf8 != 0 {
            return None;
        }
        let count = |at: usize| u16::from_be_bytes([request[at], request[at + 1]]);
        let additional = count(10);
        if count(4) != 1 || count(6) != 0 || count(8) != 0 || additional > 1 {
            return None;
        }
        let mut at = 12;
        loop {
            let len = usize::from(*request.get(at)?);
            at += 1;
            if len == 0 {
                break;
            }
            if len & 0xc0 != 0 || at - 12 > 255 {
                return None;
            }
            at += len;
        }
        let name_end = at;
        let question_end = at + 4;
        let end = if additional == 1 {
            opt_end(request, question_end)?
        } else {
            question_end
        };
        if end != request.len() {
            return None;
        }
        let mut bytes = Vec::with_capacity(request.len());
        bytes.push(u8::from(udp));
        bytes.extend_from_slice(&request[2..12]);
        bytes.extend(request[12..name_end].iter().map(u8::to_ascii_lowercase));
        bytes.extend_from_slice(&request[name_end..]);
        Some(Key {
            bytes,
            question_end,
        })
    }
}

/// Where the OPT record starting at `at` ends, or `None` when it is not one or carries
/// a COOKIE option.
fn opt_end(request: &[u8], at: usize) -> Option<usize> {
    let fixed = request.get(at..at + 11)?;
    // Root owner name, type OPT (41).
    if fixed[0] != 0 || fixed[1..3] != [0, 41] {
        return None;
    }
    let rdlen = usize::from(u16::from_be_bytes([fixed[9], fixed[10]]));
    let mut option = at + 11;
    let end = option + rdlen;
    while option < end {
        let head = request.get(option..option + 4)?;
        let code = u16::from_be_bytes([head[0], head[1]]);
        let len = usize::from(u16::from_be_bytes([head[2], head[3]]));
        if code == 10 {
            return None;
        }
        option += 4 + len;
    }
    (option == end).then_some(end)
}

/// When and for which rotation an answer is looked up or kept.
#[derive(Debug, Clone, Copy)]
pub struct Stamp {
    /// The authority's generation when the query arrived.
    pub generation: u64,
    /// The query's rotation turn.
    pub turn: usize,
    /// When the query arrived.
    pub now: Instant,
}

/// How an answer varies between queries with the same bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variation {
    /// Always the same: kept once.
    Fixed,
    /// One of this many rotations, chosen by the query's turn: kept once per rotation.
    Rotated(usize),
    /// Drawn or located per query: never kept.
    PerQuery,
}

impl Variation {
    /// How an answer made of parts varying as `self` and `other` varies: two rotations
    /// (both families of an ANY query) are not kept.
    pub fn and(self, other: Variation) -> Variation {
        match (self, other) {
            (Variation::Fixed, v) | (v, Variation::Fixed) => v,
            _ => Variation::PerQuery,
        }
    }
}

/// What [`PacketCache::get`] gives back: the answer and its metric labels.
pub struct Hit {
    /// The answer, with the query's ID and question.
    pub bytes: Vec<u8>,
    /// Query type label.
    pub qtype: &'static str,
    /// Response code label.
    pub rcode: &'static str,
}

struct Entry {
    generation: u64,
    made: Instant,
    qtype: &'static str,
    rcode: &'static str,
    /// One slot per rotation (one for a fixed answer).
    variants: Vec<Option<Arc<[u8]>>>,
}

/// The cache of one authority.
pub struct PacketCache(Sharded<Entry>);

impl Default for PacketCache {
    fn default() -> Self {
        PacketCache(Sharded::new(PER_SHARD))
    }
}

impl PacketCache {
    /// The kept answer to `request` (whose key is `key`) for the stamp's rotation, made
    /// under its generation within [`MAX_AGE`] of its time.
    pub fn get(&self, key: &Key, request: &[u8], stamp: Stamp) -> Option<Hit> {
        let map = self.0.shard(&key.bytes);
        let entry = map.get(&key.bytes)?;
        if entry.generation != stamp.generation || stamp.now.duration_since(entry.made) >= MAX_AGE {
            return None;
        }
        let kept = entry.variants[stamp.turn % entry.variants.len()].as_ref()?;
        let (qtype, rcode) = (entry.qtype, entry.rcode);
        let mut bytes = kept.to_vec();
        drop(map);
        // The query's ID and its question as sent (the case of its name, which the
        // answer's records point to).
        bytes[..2].copy_from_slice(&request[..2]);
        bytes[12..key.question_end].copy_from_slice(&request[12..key.question_end]);
        Some(Hit {
            bytes,
            qtype,
            rcode,
        })
    }

    /// Keeps `answer` (labels `qtype`, `rcode`) to the query of `key` for the stamp's
    /// rotation and generation, unless it varies per query.
    pub fn put(
        &self,
        key: Key,
        answer: &[u8],
        labels: (&'static str, &'static str),
        variation: Variation,
        stamp: Stamp,
    ) {
        let Stamp {
            generation,
            turn,
            now,
        } = stamp;
        let rotations = match variation {
            Variation::Fixed => 1,
            Variation::Rotated(n) => n.max(1),
            Variation::PerQuery => return,
        };
        if answer.len() < key.question_end {
            return;
        }
        let mut map = self.0.shard(&key.bytes);
        let fresh = |e: &Entry| {
            e.generation == generation
                && now.duration_since(e.made) < MAX_AGE
                && e.variants.len() == rotations
        };
        if !map.get(&key.bytes).is_some_and(fresh) {
            self.0.make_room(&mut map);
            map.insert(
                key.bytes.clone(),
                Entry {
                    generation,
                    made: now,
                    qtype: labels.0,
                    rcode: labels.1,
                    variants: vec![None; rotations],
                },
            );
        }
        if let Some(entry) = map.get_mut(&key.bytes) {
            entry.variants[turn % rotations] = Some(answer.into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(generation: u64, turn: usize, now: Instant) -> Stamp {
        Stamp {
            generation,
            turn,
            now,
        }
    }

    /// `api.example.org A` with ID `id`, the name as `name` spells it, with an OPT record
    /// carrying `options` when given.
    fn query(id: u16, name: &str, options: Option<&[u8]>) -> Vec<u8> {
        let mut q = id.to_be_bytes().to_vec();
        q.extend_from_slice(&[1, 0, 0, 1, 0, 0, 0, 0, 0, u8::from(options.is_some())]);
        for label in name.split('.') {
            q.push(u8::try_from(label.len()).unwrap());
            q.extend_from_slice(label.as_bytes());
        }
        q.extend_from_slice(&[0, 0, 1, 0, 1]);
        if let Some(o) = options {
            q.extend_from_slice(&[0, 0, 41, 4, 208, 0, 0, 0, 0]);
            q.extend_from_slice(&u16::try_from(o.len()).unwrap().to_be_bytes());
            q.extend_from_slice(o);
        }
        q
    }

    #[test]
    fn an_answer_is_served_with_the_querys_id_and_question_case() {
        let cache = PacketCache::default();
        let now = Instant::now();
        let first = query(1, "api.example.org", None);
        let mut answer = first.clone();
        answer[2] |= 0x80;
        answer.extend_from_slice(b"records");
        let key = Key::of(&first, true).unwrap();
        cache.put(
            key,
            &answer,
            ("A", "NOERROR"),
            Variation::Fixed,
            at(7, 0, now),
        );
        let second = query(2, "API.Example.ORG", None);
        let key = Key::of(&second, true).unwrap();
        let hit = cache
            .get(&key, &second, at(7, 5, now))
            .expect("same name, any case");
        assert_eq!(&hit.bytes[..2], &[0, 2], "the query's ID");
        assert_eq!(
            &hit.bytes[12..second.len()],
            &second[12..],
            "the question as sent"
        );
        assert!(hit.bytes.ends_with(b"records"));
        assert_eq!((hit.qtype, hit.rcode), ("A", "NOERROR"));
        assert!(
            cache.get(&key, &second, at(8, 0, now)).is_none(),
            "a new generation"
        );
        assert!(
            cache.get(&key, &second, at(7, 0, now + MAX_AGE)).is_none(),
            "too old"
        );
        let tcp = Key::of(&second, false).unwrap();
        assert!(
            cache.get(&tcp, &second, at(7, 0, now)).is_none(),
            "UDP and TCP apart"
        );
    }

    #[test]
    fn rotations_are_kept_apart_and_per_query_answers_not_at_all() {
        let cache = PacketCache::default();
        let now = Instant::now();
        let q = query(1, "api.example.org", None);
        for turn in 0..3 {
            let key = Key::of(&q, true).unwrap();
            let answer = [&q[..], &[u8::try_from(turn).unwrap()]].concat();
            cache.put(
                key,
                &answer,
                ("A", "NOERROR"),
                Variation::Rotated(3),
                at(1, turn, now),
            );
        }
        let key = Key::of(&q, true).unwrap();
        for turn in 0..6 {
            let hit = cache.get(&key, &q, at(1, turn, now)).unwrap();
            assert_eq!(*hit.bytes.last().unwrap(), u8::try_from(turn % 3).unwrap());
        }
        let other = query(1, "www.example.org", None);
        let key = Key::of(&other, true).unwrap();
        cache.put(
            key,
            &other,
            ("A", "NOERROR"),
            Variation::PerQuery,
            at(1, 0, now),
        );
        let key = Key::of(&other, true).unwrap();
        assert!(cache.get(&key, &other, at(1, 0, now)).is_none());
    }

    #[test]
    fn only_plain_queries_without_a_cookie_have_a_key() {
        assert!(Key::of(&query(1, "a.example.org", Some(&[])), true).is_some());
        // Client subnet (8): the key holds it, so each subnet has its own answer.
        let ecs = [0, 8, 0, 7, 0, 1, 24, 0, 10, 1, 7];
        assert!(Key::of(&query(1, "a.example.org", Some(&ecs)), true).is_some());
        let cookie = [0, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8];
        assert!(Key::of(&query(1, "a.example.org", Some(&cookie)), true).is_none());
        let mut response = query(1, "a.example.org", None);
        response[2] |= 0x80;
        assert!(Key::of(&response, true).is_none());
        let mut trailing = query(1, "a.example.org", None);
        trailing.push(0);
        assert!(Key::of(&trailing, true).is_none());
        let truncated_opt = query(1, "a.example.org", Some(&cookie[..6]));
        assert!(Key::of(&truncated_opt, true).is_none());
    }

    #[test]
    fn the_cache_is_bounded() {
        let cache = PacketCache::default();
        let now = Instant::now();
        for i in 0..(cache.0.capacity() * 2) {
            let q = query(1, &format!("n{i}.example.org"), None);
            let key = Key::of(&q, true).unwrap();
            cache.put(key, &q, ("A", "NOERROR"), Variation::Fixed, at(1, 0, now));
        }
        assert!(cache.0.len() <= cache.0.capacity());
        assert!(!cache.0.is_empty());
    }
}
