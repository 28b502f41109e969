//! A bounded map split into shards, each behind its own lock, for what the serving threads
//! keep between queries (signatures, whole answers): threads answering different queries
//! rarely wait for each other, and a flood of distinct keys empties a full shard rather
//! than growing memory.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Mutex, MutexGuard};

/// Shards of every map.
const SHARDS: usize = 16;

/// Byte-string keys to `V`, at most `SHARDS` x `per_shard` entries.
pub struct Sharded<V> {
    hasher: std::collections::hash_map::RandomState,
    shards: Vec<Mutex<HashMap<Vec<u8>, V>>>,
    per_shard: usize,
}

impl<V> Sharded<V> {
    /// An empty map of at most `per_shard` entries per shard.
    pub fn new(per_shard: usize) -> Sharded<V> {
        Sharded {
            hasher: std::collections::hash_map::RandomState::new(),
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            per_shard,
        }
    }

    /// The most entries it holds (tests check the bound).
    #[cfg(test)]
    pub fn capacity(&self) -> usize {
        SHARDS * self.per_shard
    }

    /// The locked shard holding `key`.
    pub fn shard(&self, key: &[u8]) -> MutexGuard<'_, HashMap<Vec<u8>, V>> {
        let i = self.hasher.hash_one(key) % SHARDS as u64;
        self.shards[usize::try_from(i).unwrap_or(0)]
            .lock()
            .expect("not poisoned")
    }

    /// Makes room in `shard` for one more entry: a full shard is emptied.
    pub fn make_room(&self, shard: &mut HashMap<Vec<u8>, V>) {
        if shard.len() >= self.per_shard {
            shard.clear();
        }
    }

    /// Forgets everything.
    pub fn clear(&self) {
        for shard in &self.shards {
            shard.lock().expect("not poisoned").clear();
        }
    }

    /// Entries held (tests check the bound).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().expect("not poisoned").len())
            .sum()
    }

    /// Whether nothing is held (tests).
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
