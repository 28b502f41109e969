//! The prober actor: one per unique target. It runs the target's probe on schedule and
//! reports each result to the [`HealthTracker`](crate::tracker::HealthTracker).
//!
//! It runs its own copy of the target's [`Hysteresis`] only to pick its next slot: a result
//! that disagrees with the verdict is re-checked at `fast_interval`, otherwise the target
//! waits for its next grid slot. The copy sees the same results in the same order as the
//! tracker's (one prober, one ordered mailbox), so both reach the same verdict, without a
//! message back per probe and without depending on how busy the tracker is. The tracker's
//! verdict stays the one that is published.

use std::sync::Arc;

use actix::prelude::*;
use ho_config::Timing;
use opentelemetry::KeyValue;
use tokio::time::Instant;

use crate::hysteresis::{Hysteresis, Judgement};
use crate::observation::{Observation, TargetId};
use crate::outbox::{self, Observations};
use crate::probe::{KeptConnection, Probe, ProbeResult};
use crate::probe_limits::{Admission, ProbeLimits};
use crate::schedule::Schedule;
use crate::trace;

/// Probes one target forever, one probe in flight at most.
pub struct Prober {
    target: TargetId,
    probe: Arc<Probe>,
    /// The connection kept between probes (`reuse_connection`); out with the probe in flight.
    kept: Option<KeptConnection>,
    schedule: Schedule,
    tracker: Recipient<Observations>,
    /// Rise and fall of the target's check, for the scheduling copy of the hysteresis.
    timing: Timing,
    mirror: Hysteresis,
    /// Share of probes traced (0 with tracing off), and the target's key for those spans.
    sample: (f64, String),
    limits: Arc<ProbeLimits>,
}

impl Prober {
    /// A prober for target `target`, reporting to `tracker`; `sample` = (share of probes
    /// traced, target key); every probe is admitted by `limits`.
    pub fn new(
        target: TargetId,
        probe: Probe,
        schedule: Schedule,
        timing: &Timing,
        tracker: Recipient<Observations>,
        sample: (f64, String),
        limits: Arc<ProbeLimits>,
    ) -> Prober {
        Prober {
            target,
            probe: Arc::new(probe),
            kept: None,
            schedule,
            tracker,
            timing: *timing,
            mirror: Hysteresis::new(),
            sample,
            limits,
        }
    }

    /// Starts the probe due at `slot` on its tick; lateness still counts from `slot`.
    fn arm(&mut self, ctx: &mut Context<Self>, slot: Instant) {
        let delay = self
            .schedule
            .start_of(slot)
            .saturating_duration_since(Instant::now());
        ctx.run_later(delay, move |act, ctx| act.fire(slot, ctx));
    }

    fn fire(&mut self, slot: Instant, ctx: &mut Context<Self>) {
        let probe = self.probe.clone();
        let limits = self.limits.clone();
        let mut kept = self.kept.take();
        ctx.spawn(
            async move {
                let mut admission = limits.admit().await;
                // Lateness counts from the slot to the start, waiting for a bound included.
                let start_delay = Instant::now().saturating_duration_since(slot);
                let result = probe.run(&mut kept).await;
                admission.probe_done();
                (result, start_delay, admission, kept)
            }
            .into_actor(self)
            .map(move |(result, start_delay, admission, kept), act, ctx| {
                act.kept = kept;
                act.finished(result, start_delay, admission, ctx)
            }),
        );
    }

    fn finished(
        &mut self,
        result: ProbeResult,
        start_delay: std::time::Duration,
        admission: Admission,
        ctx: &mut Context<Self>,
    ) {
        if self.sample.0 > 0.0 && fastrand::f64() < self.sample.0 {
            self.trace(&result);
        }
        // A result caused by this machine (no descriptor, no port) is not judged: it waits
        // for its next regular slot instead of a fast re-check.
        let settled = match self.mirror.judge(&result, &self.timing) {
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
        let next = if settled {
            self.schedule.next_slot(now)
        } else {
            self.schedule.fast(now)
        };
        self.arm(ctx, next);
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
                KeyValue::new("target", self.sample.1.clone()),
                KeyValue::new("result", result.reason()),
                KeyValue::new("latency_ms", result.latency.as_secs_f64() * 1000.0),
            ],
        );
    }
}

impl Actor for Prober {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let first = self.schedule.first();
        self.arm(ctx, first);
    }
}
