//! The sink delivery's decisions as plain code: no actor, no clock, no I/O beyond logs.
//! The shell ([`super::SinkActor`]) feeds it snapshots, finished writes and timer wake-ups
//! with the current [`Now`], and carries out the [`Effect`]s it returns (start this write,
//! wake me then). Tested in virtual time in `tests.rs`.
//!
//! The invariant it keeps: one write in flight per tenant, and at most `max_in_flight`
//! over all tenants; the latest snapshot is the only one ever written (older ones are
//! dropped, replaced ones hand their changes on); writes start only while the writer fence
//! is open, in the order tenants asked once the token bucket runs dry or every place in
//! flight is taken; a failed write is retried after its backoff or the back end's
//! `Retry-After`, whichever is longer, unless a newer snapshot comes first.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use ho_config::Delivery;
use tokio::time::Instant;
use tracing::{debug, info};

use crate::backoff::ExponentialBackoff;
pub(crate) use crate::clock::Now;
use crate::sink::{Applied, SinkError};
use crate::snapshot::{TenantSnapshot, MAX_CHANGES};
use crate::status::SinkTenantStatus;
use crate::token_bucket::TokenBucket;

use super::round::{Overrun, Rounds};
use super::slot::{plan_retry, Slot};

/// Share of a backoff delay taken off at random, so sinks failing together retry apart.
const BACKOFF_JITTER: f64 = 0.2;

/// Why a write is made: for logs, traces and the drift warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cause {
    /// A new snapshot.
    Snapshot,
    /// A failed write, tried again.
    Retry,
    /// The periodic re-write that repairs drift.
    Reconcile,
    /// This replica just became the writer (leader election).
    Takeover,
}

impl Cause {
    /// The name in traces.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Cause::Snapshot => "snapshot",
            Cause::Retry => "retry",
            Cause::Reconcile => "reconcile",
            Cause::Takeover => "takeover",
        }
    }
}

/// A write the shell must start: call `Sink::apply(snapshot)` and hand the result back
/// through [`DeliveryCore::written`].
#[derive(Debug, Clone)]
pub(crate) struct Write {
    /// Tells this write's result from that of a write of a slot since forgotten.
    pub id: u64,
    /// Tenant name.
    pub tenant: String,
    /// What to write: the desired state, carrying the changes of snapshots it replaced.
    pub snapshot: Arc<TenantSnapshot>,
    /// Why.
    pub cause: Cause,
    /// 1 for a first attempt, counting up while attempts fail.
    pub attempt: u32,
}

/// A timer the core asked for; handed back to [`DeliveryCore::wake`] when due.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Wake {
    /// The next write token is available: serve the queue.
    Token,
    /// The retry of `tenant` planned for `at` is due. A retry replaced since (a newer
    /// snapshot, a forget) has another `at` or none, so a stale wake-up does nothing: the
    /// shell never has to cancel a timer.
    Retry {
        /// Tenant name.
        tenant: String,
        /// The instant the retry was planned for.
        at: Instant,
    },
}

/// What the shell must do.
#[derive(Debug)]
pub(crate) enum Effect {
    /// Start this write.
    Write(Write),
    /// Call [`DeliveryCore::wake`] with `wake` at `at`.
    WakeAt {
        /// When.
        at: Instant,
        /// What for.
        wake: Wake,
    },
}

/// What a finished write changed, for the shell's logs and metrics.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Finished {
    /// A success that wrote this seq for the first time (not a reconcile of it): the end of
    /// a failover for this sink.
    pub first_of_seq: bool,
    /// Failed attempts since the last success, this one included.
    pub attempts: u32,
    /// When a failure is retried: after this long (`None`: not retried, or a newer snapshot
    /// is written at once).
    pub retry_in: Option<Duration>,
}

/// The delivery state of one sink: every tenant's slot, the token bucket and its queue.
pub(crate) struct DeliveryCore {
    /// The sink's name, for logs.
    name: String,
    backoff: ExponentialBackoff,
    bucket: TokenBucket,
    slots: BTreeMap<String, Slot>,
    /// Tenants waiting for a write token or a place in flight, each once, in the order they
    /// asked; one timer serves the whole queue (a timer per tenant would wake every waiting
    /// tenant for each token), and every write that ends serves it too.
    queue: VecDeque<(String, Cause)>,
    /// Writes in flight at most (`delivery.max_in_flight`): a start-up or takeover round of
    /// every tenant must not hold a request body and a connection per tenant at once.
    max_in_flight: usize,
    /// Writes started and not ended, forgotten tenants' included: they hold their place
    /// until they end.
    in_flight: usize,
    /// Writes in flight of forgotten tenants, by id: a tenant added again under the same
    /// name waits for them, so an old state never lands after a new one.
    orphans: BTreeMap<u64, String>,
    /// The id of the next write.
    next_id: u64,
    /// A [`Wake::Token`] is planned.
    token_armed: bool,
    /// Set at shutdown: writes in flight finish, no new one starts.
    stopping: bool,
    /// Whether reconcile rounds keep up with their interval.
    rounds: Rounds,
    /// Backoff jitter; seeded in tests.
    rng: fastrand::Rng,
}

impl DeliveryCore {
    /// The delivery of sink `name` as `delivery` says, its bucket full at `now`.
    pub(crate) fn new(
        name: String,
        delivery: &Delivery,
        now: Instant,
        rng: fastrand::Rng,
    ) -> DeliveryCore {
        DeliveryCore {
            name,
            backoff: ExponentialBackoff::try_new(
                delivery.backoff_min,
                delivery.backoff_max,
                BACKOFF_JITTER,
            )
            .expect("validated with the config"),
            bucket: TokenBucket::within_any_second(
                delivery.max_writes_per_second,
                delivery.burst,
                now,
            ),
            slots: BTreeMap::new(),
            queue: VecDeque::new(),
            max_in_flight: delivery.max_in_flight as usize,
            in_flight: 0,
            orphans: BTreeMap::new(),
            next_id: 0,
            token_armed: false,
            stopping: false,
            rounds: Rounds::new(delivery.reconcile_interval),
            rng,
        }
    }

    /// A new desired state for its tenant. An older seq than the one held is dropped; a
    /// newer one replaces it (carrying its changes if it was never written) and is written
    /// now, or when the write in flight ends.
    pub(crate) fn publish(
        &mut self,
        snapshot: Arc<TenantSnapshot>,
        now: Now,
        fx: &mut Vec<Effect>,
    ) {
        let tenant = snapshot.tenant.clone();
        let known = self.slots.contains_key(&tenant);
        let slot = self
            .slots
            .entry(tenant.clone())
            .or_insert_with(|| Slot::new(snapshot.clone()));
        if known && snapshot.seq == slot.desired.seq {
            // The same state again (a reload sends every tenant's current one, for sinks it
            // added or rebuilt): already written, in flight, or waiting for a token or a
            // retry. Writing it again would cost a write per tenant at every reload.
            return;
        }
        if snapshot.seq < slot.desired.seq {
            info!(sink = %self.name, tenant, seq = snapshot.seq, "dropping an older snapshot");
            return;
        }
        if snapshot.seq > slot.desired.seq && slot.pending() {
            let replaced = slot.desired.seq;
            slot.carried
                .extend(slot.desired.changes.iter().map(|c| (replaced, c.clone())));
            let excess = slot.carried.len().saturating_sub(MAX_CHANGES);
            slot.carried.drain(..excess);
        }
        slot.desired = snapshot;
        // Even if a retry was waiting: the new state may succeed.
        self.write(&tenant, Cause::Snapshot, now, fx);
    }

    /// The last state of a tenant no longer run here ([`super::PublishLast`]): written as
    /// any snapshot, then forgotten once written.
    pub(crate) fn publish_last(
        &mut self,
        snapshot: Arc<TenantSnapshot>,
        now: Now,
        fx: &mut Vec<Effect>,
    ) {
        let tenant = snapshot.tenant.clone();
        self.publish(snapshot, now, fx);
        if let Some(slot) = self.slots.get_mut(&tenant) {
            slot.last = true;
        }
    }

    /// A reload removed the tenant: no more writes or reconciles of it (a write in flight
    /// finishes and frees its place; its result is then ignored).
    pub(crate) fn forget(&mut self, tenant: &str) {
        // Its place in the queue is not a tenant added again under the same name.
        self.queue.retain(|(t, _)| t != tenant);
        if let Some(id) = self.slots.remove(tenant).and_then(|s| s.in_flight) {
            self.orphans.insert(id, tenant.to_owned());
        }
    }

    /// Shutdown: start no new write; answers how many are still in flight.
    pub(crate) fn quiesce(&mut self) -> usize {
        self.stopping = true;
        self.in_flight
    }

    /// This replica became the writer: every tenant is written now from the snapshots kept.
    pub(crate) fn takeover(&mut self, now: Now, fx: &mut Vec<Effect>) {
        let tenants: Vec<String> = self.slots.keys().cloned().collect();
        info!(sink = %self.name, tenants = tenants.len(), "writer now: writing every tenant");
        for tenant in tenants {
            self.write(&tenant, Cause::Takeover, now, fx);
        }
    }

    /// The periodic re-write of every idle tenant (not in flight, no retry or token
    /// awaited), which repairs drift made by someone else. Returns, once, a round still
    /// waiting for places at this tick.
    pub(crate) fn reconcile(&mut self, now: Now, fx: &mut Vec<Effect>) -> Option<Overrun> {
        let idle: Vec<String> = self
            .slots
            .iter()
            .filter(|(t, s)| {
                s.in_flight.is_none()
                    && s.retry_at.is_none()
                    && !self.queue.iter().any(|(q, _)| q == *t)
            })
            .map(|(t, _)| t.clone())
            .collect();
        let waiting = self.queued_reconciles();
        let overrun = self
            .rounds
            .tick(now.clock.mono, waiting, idle.len(), self.max_in_flight);
        if !idle.is_empty() {
            debug!(sink = %self.name, tenants = idle.len(), "periodic reconcile");
        }
        for tenant in idle {
            self.write(&tenant, Cause::Reconcile, now, fx);
        }
        overrun
    }

    /// Reconciles waiting in the queue.
    fn queued_reconciles(&self) -> usize {
        self.queue
            .iter()
            .filter(|(_, c)| *c == Cause::Reconcile)
            .count()
    }

    /// A timer asked for in an [`Effect::WakeAt`] is due.
    pub(crate) fn wake(&mut self, wake: Wake, now: Now, fx: &mut Vec<Effect>) {
        match wake {
            Wake::Token => {
                self.token_armed = false;
                self.serve_queue(now, fx);
            }
            Wake::Retry { tenant, at } => {
                let Some(slot) = self.slots.get_mut(&tenant) else {
                    return;
                };
                if slot.retry_at == Some(at) {
                    slot.retry_at = None;
                    self.write(&tenant, Cause::Retry, now, fx);
                }
            }
        }
    }

    /// `write` ended with `result`; its place in flight goes to the first write queued.
    /// A newer snapshot that arrived meanwhile is written next, whatever the result; else
    /// a retriable failure waits for its retry. `None` when the tenant was forgotten
    /// meanwhile.
    pub(crate) fn written(
        &mut self,
        write: &Write,
        result: &Result<Applied, SinkError>,
        now: Now,
        fx: &mut Vec<Effect>,
    ) -> Option<Finished> {
        self.in_flight -= 1;
        let finished = self.settle(write, result, now, fx);
        self.serve_queue(now, fx);
        finished
    }

    /// What `write`'s result changes in its tenant's slot.
    fn settle(
        &mut self,
        write: &Write,
        result: &Result<Applied, SinkError>,
        now: Now,
        fx: &mut Vec<Effect>,
    ) -> Option<Finished> {
        if let Some(tenant) = self.orphans.remove(&write.id) {
            // A tenant added again under this name waited for this write to end.
            self.write(&tenant, Cause::Snapshot, now, fx);
            return None;
        }
        let (tenant, seq) = (write.tenant.as_str(), write.snapshot.seq);
        let slot = self.slots.get_mut(tenant)?;
        slot.in_flight = None;
        let mut finished = Finished {
            first_of_seq: false,
            attempts: 0,
            retry_in: None,
        };
        match result {
            Ok(_) => {
                finished.first_of_seq = slot.written_seq != Some(seq);
                if finished.first_of_seq {
                    slot.written_at = Some(now.clock.wall);
                }
                slot.attempts = 0;
                slot.written_seq = Some(seq);
                slot.carried.retain(|(carried, _)| *carried > seq);
                slot.last_success = Some(now.clock.wall);
                slot.last_error = None;
            }
            Err(e) => {
                slot.attempts += 1;
                if e.retriable {
                    let backoff = self.backoff.delay(slot.attempts, self.rng.f64());
                    finished.retry_in =
                        Some(e.retry_after.map_or(backoff, |after| after.max(backoff)));
                }
                slot.last_error = Some((now.clock.wall, e.clone()));
            }
        }
        finished.attempts = slot.attempts;
        if slot.desired.seq != seq {
            finished.retry_in = None;
            self.write(tenant, Cause::Snapshot, now, fx);
        } else if let Some(delay) = finished.retry_in {
            plan_retry(slot, tenant, now.clock.mono + delay, fx);
        } else if slot.last && result.is_ok() {
            self.slots.remove(tenant);
        }
        Some(finished)
    }

    /// Tenants whose latest snapshot is not written yet; none on a standby (`writer`
    /// false): the writes are the leader's.
    pub(crate) fn pending(&self, writer: bool) -> usize {
        if !writer {
            return 0;
        }
        self.slots.values().filter(|s| s.pending()).count()
    }

    /// Writes waiting for a place in flight (`delivery.max_in_flight`) or a write token.
    pub(crate) fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Every tenant's delivery, for `/status`.
    pub(crate) fn status(&self) -> Vec<SinkTenantStatus> {
        self.slots
            .iter()
            .map(|(tenant, slot)| slot.status(tenant))
            .collect()
    }

    /// Writes the tenant's desired state now if a token and a place in flight are free and
    /// nobody queues for them, else queues it. A waiting retry is dropped: this write
    /// (or the one in flight) supersedes it.
    fn write(&mut self, tenant: &str, cause: Cause, now: Now, fx: &mut Vec<Effect>) {
        let orphaned = self.orphaned(tenant);
        let Some(slot) = self.slots.get_mut(tenant) else {
            return;
        };
        if slot.in_flight.is_some() || orphaned || self.stopping {
            return;
        }
        slot.retry_at = None;
        if !now.writer {
            // Kept for a takeover; a retry or reconcile of a former leader ends here too.
            return;
        }
        if self.held_for_a_count(tenant, now, fx) {
            return;
        }
        let room = self.in_flight < self.max_in_flight;
        if room && self.queue.is_empty() && self.bucket.try_take(now.clock.mono).is_ok() {
            self.start(tenant, cause, fx);
        } else {
            if room {
                debug!(sink = %self.name, tenant, "rate limited");
            } else {
                debug!(sink = %self.name, tenant, "waiting for a write in flight to end");
            }
            self.enqueue(tenant, cause);
            self.serve_queue(now, fx);
        }
    }

    /// Queues the tenant for a token. A reconcile only repairs drift, so a change or a
    /// retry goes ahead of every queued reconcile (in order among themselves): with many
    /// tenants, a round of reconciles must not hold a new verdict back for a round's
    /// worth of tokens. A tenant queued for a reconcile that now has a change moves up.
    fn enqueue(&mut self, tenant: &str, cause: Cause) {
        let queued = self.queue.iter().position(|(t, _)| t == tenant);
        if cause == Cause::Reconcile {
            if queued.is_none() {
                self.queue.push_back((tenant.to_owned(), cause));
            }
            return;
        }
        match queued {
            Some(at) if self.queue[at].1 != Cause::Reconcile => return,
            Some(at) => {
                self.queue.remove(at);
            }
            None => {}
        }
        let first_reconcile = self
            .queue
            .iter()
            .position(|(_, c)| *c == Cause::Reconcile)
            .unwrap_or(self.queue.len());
        self.queue
            .insert(first_reconcile, (tenant.to_owned(), cause));
    }

    /// A write of a forgotten slot of `tenant` is in flight.
    fn orphaned(&self, tenant: &str) -> bool {
        self.orphans.values().any(|t| t == tenant)
    }

    /// Starts queued writes while tokens and places in flight last, then asks to be woken
    /// for the next token (a write that ends serves the queue again).
    fn serve_queue(&mut self, now: Now, fx: &mut Vec<Effect>) {
        if self.token_armed {
            return;
        }
        while self.in_flight < self.max_in_flight {
            let Some((tenant, cause)) = self.queue.front().cloned() else {
                return;
            };
            let ready = now.writer
                && !self.stopping
                && !self.orphaned(&tenant)
                && self
                    .slots
                    .get(&tenant)
                    .is_some_and(|s| s.in_flight.is_none());
            if !ready || self.held_for_a_count(&tenant, now, fx) {
                // Gone, being written (it picks up the newest state), fenced, stopping, or
                // waiting for a count of the clusters' reports.
                self.queue.pop_front();
                continue;
            }
            if let Err(wait) = self.bucket.try_take(now.clock.mono) {
                self.token_armed = true;
                fx.push(Effect::WakeAt {
                    at: now.clock.mono + wait,
                    wake: Wake::Token,
                });
                return;
            }
            self.queue.pop_front();
            self.start(&tenant, cause, fx);
        }
    }

    /// Holds the write of a set published from the clusters' vote when no count within
    /// `report_ttl` stands behind it (see [`crate::multi_cluster::vote::Confirmed`]): it
    /// counts as a failed attempt (its retry waits the backoff, the error says why), so the
    /// set is written once a count renews it or a newer one replaces it.
    fn held_for_a_count(&mut self, tenant: &str, now: Now, fx: &mut Vec<Effect>) -> bool {
        let Some(slot) = self.slots.get_mut(tenant) else {
            return false;
        };
        let votes = slot.desired.votes.as_ref();
        if votes.is_none_or(|v| v.current_at(now.clock.mono)) {
            return false;
        }
        slot.attempts += 1;
        slot.last_error = Some((
            now.clock.wall,
            SinkError::retriable(
                "not written: no count of the clusters' reports within report_ttl stands \
                 behind this set (they cannot be read); it waits for one",
            ),
        ));
        let delay = self.backoff.delay(slot.attempts, self.rng.f64());
        plan_retry(slot, tenant, now.clock.mono + delay, fx);
        true
    }

    /// Starts the write of `tenant` (a token and a place in flight were taken).
    fn start(&mut self, tenant: &str, cause: Cause, fx: &mut Vec<Effect>) {
        let id = self.next_id;
        self.next_id += 1;
        self.in_flight += 1;
        let slot = self.slots.get_mut(tenant).expect("checked by the caller");
        slot.in_flight = Some(id);
        fx.push(Effect::Write(Write {
            id,
            tenant: tenant.to_owned(),
            snapshot: slot.to_write(),
            cause,
            attempt: slot.attempts + 1,
        }));
    }
}

/// The label of a write's result in metrics and events.
pub(crate) fn result_label(result: &Result<Applied, SinkError>) -> &'static str {
    match result {
        Ok(applied) => applied.as_str(),
        Err(_) => "error",
    }
}
