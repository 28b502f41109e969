//! The tracker's decisions as plain code: no actor, no clock, no I/O beyond logs and
//! metrics. The actor shell ([`super::HealthTracker`]) feeds it observations, plans and
//! timer wake-ups with the current [`Clock`], and carries out the [`Effect`]s it returns
//! (send a snapshot, tell a sink to forget a tenant, wake me later). Tested with a fake
//! clock in `tests.rs`.
//!
//! Each target's verdict is the [`Verdicts`]' (`../verdicts.rs`: hysteresis, flap damping,
//! the ring's combination), which knows nothing of tenants. The core's interface is in
//! `effects.rs`, what it keeps per tenant in `state.rs`; the decision of a tenant lives here,
//! what a probe result means for the tenants in `observe.rs`, a reload's adoption of a new
//! plan in `reload.rs`, the way from a decision to a snapshot in `publish.rs`.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use ho_config::Plan;
use tokio::time::Instant;
use tracing::{info, warn};

use crate::brake::Brake;
use crate::drain::{Forced, OperatorState};
use crate::events::{Event, Events};
use crate::hysteresis::Health;
use crate::metrics::{Metrics, TenantLabel};
use crate::observation::{Observation, TargetId};
use crate::probe_limits::Throttle;
use crate::selection::{decide, locations, published_addresses, Decision};
use crate::snapshot::EndpointMeta;

use super::index::{EndpointIx, TargetIx, TenantIx, Topology};
use super::pacing::Pace;
use super::report;

mod effects;
mod observe;
mod publish;
mod reload;
mod shared;
mod state;
use super::verdicts::Verdicts;
pub use crate::clock::Clock;
pub use effects::{Effect, Wake};
pub(super) use state::TenantState;

/// Paces the warning about probes that failed for lack of local resources.
static LOCAL_FAILURE_LOG: Throttle = Throttle::new();

/// The per-tenant decision over every target's verdict, for one plan at a time.
pub struct TrackerCore {
    pub(super) plan: Arc<Plan>,
    /// Every target's verdict (hysteresis, flap damping, the ring's).
    pub(super) verdicts: Verdicts,
    pub(super) tenants: Vec<TenantState>,
    topology: Topology,
    /// Endpoint metadata shared by every snapshot.
    endpoint_meta: Vec<Arc<EndpointMeta>>,
    metrics: Arc<Metrics>,
    pub(super) grace_over: bool,
    /// What operators set: drained endpoints, forced health (see [`crate::drain`]).
    pub(super) operator: OperatorState,
    /// Where transitions and publishes are announced (`/events`).
    pub(super) events: Events,
    /// The blast-radius brake (`[brake]`).
    pub(super) brake: Brake,
}

impl TrackerCore {
    /// A core for `plan` (`ids`: each target's stable id). Call [`TrackerCore::start`]
    /// once the shell can carry out effects.
    pub fn new(plan: Arc<Plan>, ids: Vec<TargetId>, metrics: Arc<Metrics>, now: Clock) -> Self {
        let mut core = TrackerCore {
            plan: plan.clone(),
            verdicts: Verdicts::default(),
            tenants: Vec::new(),
            topology: Topology::default(),
            endpoint_meta: Vec::new(),
            metrics,
            grace_over: false,
            operator: OperatorState::default(),
            events: Events::default(),
            brake: Brake::new(plan.brake),
        };
        core.adopt(plan, ids, now);
        core
    }

    /// Arms the start-up grace.
    pub fn start(&mut self, now: Clock, fx: &mut Vec<Effect>) {
        fx.push(Effect::WakeAt {
            at: now.mono + self.plan.startup_grace,
            wake: Wake::GraceOver,
        });
    }

    /// The names of the endpoints `selection` picks, in configuration order.
    pub(super) fn selected(&self, selection: &super::Selection) -> Vec<String> {
        self.plan
            .endpoints
            .iter()
            .filter(|e| match selection {
                super::Selection::Name(name) => &e.name == name,
                super::Selection::Labels(labels) => {
                    labels.iter().all(|(k, v)| e.labels.get(k) == Some(v))
                }
            })
            .map(|e| e.name.clone())
            .collect()
    }

    /// The drained endpoint names.
    pub fn drained(&self) -> &BTreeSet<String> {
        &self.operator.drained
    }

    /// Replaces the drained set and re-decides every tenant with an endpoint whose drain
    /// changed.
    pub fn set_drained(&mut self, drained: BTreeSet<String>, now: Clock, fx: &mut Vec<Effect>) {
        let changed: BTreeSet<String> = drained
            .symmetric_difference(&self.operator.drained)
            .cloned()
            .collect();
        self.operator.drained = drained;
        self.refresh_tenants_of(&changed, now, fx);
    }

    /// The endpoints whose health an operator forced.
    pub fn forced(&self) -> &BTreeMap<String, Forced> {
        &self.operator.forced
    }

    /// Replaces the forced health and re-decides every tenant with an endpoint whose
    /// forced health changed.
    pub fn set_forced(
        &mut self,
        forced: BTreeMap<String, Forced>,
        now: Clock,
        fx: &mut Vec<Effect>,
    ) {
        let changed: BTreeSet<String> = forced
            .iter()
            .filter(|(name, f)| self.operator.forced.get(*name) != Some(f))
            .map(|(name, _)| name.clone())
            .chain(
                self.operator
                    .forced
                    .keys()
                    .filter(|n| !forced.contains_key(*n))
                    .cloned(),
            )
            .collect();
        self.operator.forced = forced;
        self.refresh_tenants_of(&changed, now, fx);
    }

    /// Replaces what operators set (drains and forced health), re-decides the tenants it
    /// touches and tells listeners which endpoints are held by hand now (the availability
    /// ledger counts their names' time as maintenance).
    pub fn set_operator(&mut self, state: OperatorState, now: Clock, fx: &mut Vec<Effect>) {
        self.set_drained(state.drained, now, fx);
        self.set_forced(state.forced, now, fx);
        let held = self.operator.held();
        self.events.emit(|| Event::Held {
            at: crate::events::now(),
            endpoints: held,
        });
    }

    /// Lets every withdrawal the brake holds go through now (an operator's release): the
    /// tenants holding some are decided again with the brake off; the addresses released.
    pub fn release_brake(&mut self, now: Clock, fx: &mut Vec<Effect>) -> usize {
        let holding: Vec<(String, usize)> = self
            .brake
            .held()
            .iter()
            .map(|(t, n)| (t.clone(), *n))
            .collect();
        let was_impaired = self.brake.impaired_since().is_some();
        self.brake.set_released(true);
        if was_impaired {
            self.resume(now, fx);
        } else {
            for (tenant, _) in &holding {
                if let Some(ti) = self.tenant_index(tenant) {
                    self.refresh(ti, now.mono, now, fx);
                }
            }
        }
        self.brake.set_released(false);
        holding.iter().map(|(_, n)| n).sum()
    }

    /// Re-decides every tenant with an endpoint named in `names`.
    fn refresh_tenants_of(&mut self, names: &BTreeSet<String>, now: Clock, fx: &mut Vec<Effect>) {
        let affected: Vec<TenantIx> = self
            .plan
            .tenants
            .iter()
            .enumerate()
            .filter(|(_, t)| {
                t.endpoints
                    .iter()
                    .any(|&e| names.contains(&self.plan.endpoints[e].name))
            })
            .map(|(i, _)| TenantIx(i))
            .collect();
        for ti in affected {
            self.refresh(ti, now.mono, now, fx);
        }
    }

    /// The endpoints `tenant` decides from: all but the drained ones, or all of them when
    /// every one is drained (a drain never empties a name).
    pub(super) fn members<'t>(&self, tenant: &'t ho_config::Tenant) -> Cow<'t, [usize]> {
        if self.operator.drained.is_empty() {
            // The common case, on every decision: no copy.
            return Cow::Borrowed(&tenant.endpoints);
        }
        let kept: Vec<usize> = tenant
            .endpoints
            .iter()
            .copied()
            .filter(|&e| !self.operator.drained.contains(&self.plan.endpoints[e].name))
            .collect();
        if kept.is_empty() {
            Cow::Borrowed(&tenant.endpoints)
        } else {
            Cow::Owned(kept)
        }
    }

    /// Whether `/readyz` passes: every target has a verdict, or the grace passed.
    pub fn ready(&self) -> bool {
        self.grace_over || self.verdicts.all_known()
    }

    /// Applies probe results, in the order they were made.
    pub fn observe(&mut self, batch: Vec<Observation>, now: Clock, fx: &mut Vec<Effect>) {
        for obs in batch {
            self.observe_one(obs, now, fx);
        }
    }

    /// A timer the core asked for is due.
    pub fn wake(&mut self, wake: Wake, now: Clock, fx: &mut Vec<Effect>) {
        match wake {
            Wake::GraceOver => self.grace_over(now, fx),
            Wake::Paced(name) => {
                if let Some(ti) = self.tenant_index(&name) {
                    if let Some(cause) = self.tenants[ti.0].pacing.due() {
                        self.refresh(ti, cause, now, fx);
                    }
                }
            }
            Wake::SelfCheck => self.check_recovery(now, fx),
            Wake::ReloadGraceOver(name) | Wake::Brake(name) => {
                if let Some(ti) = self.tenant_index(&name) {
                    self.refresh(ti, now.mono, now, fx);
                }
            }
            Wake::DampingRelease(id) => {
                let Some(target) = self.verdicts.index(id) else {
                    return;
                };
                let before = self.verdicts.effective(target);
                self.schedule_release(target, now, fx);
                let after = self.verdicts.effective(target);
                if before != after {
                    info!(target = %self.plan.targets[target.0].key(), state = after.as_str(), "flap damping released the endpoint: its verdict counts again");
                    self.effective_changed(target, before, now, fx);
                }
            }
        }
    }

    fn grace_over(&mut self, now: Clock, fx: &mut Vec<Effect>) {
        self.grace_over = true;
        let unknown = self.verdicts.unknown();
        if unknown > 0 {
            warn!(
                unknown,
                "start-up grace over; targets without a verdict count as unhealthy"
            );
        }
        for ti in (0..self.tenants.len()).map(TenantIx) {
            if self.tenants[ti.0].last_snapshot.is_none() {
                self.refresh(ti, now.mono, now, fx);
            }
        }
    }

    fn tenant_index(&self, name: &str) -> Option<TenantIx> {
        self.plan
            .tenants
            .iter()
            .position(|t| t.name == name)
            .map(TenantIx)
    }

    /// The health that decides whether `endpoint` is published: an operator's forced health,
    /// else the verdict.
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
            .get(&self.plan.endpoints[endpoint.0].name)
        {
            Some(Forced::Up) => Health::Up,
            Some(Forced::Down) if honour_down => Health::Down,
            _ => self.verdict(endpoint),
        }
    }

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

    /// Keeps the per-tenant counts and the `node_status` gauge in step with a change of
    /// `target`'s effective health (it was `from`), and asks the tenants whose endpoints'
    /// verdicts changed to re-decide.
    fn effective_changed(
        &mut self,
        target: TargetIx,
        from: Health,
        now: Clock,
        fx: &mut Vec<Effect>,
    ) {
        // Each endpoint on the target, with its verdict before and after: a check's change
        // is its endpoint's unless other checks of a composite endpoint outweigh it.
        let changed: Vec<(EndpointIx, Health, Health)> = self
            .topology
            .endpoints(target)
            .iter()
            .map(|&e| (e, self.verdict_before(e, target, from), self.verdict(e)))
            .filter(|(_, was, is)| was != is)
            .collect();
        let mut held = false;
        for &(e, was, is) in &changed {
            let ep = &self.plan.endpoints[e.0];
            self.metrics
                .node_status
                .get_or_create(&report::node_labels(ep))
                .set(i64::from(is == Health::Up));
            // A failure while serving (not a first verdict) holds it out until released.
            if ep.hold_failback && was == Health::Up && is == Health::Down {
                if let std::collections::btree_map::Entry::Vacant(v) =
                    self.operator.forced.entry(ep.name.clone())
                {
                    warn!(endpoint = %ep.name, "failed: held out of DNS until an operator releases it (hold_failback)");
                    v.insert(Forced::Down);
                    held = true;
                }
            }
        }
        if held {
            fx.push(Effect::Remember(self.operator.clone()));
        }
        for i in 0..self.topology.tenants(target).len() {
            let membership = self.topology.tenants(target)[i];
            let Some(&(_, was, is)) = changed.iter().find(|c| c.0 == membership.endpoint) else {
                continue;
            };
            let ti = membership.tenant;
            let tenant = &mut self.tenants[ti.0];
            if was == Health::Unknown {
                tenant.unknown -= 1;
            }
            if was == Health::Up {
                tenant.healthy -= 1;
            }
            if is == Health::Unknown {
                tenant.unknown += 1;
            }
            if is == Health::Up {
                tenant.healthy += 1;
            }
            self.request_decision(ti, now, fx);
        }
    }

    /// A reported weight of `target` changed: its weighted tenants decide again.
    pub(super) fn reweighed(&mut self, target: TargetIx, now: Clock, fx: &mut Vec<Effect>) {
        for i in 0..self.topology.tenants(target).len() {
            let ti = self.topology.tenants(target)[i].tenant;
            if self.plan.tenants[ti.0].weighs {
                self.request_decision(ti, now, fx);
            }
        }
    }

    /// Asks for tenant `ti` to be decided again, now or when its pacing allows.
    fn request_decision(&mut self, ti: TenantIx, now: Clock, fx: &mut Vec<Effect>) {
        match self.tenants[ti.0].pacing.request(now.mono, now.mono) {
            Pace::Now => self.refresh(ti, now.mono, now, fx),
            Pace::Later(at) => fx.push(Effect::WakeAt {
                at,
                wake: Wake::Paced(self.plan.tenants[ti.0].name.clone()),
            }),
            Pace::Scheduled => {}
        }
    }

    /// The weight endpoint `e` reported through its check (the first of its checks that
    /// reports one), if any.
    pub(super) fn reported_weight(&self, e: EndpointIx) -> Option<u32> {
        self.verdicts.reported_weight(&self.plan.endpoints[e.0])
    }

    /// The one wait-for-verdicts rule: a tenant with endpoints still `unknown` holds its
    /// decision until the start-up grace ends, and a tenant a reload added (nothing
    /// published yet) until its own grace ends. A tenant already published never waits
    /// after start-up: its new endpoints join once up, changes of the others go out at once.
    fn waits_for_verdicts(&self, ti: TenantIx, now: Instant) -> bool {
        let state = &self.tenants[ti.0];
        let new_tenant_waiting =
            state.last_snapshot.is_none() && state.wait_until.is_some_and(|until| now < until);
        state.unknown > 0 && (!self.grace_over || new_tenant_waiting)
    }

    /// Re-decides tenant `ti` and publishes if its record set changed. `cause_at` is when
    /// the health change behind it was observed.
    fn refresh(&mut self, ti: TenantIx, cause_at: Instant, now: Clock, fx: &mut Vec<Effect>) {
        let tenant = &self.plan.tenants[ti.0];
        self.metrics
            .healthy_nodes
            .get_or_create(&TenantLabel {
                tenant: tenant.name.clone(),
            })
            .set(self.tenants[ti.0].healthy as i64);
        if self.waits_for_verdicts(ti, now.mono) {
            return;
        }
        self.tenants[ti.0].pacing.decided(now.mono);
        if tenant.multi_cluster {
            if self.brake.impaired_since().is_some() {
                // An impaired prober votes nothing new: its last view stands.
                return;
            }
            let view = self.local_view(ti);
            if self.tenants[ti.0].last_view.as_ref() != Some(&view) {
                self.tenants[ti.0].last_view = Some(view.clone());
                fx.push(Effect::Vote(view));
            }
            return;
        }
        let members = self.members(tenant);
        let honour_down = members.iter().any(|&e| {
            self.operator.forced.get(&self.plan.endpoints[e].name) != Some(&Forced::Down)
        });
        let (endpoints, mode) = match decide(tenant, &members, &self.plan.endpoints, |e| {
            self.health_with(EndpointIx(e), honour_down)
        }) {
            Decision::KeepLast => return,
            Decision::Publish { endpoints, mode } => (endpoints, mode),
        };
        let addresses = published_addresses(
            tenant,
            &self.plan.endpoints,
            &self.endpoint_meta,
            &endpoints,
            |e| self.reported_weight(EndpointIx(e)),
        );
        let decided = publish::Decided {
            addresses,
            mode,
            geos: locations(tenant, &self.plan.endpoints),
            votes: None,
        };
        self.publish(ti, decided, cause_at, now, fx);
    }
}
