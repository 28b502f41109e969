//! The tenants each target key judges an endpoint of: a transition re-judges only those,
//! so a wave of a thousand transitions does not re-judge every name a thousand times.
//!
//! One sorted array of (key, tenant) pairs, looked up by binary search: most keys judge one
//! tenant's endpoint, and a hash map of keys to lists held about 80 bytes a key (its entry,
//! the load factor's room and a list's allocation), where a pair is 8. A pair holds the
//! key's [`CheckKey::prefix`]: two keys sharing one only re-judge a tenant in vain, as the
//! tenant is judged by its endpoints' whole keys.

use std::sync::Arc;

use super::CheckKey;

/// Which tenants each target key judges, built once per plan.
#[derive(Default)]
pub(super) struct JudgedBy {
    /// Each (key's prefix, index into `tenants`) once, sorted by prefix, then by tenant.
    pairs: Box<[(u32, u32)]>,
    /// The tenants' names, in the order they were given.
    tenants: Box<[Arc<str>]>,
}

impl JudgedBy {
    /// The index of `tenants`: each tenant's name with the target keys of its endpoints'
    /// checks.
    pub(super) fn of<'a, K>(tenants: impl IntoIterator<Item = (&'a str, K)>) -> JudgedBy
    where
        K: IntoIterator<Item = CheckKey>,
    {
        let mut names = Vec::new();
        let mut pairs = Vec::new();
        for (ti, (tenant, keys)) in tenants.into_iter().enumerate() {
            let ti = u32::try_from(ti).expect("fewer than 2^32 tenants");
            names.push(Arc::<str>::from(tenant));
            pairs.extend(keys.into_iter().map(|k| (k.prefix(), ti)));
        }
        pairs.sort_unstable();
        pairs.dedup();
        JudgedBy {
            pairs: pairs.into_boxed_slice(),
            tenants: names.into_boxed_slice(),
        }
    }

    /// The pairs of `key`'s prefix.
    fn of_key(&self, key: CheckKey) -> &[(u32, u32)] {
        let prefix = key.prefix();
        let start = self.pairs.partition_point(|(k, _)| *k < prefix);
        let len = self.pairs[start..].partition_point(|(k, _)| *k == prefix);
        &self.pairs[start..start + len]
    }

    /// The tenants `key` judges an endpoint of, in the order they were given (and any a
    /// key of the same prefix judges); `None` if no endpoint is judged by either.
    pub(super) fn tenants(&self, key: CheckKey) -> Option<Vec<Arc<str>>> {
        let pairs = self.of_key(key);
        (!pairs.is_empty()).then(|| {
            (pairs.iter())
                .map(|(_, ti)| self.tenants[*ti as usize].clone())
                .collect()
        })
    }

    /// Bytes it holds besides the tenants' names.
    #[cfg(test)]
    pub(super) fn own_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.pairs) + std::mem::size_of_val(&*self.tenants)
    }
}

#[cfg(test)]
#[path = "judged_tests.rs"]
mod tests;
