//! Typed indices into the running plan, and the plan's relations the tracker walks on every
//! transition (which endpoints a target serves, which tenants include them).
//!
//! The plan's invariant (see `ho_config::plan`): `Endpoint::target` (and a composite
//! endpoint's other targets) index `Plan::targets`, `Tenant::endpoints` index
//! `Plan::endpoints`, and a tenant holds at most one endpoint per address, hence at most
//! one per target. Newtypes keep the three index spaces apart.

use std::collections::HashMap;

use ho_config::Plan;

use crate::observation::TargetId;
use crate::ring::rendezvous::target_hash;

/// Index into `Plan::targets` (and the tracker's per-target state).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TargetIx(pub usize);

/// Index into `Plan::endpoints`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EndpointIx(pub usize);

/// Index into `Plan::tenants` (and the tracker's per-tenant state).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TenantIx(pub usize);

/// One tenant's use of a target: the tenant, and its endpoint on that target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Membership {
    /// The tenant.
    pub tenant: TenantIx,
    /// The tenant's endpoint on the target.
    pub endpoint: EndpointIx,
}

/// The plan's relations, built once per plan so a transition costs only the tenants it
/// touches. Each relation is stored flat ([`Rows`]): a `Vec` per target cost a header and an
/// allocation each, more than the indices in it (about 150 bytes a target against 40). Its
/// indices are kept in 32 bits (a plan never has 2^32 endpoints or tenants), half of what
/// the typed indices take: 20 bytes a target of one endpoint in one tenant, where 32.
#[derive(Debug, Default)]
pub struct Topology {
    /// For each target, its endpoints.
    endpoints_of_target: Rows<u32>,
    /// For each target, the tenants that include one of its endpoints: (tenant, endpoint).
    tenants_of_target: Rows<[u32; 2]>,
}

/// An index of the plan in the 32 bits [`Topology`] keeps it in.
fn narrow(index: usize) -> u32 {
    u32::try_from(index).expect("a plan has fewer than 2^32 endpoints and tenants")
}

impl Topology {
    /// The relations of `plan`.
    pub fn of(plan: &Plan) -> Topology {
        let endpoints = plan.endpoints.iter().enumerate();
        let endpoints_of_target =
            endpoints.flat_map(|(ei, ep)| ep.targets().map(move |t| (t, narrow(ei))));
        let tenants_of_target = plan.tenants.iter().enumerate().flat_map(|(ti, tenant)| {
            (tenant.endpoints.iter())
                .flat_map(move |&ei| (plan.endpoints[ei].targets()).map(move |t| (t, ei)))
                .map(move |(t, ei)| (t, [narrow(ti), narrow(ei)]))
        });
        Topology {
            endpoints_of_target: Rows::of(plan.targets.len(), endpoints_of_target),
            tenants_of_target: Rows::of(plan.targets.len(), tenants_of_target),
        }
    }

    /// The endpoints judged by `target` (their check, or one of their checks).
    pub fn endpoints(&self, target: TargetIx) -> impl ExactSizeIterator<Item = EndpointIx> + '_ {
        (self.endpoints_of_target.row(target.0).iter()).map(|&e| EndpointIx(e as usize))
    }

    /// The tenants that include `target`, each with its endpoint there.
    pub fn tenants(&self, target: TargetIx) -> impl ExactSizeIterator<Item = Membership> + '_ {
        (self.tenants_of_target.row(target.0).iter()).map(|&[t, e]| Membership {
            tenant: TenantIx(t as usize),
            endpoint: EndpointIx(e as usize),
        })
    }
}

/// A relation from row numbers to items, stored flat: row `r` is
/// `items[starts[r]..starts[r + 1]]`. Both exact, boxed slices: the pairs they are built
/// from grew by doubling, and items collected in their place kept that room (about 30
/// bytes a target of the two relations at 100,000).
#[derive(Debug)]
struct Rows<T> {
    starts: Box<[u32]>,
    items: Box<[T]>,
}

impl<T> Default for Rows<T> {
    fn default() -> Self {
        Rows {
            starts: Box::new([0]),
            items: Box::new([]),
        }
    }
}

impl<T> Rows<T> {
    /// `rows` rows of the `(row, item)` pairs, each row's items in the pairs' order.
    fn of(rows: usize, pairs: impl Iterator<Item = (usize, T)>) -> Rows<T> {
        let mut pairs: Vec<(usize, T)> = pairs.collect();
        // Stable: a row keeps its items in the order they came.
        pairs.sort_by_key(|(row, _)| *row);
        let mut starts = vec![0u32; rows + 1];
        for (row, _) in &pairs {
            starts[row + 1] += 1;
        }
        for r in 0..rows {
            starts[r + 1] += starts[r];
        }
        let mut items = Vec::with_capacity(pairs.len());
        items.extend(pairs.into_iter().map(|(_, item)| item));
        Rows {
            starts: starts.into_boxed_slice(),
            items: items.into_boxed_slice(),
        }
    }

    /// The items of `row`; none past the last row.
    fn row(&self, row: usize) -> &[T] {
        match (self.starts.get(row), self.starts.get(row + 1)) {
            (Some(&start), Some(&end)) => &self.items[start as usize..end as usize],
            _ => &[],
        }
    }

    /// Bytes it holds.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        std::mem::size_of_val(&*self.starts) + std::mem::size_of_val(&*self.items)
    }
}

/// Per-tenant state of plan `old` (`states`, by [`TenantIx`]) laid out for plan `new`:
/// each tenant's kept by name, a new tenant's starting empty. Tenants are keyed by name
/// across reloads, since a reload may move or remove them.
pub fn carry_by_name<T: Default>(old: &Plan, states: Vec<T>, new: &Plan) -> Vec<T> {
    let mut by_name: HashMap<&str, T> = old
        .tenants
        .iter()
        .map(|t| t.name.as_str())
        .zip(states)
        .collect();
    new.tenants
        .iter()
        .map(|t| by_name.remove(t.name.as_str()).unwrap_or_default())
        .collect()
}

/// Which target an observation, a timer or a ring member's stream names: each plan target's
/// stable id (what probers and timers carry, kept across reloads) and, under `[ring]`, its
/// key (what members' streams carry). Observations of ids not in the plan (a prober removed
/// by a reload, still finishing a probe) find no target and are ignored.
#[derive(Debug, Default)]
pub struct TargetIds {
    /// The stable id of each plan target (index = target index).
    ids: Vec<TargetId>,
    /// The target indices in the order of their ids, found by binary search; `None` while
    /// the ids ascend with the targets (as at start), which `ids` alone answers. Four
    /// bytes a target at most, where a hash map from id to index was about 22.
    by_id: Option<Box<[u32]>>,
    /// `[ring]`: each target's [`target_hash`] and index, sorted: what a member's stream or a
    /// moved gate names is found by binary search. 16 bytes a target, where a map from a
    /// copy of each key was about 80.
    by_hash: Vec<(u64, TargetIx)>,
}

impl TargetIds {
    /// The targets of a plan, numbered by `ids` (one per target, in order); keys come with
    /// [`TargetIds::index_keys`].
    pub fn of(ids: Vec<TargetId>) -> TargetIds {
        let by_id = (!ids.is_sorted_by(|a, b| a < b)).then(|| {
            let count = u32::try_from(ids.len()).expect("a plan has fewer than 2^32 targets");
            let mut order: Box<[u32]> = (0..count).collect();
            order.sort_unstable_by_key(|&t| ids[t as usize]);
            order
        });
        TargetIds {
            ids,
            by_id,
            by_hash: Vec::new(),
        }
    }

    /// Indexes the targets of `plan` (the plan these ids number) by key hash as well.
    pub fn index_keys(&mut self, plan: &Plan) {
        self.by_hash = plan
            .targets
            .iter()
            .enumerate()
            .map(|(i, t)| (target_hash(&t.key()), TargetIx(i)))
            .collect();
        self.by_hash.sort_unstable_by_key(|&(h, t)| (h, t.0));
        self.by_hash.shrink_to_fit();
    }

    /// The targets whose key hashes to `hash` (`[ring]`): one, as a rule.
    pub fn by_hash(&self, hash: u64) -> impl Iterator<Item = TargetIx> + '_ {
        let start = self.by_hash.partition_point(|(h, _)| *h < hash);
        self.by_hash[start..]
            .iter()
            .take_while(move |(h, _)| *h == hash)
            .map(|(_, t)| *t)
    }

    /// The target of `plan` (the plan these ids number) keyed `key` (`[ring]`).
    pub fn by_key(&self, key: &str, plan: &Plan) -> Option<TargetIx> {
        self.by_hash(target_hash(key))
            .find(|t| plan.targets[t.0].key() == key)
    }

    /// The target with stable id `id`.
    pub fn index(&self, id: TargetId) -> Option<TargetIx> {
        let found = match &self.by_id {
            None => self.ids.binary_search(&id).ok(),
            Some(order) => (order
                .binary_search_by_key(&id, |&t| self.ids[t as usize])
                .ok())
            .map(|at| order[at] as usize),
        };
        found.map(TargetIx)
    }

    /// The stable id of `target`.
    pub fn id(&self, target: TargetIx) -> TargetId {
        self.ids[target.0]
    }

    /// The ids in target order, given up (a reload renumbers).
    pub fn into_ids(self) -> Vec<TargetId> {
        self.ids
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::{EndpointIx, Membership, Rows, TargetIds, TargetIx, TenantIx, Topology};

    /// Ids ascending with their targets (as at start) and shuffled (as after reloads),
    /// seeded, against a map from id to index: each id finds its target, an id of no
    /// target none; the order of shuffled ids costs four bytes a target, ascending ones
    /// nothing.
    #[test]
    fn every_id_finds_the_target_a_map_finds_in_generated_orders() {
        for seed in 0..200 {
            let mut rng = fastrand::Rng::with_seed(seed);
            let mut ids: Vec<u64> = Vec::new();
            let mut next = 0;
            for _ in 0..rng.usize(0..300) {
                next += rng.u64(1..4);
                ids.push(next);
            }
            let ascending = seed % 2 == 0;
            if !ascending {
                rng.shuffle(&mut ids);
            }
            let map: HashMap<u64, usize> = ids.iter().enumerate().map(|(i, &id)| (id, i)).collect();
            let index = TargetIds::of(ids.clone());
            for id in 0..=next + 1 {
                assert_eq!(
                    index.index(id),
                    map.get(&id).map(|&i| TargetIx(i)),
                    "seed {seed}"
                );
            }
            let sorted_already = ids.is_sorted();
            let order = index
                .by_id
                .as_ref()
                .map_or(0, |o| std::mem::size_of_val(&**o));
            assert_eq!(
                order,
                if sorted_already { 0 } else { 4 * ids.len() },
                "seed {seed}"
            );
        }
    }

    /// A plan's relations against the plan's own fields: each target's endpoints are those
    /// whose check it is, each in the one tenant; kept in 20 bytes a target (two rows'
    /// starts, an endpoint's index, a tenant's and an endpoint's), where 32 as typed indices.
    #[test]
    fn a_target_of_one_endpoint_in_one_tenant_costs_twenty_bytes() {
        let n = 40;
        let plan = super::super::tests::plan(n, "", "");
        let topology = Topology::of(&plan);
        for t in 0..plan.targets.len() {
            let expected: Vec<EndpointIx> = (0..plan.endpoints.len())
                .filter(|&e| plan.endpoints[e].target() == t)
                .map(EndpointIx)
                .collect();
            let got: Vec<EndpointIx> = topology.endpoints(TargetIx(t)).collect();
            assert_eq!(got, expected, "target {t}");
            let members: Vec<Membership> = topology.tenants(TargetIx(t)).collect();
            let tenants: Vec<Membership> = (expected.iter())
                .map(|&endpoint| Membership {
                    tenant: TenantIx(0),
                    endpoint,
                })
                .collect();
            assert_eq!(members, tenants, "target {t}");
        }
        let targets = plan.targets.len();
        assert_eq!(targets, n);
        let bytes = topology.endpoints_of_target.bytes() + topology.tenants_of_target.bytes();
        assert_eq!(bytes, 8 * (targets + 1) + 12 * n);
    }

    /// Seeded pairs against the same relation built the obvious way, a `Vec` per row; held
    /// in no more than its rows' starts and its items.
    #[test]
    fn rows_hold_each_rows_items_in_the_order_they_came() {
        let mut rng = fastrand::Rng::with_seed(0x9e37_79b9_7f4a_7c15);
        let mut next = |below: u64| rng.u64(..below);
        for case in 0..200 {
            let rows = next(20) as usize;
            let count = if rows == 0 { 0 } else { next(60) };
            let pairs: Vec<(usize, u64)> = (0..count)
                .map(|i| (next(rows as u64) as usize, i * 1000 + case))
                .collect();
            let mut expected = vec![Vec::new(); rows];
            for &(row, item) in &pairs {
                expected[row].push(item);
            }
            let flat = Rows::of(rows, pairs.into_iter());
            for (row, items) in expected.iter().enumerate() {
                assert_eq!(flat.row(row), &items[..], "case {case}, row {row}");
            }
            assert!(flat.row(rows).is_empty(), "past the last row");
            // Four bytes a row (and one), the items without room.
            assert_eq!(
                flat.bytes(),
                4 * (rows + 1) + 8 * count as usize,
                "case {case}"
            );
        }
    }
}
