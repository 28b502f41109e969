//! The API server's watch cache, as far as lists see it. A real API server answers a list
//! with `resourceVersion=0` (kube-runtime's `ListSemantic::Any`) from its watch cache,
//! which may lag etcd (an HA replica behind the others) or have just restarted empty; a
//! list without `resourceVersion` (`MostRecent`) is a quorum read of etcd and always
//! current. [`Lag`] makes the cache fall behind on purpose, so a test can tell whether a
//! client's lists can take it back in time.
//!
//! Not implemented: watches served from the lagging cache (they replay etcd's history as
//! before), `resourceVersionMatch=Exact`, and the cache catching up by itself (it lags
//! until [`CachedLists::catch_up`]).

use std::collections::BTreeMap;

use serde_json::Value;

use super::Key;

/// How the watch cache lags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lag {
    /// It stops following etcd: lists that accept any version get what it held then.
    Stale,
    /// It restarted empty: lists that accept any version get no items, at the revision of
    /// a cache that has seen nothing.
    Empty,
}

/// A frozen cache: its objects and the revision it stands at.
#[derive(Default)]
pub struct CachedLists {
    frozen: Option<(BTreeMap<Key, Value>, u64)>,
}

impl CachedLists {
    /// Freezes the cache at `objects` and `revision`, or empty at revision 1.
    pub fn lag(&mut self, lag: Lag, objects: &BTreeMap<Key, Value>, revision: u64) {
        self.frozen = Some(match lag {
            Lag::Stale => (objects.clone(), revision),
            Lag::Empty => (BTreeMap::new(), 1),
        });
    }

    /// The cache follows etcd again.
    pub fn catch_up(&mut self) {
        self.frozen = None;
    }

    /// For a list with `resource_version`: the frozen objects and revision when the list
    /// may be served from the cache and it lags; `None` when etcd answers.
    pub fn serve(&self, resource_version: Option<&str>) -> Option<(&BTreeMap<Key, Value>, u64)> {
        let (objects, revision) = self.frozen.as_ref()?;
        (resource_version == Some("0")).then_some((objects, *revision))
    }
}
