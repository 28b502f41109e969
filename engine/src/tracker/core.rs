//! The tracker's decisions as plain code: no actor, no clock, no I/O beyond logs and
//! metrics. The actor shell ([`super::HealthTracker`]) feeds it observations, plans and
//! timer wake-ups with the current [`Clock`], and carries out the [`Effect`]s it returns
//! (send a snapshot, tell a sink to forget a tenant, wake me later). Tested with a fake
//! clock in `tests.rs`.
//!
//! The core's parts, each its own struct: every target's verdict is the [`Verdicts`]'
//! (`../verdicts.rs`: hysteresis, flap damping, the ring's combination), which knows
//! nothing of tenants; what an endpoint counts as when a tenant is decided is read through a
//! [`HealthView`] (`../health.rs`: forced health, drains, weights), which changes nothing;
//! from a decision to a snapshot is the [`Publisher`]'s (`../publisher.rs`: the brake, seq,
//! changes carried), which knows nothing of verdicts. The core joins them: which tenants a
//! verdict change touches, their counts and pacing, when they wait, and the votes of
//! `[multi_cluster]` tenants. Its interface is in `effects.rs`, what it keeps per tenant in
//! `state.rs`; what a probe result means for the tenants is in `observe.rs`, what operators
//! set in `operator.rs`, a reload's adoption of a new plan in `reload.rs`, the ring's
//! verdicts in `shared.rs`.

use std::sync::Arc;

use ho_config::Plan;
use tokio::time::Instant;
use tracing::{info, warn};

use crate::brake::Brake;
use crate::drain::{Forced, OperatorState};
use crate::events::Events;
use crate::hysteresis::Health;
use crate::metrics::{Metrics, TenantLabel};
use crate::multi_cluster::vote::{self, Tally};
use crate::observation::{Observation, TargetId};
use crate::probe_limits::Throttle;
use crate::snapshot::{EndpointMeta, TenantSnapshot};

use super::carried::Carried;
use super::health::HealthView;
use super::index::{EndpointIx, TargetIx, TenantIx, Topology};
use super::pacing::Pace;
use super::publisher::{Decided, Publisher};
use super::verdicts::Verdicts;

mod effects;
mod observe;
mod operator;
mod reload;
mod shared;
mod state;
pub use crate::clock::Clock;
pub use effects::{Effect, Wake};
pub use shared::{OwnState, Part};
pub(super) use state::TenantState;

/// Paces the warning about probes that failed for lack of local resources.
static LOCAL_FAILURE_LOG: Throttle = Throttle::new();

/// The per-tenant decision over every target's verdict, for one plan at a time.
pub struct TrackerCore {
    pub(super) plan: Arc<Plan>,
    /// Every target's verdict (hysteresis, flap damping, the ring's).
    pub(super) verdicts: Verdicts,
    /// Each tenant's counts, pacing and vote (by [`TenantIx`]).
    pub(super) tenants: Vec<TenantState>,
    /// What each tenant published, and the brake.
    publisher: Publisher,
    topology: Topology,
    /// Endpoint metadata shared by every snapshot.
    endpoint_meta: Vec<Arc<EndpointMeta>>,
    metrics: Arc<Metrics>,
    pub(super) grace_over: bool,
    /// What operators set: drained endpoints, forced health (see [`crate::drain`]).
    pub(super) operator: OperatorState,
    /// Where transitions and operators' holds are announced (`/events`).
    pub(super) events: Events,
    /// The verdicts endpoints carry across a reload that changed their checks.
    pub(super) carried: Carried,
}

impl TrackerCore {
    /// A core for `plan` (`ids`: each target's stable id) that announces on `events`. Call
    /// [`TrackerCore::start`] once the shell can carry out effects.
    pub fn new(
        plan: Arc<Plan>,
        ids: Vec<TargetId>,
        metrics: Arc<Metrics>,
        events: Events,
        now: Clock,
    ) -> Self {
        let mut core = TrackerCore {
            plan: plan.clone(),
            verdicts: Verdicts::default(),
            tenants: Vec::new(),
            publisher: Publisher::new(Brake::new(plan.brake), metrics.clone(), events.clone()),
            topology: Topology::default(),
            endpoint_meta: Vec::new(),
            metrics,
            grace_over: false,
            operator: OperatorState::default(),
            events,
            carried: Carried::default(),
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
            if self.publisher.last(ti).is_none() {
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

    /// The plan, verdicts and operator's state, as a decision reads them.
    pub(super) fn health(&self) -> HealthView<'_> {
        HealthView {
            plan: &self.plan,
            verdicts: &self.verdicts,
            operator: &self.operator,
            carried: &self.carried,
        }
    }

    /// What tenant `ti` published last.
    pub(super) fn last_published(&self, ti: TenantIx) -> Option<&Arc<TenantSnapshot>> {
        self.publisher.last(ti)
    }

    /// The blast-radius brake (`[brake]`).
    pub(super) fn brake(&self) -> &Brake {
        &self.publisher.brake
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
        let health = self.health();
        let changed: Vec<(EndpointIx, Health, Health)> = self
            .topology
            .endpoints(target)
            .map(|e| (e, health.verdict_before(e, target, from), health.verdict(e)))
            .filter(|(_, was, is)| was != is)
            .collect();
        let mut held = false;
        for &(e, was, is) in &changed {
            let ep = &self.plan.endpoints[e.0];
            self.metrics.node_status.set(e.0, is == Health::Up);
            let serving = self.carried.deciding(e, was) == Health::Up;
            if is != Health::Unknown {
                self.carried.settle(e);
            }
            // A failure while serving (not a first verdict, unless a new check's first
            // verdict on an address its old one served) holds it out until released.
            if ep.hold_failback && serving && is == Health::Down {
                if let std::collections::btree_map::Entry::Vacant(v) =
                    self.operator.forced.entry(ep.name.to_string())
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
        let count = self.topology.tenants(target).len();
        for i in 0..count {
            let membership = self
                .topology
                .tenants(target)
                .nth(i)
                .expect("below its length");
            let Some(&(_, was, is)) = changed.iter().find(|c| c.0 == membership.endpoint) else {
                continue;
            };
            self.tenants[membership.tenant.0].recount(was, is);
            self.request_decision(membership.tenant, now, fx);
        }
    }

    /// A reported weight of `target` changed: its weighted tenants decide again.
    pub(super) fn reweighed(&mut self, target: TargetIx, now: Clock, fx: &mut Vec<Effect>) {
        let count = self.topology.tenants(target).len();
        for i in 0..count {
            let ti = (self.topology.tenants(target).nth(i))
                .expect("below its length")
                .tenant;
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

    /// The one wait-for-verdicts rule: a tenant with endpoints still `unknown` holds its
    /// decision until the start-up grace ends, and a tenant a reload added (nothing
    /// published yet) until its own grace ends. A tenant already published never waits
    /// after start-up: its new endpoints join once up, changes of the others go out at once.
    fn waits_for_verdicts(&self, ti: TenantIx, now: Instant) -> bool {
        let state = &self.tenants[ti.0];
        let new_tenant_waiting =
            self.publisher.last(ti).is_none() && state.wait_until.is_some_and(|until| now < until);
        state.unknown > 0 && (!self.grace_over || new_tenant_waiting)
    }

    /// Re-decides tenant `ti` and publishes if its record set changed. `cause_at` is when
    /// the health change behind it was observed.
    fn refresh(&mut self, ti: TenantIx, cause_at: Instant, now: Clock, fx: &mut Vec<Effect>) {
        let tenant = &self.plan.tenants[ti.0];
        let label = TenantLabel {
            tenant: tenant.name.clone(),
        };
        (self.metrics.healthy_nodes.get_or_create(&label)).set(self.tenants[ti.0].healthy as i64);
        (self.metrics.tenant_endpoints.get_or_create(&label)).set(tenant.endpoints.len() as i64);
        if self.waits_for_verdicts(ti, now.mono) {
            return;
        }
        self.tenants[ti.0].pacing.decided(now.mono);
        if tenant.multi_cluster {
            if self.publisher.brake.impaired_since().is_some() {
                // An impaired prober votes nothing new: its last view stands.
                return;
            }
            let view = self.health().local_view(ti);
            if self.tenants[ti.0].last_view.as_ref() != Some(&view) {
                self.tenants[ti.0].last_view = Some(view.clone());
                fx.push(Effect::Vote(view));
            }
            return;
        }
        let Some(decided) = self.health().decide(ti, &self.endpoint_meta) else {
            return;
        };
        self.publisher
            .publish(&self.plan.tenants[ti.0], ti, decided, cause_at, now, fx);
    }

    /// Publishes the tally of a voting tenant (see [`crate::multi_cluster`]): the set the
    /// vote over the clusters' reports gives, with the tenant's policy applied.
    pub fn voted(&mut self, tenant: &str, tally: Arc<Tally>, now: Clock, fx: &mut Vec<Effect>) {
        let Some(ti) = self.tenant_index(tenant) else {
            return;
        };
        let t = &self.plan.tenants[ti.0];
        if !t.multi_cluster {
            return;
        }
        self.tenants[ti.0].votes = Some(tally.clone());
        let Some((addresses, mode)) = vote::publishable(t, &tally) else {
            return;
        };
        let decided = Decided {
            addresses,
            mode,
            ttl: self.health().ttl(ti),
            geos: vote::locations(t, &tally),
            votes: Some(tally),
        };
        self.publisher.publish(t, ti, decided, now.mono, now, fx);
    }
}
