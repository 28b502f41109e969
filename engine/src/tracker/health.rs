//! What each endpoint counts as when its tenant is decided, read in one borrowed pass over
//! the plan, the verdicts and what operators set: an operator's forced health over the
//! verdict, drains that never empty a name, reported weights, and from these a tenant's
//! decision or, for a voting tenant, this cluster's view. Nothing here changes state, so a
//! decision reads one consistent picture.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use ho_config::{Plan, Tenant};

use crate::drain::{Forced, OperatorState};
use crate::hysteresis::Health;
use crate::multi_cluster::{LocalEndpoint, LocalView};
use crate::selection::{decide, locations, published_addresses, published_weight, Decision};
use crate::snapshot::EndpointMeta;

use super::carried::Carried;
use super::index::{EndpointIx, TargetIx, TenantIx};
use super::publisher::Decided;
use super::verdicts::Verdicts;

/// The plan, the verdicts and the operator's state, borrowed together for one decision.
#[derive(Clone, Copy)]
pub(super) struct HealthView<'a> {
    pub(super) plan: &'a Plan,
    pub(super) verdicts: &'a Verdicts,
    pub(super) operator: &'a OperatorState,
    /// The verdicts endpoints carry across a change of their checks.
    pub(super) carried: &'a Carried,
}

impl HealthView<'_> {
    /// The endpoint's verdict: its check's effective health, or its checks' combined.
    pub(super) fn verdict(&self, endpoint: EndpointIx) -> Health {
        self.verdicts.endpoint(&self.plan.endpoints[endpoint.0])
    }

    /// The endpoint's verdict had `target`'s effective health been `was` (what it was
    /// before the change being applied).
    pub(super) fn verdict_before(
        &self,
        endpoint: EndpointIx,
        target: TargetIx,
        was: Health,
    ) -> Health {
        self.verdicts
            .endpoint_before(&self.plan.endpoints[endpoint.0], target, was)
    }

    /// The verdict that decides `endpoint`: its own, or until it has one the verdict it
    /// carries across a change of its checks.
    pub(super) fn deciding_verdict(&self, endpoint: EndpointIx) -> Health {
        self.carried.deciding(endpoint, self.verdict(endpoint))
    }

    /// The health that decides whether `endpoint` is published: an operator's forced health,
    /// else the verdict (the one carried across a change of its checks until it has one).
    pub(super) fn health_of(&self, endpoint: EndpointIx) -> Health {
        self.health_with(endpoint, true)
    }

    /// [`Self::health_of`], with a forced-down endpoint decided by its verdict unless
    /// `honour_down` (a tenant whose every member is forced down ignores the force-downs:
    /// no override empties a name).
    fn health_with(&self, endpoint: EndpointIx, honour_down: bool) -> Health {
        match self
            .operator
            .forced
            .get(&*self.plan.endpoints[endpoint.0].name)
        {
            Some(Forced::Up) => Health::Up,
            Some(Forced::Down) if honour_down => Health::Down,
            _ => self.deciding_verdict(endpoint),
        }
    }

    /// The weight endpoint `e` reported through its check (the first of its checks that
    /// reports one), if any.
    pub(super) fn reported_weight(&self, e: EndpointIx) -> Option<u32> {
        self.verdicts.reported_weight(&self.plan.endpoints[e.0])
    }

    /// The endpoints `tenant` decides from: all but the drained ones, or all of them when
    /// every one is drained (a drain never empties a name).
    fn members<'t>(&self, tenant: &'t Tenant) -> Cow<'t, [usize]> {
        let drained = &self.operator.drained;
        if drained.is_empty() {
            // The common case, on every decision: no copy.
            return Cow::Borrowed(&tenant.endpoints);
        }
        let kept: Vec<usize> = tenant
            .endpoints
            .iter()
            .copied()
            .filter(|&e| !drained.contains(&*self.plan.endpoints[e].name))
            .collect();
        if kept.is_empty() {
            Cow::Borrowed(&tenant.endpoints)
        } else {
            Cow::Owned(kept)
        }
    }

    /// What tenant `ti` publishes now (`meta`: the plan's endpoints' shared metadata), or
    /// `None` when its policy keeps the last set.
    pub(super) fn decide(&self, ti: TenantIx, meta: &[Arc<EndpointMeta>]) -> Option<Decided> {
        let tenant = &self.plan.tenants[ti.0];
        let members = self.members(tenant);
        let honour_down = members.iter().any(|&e| {
            self.operator.forced.get(&*self.plan.endpoints[e].name) != Some(&Forced::Down)
        });
        let (endpoints, mode) = match decide(tenant, &members, &self.plan.endpoints, |e| {
            self.health_with(EndpointIx(e), honour_down)
        }) {
            Decision::KeepLast => return None,
            Decision::Publish { endpoints, mode } => (endpoints, mode),
        };
        let addresses = published_addresses(tenant, &self.plan.endpoints, meta, &endpoints, |e| {
            self.reported_weight(EndpointIx(e))
        });
        Some(Decided {
            addresses,
            mode,
            ttl: self.ttl(ti),
            geos: locations(tenant, &self.plan.endpoints),
            votes: None,
        })
    }

    /// The TTL tenant `ti` publishes with now: `degraded_ttl` while one of its endpoints is
    /// down, so resolvers come back sooner for the recovery.
    pub(super) fn ttl(&self, ti: TenantIx) -> Duration {
        let tenant = &self.plan.tenants[ti.0];
        match tenant.degraded_ttl {
            Some(degraded)
                if tenant
                    .endpoints
                    .iter()
                    .any(|&e| self.health_of(EndpointIx(e)) == Health::Down) =>
            {
                degraded
            }
            _ => tenant.ttl,
        }
    }

    /// This cluster's view of voting tenant `ti`: each endpoint's verdict, owner and drain.
    pub(super) fn local_view(&self, ti: TenantIx) -> LocalView {
        let tenant = &self.plan.tenants[ti.0];
        LocalView {
            tenant: tenant.name.clone(),
            endpoints: tenant
                .endpoints
                .iter()
                .map(|&e| {
                    let ep = &self.plan.endpoints[e];
                    LocalEndpoint {
                        address: ep.address,
                        name: ep.name.to_string(),
                        cluster: ep.cluster().map(str::to_owned),
                        weight: published_weight(tenant, ep, self.reported_weight(EndpointIx(e))),
                        priority: ep.priority,
                        geo: ep.labels().get("geo").cloned(),
                        health: self.health_of(EndpointIx(e)),
                        drained: self.operator.drained.contains(&*ep.name),
                    }
                })
                .collect(),
        }
    }
}
