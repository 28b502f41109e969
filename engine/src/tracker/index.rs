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
/// touches.
#[derive(Debug, Default)]
pub struct Topology {
    /// For each target, its endpoints.
    endpoints_of_target: Vec<Vec<EndpointIx>>,
    /// For each target, the tenants that include one of its endpoints.
    tenants_of_target: Vec<Vec<Membership>>,
}

impl Topology {
    /// The relations of `plan`.
    pub fn of(plan: &Plan) -> Topology {
        let mut endpoints_of_target = vec![Vec::new(); plan.targets.len()];
        let mut tenants_of_target = vec![Vec::new(); plan.targets.len()];
        for (ei, ep) in plan.endpoints.iter().enumerate() {
            for t in ep.targets() {
                endpoints_of_target[t].push(EndpointIx(ei));
            }
        }
        for (ti, tenant) in plan.tenants.iter().enumerate() {
            for &ei in &tenant.endpoints {
                for t in plan.endpoints[ei].targets() {
                    tenants_of_target[t].push(Membership {
                        tenant: TenantIx(ti),
                        endpoint: EndpointIx(ei),
                    });
                }
            }
        }
        Topology {
            endpoints_of_target,
            tenants_of_target,
        }
    }

    /// The endpoints judged by `target` (their check, or one of their checks).
    pub fn endpoints(&self, target: TargetIx) -> &[EndpointIx] {
        &self.endpoints_of_target[target.0]
    }

    /// The tenants that include `target`, each with its endpoint there.
    pub fn tenants(&self, target: TargetIx) -> &[Membership] {
        &self.tenants_of_target[target.0]
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
    /// Target index of each id.
    index_of: HashMap<TargetId, TargetIx>,
    /// `[ring]`: target index of each key.
    by_key: HashMap<String, TargetIx>,
}

impl TargetIds {
    /// The targets of a plan, numbered by `ids` (one per target, in order); keys come with
    /// [`TargetIds::index_keys`].
    pub fn of(ids: Vec<TargetId>) -> TargetIds {
        let index_of = ids
            .iter()
            .enumerate()
            .map(|(i, id)| (*id, TargetIx(i)))
            .collect();
        TargetIds {
            ids,
            index_of,
            by_key: HashMap::new(),
        }
    }

    /// Indexes the targets of `plan` (the plan these ids number) by key as well.
    pub fn index_keys(&mut self, plan: &Plan) {
        self.by_key = plan
            .targets
            .iter()
            .enumerate()
            .map(|(i, t)| (t.key(), TargetIx(i)))
            .collect();
    }

    /// The target with stable id `id`.
    pub fn index(&self, id: TargetId) -> Option<TargetIx> {
        self.index_of.get(&id).copied()
    }

    /// The target keyed `key` (`[ring]`).
    pub fn by_key(&self, key: &str) -> Option<TargetIx> {
        self.by_key.get(key).copied()
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
