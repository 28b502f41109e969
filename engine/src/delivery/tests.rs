//! The delivery core in virtual time: no actix, no sockets, no sink. Writes are effects the
//! test completes by hand; timers fire only when the test moves time past them.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use ho_config::{Delivery, RoutingPolicy};
use tokio::time::Instant;

use super::core::{Cause, DeliveryCore, Effect, Finished, Now, Wake, Write};
use super::round::Overrun;
use crate::clock::Clock;
use crate::hysteresis::Health;
use crate::sink::{Applied, SinkError};
use crate::snapshot::{TenantSnapshot, VerdictChange, MAX_CHANGES};

mod in_flight;

/// One sink's delivery under a hand-moved clock: the timers it asked for and the writes
/// it started, until the test finishes them.
struct Run {
    core: DeliveryCore,
    start: Clock,
    /// Virtual time since `start`.
    elapsed: Duration,
    writer: bool,
    timers: Vec<(Instant, Wake)>,
    in_flight: Vec<Write>,
    /// Every write started, with the virtual time it started at.
    started: Vec<(Duration, Write)>,
}

impl Run {
    fn new(delivery: Delivery) -> Run {
        let start = Clock::now();
        Run {
            core: DeliveryCore::new(
                "s".into(),
                &delivery,
                start.mono,
                fastrand::Rng::with_seed(7),
            ),
            start,
            elapsed: Duration::ZERO,
            writer: true,
            timers: Vec::new(),
            in_flight: Vec::new(),
            started: Vec::new(),
        }
    }

    /// No rate limit to speak of; backoff 1 s doubling to 8 s.
    fn unlimited() -> Run {
        Run::new(delivery(1000.0, 1000))
    }

    fn now(&self) -> Now {
        Now {
            clock: self.start.after(self.elapsed),
            writer: self.writer,
        }
    }

    fn take(&mut self, fx: Vec<Effect>) {
        for effect in fx {
            match effect {
                Effect::Write(write) => {
                    assert!(
                        !self.in_flight.iter().any(|w| w.tenant == write.tenant),
                        "two writes in flight for {}",
                        write.tenant
                    );
                    self.started.push((self.elapsed, write.clone()));
                    self.in_flight.push(write);
                }
                Effect::WakeAt { at, wake } => self.timers.push((at, wake)),
            }
        }
    }

    fn publish(&mut self, snapshot: TenantSnapshot) {
        let (now, mut fx) = (self.now(), Vec::new());
        self.core.publish(Arc::new(snapshot), now, &mut fx);
        self.take(fx);
    }

    /// A reconcile tick; a late round, the first time.
    fn reconcile(&mut self) -> Option<Overrun> {
        let (now, mut fx) = (self.now(), Vec::new());
        let overrun = self.core.reconcile(now, &mut fx);
        self.take(fx);
        overrun
    }

    fn step(&mut self, f: impl FnOnce(&mut DeliveryCore, Now, &mut Vec<Effect>)) {
        let (now, mut fx) = (self.now(), Vec::new());
        f(&mut self.core, now, &mut fx);
        self.take(fx);
    }

    /// Moves time on by `d`, firing every timer that falls due, in time order.
    fn advance(&mut self, d: Duration) {
        let end = self.elapsed + d;
        loop {
            self.timers.sort_by_key(|(at, _)| *at);
            let due = self
                .timers
                .first()
                .is_some_and(|(at, _)| *at <= self.start.mono + end);
            if !due {
                break;
            }
            let (at, wake) = self.timers.remove(0);
            self.elapsed = at - self.start.mono;
            self.step(|core, now, fx| core.wake(wake, now, fx));
        }
        self.elapsed = end;
    }

    /// Ends the write in flight for `tenant` with `result`.
    fn finish(&mut self, tenant: &str, result: Result<Applied, SinkError>) -> Option<Finished> {
        let i = self
            .in_flight
            .iter()
            .position(|w| w.tenant == tenant)
            .unwrap_or_else(|| panic!("no write in flight for {tenant}"));
        let write = self.in_flight.remove(i);
        let (now, mut fx) = (self.now(), Vec::new());
        let finished = self.core.written(&write, &result, now, &mut fx);
        self.take(fx);
        finished
    }

    /// (tenant, seq) of every write started, in order.
    fn writes(&self) -> Vec<(String, u64)> {
        self.started
            .iter()
            .map(|(_, w)| (w.tenant.clone(), w.snapshot.seq))
            .collect()
    }

    fn last_write(&self) -> &Write {
        &self.started.last().expect("a write started").1
    }
}

fn delivery(rate: f64, burst: u32) -> Delivery {
    Delivery {
        max_writes_per_second: rate,
        burst,
        max_in_flight: 1000,
        reconcile_interval: Duration::from_secs(60),
        backoff_min: Duration::from_secs(1),
        backoff_max: Duration::from_secs(8),
    }
}

/// Tenant `tenant`'s snapshot `seq`, with one verdict change per name in `changes`.
fn snap(tenant: &str, seq: u64, changes: &[&str]) -> TenantSnapshot {
    let mut s = TenantSnapshot::healthy(tenant, &["a.example"], RoutingPolicy::All, vec![]);
    s.seq = seq;
    s.changes = changes.iter().map(|c| change(c)).collect();
    s
}

fn change(endpoint: &str) -> VerdictChange {
    VerdictChange {
        endpoint: endpoint.into(),
        address: IpAddr::V4(Ipv4Addr::LOCALHOST),
        from: Health::Up,
        to: Health::Down,
        reason: "refused".into(),
    }
}

fn changed_endpoints(w: &Write) -> Vec<&str> {
    w.snapshot.changes.iter().map(|c| &*c.endpoint).collect()
}

fn ok() -> Result<Applied, SinkError> {
    Ok(Applied::Changed)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn snapshots_during_a_write_coalesce_to_the_latest() {
    let mut run = Run::unlimited();
    run.publish(snap("t", 1, &[]));
    run.publish(snap("t", 2, &[]));
    run.publish(snap("t", 3, &[]));
    assert_eq!(
        run.writes(),
        [("t".into(), 1)],
        "one write in flight per tenant"
    );
    run.finish("t", ok());
    assert_eq!(
        run.writes(),
        [("t".into(), 1), ("t".into(), 3)],
        "seq 2 is never written"
    );
    run.finish("t", ok());
    assert_eq!(run.core.pending(true), 0);
}

#[test]
fn an_older_snapshot_is_dropped() {
    let mut run = Run::unlimited();
    run.publish(snap("t", 5, &[]));
    run.finish("t", ok());
    run.publish(snap("t", 4, &[]));
    assert_eq!(run.writes(), [("t".into(), 5)]);
    assert_eq!(run.core.status()[0].desired_seq, 5);
}

#[test]
fn replaced_snapshots_hand_their_changes_to_the_next_write() {
    let mut run = Run::unlimited();
    run.publish(snap("t", 1, &["a"]));
    run.publish(snap("t", 2, &["b"]));
    run.publish(snap("t", 3, &["c"]));
    assert_eq!(changed_endpoints(run.last_write()), ["a"]);
    run.finish("t", ok());
    // Seq 1's change was written with seq 1; seq 2's rides on seq 3.
    assert_eq!(changed_endpoints(run.last_write()), ["b", "c"]);
    run.finish("t", ok());
    run.publish(snap("t", 4, &["d"]));
    assert_eq!(
        changed_endpoints(run.last_write()),
        ["d"],
        "written changes are not carried again"
    );
}

#[test]
fn a_failed_write_keeps_its_changes_for_the_next_snapshot() {
    let mut run = Run::unlimited();
    run.publish(snap("t", 1, &["a"]));
    run.finish("t", Err(SinkError::permanent("denied")));
    run.publish(snap("t", 2, &["b"]));
    assert_eq!(changed_endpoints(run.last_write()), ["a", "b"]);
    let changes = &run.last_write().snapshot.changes;
    assert_eq!(changes.capacity(), changes.len(), "no spare room");
}

#[test]
fn carried_changes_keep_the_latest_max_changes() {
    let mut run = Run::unlimited();
    run.publish(snap("t", 1, &[]));
    let names: Vec<String> = (0..MAX_CHANGES + 50).map(|i| format!("e{i}")).collect();
    for (i, chunk) in names.chunks(100).enumerate() {
        let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
        run.publish(snap("t", 2 + i as u64, &refs));
    }
    run.finish("t", ok());
    let written = changed_endpoints(run.last_write());
    assert_eq!(written.len(), MAX_CHANGES);
    let changes = &run.last_write().snapshot.changes;
    assert_eq!(changes.capacity(), MAX_CHANGES, "no spare room");
    assert_eq!(
        written.first().copied(),
        Some("e50"),
        "the oldest changes go first"
    );
    assert_eq!(
        written.last().copied(),
        Some(names.last().unwrap().as_str())
    );
}

#[test]
fn rate_limited_tenants_are_written_in_the_order_they_asked() {
    // 10 writes/s, burst 1: one write now, then one per 100 ms.
    let mut run = Run::new(delivery(10.0, 1));
    for tenant in ["d", "b", "e", "a", "c"] {
        run.publish(snap(tenant, 1, &[]));
    }
    // Asking again while queued keeps the place in the queue.
    run.publish(snap("e", 2, &[]));
    assert_eq!(run.timers.len(), 1, "one timer serves the whole queue");
    run.advance(ms(1000));
    let order: Vec<(u128, &str)> = run
        .started
        .iter()
        .map(|(at, w)| (at.as_millis(), w.tenant.as_str()))
        .collect();
    assert_eq!(
        order,
        [(0, "d"), (100, "b"), (200, "e"), (300, "a"), (400, "c")]
    );
    assert_eq!(
        run.started[2].1.snapshot.seq, 2,
        "the queued tenant writes its latest"
    );
}

#[test]
fn the_same_state_sent_again_is_not_written_again() {
    // A reload sends every tenant's current snapshot; a sink that has it writes nothing.
    let mut run = Run::unlimited();
    run.publish(snap("t", 1, &[]));
    run.finish("t", ok());
    run.publish(snap("t", 1, &[]));
    assert_eq!(run.writes(), [("t".into(), 1)]);
    run.publish(snap("t", 2, &[]));
    assert_eq!(run.writes(), [("t".into(), 1), ("t".into(), 2)]);
}

#[test]
fn changes_go_ahead_of_queued_reconciles() {
    // 10 writes/s, burst 1: one write now, then one per 100 ms.
    let mut run = Run::new(delivery(10.0, 1));
    for (i, tenant) in ["a", "b", "c", "d"].into_iter().enumerate() {
        run.publish(snap(tenant, 1, &[]));
        run.advance(ms(100));
        assert_eq!(run.writes().len(), i + 1);
        run.finish(tenant, ok());
    }
    run.advance(ms(100));
    // A reconcile round: "a" takes the token, the rest queue.
    run.reconcile();
    run.finish("a", ok());
    // A new tenant and a changed one are written before the reconciles still waiting.
    run.publish(snap("e", 1, &[]));
    run.publish(snap("c", 2, &[]));
    run.advance(ms(1000));
    let order: Vec<(&str, Cause)> = run.started[4..]
        .iter()
        .map(|(_, w)| (w.tenant.as_str(), w.cause))
        .collect();
    assert_eq!(
        order,
        [
            ("a", Cause::Reconcile),
            ("e", Cause::Snapshot),
            ("c", Cause::Snapshot),
            ("b", Cause::Reconcile),
            ("d", Cause::Reconcile),
        ]
    );
}

#[test]
fn a_retry_waits_for_its_backoff_doubling_per_attempt() {
    let mut run = Run::unlimited();
    run.publish(snap("t", 1, &[]));
    let mut gaps = Vec::new();
    for _ in 0..4 {
        let failed_at = run.elapsed;
        let finished = run.finish("t", Err(SinkError::retriable("503"))).unwrap();
        let retry = finished.retry_in.expect("retriable");
        run.advance(retry - ms(1));
        assert!(run.in_flight.is_empty(), "not before the backoff");
        run.advance(ms(1));
        assert_eq!(run.last_write().cause, Cause::Retry);
        gaps.push(((run.elapsed - failed_at).as_millis(), finished.attempts));
    }
    // Backoff 1 s doubling to 8 s, shortened by up to 20 % jitter.
    for (i, (gap, attempts)) in gaps.iter().enumerate() {
        let base = 1000u128 << i;
        assert!(
            (base * 8 / 10..=base).contains(gap),
            "attempt {i}: {gap} ms"
        );
        assert_eq!(*attempts, i as u32 + 1);
    }
    assert_eq!(run.last_write().attempt, 5);
    let done = run.finish("t", ok()).unwrap();
    assert_eq!((done.attempts, done.first_of_seq), (0, true));
}

#[test]
fn retry_after_longer_than_the_backoff_wins() {
    let mut run = Run::unlimited();
    run.publish(snap("t", 1, &[]));
    let slow = SinkError::throttled("429", Some(Duration::from_secs(5)));
    assert_eq!(
        run.finish("t", Err(slow)).unwrap().retry_in,
        Some(Duration::from_secs(5))
    );
    run.advance(Duration::from_secs(5));
    // A Retry-After shorter than the backoff does not shorten it.
    let quick = SinkError::throttled("429", Some(ms(10)));
    let retry = run.finish("t", Err(quick)).unwrap().retry_in.unwrap();
    assert!(
        retry >= ms(1600),
        "attempt 2 backs off >= 2 s - 20 %: {retry:?}"
    );
}

#[test]
fn a_permanent_error_waits_for_the_next_snapshot() {
    let mut run = Run::unlimited();
    run.publish(snap("t", 1, &[]));
    let finished = run.finish("t", Err(SinkError::permanent("403"))).unwrap();
    assert_eq!(finished.retry_in, None);
    assert!(run.timers.is_empty());
    let status = &run.core.status()[0];
    assert!(status.pending && !status.last_error.as_ref().unwrap().retrying);
}

#[test]
fn a_newer_snapshot_replaces_a_waiting_retry() {
    let mut run = Run::unlimited();
    run.publish(snap("t", 1, &[]));
    run.finish("t", Err(SinkError::retriable("503")));
    run.advance(ms(100));
    run.publish(snap("t", 2, &[]));
    assert_eq!(run.last_write().snapshot.seq, 2);
    assert_eq!(run.last_write().cause, Cause::Snapshot);
    run.finish("t", ok());
    run.advance(Duration::from_secs(10));
    assert_eq!(
        run.writes().len(),
        2,
        "the old retry's timer fires and does nothing"
    );
}

#[test]
fn a_snapshot_arriving_during_a_failing_write_is_written_at_once() {
    let mut run = Run::unlimited();
    run.publish(snap("t", 1, &[]));
    run.publish(snap("t", 2, &[]));
    let finished = run.finish("t", Err(SinkError::retriable("503"))).unwrap();
    assert_eq!(finished.retry_in, None, "no retry of the old state");
    assert_eq!(run.writes(), [("t".into(), 1), ("t".into(), 2)]);
}

/// A set published from the clusters' vote is written only while a count within
/// `report_ttl` stands behind it: past that its attempts are held (retried at the backoff,
/// the error says why), and a later count with the same outcome lets it through.
#[test]
fn a_set_from_the_vote_waits_for_a_count_within_report_ttl() {
    use crate::multi_cluster::vote::Tally;
    let mut run = Run::unlimited();
    let ttl = Duration::from_secs(2);
    let counted =
        |run: &Run| Arc::new(Tally::count(&[], 0, ttl, 0.5).counted_at(run.now().clock.mono));
    let tally = counted(&run);
    run.advance(ms(2_500));
    run.publish(TenantSnapshot {
        votes: Some(tally.clone()),
        ..snap("a", 1, &[])
    });
    assert!(run.started.is_empty(), "no count for 2.5 s: held");
    let status = run.core.status();
    let error = status[0].last_error.as_ref().expect("the hold is said");
    assert!(error.message.contains("report_ttl"), "{error:?}");
    // The retry comes at the backoff and is held again while nothing renews the count.
    run.advance(Duration::from_secs(1));
    assert!(run.started.is_empty());
    // A count with the same outcome renews it: the next retry writes.
    tally.renew(&counted(&run));
    run.advance(Duration::from_secs(4));
    assert_eq!(run.writes(), [("a".into(), 1)]);
}

#[test]
fn a_closed_fence_writes_nothing_and_keeps_every_snapshot() {
    let mut run = Run::unlimited();
    run.writer = false;
    run.publish(snap("a", 1, &[]));
    run.publish(snap("b", 1, &[]));
    run.reconcile();
    assert!(run.started.is_empty());
    assert_eq!(run.core.pending(false), 0, "a standby has nothing pending");
    assert!(run.core.status().iter().all(|t| t.pending));
    // The fence opens: the takeover writes every tenant at once.
    run.writer = true;
    run.step(DeliveryCore::takeover);
    assert_eq!(run.writes(), [("a".into(), 1), ("b".into(), 1)]);
    assert!(run
        .started
        .iter()
        .all(|(at, w)| at.is_zero() && w.cause == Cause::Takeover));
}

#[test]
fn a_fence_closing_ends_retries_and_empties_the_queue() {
    let mut run = Run::new(delivery(10.0, 1));
    run.publish(snap("a", 1, &[]));
    run.publish(snap("b", 1, &[]));
    run.finish("a", Err(SinkError::retriable("503")));
    run.writer = false;
    run.advance(Duration::from_secs(10));
    assert_eq!(
        run.writes(),
        [("a".into(), 1)],
        "neither the queued b nor a's retry"
    );
    run.writer = true;
    run.step(DeliveryCore::takeover);
    run.advance(ms(100)); // b waits for its token
    assert_eq!(run.writes()[1..], [("a".into(), 1), ("b".into(), 1)]);
}

#[test]
fn a_write_in_flight_when_the_fence_closes_still_counts() {
    let mut run = Run::unlimited();
    run.publish(snap("t", 1, &[]));
    run.writer = false;
    let finished = run.finish("t", ok()).unwrap();
    assert!(finished.first_of_seq);
    assert_eq!(run.core.status()[0].written_seq, Some(1));
}

#[test]
fn reconcile_rewrites_only_idle_tenants() {
    let mut run = Run::new(delivery(1000.0, 3));
    for tenant in ["idle", "busy", "retrying"] {
        run.publish(snap(tenant, 1, &[]));
    }
    run.finish("idle", ok());
    run.finish("retrying", Err(SinkError::retriable("503")));
    run.publish(snap("queued", 1, &[])); // the bucket (burst 3) is empty: queued
    run.reconcile();
    run.advance(ms(10)); // tokens for the queue: "queued" first, then the reconcile
    let reconciled: Vec<&str> = run
        .started
        .iter()
        .filter(|(_, w)| w.cause == Cause::Reconcile)
        .map(|(_, w)| w.tenant.as_str())
        .collect();
    assert_eq!(reconciled, ["idle"]);
    // A reconcile of a seq already written is not a failover.
    let finished = run.finish("idle", ok()).unwrap();
    assert!(!finished.first_of_seq);
}

#[test]
fn a_forgotten_tenant_is_never_written_again() {
    let mut run = Run::unlimited();
    run.publish(snap("t", 1, &[]));
    run.publish(snap("t", 2, &[]));
    run.core.forget("t");
    assert_eq!(run.finish("t", ok()), None, "its late result is ignored");
    run.reconcile();
    run.advance(Duration::from_secs(60));
    assert_eq!(run.writes(), [("t".into(), 1)]);
    assert!(run.core.status().is_empty());
}

#[test]
fn quiesce_starts_nothing_and_counts_writes_in_flight() {
    let mut run = Run::unlimited();
    run.publish(snap("a", 1, &[]));
    run.publish(snap("b", 1, &[]));
    run.finish("b", ok());
    assert_eq!(run.core.quiesce(), 1);
    run.publish(snap("b", 2, &[]));
    run.publish(snap("a", 2, &[]));
    run.finish("a", ok());
    assert_eq!(run.core.quiesce(), 0);
    assert_eq!(run.writes().len(), 2);
}

#[test]
fn status_shows_the_last_success_and_error_at_the_time_given() {
    let mut run = Run::unlimited();
    run.publish(snap("t", 1, &[]));
    run.advance(Duration::from_secs(2));
    run.finish("t", Err(SinkError::retriable("timed out")));
    let status = &run.core.status()[0];
    let at = run.start.wall + Duration::from_secs(2);
    let error = status.last_error.as_ref().unwrap();
    assert_eq!(error.at, crate::clock::Timestamp(at));
    assert_eq!(
        (error.message.as_str(), error.retrying, status.attempts),
        ("timed out", true, 1)
    );
    assert_eq!(status.last_success, None);
    assert!(SystemTime::UNIX_EPOCH < at);
}

/// The last state of a tenant no longer run here (a cluster leaving a shared name) is
/// written, retried on a retriable failure, and once written forgotten: reconciliation
/// never writes it again over what the other clusters write later.
#[test]
fn a_last_state_is_written_until_it_succeeds_then_forgotten() {
    let mut run = Run::unlimited();
    run.step(|core, now, fx| core.publish_last(Arc::new(snap("t", 5, &[])), now, fx));
    assert_eq!(run.writes(), [("t".to_owned(), 5)]);
    let busy = SinkError::retriable("zone busy");
    assert!(run.finish("t", Err(busy)).unwrap().retry_in.is_some());
    run.advance(Duration::from_secs(2));
    assert_eq!(run.writes().len(), 2, "retried");
    run.finish("t", ok());
    assert!(run.core.status().is_empty(), "forgotten once written");
    run.reconcile();
    assert_eq!(run.writes().len(), 2, "never reconciled again");
}
