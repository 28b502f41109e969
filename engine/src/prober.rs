//! The prober: one compact record per target this process probes, kept on one of the
//! engine's prober threads by that thread's [`wheel`]. The wheel runs the target's probe on
//! schedule and the record reports each result to the
//! [`HealthTracker`](crate::tracker::HealthTracker).
//!
//! A target waiting for its slot holds only this record and its place in the wheel: no
//! task, no future, no buffer. When its slot comes the wheel moves the record into a task
//! that lives for one attempt (admission, probe, report) and hands it back. Measured against
//! a task per target that slept between probes (bench/README.md "Memory"): that task kept
//! its 128-byte-aligned cell and its loop's timer and state for every idle target.
//!
//! The record runs its own copy of the target's [`Hysteresis`] only to pick its next slot: a
//! result that disagrees with the verdict is re-checked at `fast_interval`, otherwise the
//! target waits for its next grid slot. The copy sees the same results in the same order as
//! the tracker's (one record, one ordered outbox), so both reach the same verdict, without a
//! message back per probe and without depending on how busy the tracker is. The tracker's
//! verdict stays the one that is published.

#[cfg(test)]
mod record_tests;
pub mod wheel;
#[cfg(test)]
mod wheel_tests;

use std::sync::Arc;

use actix::Recipient;
use ho_config::CheckSpec;
use opentelemetry::KeyValue;
use tokio::time::Instant;

use crate::hysteresis::{Hysteresis, Judgement};
use crate::observation::{Observation, TargetId};
use crate::outbox::{self, Observations};
use crate::probe::{KeptConnection, Probe, ProbeResult};
use crate::probe_limits::{Admission, ProbeLimits};
use crate::schedule::{Grid, Schedule};
use crate::trace;

pub use wheel::{ProberHandle, Wheel};

/// What every prober of one thread shares: where results go, the bounds on probing, the
/// share of probes traced.
pub struct Reporting {
    /// Where results go.
    pub tracker: Recipient<Observations>,
    /// Bounds every probe.
    pub limits: Arc<ProbeLimits>,
    /// Share of probes traced: 0 with tracing off.
    pub sample_share: f64,
    /// The grid of every schedule of the thread's records, which keep their times as
    /// offsets on it.
    pub grid: Grid,
}

/// One target's probing between its attempts: what the next attempt needs and what picks
/// its slot. Every idle target holds one, so it keeps only what is its own: its schedule is
/// its phase (the grid is its thread's, the intervals its check's), its times are offsets on
/// the grid, and what few targets have is out of line.
pub struct Prober {
    target: TargetId,
    probe: Probe,
    /// The connection kept between probes (`reuse_connection`); out with the probe in
    /// flight. Boxed: a target that keeps none holds 8 bytes for it, not 64.
    kept: Option<Box<KeptConnection>>,
    /// The schedule's phase, in nanoseconds ([`Schedule::phase`]).
    phase: u64,
    /// The slot of the next attempt, in nanoseconds after the grid's origin.
    slot: u64,
    /// The target's check (shared with the plan): its intervals, and the rise and fall of
    /// the scheduling copy of the hysteresis.
    check: Arc<CheckSpec>,
    mirror: Hysteresis,
    /// The target's key in sampled spans; kept only when probes are sampled, behind a thin
    /// pointer (8 bytes in a record, not 16).
    span_key: Option<Box<Box<str>>>,
}

impl Prober {
    /// A prober for target `target` of `check`, probing first at `first`; `span_key` names
    /// it in traced probes (none when nothing is traced). The schedule's grid must be the
    /// thread's ([`Reporting::grid`]).
    pub fn new(
        target: TargetId,
        probe: Probe,
        (schedule, first): (Schedule, Instant),
        check: Arc<CheckSpec>,
        span_key: Option<Box<str>>,
    ) -> Prober {
        Prober {
            target,
            probe,
            kept: None,
            phase: schedule.phase(),
            slot: schedule.grid().offset(first),
            check,
            mirror: Hysteresis::new(),
            span_key: span_key.map(Box::new),
        }
    }

    /// When the next attempt starts on `grid`: its slot's tick.
    pub fn starts_at(&self, grid: Grid) -> Instant {
        self.schedule(grid).start_of(grid.at(self.slot))
    }

    /// The full schedule, rebuilt from the record's phase (copies, no allocation).
    fn schedule(&self, grid: Grid) -> Schedule {
        Schedule::on(grid, self.phase, &self.check.timing)
    }

    /// Moves the slot past `now`: the next grid slot once the result is `settled` (agrees
    /// with the verdict), a fast re-check otherwise.
    fn next_slot(&mut self, settled: bool, now: Instant, grid: Grid) {
        let schedule = self.schedule(grid);
        let next = if settled {
            schedule.next_slot(now)
        } else {
            schedule.fast(now)
        };
        self.slot = grid.offset(next);
    }

    /// The attempt for the current slot: waits for admission, probes, reports, and moves
    /// the slot to the next attempt's. Its lateness counts from the slot, waiting for a
    /// bound included.
    pub async fn attempt(&mut self, reporting: &Reporting) {
        let mut admission = reporting.limits.admit().await;
        let start_delay = Instant::now().saturating_duration_since(reporting.grid.at(self.slot));
        let mut kept = self.kept.take().map(|kept| *kept);
        let result = self.probe.run(&mut kept).await;
        self.kept = kept.map(Box::new);
        admission.probe_done();
        self.finished(result, start_delay, admission, reporting);
    }

    /// Reports `result` and moves the slot to the next probe's.
    fn finished(
        &mut self,
        result: ProbeResult,
        start_delay: std::time::Duration,
        admission: Admission,
        reporting: &Reporting,
    ) {
        if reporting.sample_share > 0.0 && fastrand::f64() < reporting.sample_share {
            self.trace(&result);
        }
        // A result caused by this machine (no descriptor, no port) is not judged: it waits
        // for its next regular slot instead of a fast re-check.
        let settled = match self.mirror.judge(&result, &self.check.timing) {
            Judgement::NotJudged => true,
            Judgement::Judged(_) => self.mirror.state().agrees_with(result.ok()),
        };
        outbox::post(
            &reporting.tracker,
            Observation {
                target: self.target,
                result,
                start_delay,
            },
        );
        admission.sent();
        self.next_slot(settled, Instant::now(), reporting.grid);
    }

    fn trace(&self, result: &ProbeResult) {
        let started = std::time::SystemTime::now()
            .checked_sub(result.latency)
            .unwrap_or_else(std::time::SystemTime::now);
        trace::probe(
            started,
            !result.ok(),
            vec![
                KeyValue::new(
                    "target",
                    self.span_key.as_deref().map_or("", |k| &**k).to_owned(),
                ),
                KeyValue::new("result", result.reason()),
                KeyValue::new("latency_ms", result.latency.as_secs_f64() * 1000.0),
            ],
        );
    }
}
