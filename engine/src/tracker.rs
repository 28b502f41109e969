//! The health tracker actor (the design's "supervisor"; not actix's `Supervisor`, which
//! restarts actors). It applies hysteresis to every observation, keeps what `/status`
//! shows, decides each tenant's record set and sends a snapshot to the tenant's sinks only
//! when that set changes.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use actix::prelude::*;
use ho_config::{Plan, RoutingPolicy};
use opentelemetry::KeyValue;
use tokio::time::Instant;
use tracing::{info, warn};

use crate::damping::FlapDamping;
use crate::hysteresis::{Health, Hysteresis, Transition};
use crate::metrics::{Metrics, NodeLabels, ResultLabel, TenantLabel, TransitionLabel};
use crate::outbox::Observations;
use crate::probe::ProbeResult;
use crate::probe_limits::{ProbeLimits, Throttle};
use crate::prober::{Observation, TargetId};
use crate::selection::{decide, published_addresses, Decision};
use crate::sink_actor::{Forget, Publish};
use crate::snapshot::{Change, EndpointMeta, PublishedAddress, TenantSnapshot, MAX_CHANGES};
use crate::status::{
    DampingStatus, EndpointStatus, LastProbe, PublishedStatus, TenantEndpointStatus, TenantStatus,
    TrackerStatus, Why,
};
use crate::trace;

/// What the tracker knows about one target.
struct TargetState {
    hysteresis: Hysteresis,
    /// Flap damping, when the target's check turns it on.
    damping: Option<FlapDamping>,
    last: Option<(ProbeResult, SystemTime)>,
    since: Option<SystemTime>,
    probes: u64,
    failures: u64,
}

/// What the tracker knows about one tenant.
struct TenantState {
    sinks: Vec<Recipient<Publish>>,
    published: Option<Arc<TenantSnapshot>>,
    last_seq: u64,
    /// Endpoints still without a verdict, kept up to date on transitions so that a tenant
    /// waiting at start-up costs nothing per transition.
    unknown: usize,
    /// Endpoints up.
    healthy: usize,
    /// When the last snapshot was decided, for the publish rate limit.
    last_decided: Option<Instant>,
    /// Earliest transition not yet reflected in a decision; `Some` while a decision is
    /// scheduled.
    pending_cause: Option<Instant>,
    /// Verdict changes not yet carried by a snapshot.
    changes: VecDeque<Change>,
    /// Set by a reload that gave the tenant endpoints without a verdict: a tenant that has
    /// published nothing yet waits for them until then, as at start-up.
    wait_until: Option<Instant>,
}

/// Least time between two decisions for one tenant. The first change after a quiet period
/// is decided at once; a burst (a rack going down: thousands of transitions in a second)
/// is folded into at most one snapshot per gap instead of one per transition.
const MIN_PUBLISH_GAP: Duration = Duration::from_millis(20);

/// Paces the warning about probes that failed for lack of local resources.
static LOCAL_FAILURE_LOG: Throttle = Throttle::new();

/// Asks for the `/status` view.
#[derive(Message)]
#[rtype(result = "TrackerStatus")]
pub struct GetStatus;

/// Asks whether `/readyz` should pass: every target has a verdict, or the grace passed.
#[derive(Message)]
#[rtype(result = "bool")]
pub struct IsReady;

/// Applies hysteresis and publishes tenant snapshots.
pub struct HealthTracker {
    plan: Arc<Plan>,
    /// The stable id of each plan target (index = target index).
    ids: Vec<TargetId>,
    /// Target index of each id; observations of ids not in the plan (a prober removed by a
    /// reload, still finishing a probe) are ignored.
    index_of: HashMap<TargetId, usize>,
    targets: Vec<TargetState>,
    tenants: Vec<TenantState>,
    /// For each target, the tenants that include one of its endpoints, with that endpoint
    /// (a tenant holds at most one endpoint per address, so at most one per target).
    tenants_of_target: Vec<Vec<(usize, usize)>>,
    /// For each target, its endpoints.
    endpoints_of_target: Vec<Vec<usize>>,
    /// Endpoint metadata shared by every snapshot.
    endpoint_meta: Vec<Arc<EndpointMeta>>,
    metrics: Arc<Metrics>,
    /// Freed one mailbox slot per observation taken.
    limits: Arc<ProbeLimits>,
    grace_over: bool,
}

/// Replaces the plan (a config reload). Targets with an id the tracker already knows keep
/// their verdict and counters; new ones start `unknown`; tenants keep what they published.
/// Every tenant is then re-decided, and its current snapshot is sent to its sinks, so sinks
/// added or rebuilt by the reload converge at once.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Reload {
    /// The new plan.
    pub plan: Arc<Plan>,
    /// Stable id of each of its targets.
    pub ids: Vec<TargetId>,
    /// Every sink actor by name.
    pub sinks: BTreeMap<String, Recipient<Publish>>,
    /// The same actors, to tell them about tenants the reload removed.
    pub forget: BTreeMap<String, Recipient<Forget>>,
}

impl TargetState {
    fn new(damping: Option<ho_config::Damping>) -> TargetState {
        TargetState {
            hysteresis: Hysteresis::new(),
            damping: damping.map(|d| FlapDamping::new(d, Instant::now())),
            last: None,
            since: None,
            probes: 0,
            failures: 0,
        }
    }

    /// The health that decides publication: the verdict, or down while flap damping holds
    /// the target out.
    fn published(&self) -> Health {
        if self.held() {
            Health::Down
        } else {
            self.hysteresis.state()
        }
    }

    fn held(&self) -> bool {
        self.damping.as_ref().is_some_and(FlapDamping::suppressed)
    }
}

impl TenantState {
    fn new() -> TenantState {
        TenantState {
            sinks: Vec::new(),
            published: None,
            last_seq: 0,
            unknown: 0,
            healthy: 0,
            last_decided: None,
            pending_cause: None,
            changes: VecDeque::new(),
            wait_until: None,
        }
    }
}

impl HealthTracker {
    /// A tracker for `plan` (`ids`: each target's stable id), publishing to the sink
    /// recipients named by each tenant.
    pub fn new(
        plan: Arc<Plan>,
        ids: Vec<TargetId>,
        sinks: &BTreeMap<String, Recipient<Publish>>,
        metrics: Arc<Metrics>,
        limits: Arc<ProbeLimits>,
    ) -> HealthTracker {
        let mut tracker = HealthTracker {
            plan: plan.clone(),
            ids: Vec::new(),
            index_of: HashMap::new(),
            targets: Vec::new(),
            tenants: Vec::new(),
            tenants_of_target: Vec::new(),
            endpoints_of_target: Vec::new(),
            endpoint_meta: Vec::new(),
            metrics,
            limits,
            grace_over: false,
        };
        tracker.install(plan, ids, sinks);
        tracker
    }

    /// Makes `plan` current, keeping the state of targets (by id) and tenants (by name)
    /// that stay.
    fn install(
        &mut self,
        plan: Arc<Plan>,
        ids: Vec<TargetId>,
        sinks: &BTreeMap<String, Recipient<Publish>>,
    ) {
        let mut old_targets: HashMap<TargetId, TargetState> =
            self.ids.drain(..).zip(self.targets.drain(..)).collect();
        let mut old_tenants: HashMap<String, TenantState> = self
            .plan
            .tenants
            .iter()
            .map(|t| t.name.clone())
            .zip(self.tenants.drain(..))
            .collect();
        // Sets, not scans: with 100,000 endpoints a scan per endpoint took minutes at start.
        let staying: HashSet<(&str, IpAddr)> = plan
            .endpoints
            .iter()
            .map(|e| (e.name.as_str(), e.address))
            .collect();
        for ep in &self.plan.endpoints {
            if !staying.contains(&(ep.name.as_str(), ep.address)) {
                self.metrics.node_status.remove(&node_labels(ep));
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
        self.targets = ids
            .iter()
            .zip(&plan.targets)
            .map(|(id, target)| {
                old_targets
                    .remove(id)
                    .unwrap_or_else(|| TargetState::new(target.check.timing.damping))
            })
            .collect();
        self.index_of = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
        self.ids = ids;
        self.plan = plan;
        let plan = &self.plan;
        self.tenants_of_target = vec![Vec::new(); plan.targets.len()];
        self.endpoints_of_target = vec![Vec::new(); plan.targets.len()];
        for (ei, ep) in plan.endpoints.iter().enumerate() {
            self.endpoints_of_target[ep.target].push(ei);
        }
        for (ti, tenant) in plan.tenants.iter().enumerate() {
            for &ei in &tenant.endpoints {
                self.tenants_of_target[plan.endpoints[ei].target].push((ti, ei));
            }
        }
        for ep in &plan.endpoints {
            let up = self.targets[ep.target].published() == Health::Up;
            self.metrics
                .node_status
                .get_or_create(&node_labels(ep))
                .set(i64::from(up));
        }
        self.endpoint_meta = plan
            .endpoints
            .iter()
            .map(|e| Arc::new(EndpointMeta::of(e)))
            .collect();
        let tenants: Vec<TenantState> = plan
            .tenants
            .iter()
            .map(|t| {
                let mut state = old_tenants.remove(&t.name).unwrap_or_else(TenantState::new);
                state.sinks = t
                    .sinks
                    .iter()
                    .filter_map(|s| sinks.get(s).cloned())
                    .collect();
                let health = |e: &usize| self.targets[plan.endpoints[*e].target].published();
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

    /// Tenants `reload` removes: withdrawn from their sinks with an empty snapshot when they
    /// asked for `cleanup_on_remove`, else forgotten by the sinks (records stay as written).
    fn retire_removed_tenants(&self, reload: &Reload) {
        for (old, state) in self.plan.tenants.iter().zip(&self.tenants) {
            if reload.plan.tenants.iter().any(|t| t.name == old.name) {
                continue;
            }
            if old.cleanup_on_remove {
                let now = SystemTime::now();
                let empty = Arc::new(TenantSnapshot {
                    tenant: old.name.clone(),
                    seq: next_seq(now, state.last_seq),
                    domains: old.domains.clone(),
                    ttl: old.ttl,
                    addresses: Vec::new(),
                    mode: crate::snapshot::PublishMode::NoneHealthy,
                    changes: Vec::new(),
                    policy: old.policy,
                    default_geo: old.default_geo.clone(),
                    decided_at: now,
                    cause_at: Instant::now(),
                    trace: opentelemetry::trace::SpanContext::NONE,
                });
                info!(tenant = %old.name, "tenant removed by reload: withdrawing its records (cleanup_on_remove)");
                for sink in old.sinks.iter().filter_map(|s| reload.sinks.get(s)) {
                    sink.do_send(Publish(empty.clone()));
                }
            } else {
                info!(tenant = %old.name, "tenant removed by reload: no longer published; its records stay");
                for sink in old.sinks.iter().filter_map(|s| reload.forget.get(s)) {
                    sink.do_send(Forget(old.name.clone()));
                }
            }
        }
    }

    /// The index of tenant `name` in the current plan.
    fn tenant_index(&self, name: &str) -> Option<usize> {
        self.plan.tenants.iter().position(|t| t.name == name)
    }

    fn health_of_endpoint(&self, endpoint: usize) -> Health {
        self.targets[self.plan.endpoints[endpoint].target].published()
    }

    /// Keeps the per-tenant counts and the `node_status` gauge in step with a change of
    /// the health that decides publication, and asks the tenants to re-decide.
    fn published_changed(
        &mut self,
        target: usize,
        from: Health,
        to: Health,
        now: Instant,
        ctx: &mut Context<Self>,
    ) {
        for &e in &self.endpoints_of_target[target] {
            self.metrics
                .node_status
                .get_or_create(&node_labels(&self.plan.endpoints[e]))
                .set(i64::from(to == Health::Up));
        }
        for i in 0..self.tenants_of_target[target].len() {
            let (ti, _) = self.tenants_of_target[target][i];
            let tenant = &mut self.tenants[ti];
            if from == Health::Unknown {
                tenant.unknown -= 1;
            }
            if from == Health::Up {
                tenant.healthy -= 1;
            }
            if to == Health::Up {
                tenant.healthy += 1;
            }
            self.request_refresh(ti, now, ctx);
        }
    }

    /// Arms the check that ends a flap-damping hold of `target` (by id: a reload may move it).
    fn schedule_release(&mut self, target: usize, ctx: &mut Context<Self>) {
        let id = self.ids[target];
        let Some(wait) = self.targets[target]
            .damping
            .as_mut()
            .and_then(|d| d.release_due(Instant::now()))
        else {
            return;
        };
        ctx.run_later(wait, move |act, ctx| {
            let Some(&target) = act.index_of.get(&id) else {
                return;
            };
            let before = act.targets[target].published();
            act.schedule_release(target, ctx);
            let after = act.targets[target].published();
            if before != after {
                info!(target = %act.plan.targets[target].key(), state = after.as_str(), "flap damping released the endpoint: its verdict counts again");
                act.published_changed(target, before, after, Instant::now(), ctx);
            }
        });
    }

    fn on_transition(&mut self, target: usize, t: Transition, result: &ProbeResult) {
        let timing = &self.plan.targets[target].check.timing;
        let state = &mut self.targets[target];
        state.since = Some(SystemTime::now());
        let key = self.plan.targets[target].key();
        let names: Vec<&str> = self.endpoints_of_target[target]
            .iter()
            .map(|&e| self.plan.endpoints[e].name.as_str())
            .collect();
        let (count, threshold) = if t.to == Health::Up {
            ("successes", timing.rise)
        } else {
            ("failures", timing.fall)
        };
        let message = format!("{} -> {}", t.from.as_str(), t.to.as_str());
        let reason = result.reason();
        let span = trace::transition(vec![
            KeyValue::new("endpoint.names", names.join(",")),
            KeyValue::new("target", key.clone()),
            KeyValue::new("address", self.plan.targets[target].address.to_string()),
            KeyValue::new("from", t.from.as_str()),
            KeyValue::new("to", t.to.as_str()),
            KeyValue::new("reason", reason.clone()),
            KeyValue::new("consecutive", i64::from(threshold)),
        ]);
        let trace_id = TraceId(&span);
        if t.to == Health::Down {
            warn!(endpoints = ?names, target = %key, %reason, %trace_id, "{message} after {threshold} consecutive {count}");
        } else {
            info!(endpoints = ?names, target = %key, %reason, %trace_id, "{message} after {threshold} consecutive {count}");
        }
        self.metrics
            .transitions
            .get_or_create(&TransitionLabel { to: t.to.as_str() })
            .inc();
        let held = self.targets[target].held();
        let reason = if held {
            format!("{reason} (held out of DNS by flap damping)")
        } else {
            reason
        };
        for &(ti, e) in &self.tenants_of_target[target] {
            let tenant = &mut self.tenants[ti];
            if tenant.changes.len() == MAX_CHANGES {
                tenant.changes.pop_front();
            }
            tenant.changes.push_back(Change {
                endpoint: self.plan.endpoints[e].name.clone(),
                address: self.plan.endpoints[e].address,
                from: t.from,
                to: t.to,
                reason: reason.clone(),
                trace: span.clone(),
            });
        }
    }

    /// Re-decides `tenant` now, or when [`MIN_PUBLISH_GAP`] has passed since the last
    /// decision. `cause_at` is when the health change behind it was observed.
    fn request_refresh(&mut self, ti: usize, cause_at: Instant, ctx: &mut Context<Self>) {
        let state = &mut self.tenants[ti];
        if let Some(pending) = state.pending_cause {
            state.pending_cause = Some(pending.min(cause_at));
            return;
        }
        let wait = state.last_decided.map_or(Duration::ZERO, |at| {
            MIN_PUBLISH_GAP.saturating_sub(at.elapsed())
        });
        if wait.is_zero() {
            self.refresh_tenant(ti, cause_at);
        } else {
            state.pending_cause = Some(cause_at);
            // By name: a reload in between may move or remove the tenant.
            let name = self.plan.tenants[ti].name.clone();
            ctx.run_later(wait, move |act, _| {
                let Some(ti) = act.tenant_index(&name) else {
                    return;
                };
                if let Some(cause) = act.tenants[ti].pending_cause.take() {
                    act.refresh_tenant(ti, cause);
                }
            });
        }
    }

    /// Re-decides `tenant` and publishes if its record set changed.
    fn refresh_tenant(&mut self, ti: usize, cause_at: Instant) {
        let tenant = &self.plan.tenants[ti];
        self.metrics
            .healthy_nodes
            .get_or_create(&TenantLabel {
                tenant: tenant.name.clone(),
            })
            .set(self.tenants[ti].healthy as i64);
        // Wait for first verdicts at start-up, and for a tenant a reload added (nothing
        // published yet) until its grace ends. A tenant already published never waits: its
        // new endpoints join once up, and changes of the others go out at once.
        let state = &self.tenants[ti];
        let new_tenant_waiting = state.published.is_none()
            && state.wait_until.is_some_and(|until| Instant::now() < until);
        if state.unknown > 0 && (!self.grace_over || new_tenant_waiting) {
            return;
        }
        self.tenants[ti].last_decided = Some(Instant::now());
        let (endpoints, mode) = match decide(
            tenant,
            &self.plan.endpoints,
            |e| self.health_of_endpoint(e),
            self.grace_over,
        ) {
            Decision::Wait | Decision::KeepLast => return,
            Decision::Publish { endpoints, mode } => (endpoints, mode),
        };
        let addresses = published_addresses(
            tenant,
            &self.plan.endpoints,
            &self.endpoint_meta,
            &endpoints,
        );
        let state = &mut self.tenants[ti];
        if let Some(last) = &state.published {
            let same_records = last.domains == tenant.domains
                && last.ttl == tenant.ttl
                && last.policy == tenant.policy
                && last.default_geo == tenant.default_geo;
            if same_records && last.addresses == addresses && last.mode == mode {
                return;
            }
        }
        let now = SystemTime::now();
        state.last_seq = next_seq(now, state.last_seq);
        let changes: Vec<Change> = state.changes.drain(..).collect();
        let causes: Vec<_> = changes.iter().map(|c| c.trace.clone()).collect();
        let span = trace::publish(
            &causes,
            vec![
                KeyValue::new("tenant", tenant.name.clone()),
                KeyValue::new("seq", state.last_seq as i64),
                KeyValue::new("mode", mode.as_str()),
                KeyValue::new("records.addresses", addresses.len() as i64),
                KeyValue::new("records.domains", tenant.domains.len() as i64),
                KeyValue::new("changes", changes.len() as i64),
            ],
        );
        let snapshot = Arc::new(TenantSnapshot {
            tenant: tenant.name.clone(),
            seq: state.last_seq,
            domains: tenant.domains.clone(),
            ttl: tenant.ttl,
            addresses,
            mode,
            changes,
            policy: tenant.policy,
            default_geo: tenant.default_geo.clone(),
            decided_at: now,
            cause_at,
            trace: span,
        });
        info!(
            tenant = %tenant.name,
            seq = snapshot.seq,
            mode = ?mode,
            count = snapshot.addresses.len(),
            addresses = %AddressList(&snapshot.addresses),
            trace_id = %TraceId(&snapshot.trace),
            "publish"
        );
        self.metrics
            .dns_updates
            .get_or_create(&TenantLabel {
                tenant: tenant.name.clone(),
            })
            .inc();
        for sink in &state.sinks {
            sink.do_send(Publish(snapshot.clone()));
        }
        state.published = Some(snapshot);
    }

    fn all_have_verdicts(&self) -> bool {
        self.targets
            .iter()
            .all(|t| t.hysteresis.state() != Health::Unknown)
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

/// A span's trace id for log lines, empty when tracing is off, so logs and traces join.
struct TraceId<'a>(&'a opentelemetry::trace::SpanContext);

impl std::fmt::Display for TraceId<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_valid() {
            write!(f, "{}", self.0.trace_id())
        } else {
            Ok(())
        }
    }
}

/// Formats addresses only when the log line is actually written (10,000 of them are not
/// worth formatting for a filtered-out line). Long lists are cut after 20.
struct AddressList<'a>(&'a [PublishedAddress]);

impl std::fmt::Display for AddressList<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, a) in self.0.iter().take(20).enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{}", a.address)?;
        }
        if self.0.len() > 20 {
            write!(f, ",... ({} more)", self.0.len() - 20)?;
        }
        Ok(())
    }
}

fn node_labels(ep: &ho_config::Endpoint) -> NodeLabels {
    NodeLabels {
        node_name: ep.name.clone(),
        node_ip: ep.address.to_string(),
    }
}

impl Actor for HealthTracker {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.run_later(self.plan.startup_grace, |act, _| {
            act.grace_over = true;
            let unknown = act
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
            let now = Instant::now();
            for ti in 0..act.tenants.len() {
                if act.tenants[ti].published.is_none() {
                    act.refresh_tenant(ti, now);
                }
            }
        });
    }
}

impl Handler<Observations> for HealthTracker {
    type Result = ();

    fn handle(&mut self, batch: Observations, ctx: &mut Context<Self>) {
        let now = Instant::now();
        self.limits.results_taken(batch.0.len());
        for obs in batch.0 {
            self.observe(obs, now, ctx);
        }
    }
}

impl HealthTracker {
    /// Applies one probe result.
    fn observe(&mut self, obs: Observation, now: Instant, ctx: &mut Context<Self>) {
        let m = &self.metrics;
        m.probes
            .get_or_create(&ResultLabel {
                result: obs.result.label(),
            })
            .inc();
        m.check_duration.observe(obs.result.latency.as_secs_f64());
        m.probe_start_delay.observe(obs.start_delay.as_secs_f64());
        let Some(&target) = self.index_of.get(&obs.target) else {
            return;
        };
        if !obs.result.counts() {
            if LOCAL_FAILURE_LOG.ready(Duration::from_secs(60)) {
                warn!(
                    target = %self.plan.targets[target].key(),
                    reason = %obs.result.reason(),
                    "a probe could not run for lack of local resources; not counted against the endpoint (probes_total{{result=\"local\"}}; logged at most once a minute)"
                );
            }
            self.targets[target].last = Some((obs.result, SystemTime::now()));
            return;
        }
        let timing = self.plan.targets[target].check.timing;
        let state = &mut self.targets[target];
        state.probes += 1;
        if !obs.result.ok() {
            state.failures += 1;
        }
        let before = state.published();
        let transition = state
            .hysteresis
            .record(obs.result.ok(), timing.rise, timing.fall);
        if let Some(t) = transition {
            let hold_starts =
                t.to == Health::Down && state.damping.as_mut().is_some_and(|d| d.went_down(now));
            if hold_starts {
                let penalty = state.damping.as_ref().map_or(0.0, |d| d.penalty(now));
                warn!(target = %self.plan.targets[target].key(), penalty = penalty.round(), "flapping: flap damping holds the endpoint out of DNS until its penalty decays below reuse");
                self.metrics.damping_holds.inc();
                self.schedule_release(target, ctx);
            }
            self.on_transition(target, t, &obs.result);
        }
        self.targets[target].last = Some((obs.result, SystemTime::now()));
        let after = self.targets[target].published();
        if before != after {
            self.published_changed(target, before, after, now, ctx);
        }
    }
}

impl Handler<Reload> for HealthTracker {
    type Result = ();

    fn handle(&mut self, msg: Reload, ctx: &mut Context<Self>) {
        self.retire_removed_tenants(&msg);
        self.install(msg.plan, msg.ids, &msg.sinks);
        let now = Instant::now();
        let grace = self.plan.startup_grace;
        for ti in 0..self.tenants.len() {
            if self.tenants[ti].unknown > 0 {
                // New endpoints: wait for their verdicts (or the grace) before they count.
                self.tenants[ti].wait_until = Some(now + grace);
                let name = self.plan.tenants[ti].name.clone();
                ctx.run_later(grace, move |act, _| {
                    if let Some(ti) = act.tenant_index(&name) {
                        act.refresh_tenant(ti, Instant::now());
                    }
                });
            }
            let before = self.tenants[ti].published.as_ref().map(|p| p.seq);
            self.refresh_tenant(ti, now);
            let state = &self.tenants[ti];
            if let Some(published) = state.published.as_ref().filter(|p| Some(p.seq) == before) {
                for sink in &state.sinks {
                    sink.do_send(Publish(published.clone()));
                }
            }
        }
    }
}

impl Handler<IsReady> for HealthTracker {
    type Result = bool;

    fn handle(&mut self, _: IsReady, _: &mut Context<Self>) -> bool {
        self.grace_over || self.all_have_verdicts()
    }
}

impl Handler<GetStatus> for HealthTracker {
    type Result = MessageResult<GetStatus>;

    fn handle(&mut self, _: GetStatus, _: &mut Context<Self>) -> Self::Result {
        let endpoints = self
            .plan
            .endpoints
            .iter()
            .map(|ep| {
                let t = &self.targets[ep.target];
                EndpointStatus {
                    name: ep.name.clone(),
                    address: ep.address,
                    target: self.plan.targets[ep.target].key(),
                    state: t.hysteresis.state(),
                    since: t.since.map(crate::status::unix_seconds),
                    consecutive_successes: t.hysteresis.successes(),
                    consecutive_failures: t.hysteresis.failures(),
                    probes: t.probes,
                    failures: t.failures,
                    last: t.last.as_ref().map(|(r, at)| LastProbe {
                        ok: r.ok(),
                        reason: r.reason(),
                        latency_ms: r.latency.as_secs_f64() * 1000.0,
                        at: crate::status::unix_seconds(*at),
                    }),
                    damping: t.damping.as_ref().map(|d| DampingStatus {
                        penalty: d.penalty(Instant::now()).round(),
                        held: d.suppressed(),
                    }),
                }
            })
            .collect();
        let tenants = self
            .plan
            .tenants
            .iter()
            .zip(&self.tenants)
            .map(|(t, s)| {
                let published_set: HashSet<IpAddr> = s
                    .published
                    .iter()
                    .flat_map(|p| p.addresses.iter().map(|a| a.address))
                    .collect();
                TenantStatus {
                    name: t.name.clone(),
                    domains: t.domains.clone(),
                    sinks: t.sinks.clone(),
                    policy: t.policy,
                    on_all_unhealthy: t.on_all_unhealthy,
                    min_healthy: t.min_healthy,
                    endpoints: t
                        .endpoints
                        .iter()
                        .map(|&e| {
                            let ep = &self.plan.endpoints[e];
                            let published = published_set.contains(&ep.address);
                            let health = self.health_of_endpoint(e);
                            let held = self.targets[ep.target].held();
                            let why = match (published, health) {
                                (false, _) if held => Why::Damped,
                                (true, Health::Up) => Why::Healthy,
                                (true, _) => Why::FailOpen,
                                (false, Health::Down) => Why::Unhealthy,
                                (false, Health::Unknown) => Why::Unknown,
                                (false, Health::Up) if t.policy == RoutingPolicy::Failover => {
                                    Why::StandbyTier
                                }
                                (false, Health::Up) => Why::Held,
                            };
                            TenantEndpointStatus {
                                name: ep.name.clone(),
                                address: ep.address,
                                published,
                                why,
                            }
                        })
                        .collect(),
                    published: s.published.as_ref().map(|p| PublishedStatus {
                        seq: p.seq,
                        mode: p.mode,
                        addresses: p.addresses.iter().map(|a| a.address).collect(),
                        at: crate::status::unix_seconds(p.decided_at),
                    }),
                }
            })
            .collect();
        MessageResult(TrackerStatus {
            ready: self.grace_over || self.all_have_verdicts(),
            endpoints,
            tenants,
        })
    }
}
