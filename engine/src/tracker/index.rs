//! Typed indices into the running plan, and the plan's relations the tracker walks on every
//! transition (which endpoints a target serves, which tenants include them).
//!
//! The plan's invariant (see `ho_config::plan`): `Endpoint::target` (and a composite
//! endpoint's other targets) index `Plan::targets`, `Tenant::endpoints` index
//! `Plan::endpoints`, and a tenant holds at most one endpoint per address, hence at most
//! one per target. Newtypes keep the three index spaces apart.

use ho_config::Plan;

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
