//! The actor around every sink: coalesces snapshots (latest wins), runs one write per
//! tenant at a time, limits the write rate (token bucket), retries failures with exponential
//! backoff and jitter (or the back end's `Retry-After`), re-writes the full desired state
//! periodically to repair drift, and keeps the status and metrics. Sinks themselves only
//! know how to write.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use actix::prelude::*;
use ho_config::Delivery;
use opentelemetry::KeyValue;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::backoff::ExponentialBackoff;
use crate::events::{Event, Events};
use crate::leadership::Leadership;
use crate::metrics::{Metrics, SinkLabel, SinkResultLabels};
use crate::sink::{Applied, Sink, SinkError};
use crate::snapshot::{TenantSnapshot, VerdictChange, MAX_CHANGES};
use crate::status::{unix_seconds, SinkErrorStatus, SinkStatus, SinkTenantStatus};
use crate::token_bucket::TokenBucket;
use crate::trace;

/// A new desired state for one tenant.
#[derive(Message, Clone)]
#[rtype(result = "()")]
pub struct Publish(pub Arc<TenantSnapshot>);

/// Asks for this sink's part of `/status`.
#[derive(Message)]
#[rtype(result = "SinkStatus")]
pub struct GetSinkStatus;

/// Why a write is being made; only for logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cause {
    Snapshot,
    Retry,
    Reconcile,
    /// This replica just became the writer (leader election).
    Takeover,
}

impl Cause {
    fn as_str(self) -> &'static str {
        match self {
            Cause::Snapshot => "snapshot",
            Cause::Retry => "retry",
            Cause::Reconcile => "reconcile",
            Cause::Takeover => "takeover",
        }
    }
}

/// Per-tenant write state.
struct Slot {
    /// Latest snapshot received: the only one that will ever be written.
    desired: Arc<TenantSnapshot>,
    written_seq: Option<u64>,
    in_flight: bool,
    /// A retry waiting for its time (backoff or `Retry-After`).
    waiting: Option<SpawnHandle>,
    attempts: u32,
    last_success: Option<SystemTime>,
    last_error: Option<(SystemTime, SinkError)>,
    /// Changes of snapshots that were replaced before they were written, with the seq they
    /// came with: coalescing keeps only the latest state, but no change goes unreported.
    carried: Vec<(u64, VerdictChange)>,
}

impl Slot {
    /// What to write: the desired snapshot, carrying the changes of the snapshots it replaced.
    fn to_write(&self) -> Arc<TenantSnapshot> {
        if self.carried.is_empty() {
            return self.desired.clone();
        }
        let mut snapshot = (*self.desired).clone();
        let mut changes: Vec<VerdictChange> = self.carried.iter().map(|(_, c)| c.clone()).collect();
        changes.extend(snapshot.changes);
        let excess = changes.len().saturating_sub(MAX_CHANGES);
        snapshot.changes = changes.split_off(excess);
        Arc::new(snapshot)
    }
}

/// Drives one [`Sink`].
pub struct SinkActor {
    name: String,
    sink: Arc<dyn Sink>,
    backoff: ExponentialBackoff,
    bucket: TokenBucket,
    reconcile_interval: Duration,
    slots: BTreeMap<String, Slot>,
    /// Tenants waiting for a write token, each once, in the order they asked; one timer
    /// (`token_timer`) serves the queue. (A timer per tenant woke every waiting tenant for
    /// each token: 216,000 wake-ups in a minute with 500 tenants behind a 10/s limit.)
    queue: VecDeque<(String, Cause)>,
    token_timer: Option<SpawnHandle>,
    metrics: Arc<Metrics>,
    /// Set at shutdown: writes in flight finish, no new one starts.
    stopping: bool,
    /// For a shared back end under leader election: writes start only while it allows.
    gate: Option<Leadership>,
    /// Where every write's result is announced (`/events`).
    events: Events,
}

/// This replica became the writer: write every tenant now, from the snapshots kept.
#[derive(Message)]
#[rtype(result = "()")]
struct Takeover;

impl Handler<Takeover> for SinkActor {
    type Result = ();

    fn handle(&mut self, _: Takeover, ctx: &mut Context<Self>) {
        let tenants: Vec<String> = self.slots.keys().cloned().collect();
        info!(sink = %self.name, tenants = tenants.len(), "writer now: writing every tenant");
        for tenant in tenants {
            self.write(&tenant, Cause::Takeover, ctx);
        }
        self.update_pending();
    }
}

/// A config reload removed the tenant: stop writing and reconciling it (its records stay
/// as last written unless the tenant asked for cleanup, which is sent as a snapshot).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Forget(pub String);

impl Handler<Forget> for SinkActor {
    type Result = ();

    fn handle(&mut self, msg: Forget, ctx: &mut Context<Self>) {
        if let Some(slot) = self.slots.remove(&msg.0) {
            if let Some(handle) = slot.waiting {
                ctx.cancel_future(handle);
            }
        }
        self.update_pending();
    }
}

/// Shutdown: start no new write and answer how many are still in flight. Sent until the
/// answer is 0 or the shutdown deadline passes.
#[derive(Message)]
#[rtype(result = "usize")]
pub struct Quiesce;

impl Handler<Quiesce> for SinkActor {
    type Result = usize;

    fn handle(&mut self, _: Quiesce, _: &mut Context<Self>) -> usize {
        self.stopping = true;
        self.slots.values().filter(|s| s.in_flight).count()
    }
}

impl SinkActor {
    /// Wraps `sink` under the name `name`, driven as `delivery` says; with a `gate`, writes
    /// start only while it allows.
    pub fn new(
        name: String,
        sink: Arc<dyn Sink>,
        delivery: &Delivery,
        metrics: Arc<Metrics>,
        gate: Option<Leadership>,
        events: Events,
    ) -> SinkActor {
        SinkActor {
            name,
            sink,
            backoff: ExponentialBackoff::try_new(delivery.backoff_min, delivery.backoff_max, 0.2)
                .expect("validated with the config"),
            bucket: TokenBucket::new(
                delivery.max_writes_per_second,
                delivery.burst,
                Instant::now(),
            ),
            reconcile_interval: delivery.reconcile_interval,
            slots: BTreeMap::new(),
            queue: VecDeque::new(),
            token_timer: None,
            metrics,
            stopping: false,
            gate,
            events,
        }
    }

    /// Whether this replica writes the sink now.
    fn writing(&self) -> bool {
        self.gate.as_ref().is_none_or(Leadership::may_write)
    }

    fn label(&self) -> SinkLabel {
        SinkLabel {
            sink: self.name.clone(),
        }
    }

    fn update_pending(&self) {
        // A standby has nothing pending: the writes are the leader's.
        let pending = if self.writing() {
            self.slots
                .values()
                .filter(|s| s.written_seq != Some(s.desired.seq))
                .count()
        } else {
            0
        };
        self.metrics
            .sink_pending
            .get_or_create(&self.label())
            .set(pending as i64);
    }

    /// Writes the tenant's desired state now if a token is available and nobody queues
    /// for one, else queues it for the next token.
    fn write(&mut self, tenant: &str, cause: Cause, ctx: &mut Context<Self>) {
        let Some(slot) = self.slots.get_mut(tenant) else {
            return;
        };
        if slot.in_flight || self.stopping {
            return;
        }
        if let Some(handle) = slot.waiting.take() {
            ctx.cancel_future(handle);
        }
        if !self.writing() {
            // Kept for a takeover; a retry or reconcile of a former leader ends here too.
            return;
        }
        if self.queue.is_empty() && self.bucket.try_take(Instant::now()).is_ok() {
            self.start(tenant, cause, ctx);
        } else if !self.queue.iter().any(|(t, _)| t == tenant) {
            debug!(sink = %self.name, tenant, "rate limited");
            self.queue.push_back((tenant.to_owned(), cause));
            self.serve_queue(ctx);
        }
    }

    /// Starts queued writes while tokens last, then sleeps until the next token.
    fn serve_queue(&mut self, ctx: &mut Context<Self>) {
        if self.token_timer.is_some() {
            return;
        }
        while let Some((tenant, cause)) = self.queue.front().cloned() {
            let ready = self
                .slots
                .get(&tenant)
                .is_some_and(|s| !s.in_flight && !self.stopping)
                && self.writing();
            if !ready {
                // Gone, being written (it picks up the newest state) or shutting down.
                self.queue.pop_front();
                continue;
            }
            if let Err(wait) = self.bucket.try_take(Instant::now()) {
                self.token_timer = Some(ctx.run_later(wait, |act, ctx| {
                    act.token_timer = None;
                    act.serve_queue(ctx);
                }));
                return;
            }
            self.queue.pop_front();
            self.start(&tenant, cause, ctx);
        }
    }

    /// Starts the write of `tenant` (a token was taken).
    fn start(&mut self, tenant: &str, cause: Cause, ctx: &mut Context<Self>) {
        let slot = self.slots.get_mut(tenant).expect("checked by the caller");
        slot.in_flight = true;
        let snapshot = slot.to_write();
        let tenant = tenant.to_owned();
        let started = SystemTime::now();
        ctx.spawn(self.sink.apply(snapshot.clone()).into_actor(self).map(
            move |result, act, ctx| {
                act.trace_write(&snapshot, cause, started, &result);
                act.written(&tenant, &snapshot, cause, result, ctx);
            },
        ));
    }

    fn wait_then_write(
        &mut self,
        tenant: &str,
        wait: Duration,
        cause: Cause,
        ctx: &mut Context<Self>,
    ) {
        let owned = tenant.to_owned();
        let handle = ctx.run_later(wait, move |act, ctx| {
            if let Some(slot) = act.slots.get_mut(&owned) {
                slot.waiting = None;
            }
            act.write(&owned, cause, ctx);
        });
        if let Some(slot) = self.slots.get_mut(tenant) {
            slot.waiting = Some(handle);
        }
    }

    fn written(
        &mut self,
        tenant: &str,
        snapshot: &TenantSnapshot,
        cause: Cause,
        result: Result<Applied, SinkError>,
        ctx: &mut Context<Self>,
    ) {
        let label = match &result {
            Ok(Applied::Changed) => "changed",
            Ok(Applied::Unchanged) => "unchanged",
            Err(_) => "error",
        };
        self.metrics
            .sink_writes
            .get_or_create(&SinkResultLabels {
                sink: self.name.clone(),
                result: label,
            })
            .inc();
        self.events.emit(|| Event::SinkWrite {
            at: crate::events::now(),
            sink: self.name.clone(),
            tenant: tenant.to_owned(),
            seq: snapshot.seq,
            result: label,
            error: result.as_ref().err().map(|e| e.message.clone()),
        });
        let Some(slot) = self.slots.get_mut(tenant) else {
            return;
        };
        slot.in_flight = false;
        let mut retry = None;
        match result {
            Ok(applied) => {
                let first_write_of_seq = slot.written_seq != Some(snapshot.seq);
                slot.attempts = 0;
                slot.written_seq = Some(snapshot.seq);
                slot.carried.retain(|(seq, _)| *seq > snapshot.seq);
                let now = SystemTime::now();
                slot.last_success = Some(now);
                slot.last_error = None;
                self.metrics
                    .sink_last_success
                    .get_or_create(&SinkLabel {
                        sink: self.name.clone(),
                    })
                    .set(unix_seconds(now));
                if first_write_of_seq {
                    self.metrics
                        .failover_seconds
                        .get_or_create(&SinkLabel {
                            sink: self.name.clone(),
                        })
                        .observe(snapshot.cause_at.elapsed().as_secs_f64());
                }
                if cause == Cause::Reconcile && applied == Applied::Changed {
                    warn!(sink = %self.name, tenant, seq = snapshot.seq, "drift repaired: the back end had been changed by someone else");
                } else {
                    debug!(sink = %self.name, tenant, seq = snapshot.seq, ?applied, ?cause, "written");
                }
            }
            Err(e) => {
                slot.attempts += 1;
                if e.throttled {
                    self.metrics
                        .sink_throttled
                        .get_or_create(&SinkLabel {
                            sink: self.name.clone(),
                        })
                        .inc();
                }
                warn!(sink = %self.name, tenant, seq = snapshot.seq, attempt = slot.attempts, retriable = e.retriable, throttled = e.throttled, "write failed: {e}");
                if e.retriable {
                    let backoff = self.backoff.delay(slot.attempts, fastrand::f64());
                    retry = Some(e.retry_after.map_or(backoff, |after| after.max(backoff)));
                }
                slot.last_error = Some((SystemTime::now(), e));
            }
        }
        let newer = slot.desired.seq != snapshot.seq;
        if newer {
            // A newer snapshot arrived during the write: it goes next, whatever happened.
            self.write(tenant, Cause::Snapshot, ctx);
        } else if let Some(delay) = retry {
            self.wait_then_write(tenant, delay, Cause::Retry, ctx);
        }
        self.update_pending();
    }

    /// A span under the snapshot's publish span, for writes that carry a change: first
    /// writes and their retries, and reconciles that repaired drift (routine reconciles
    /// that found nothing would only bury the failover in noise).
    fn trace_write(
        &self,
        snapshot: &TenantSnapshot,
        cause: Cause,
        started: SystemTime,
        result: &Result<Applied, SinkError>,
    ) {
        if cause == Cause::Reconcile && !matches!(result, Ok(Applied::Changed)) {
            return;
        }
        let attempt = self.slots.get(&snapshot.tenant).map_or(0, |s| s.attempts) + 1;
        let (outcome, error) = match result {
            Ok(Applied::Changed) => ("changed", None),
            Ok(Applied::Unchanged) => ("unchanged", None),
            Err(e) => ("error", Some(e.message.as_str())),
        };
        let mut attributes = vec![
            KeyValue::new("sink", self.name.clone()),
            KeyValue::new("sink.kind", self.sink.kind()),
            KeyValue::new("tenant", snapshot.tenant.clone()),
            KeyValue::new("seq", snapshot.seq as i64),
            KeyValue::new("attempt", i64::from(attempt)),
            KeyValue::new("cause", cause.as_str()),
            KeyValue::new("result", outcome),
        ];
        if let Some(message) = error {
            attributes.push(KeyValue::new("error", message.to_string()));
        }
        trace::sink_write(&snapshot.trace, started, error, attributes);
    }

    fn reconcile(&mut self, ctx: &mut Context<Self>) {
        let idle: Vec<String> = self
            .slots
            .iter()
            .filter(|(t, s)| {
                !s.in_flight && s.waiting.is_none() && !self.queue.iter().any(|(q, _)| q == *t)
            })
            .map(|(t, _)| t.clone())
            .collect();
        if !idle.is_empty() {
            debug!(sink = %self.name, tenants = idle.len(), "periodic reconcile");
        }
        for tenant in idle {
            self.write(&tenant, Cause::Reconcile, ctx);
        }
    }
}

impl Actor for SinkActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.update_pending();
        ctx.run_interval(self.reconcile_interval, |act, ctx| act.reconcile(ctx));
        if let Some(gate) = &self.gate {
            let mut became_writer = gate.subscribe();
            let me = ctx.address();
            actix::spawn(async move {
                while became_writer.changed().await.is_ok() {
                    if !me.connected() {
                        break; // stopped (a reload replaced the sink)
                    }
                    me.do_send(Takeover);
                }
            });
        }
    }
}

impl Handler<Publish> for SinkActor {
    type Result = ();

    fn handle(&mut self, msg: Publish, ctx: &mut Context<Self>) {
        let snapshot = msg.0;
        let tenant = snapshot.tenant.clone();
        let slot = self.slots.entry(tenant.clone()).or_insert_with(|| Slot {
            desired: snapshot.clone(),
            written_seq: None,
            in_flight: false,
            waiting: None,
            attempts: 0,
            last_success: None,
            last_error: None,
            carried: Vec::new(),
        });
        if snapshot.seq < slot.desired.seq {
            info!(sink = %self.name, tenant, seq = snapshot.seq, "dropping an older snapshot");
            return;
        }
        if snapshot.seq > slot.desired.seq && slot.written_seq != Some(slot.desired.seq) {
            let replaced = slot.desired.seq;
            slot.carried
                .extend(slot.desired.changes.iter().map(|c| (replaced, c.clone())));
            let excess = slot.carried.len().saturating_sub(MAX_CHANGES);
            slot.carried.drain(..excess);
        }
        slot.desired = snapshot;
        // A write in flight picks up the newer snapshot when it finishes (coalescing);
        // otherwise write now, even if a retry was waiting: the new state may succeed.
        self.write(&tenant, Cause::Snapshot, ctx);
        self.update_pending();
    }
}

impl Handler<GetSinkStatus> for SinkActor {
    type Result = MessageResult<GetSinkStatus>;

    fn handle(&mut self, _: GetSinkStatus, _: &mut Context<Self>) -> Self::Result {
        let tenants = self
            .slots
            .iter()
            .map(|(tenant, slot)| SinkTenantStatus {
                tenant: tenant.clone(),
                desired_seq: slot.desired.seq,
                written_seq: slot.written_seq,
                pending: slot.written_seq != Some(slot.desired.seq),
                attempts: slot.attempts,
                last_success: slot.last_success.map(unix_seconds),
                last_error: slot.last_error.as_ref().map(|(at, e)| SinkErrorStatus {
                    at: unix_seconds(*at),
                    message: e.message.clone(),
                    retrying: e.retriable,
                }),
            })
            .collect();
        MessageResult(SinkStatus {
            name: self.name.clone(),
            kind: self.sink.kind(),
            tenants,
            standby: !self.writing(),
        })
    }
}
