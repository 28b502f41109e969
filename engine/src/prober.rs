//! The prober: one per unique target, a task on one of the engine's prober threads. It runs
//! the target's probe on schedule and reports each result to the
//! [`HealthTracker`](crate::tracker::HealthTracker).
//!
//! It is an actor without a mailbox: its only message would be "stop", which the engine
//! sends by aborting the task ([`ProberHandle::stop`]). Measured against the actix actor it
//! replaces (bench/README.md): that actor boxed a timer and a future per probe and polled
//! its mailbox on every wake-up; this task boxes only the probe in flight.
//!
//! It runs its own copy of the target's [`Hysteresis`] only to pick its next slot: a result
//! that disagrees with the verdict is re-checked at `fast_interval`, otherwise the target
//! waits for its next grid slot. The copy sees the same results in the same order as the
//! tracker's (one prober, one ordered mailbox), so both reach the same verdict, without a
//! message back per probe and without depending on how busy the tracker is. The tracker's
//! verdict stays the one that is published.

use std::sync::Arc;

use actix::Recipient;
use actix_rt::ArbiterHandle;
use futures_util::future::{AbortHandle, Abortable};
use ho_config::CheckSpec;
use opentelemetry::KeyValue;
use prometheus_client::metrics::gauge::Gauge;
use tokio::time::Instant;

use crate::hysteresis::{Hysteresis, Judgement};
use crate::observation::{Observation, TargetId};
use crate::outbox::{self, Observations};
use crate::probe::{KeptConnection, Probe, ProbeResult};
use crate::probe_limits::{Admission, ProbeLimits};
use crate::schedule::Schedule;
use crate::trace;

/// Which of a target's probes are traced (OTLP), and the target's key in their spans.
pub struct Sampling {
    /// Share of probes traced: 0 with tracing off.
    pub share: f64,
    /// The target's key (empty when nothing is sampled).
    pub key: String,
}

/// Probes one target forever, one probe in flight at most.
pub struct Prober {
    target: TargetId,
    probe: Probe,
    /// The connection kept between probes (`reuse_connection`); out with the probe in flight.
    kept: Option<KeptConnection>,
    schedule: Schedule,
    tracker: Recipient<Observations>,
    /// The target's check (shared with the plan), for the rise and fall of the scheduling
    /// copy of the hysteresis.
    check: Arc<CheckSpec>,
    mirror: Hysteresis,
    /// Which probes are traced, and how their spans name the target.
    sample: Sampling,
    limits: Arc<ProbeLimits>,
    /// Counts this prober among the live ones until it is dropped.
    alive: Option<Alive>,
}

impl Prober {
    /// A prober for target `target` of `check`, reporting to `tracker`; `sample` says
    /// which probes are traced; every probe is admitted by `limits`.
    pub fn new(
        target: TargetId,
        probe: Probe,
        schedule: Schedule,
        check: Arc<CheckSpec>,
        tracker: Recipient<Observations>,
        sample: Sampling,
        limits: Arc<ProbeLimits>,
    ) -> Prober {
        Prober {
            target,
            probe,
            kept: None,
            schedule,
            tracker,
            check,
            mirror: Hysteresis::new(),
            sample,
            limits,
            alive: None,
        }
    }

    /// Starts this prober on `arbiter`, its first probe due at `first`; it runs until the
    /// handle stops it or the arbiter stops, counted in `live` while its task lives.
    pub fn start(mut self, arbiter: &ArbiterHandle, first: Instant, live: Gauge) -> ProberHandle {
        let (handle, registration) = AbortHandle::new_pair();
        self.alive = Some(Alive::new(live));
        // Built on the arbiter's thread: the outbox it posts to is that thread's.
        arbiter.spawn_fn(move || {
            actix_rt::spawn(Abortable::new(self.run(first), registration));
        });
        ProberHandle(handle)
    }

    /// Probes forever, one probe in flight at most; each probe starts on its slot's tick
    /// and its lateness counts from the slot, waiting for a bound included.
    ///
    /// An `async move` block, not an `async fn`: an `async fn` keeps its arguments twice in
    /// its state (as captured and as moved into the body), and this state is what every
    /// target holds between probes (1,280 bytes a task as an `async fn`, 640 as a block).
    #[allow(clippy::manual_async_fn, reason = "an async fn holds its state twice")]
    fn run(mut self, first: Instant) -> impl std::future::Future<Output = ()> {
        async move {
            let mut slot = first;
            loop {
                tokio::time::sleep_until(self.schedule.start_of(slot)).await;
                let mut admission = self.limits.admit().await;
                let start_delay = Instant::now().saturating_duration_since(slot);
                // Boxed while in flight: inline, the probe's state (~870 bytes) would be part of
                // every idle prober too (100,000 targets @ 10 s: 519 and 553 MiB peak RSS
                // inline, 480 and 515 boxed).
                let result = Box::pin(self.probe.run(&mut self.kept)).await;
                admission.probe_done();
                slot = self.finished(result, start_delay, admission);
            }
        }
    }

    /// Reports `result` and returns the slot of the next probe.
    fn finished(
        &mut self,
        result: ProbeResult,
        start_delay: std::time::Duration,
        admission: Admission,
    ) -> Instant {
        if self.sample.share > 0.0 && fastrand::f64() < self.sample.share {
            self.trace(&result);
        }
        // A result caused by this machine (no descriptor, no port) is not judged: it waits
        // for its next regular slot instead of a fast re-check.
        let settled = match self.mirror.judge(&result, &self.check.timing) {
            Judgement::NotJudged => true,
            Judgement::Judged(_) => self.mirror.state().agrees_with(result.ok()),
        };
        outbox::post(
            &self.tracker,
            Observation {
                target: self.target,
                result,
                start_delay,
            },
        );
        admission.sent();
        let now = Instant::now();
        if settled {
            self.schedule.next_slot(now)
        } else {
            self.schedule.fast(now)
        }
    }
}

/// Stops a running prober: at once, a probe in flight included (its socket closes and its
/// result is never reported). Dropping the handle leaves the prober running.
pub struct ProberHandle(AbortHandle);

/// Counts a prober task in its gauge from its start until its future is dropped (it was
/// stopped, or its thread stopped).
struct Alive(Gauge);

impl Alive {
    fn new(live: Gauge) -> Alive {
        live.inc();
        Alive(live)
    }
}

impl Drop for Alive {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl ProberHandle {
    /// Stops the prober (a target removed by a reload).
    pub fn stop(&self) {
        self.0.abort();
    }
}

impl Prober {
    fn trace(&self, result: &ProbeResult) {
        let started = std::time::SystemTime::now()
            .checked_sub(result.latency)
            .unwrap_or_else(std::time::SystemTime::now);
        trace::probe(
            started,
            !result.ok(),
            vec![
                KeyValue::new("target", self.sample.key.clone()),
                KeyValue::new("result", result.reason()),
                KeyValue::new("latency_ms", result.latency.as_secs_f64() * 1000.0),
            ],
        );
    }
}

#[cfg(test)]
mod tests {
    use super::Prober;

    /// The size of what `f` returns, without calling it (no prober need be built).
    fn returned_size<A, B, R>(_: fn(A, B) -> R) -> usize {
        std::mem::size_of::<R>()
    }

    /// Every target holds its prober's future between probes: the prober's state must be in
    /// it once (an `async fn` taking `self` held it twice: 1,280 bytes a task at 424 bytes
    /// of state).
    #[test]
    fn a_waiting_prober_holds_its_state_once() {
        let state = std::mem::size_of::<Prober>();
        let future = returned_size(Prober::run);
        assert!(
            future < 2 * state,
            "the prober's future is {future} bytes for {state} bytes of state"
        );
    }
}
