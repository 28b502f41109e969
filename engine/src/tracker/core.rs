//! The tracker's decisions as plain code: no actor, no clock, no I/O beyond logs and
//! metrics. The actor shell ([`super::HealthTracker`]) feeds it observations, plans and
//! timer wake-ups with the current [`Clock`], and carries out the [`Effect`]s it returns
//! (send a snapshot, tell a sink to forget a tenant, wake me later). Tested with a fake
//! clock in `tests.rs`.
//!
//! Over 500 lines on purpose for now: the state types and every rule that changes them sit
//! together so the state machine reads in one place; splitting `adopt`/`reload` out is the
//! next step if it grows.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ho_config::Plan;
use tokio::time::Instant;
use tracing::{info, warn};

use crate::damping::FlapDamping;
use crate::events::{Event, Events};
use crate::hysteresis::{Health, Hysteresis, Judgement, Transition};
use crate::metrics::{Metrics, ResultLabel, TenantLabel};
use crate::multi_cluster::vote::{self, Tally};
use crate::multi_cluster::{LocalEndpoint, LocalView};
use crate::observation::{Observation, TargetId};
use crate::probe::ProbeResult;
use crate::probe_limits::Throttle;
use crate::selection::{decide, locations, published_addresses, Decision};
use crate::snapshot::{
    EndpointMeta, PublishMode, PublishedAddress, TenantSnapshot, VerdictChange, MAX_CHANGES,
};

use super::index::{EndpointIx, TargetIx, TenantIx, Topology};
use super::pacing::{Pace, Pacing};
use super::report;
pub use crate::clock::Clock;

/// A timer the core asked for; handed back to [`TrackerCore::wake`] when due. Tenants and
/// targets are named by stable keys, since a reload in between may move or remove them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wake {
    /// The start-up grace ended: targets without a verdict count as unhealthy.
    GraceOver,
    /// A paced decision of this tenant is due.
    Paced(String),
    /// A flap-damping hold of this target may end.
    DampingRelease(TargetId),
    /// The grace a reload gave this tenant's new endpoints ended.
    ReloadGraceOver(String),
}

/// What the shell must do.
#[derive(Debug)]
pub enum Effect {
    /// Send `snapshot` to these sinks (by name; names the shell no longer runs are skipped).
    Publish {
        /// Sink names.
        sinks: Vec<String>,
        /// The tenant's full desired state.
        snapshot: Arc<TenantSnapshot>,
    },
    /// Tell these sinks to stop writing `tenant` (a reload removed it).
    Forget {
        /// Sink names.
        sinks: Vec<String>,
        /// Tenant name.
        tenant: String,
    },
    /// Hand this cluster's view of a voting tenant to the coordinator
    /// ([`crate::multi_cluster`]); its tally comes back through [`TrackerCore::voted`].
    Vote(LocalView),
    /// Call [`TrackerCore::wake`] with `wake` at `at`.
    WakeAt {
        /// When.
        at: Instant,
        /// What for.
        wake: Wake,
    },
}

/// Paces the warning about probes that failed for lack of local resources.
static LOCAL_FAILURE_LOG: Throttle = Throttle::new();

/// What the tracker knows about one target.
pub(super) struct TargetState {
    pub(super) hysteresis: Hysteresis,
    /// Flap damping, when the target's check turns it on.
    pub(super) damping: Option<FlapDamping>,
    /// The latest result and when it arrived.
    pub(super) last: Option<(ProbeResult, SystemTime)>,
    /// When the verdict last changed.
    pub(super) since: Option<SystemTime>,
    pub(super) probes: u64,
    pub(super) failures: u64,
    /// Verdict changes since start.
    pub(super) transitions: u64,
    /// Time spent down before the current verdict (the current down spell is added when
    /// shown).
    pub(super) downtime: Duration,
}

impl TargetState {
    fn new(damping: Option<ho_config::Damping>, now: Instant) -> TargetState {
        TargetState {
            hysteresis: Hysteresis::new(),
            damping: damping.map(|d| FlapDamping::new(d, now)),
            last: None,
            since: None,
            probes: 0,
            failures: 0,
            transitions: 0,
            downtime: Duration::ZERO,
        }
    }

    /// The health that decides publication: the verdict, or down while flap damping holds
    /// the target out.
    pub(super) fn effective(&self) -> Health {
        if self.damped() {
            Health::Down
        } else {
            self.hysteresis.state()
        }
    }

    /// Whether flap damping holds the target out of DNS now.
    pub(super) fn damped(&self) -> bool {
        self.damping.as_ref().is_some_and(FlapDamping::suppressed)
    }
}

/// What the tracker knows about one tenant.
#[derive(Default)]
pub(super) struct TenantState {
    /// The latest snapshot sent to the tenant's sinks.
    pub(super) last_snapshot: Option<Arc<TenantSnapshot>>,
    last_seq: u64,
    /// Endpoints still without a verdict, kept up to date on transitions so that a tenant
    /// waiting at start-up costs nothing per transition.
    unknown: usize,
    /// Endpoints up.
    healthy: usize,
    pacing: Pacing,
    /// Verdict changes not yet carried by a snapshot.
    changes: VecDeque<VerdictChange>,
    /// `[multi_cluster]`: the view last handed to the coordinator.
    last_view: Option<LocalView>,
    /// `[multi_cluster]`: the latest tally, shown in `/status`.
    pub(super) votes: Option<Arc<Tally>>,
    /// Set by a reload that gave the tenant endpoints without a verdict: a tenant that has
    /// published nothing yet waits for them until then, as at start-up.
    wait_until: Option<Instant>,
}

/// Hysteresis, flap damping and the per-tenant decision, for one plan at a time.
pub struct TrackerCore {
    pub(super) plan: Arc<Plan>,
    /// The stable id of each plan target (index = target index).
    ids: Vec<TargetId>,
    /// Target index of each id; observations of ids not in the plan (a prober removed by a
    /// reload, still finishing a probe) are ignored.
    index_of: HashMap<TargetId, TargetIx>,
    pub(super) targets: Vec<TargetState>,
    pub(super) tenants: Vec<TenantState>,
    topology: Topology,
    /// Endpoint metadata shared by every snapshot.
    endpoint_meta: Vec<Arc<EndpointMeta>>,
    metrics: Arc<Metrics>,
    pub(super) grace_over: bool,
    /// Endpoint names an operator drained (see [`crate::drain`]).
    pub(super) drained: BTreeSet<String>,
    /// Where transitions and publishes are announced (`/events`).
    pub(super) events: Events,
}

impl TrackerCore {
    /// A core for `plan` (`ids`: each target's stable id). Call [`TrackerCore::start`]
    /// once the shell can carry out effects.
    pub fn new(plan: Arc<Plan>, ids: Vec<TargetId>, metrics: Arc<Metrics>, now: Clock) -> Self {
        let mut core = TrackerCore {
            plan: plan.clone(),
            ids: Vec::new(),
            index_of: HashMap::new(),
            targets: Vec::new(),
            tenants: Vec::new(),
            topology: Topology::default(),
            endpoint_meta: Vec::new(),
            metrics,
            grace_over: false,
            drained: BTreeSet::new(),
            events: Events::default(),
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

    /// Whether an endpoint named `name` is in the plan.
    pub fn has_endpoint(&self, name: &str) -> bool {
        self.plan.endpoints.iter().any(|e| e.name == name)
    }

    /// The drained endpoint names.
    pub fn drained(&self) -> &BTreeSet<String> {
        &self.drained
    }

    /// Replaces the drained set and re-decides every tenant with an endpoint whose drain
    /// changed.
    pub fn set_drained(&mut self, drained: BTreeSet<String>, now: Clock, fx: &mut Vec<Effect>) {
        let changed: BTreeSet<&String> = drained.symmetric_difference(&self.drained).collect();
        let affected: Vec<TenantIx> = self
            .plan
            .tenants
            .iter()
            .enumerate()
            .filter(|(_, t)| {
                t.endpoints
                    .iter()
                    .any(|&e| changed.contains(&self.plan.endpoints[e].name))
            })
            .map(|(i, _)| TenantIx(i))
            .collect();
        self.drained = drained;
        for ti in affected {
            self.refresh(ti, now.mono, now, fx);
        }
    }

    /// The endpoints `tenant` decides from: all but the drained ones, or all of them when
    /// every one is drained (a drain never empties a name).
    pub(super) fn members<'t>(&self, tenant: &'t ho_config::Tenant) -> Cow<'t, [usize]> {
        if self.drained.is_empty() {
            // The common case, on every decision: no copy.
            return Cow::Borrowed(&tenant.endpoints);
        }
        let kept: Vec<usize> = tenant
            .endpoints
            .iter()
            .copied()
            .filter(|&e| !self.drained.contains(&self.plan.endpoints[e].name))
            .collect();
        if kept.is_empty() {
            Cow::Borrowed(&tenant.endpoints)
        } else {
            Cow::Owned(kept)
        }
    }

    /// Whether `/readyz` passes: every target has a verdict, or the grace passed.
    pub fn ready(&self) -> bool {
        self.grace_over
            || self
                .targets
                .iter()
                .all(|t| t.hysteresis.state() != Health::Unknown)
    }

    /// Applies probe results, in the order they were made.
    pub fn observe(&mut self, batch: Vec<Observation>, now: Clock, fx: &mut Vec<Effect>) {
        for obs in batch {
            self.observe_one(obs, now, fx);
        }
    }

    /// Replaces the plan (a config reload). Targets with an id the core already knows keep
    /// their verdict and counters; new ones start `unknown`; tenants keep what they
    /// published. Removed tenants are withdrawn (`cleanup_on_remove`) or forgotten. Every
    /// tenant is then re-decided and its current snapshot sent again, so sinks added or
    /// rebuilt by the reload converge at once.
    pub fn reload(
        &mut self,
        plan: Arc<Plan>,
        ids: Vec<TargetId>,
        now: Clock,
        fx: &mut Vec<Effect>,
    ) {
        self.retire_removed_tenants(&plan, now, fx);
        self.adopt(plan, ids, now);
        let grace = self.plan.startup_grace;
        for ti in (0..self.tenants.len()).map(TenantIx) {
            if self.tenants[ti.0].unknown > 0 {
                // New endpoints: wait for their verdicts (or the grace) before they count.
                self.tenants[ti.0].wait_until = Some(now.mono + grace);
                fx.push(Effect::WakeAt {
                    at: now.mono + grace,
                    wake: Wake::ReloadGraceOver(self.plan.tenants[ti.0].name.clone()),
                });
            }
            let before = self.tenants[ti.0].last_snapshot.as_ref().map(|p| p.seq);
            self.refresh(ti, now.mono, now, fx);
            let state = &self.tenants[ti.0];
            if let Some(same) = state
                .last_snapshot
                .as_ref()
                .filter(|p| Some(p.seq) == before)
            {
                fx.push(Effect::Publish {
                    sinks: self.plan.tenants[ti.0].sinks.clone(),
                    snapshot: same.clone(),
                });
            }
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
            Wake::ReloadGraceOver(name) => {
                if let Some(ti) = self.tenant_index(&name) {
                    self.refresh(ti, now.mono, now, fx);
                }
            }
            Wake::DampingRelease(id) => {
                let Some(&target) = self.index_of.get(&id) else {
                    return;
                };
                let before = self.targets[target.0].effective();
                self.schedule_release(target, now, fx);
                let after = self.targets[target.0].effective();
                if before != after {
                    info!(target = %self.plan.targets[target.0].key(), state = after.as_str(), "flap damping released the endpoint: its verdict counts again");
                    self.effective_changed(target, before, after, now, fx);
                }
            }
        }
    }

    fn grace_over(&mut self, now: Clock, fx: &mut Vec<Effect>) {
        self.grace_over = true;
        let unknown = self
            .targets
            .iter()
            .filter(|t| t.hysteresis.state() == Health::Unknown)
            .count();
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

    /// Makes `plan` current, keeping the state of targets (by id) and tenants (by name)
    /// that stay.
    fn adopt(&mut self, plan: Arc<Plan>, ids: Vec<TargetId>, now: Clock) {
        let mut old_targets: HashMap<TargetId, TargetState> =
            self.ids.drain(..).zip(self.targets.drain(..)).collect();
        let mut old_tenants: HashMap<String, TenantState> = self
            .plan
            .tenants
            .iter()
            .map(|t| t.name.clone())
            .zip(self.tenants.drain(..))
            .collect();
        self.forget_metrics_of_removed(&plan, &old_tenants);
        self.targets = ids
            .iter()
            .zip(&plan.targets)
            .map(|(id, target)| {
                old_targets
                    .remove(id)
                    .unwrap_or_else(|| TargetState::new(target.check.timing.damping, now.mono))
            })
            .collect();
        self.index_of = ids
            .iter()
            .enumerate()
            .map(|(i, id)| (*id, TargetIx(i)))
            .collect();
        self.ids = ids;
        self.topology = Topology::of(&plan);
        self.plan = plan;
        for ep in &self.plan.endpoints {
            let up = self.targets[ep.target].effective() == Health::Up;
            self.metrics
                .node_status
                .get_or_create(&report::node_labels(ep))
                .set(i64::from(up));
        }
        self.endpoint_meta = self
            .plan
            .endpoints
            .iter()
            .map(|e| Arc::new(EndpointMeta::of(e)))
            .collect();
        let tenants = self
            .plan
            .tenants
            .iter()
            .map(|t| {
                let mut state = old_tenants.remove(&t.name).unwrap_or_default();
                let health = |e: &usize| self.health_of(EndpointIx(*e));
                state.unknown = t
                    .endpoints
                    .iter()
                    .filter(|e| health(e) == Health::Unknown)
                    .count();
                state.healthy = t
                    .endpoints
                    .iter()
                    .filter(|e| health(e) == Health::Up)
                    .count();
                state
            })
            .collect();
        self.tenants = tenants;
    }

    /// Drops the per-endpoint and per-tenant gauges of what `plan` no longer has.
    fn forget_metrics_of_removed(&self, plan: &Plan, old_tenants: &HashMap<String, TenantState>) {
        // Sets, not scans: with 100,000 endpoints a scan per endpoint took minutes at start.
        let staying: HashSet<(&str, IpAddr)> = plan
            .endpoints
            .iter()
            .map(|e| (e.name.as_str(), e.address))
            .collect();
        for ep in &self.plan.endpoints {
            if !staying.contains(&(ep.name.as_str(), ep.address)) {
                self.metrics.node_status.remove(&report::node_labels(ep));
            }
        }
        let tenants: HashSet<&str> = plan.tenants.iter().map(|t| t.name.as_str()).collect();
        for name in old_tenants.keys() {
            if !tenants.contains(name.as_str()) {
                self.metrics.healthy_nodes.remove(&TenantLabel {
                    tenant: name.clone(),
                });
            }
        }
    }

    /// Tenants the new plan removes: withdrawn from their sinks with an empty snapshot when
    /// they asked for `cleanup_on_remove`, else forgotten by the sinks (records stay).
    fn retire_removed_tenants(&self, new: &Plan, now: Clock, fx: &mut Vec<Effect>) {
        let staying: HashSet<&str> = new.tenants.iter().map(|t| t.name.as_str()).collect();
        for (old, state) in self.plan.tenants.iter().zip(&self.tenants) {
            if staying.contains(old.name.as_str()) {
                continue;
            }
            if old.cleanup_on_remove {
                let empty = Arc::new(TenantSnapshot {
                    tenant: old.name.clone(),
                    hosts_key: old.hosts_key.clone(),
                    seq: next_seq(now.wall, state.last_seq),
                    domains: old.domains.clone(),
                    ttl: old.ttl,
                    addresses: Vec::new(),
                    mode: PublishMode::NoneHealthy,
                    changes: Vec::new(),
                    policy: old.policy,
                    default_geo: old.default_geo.clone(),
                    geos: Vec::new(),
                    votes: None,
                    decided_at: now.wall,
                    cause_at: now.mono,
                    trace: opentelemetry::trace::SpanContext::NONE,
                });
                info!(tenant = %old.name, "tenant removed by reload: withdrawing its records (cleanup_on_remove)");
                fx.push(Effect::Publish {
                    sinks: old.sinks.clone(),
                    snapshot: empty,
                });
            } else {
                info!(tenant = %old.name, "tenant removed by reload: no longer published; its records stay");
                fx.push(Effect::Forget {
                    sinks: old.sinks.clone(),
                    tenant: old.name.clone(),
                });
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

    /// The health that decides whether `endpoint` is published.
    pub(super) fn health_of(&self, endpoint: EndpointIx) -> Health {
        self.targets[self.plan.endpoints[endpoint.0].target].effective()
    }

    /// Applies one probe result.
    fn observe_one(&mut self, obs: Observation, now: Clock, fx: &mut Vec<Effect>) {
        let m = &self.metrics;
        m.probes
            .get_or_create(&ResultLabel {
                result: obs.result.label(),
            })
            .inc();
        m.check_duration.observe(obs.result.latency.as_secs_f64());
        if obs.result.reused {
            m.probe_connections_reused.inc();
        }
        m.probe_start_delay.observe(obs.start_delay.as_secs_f64());
        let Some(&target) = self.index_of.get(&obs.target) else {
            return;
        };
        let timing = self.plan.targets[target.0].check.timing;
        let state = &mut self.targets[target.0];
        let before = state.effective();
        let transition = match state.hysteresis.judge(&obs.result, &timing) {
            Judgement::NotJudged => {
                if LOCAL_FAILURE_LOG.ready(Duration::from_secs(60)) {
                    warn!(
                        target = %self.plan.targets[target.0].key(),
                        reason = %obs.result.reason(),
                        "a probe could not run for lack of local resources; not counted against the endpoint (probes_total{{result=\"local\"}}; logged at most once a minute)"
                    );
                }
                state.last = Some((obs.result, now.wall));
                return;
            }
            Judgement::Judged(transition) => transition,
        };
        state.probes += 1;
        if !obs.result.ok() {
            state.failures += 1;
        }
        if let Some(t) = transition {
            let hold_starts = t.to == Health::Down
                && state
                    .damping
                    .as_mut()
                    .is_some_and(|d| d.went_down(now.mono));
            if hold_starts {
                let penalty = state.damping.as_ref().map_or(0.0, |d| d.penalty(now.mono));
                warn!(target = %self.plan.targets[target.0].key(), penalty = penalty.round(), "flapping: flap damping holds the endpoint out of DNS until its penalty decays below reuse");
                self.metrics.damping_holds.inc();
                self.schedule_release(target, now, fx);
            }
            self.on_transition(target, t, &obs.result, now);
        }
        self.targets[target.0].last = Some((obs.result, now.wall));
        let after = self.targets[target.0].effective();
        if before != after {
            self.effective_changed(target, before, after, now, fx);
        }
    }

    /// Asks for the check that ends a flap-damping hold of `target`.
    fn schedule_release(&mut self, target: TargetIx, now: Clock, fx: &mut Vec<Effect>) {
        let due = self.targets[target.0]
            .damping
            .as_mut()
            .and_then(|d| d.release_due(now.mono));
        if let Some(wait) = due {
            fx.push(Effect::WakeAt {
                at: now.mono + wait,
                wake: Wake::DampingRelease(self.ids[target.0]),
            });
        }
    }

    /// Records a verdict change for the tenants of `target` (carried by their next snapshot).
    fn on_transition(&mut self, target: TargetIx, t: Transition, result: &ProbeResult, now: Clock) {
        let state = &mut self.targets[target.0];
        state.transitions += 1;
        if let (Health::Down, Some(since)) = (t.from, state.since) {
            state.downtime += now.wall.duration_since(since).unwrap_or_default();
        }
        state.since = Some(now.wall);
        let names: Vec<&str> = self
            .topology
            .endpoints(target)
            .iter()
            .map(|&e| self.plan.endpoints[e.0].name.as_str())
            .collect();
        let reason = result.reason();
        let span = report::transition(&self.plan, &self.metrics, target, &names, t, &reason);
        self.events.emit(|| Event::Transition {
            at: crate::events::now(),
            endpoints: names.iter().map(|n| (*n).to_owned()).collect(),
            address: self.plan.targets[target.0].address,
            from: t.from.as_str(),
            to: t.to.as_str(),
            reason: reason.clone(),
        });
        let reason = if self.targets[target.0].damped() {
            format!("{reason} (held out of DNS by flap damping)")
        } else {
            reason
        };
        for m in self.topology.tenants(target) {
            let tenant = &mut self.tenants[m.tenant.0];
            if tenant.changes.len() == MAX_CHANGES {
                tenant.changes.pop_front();
            }
            let ep = &self.plan.endpoints[m.endpoint.0];
            tenant.changes.push_back(VerdictChange {
                endpoint: ep.name.clone(),
                address: ep.address,
                from: t.from,
                to: t.to,
                reason: reason.clone(),
                trace: span.clone(),
            });
        }
    }

    /// Keeps the per-tenant counts and the `node_status` gauge in step with a change of
    /// the health that decides publication, and asks the tenants to re-decide.
    fn effective_changed(
        &mut self,
        target: TargetIx,
        from: Health,
        to: Health,
        now: Clock,
        fx: &mut Vec<Effect>,
    ) {
        for &e in self.topology.endpoints(target) {
            self.metrics
                .node_status
                .get_or_create(&report::node_labels(&self.plan.endpoints[e.0]))
                .set(i64::from(to == Health::Up));
        }
        for i in 0..self.topology.tenants(target).len() {
            let ti = self.topology.tenants(target)[i].tenant;
            let tenant = &mut self.tenants[ti.0];
            if from == Health::Unknown {
                tenant.unknown -= 1;
            }
            if from == Health::Up {
                tenant.healthy -= 1;
            }
            if to == Health::Up {
                tenant.healthy += 1;
            }
            match tenant.pacing.request(now.mono, now.mono) {
                Pace::Now => self.refresh(ti, now.mono, now, fx),
                Pace::Later(at) => fx.push(Effect::WakeAt {
                    at,
                    wake: Wake::Paced(self.plan.tenants[ti.0].name.clone()),
                }),
                Pace::Scheduled => {}
            }
        }
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
            let view = self.local_view(ti);
            if self.tenants[ti.0].last_view.as_ref() != Some(&view) {
                self.tenants[ti.0].last_view = Some(view.clone());
                fx.push(Effect::Vote(view));
            }
            return;
        }
        let members = self.members(tenant);
        let (endpoints, mode) = match decide(tenant, &members, &self.plan.endpoints, |e| {
            self.health_of(EndpointIx(e))
        }) {
            Decision::KeepLast => return,
            Decision::Publish { endpoints, mode } => (endpoints, mode),
        };
        let addresses = published_addresses(
            tenant,
            &self.plan.endpoints,
            &self.endpoint_meta,
            &endpoints,
        );
        let geos = locations(tenant, &self.plan.endpoints);
        self.publish(ti, (addresses, mode, geos), None, cause_at, now, fx);
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
        let geos = vote::locations(t, &tally);
        self.publish(ti, (addresses, mode, geos), Some(tally), now.mono, now, fx);
    }

    /// This cluster's view of voting tenant `ti`: each endpoint's verdict, owner and drain.
    fn local_view(&self, ti: TenantIx) -> LocalView {
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
                        name: ep.name.clone(),
                        cluster: ep.cluster.clone(),
                        weight: crate::selection::weight_of(tenant, ep),
                        priority: ep.priority,
                        geo: ep.labels.get("geo").cloned(),
                        health: self.health_of(EndpointIx(e)),
                        drained: self.drained.contains(&ep.name),
                    }
                })
                .collect(),
        }
    }

    /// Sends tenant `ti` a snapshot of `addresses` unless its records would not change.
    fn publish(
        &mut self,
        ti: TenantIx,
        (addresses, mode, geos): (Vec<PublishedAddress>, PublishMode, Vec<String>),
        votes: Option<Arc<Tally>>,
        cause_at: Instant,
        now: Clock,
        fx: &mut Vec<Effect>,
    ) {
        let tenant = &self.plan.tenants[ti.0];
        let state = &mut self.tenants[ti.0];
        if let Some(last) = &state.last_snapshot {
            let same_records = last.domains == tenant.domains
                && last.ttl == tenant.ttl
                && last.policy == tenant.policy
                && last.default_geo == tenant.default_geo
                && last.geos == geos;
            if same_records && last.addresses == addresses && last.mode == mode {
                return;
            }
        }
        state.last_seq = next_seq(now.wall, state.last_seq);
        let changes: Vec<VerdictChange> = state.changes.drain(..).collect();
        let causes: Vec<_> = changes.iter().map(|c| c.trace.clone()).collect();
        let span = report::publish_span(
            tenant,
            state.last_seq,
            mode.as_str(),
            addresses.len(),
            &causes,
        );
        let snapshot = Arc::new(TenantSnapshot {
            tenant: tenant.name.clone(),
            hosts_key: tenant.hosts_key.clone(),
            seq: state.last_seq,
            domains: tenant.domains.clone(),
            ttl: tenant.ttl,
            addresses,
            mode,
            changes,
            policy: tenant.policy,
            default_geo: tenant.default_geo.clone(),
            geos,
            votes,
            decided_at: now.wall,
            cause_at,
            trace: span,
        });
        report::published(&self.metrics, &snapshot);
        self.events.emit(|| Event::Publish {
            at: crate::events::now(),
            tenant: snapshot.tenant.clone(),
            seq: snapshot.seq,
            mode: snapshot.mode.as_str(),
            addresses: snapshot.addresses.iter().map(|a| a.address).collect(),
        });
        fx.push(Effect::Publish {
            sinks: tenant.sinks.clone(),
            snapshot: snapshot.clone(),
        });
        state.last_snapshot = Some(snapshot);
    }
}

/// Wall-clock microseconds, strictly above `last`: increasing across restarts too.
fn next_seq(now: SystemTime, last: u64) -> u64 {
    let micros = now
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_micros() as u64;
    micros.max(last + 1)
}
