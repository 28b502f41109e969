//! The prober actor: one per unique target. It runs the target's probe on schedule and
//! reports each result to the [`HealthTracker`](crate::tracker::HealthTracker).
//!
//! It keeps a copy of the target's verdict (sent by the tracker on every transition) only
//! to pick its next slot: a result that disagrees with the verdict is re-checked at
//! `fast_interval`, otherwise the target waits for its next grid slot.

use std::sync::Arc;

use actix::prelude::*;
use tokio::time::Instant;

use crate::hysteresis::Health;
use crate::probe::{Probe, ProbeResult};
use crate::schedule::Schedule;

/// One probe result, sent to the tracker.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Observation {
    /// Target index in the plan.
    pub target: usize,
    /// What the probe found.
    pub result: ProbeResult,
    /// How late the probe started against its slot.
    pub start_delay: std::time::Duration,
}

/// The tracker's new verdict for this prober's target.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub struct VerdictChanged(pub Health);

/// Probes one target forever, one probe in flight at most.
pub struct Prober {
    target: usize,
    probe: Arc<Probe>,
    schedule: Schedule,
    tracker: Recipient<Observation>,
    verdict: Health,
}

impl Prober {
    /// A prober for target `target`, reporting to `tracker`.
    pub fn new(
        target: usize,
        probe: Probe,
        schedule: Schedule,
        tracker: Recipient<Observation>,
    ) -> Prober {
        Prober {
            target,
            probe: Arc::new(probe),
            schedule,
            tracker,
            verdict: Health::Unknown,
        }
    }

    fn arm(&mut self, ctx: &mut Context<Self>, at: Instant) {
        let delay = at.saturating_duration_since(Instant::now());
        ctx.run_later(delay, move |act, ctx| act.fire(at, ctx));
    }

    fn fire(&mut self, slot: Instant, ctx: &mut Context<Self>) {
        let start_delay = Instant::now().saturating_duration_since(slot);
        let probe = self.probe.clone();
        ctx.spawn(
            async move { probe.run().await }
                .into_actor(self)
                .map(move |result, act, ctx| act.finished(result, start_delay, ctx)),
        );
    }

    fn finished(
        &mut self,
        result: ProbeResult,
        start_delay: std::time::Duration,
        ctx: &mut Context<Self>,
    ) {
        let settled = self.verdict.agrees_with(result.ok());
        self.tracker.do_send(Observation {
            target: self.target,
            result,
            start_delay,
        });
        let now = Instant::now();
        let next = if settled {
            self.schedule.next_slot(now, fastrand::f64())
        } else {
            self.schedule.fast(now)
        };
        self.arm(ctx, next);
    }
}

impl Actor for Prober {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let first = self.schedule.first();
        self.arm(ctx, first);
    }
}

impl Handler<VerdictChanged> for Prober {
    type Result = ();

    fn handle(&mut self, msg: VerdictChanged, _: &mut Context<Self>) {
        self.verdict = msg.0;
    }
}
