//! The tenants each target key judges an endpoint of: a transition re-judges only those,
//! so a wave of a thousand transitions does not re-judge every name a thousand times.
//!
//! One sorted array of (key, tenant) pairs, looked up by binary search: most keys judge one
//! tenant's endpoint, and a hash map of keys to lists held about 80 bytes a key (its entry,
//! the load factor's room and a list's allocation), where a pair is 24.

use std::sync::Arc;

/// Which tenants each target key judges, built once per plan.
#[derive(Default)]
pub(super) struct JudgedBy {
    /// Each (key, index into `tenants`) once, sorted by key, then by tenant.
    pairs: Box<[(Arc<str>, u32)]>,
    /// The tenants' names, in the order they were given.
    tenants: Box<[Arc<str>]>,
}

impl JudgedBy {
    /// The index of `tenants`: each tenant's name with the target keys of its endpoints'
    /// checks (a key the plan shares, kept as the same copy).
    pub(super) fn of<'a, K>(tenants: impl IntoIterator<Item = (&'a str, K)>) -> JudgedBy
    where
        K: IntoIterator<Item = &'a Arc<str>>,
    {
        let mut names = Vec::new();
        let mut pairs = Vec::new();
        for (ti, (tenant, keys)) in tenants.into_iter().enumerate() {
            let ti = u32::try_from(ti).expect("fewer than 2^32 tenants");
            names.push(Arc::<str>::from(tenant));
            pairs.extend(keys.into_iter().map(|k| (k.clone(), ti)));
        }
        pairs.sort_unstable_by(|(a, ta), (b, tb)| a.cmp(b).then(ta.cmp(tb)));
        pairs.dedup_by(|(a, ta), (b, tb)| ta == tb && a == b);
        JudgedBy {
            pairs: pairs.into_boxed_slice(),
            tenants: names.into_boxed_slice(),
        }
    }

    /// The pairs of `key`.
    fn of_key(&self, key: &str) -> &[(Arc<str>, u32)] {
        let start = self.pairs.partition_point(|(k, _)| &**k < key);
        let len = self.pairs[start..].partition_point(|(k, _)| &**k == key);
        &self.pairs[start..start + len]
    }

    /// The plan's copy of `key`, if an endpoint is judged by it.
    pub(super) fn key(&self, key: &str) -> Option<&Arc<str>> {
        self.of_key(key).first().map(|(k, _)| k)
    }

    /// The tenants `key` judges an endpoint of, in the order they were given; `None` if no
    /// endpoint is judged by it.
    pub(super) fn tenants(&self, key: &str) -> Option<Vec<Arc<str>>> {
        let pairs = self.of_key(key);
        (!pairs.is_empty()).then(|| {
            (pairs.iter())
                .map(|(_, ti)| self.tenants[*ti as usize].clone())
                .collect()
        })
    }

    /// Bytes it holds besides the keys' text (shared with the plan) and the tenants'.
    #[cfg(test)]
    pub(super) fn own_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.pairs) + std::mem::size_of_val(&*self.tenants)
    }
}

#[cfg(test)]
#[path = "judged_tests.rs"]
mod tests;
