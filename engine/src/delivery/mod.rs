//! Delivery: the actor around every sink. It coalesces snapshots (latest wins), runs one
//! write per tenant at a time and at most `max_in_flight` in all (each holds a request body
//! and a connection), limits the write rate (token bucket), retries failures with
//! exponential backoff and jitter (or the back end's `Retry-After`), re-writes the full
//! desired state periodically to repair drift, and keeps the status and metrics. Sinks
//! themselves only know how to write.
//!
//! The decisions are plain code in [`core`] (time passed in, effects returned); this module
//! is the thin actix shell that spawns `Sink::apply`, runs timers and hands results back;
//! [`report`] turns finished writes into metrics, events, traces and logs.

mod core;
mod report;
mod round;
mod slot;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::SystemTime;

use actix::prelude::*;
use ho_config::Delivery;
use tokio::time::Instant;

use crate::clock::Clock;
use crate::events::Events;
use crate::leadership::Leadership;
use crate::metrics::Metrics;
use crate::sink::{Applied, Sink, SinkError};
use crate::snapshot::TenantSnapshot;
use crate::status::SinkStatus;

use self::core::{DeliveryCore, Effect, Now, Write};
use self::report::Reporter;

/// A new desired state for one tenant.
#[derive(Message, Clone)]
#[rtype(result = "()")]
pub struct Publish(pub Arc<TenantSnapshot>);

/// The last desired state of a tenant no longer run here: written (retried like any
/// write), then forgotten, so it is never re-written by reconciliation over what others
/// write later.
#[derive(Message, Clone)]
#[rtype(result = "()")]
pub struct PublishLast(pub Arc<TenantSnapshot>);

/// Asks for this sink's part of `/status`.
#[derive(Message)]
#[rtype(result = "SinkStatus")]
pub struct GetSinkStatus;

/// A config reload removed the tenant: stop writing and reconciling it (its records stay
/// as last written unless the tenant asked for cleanup, which is sent as a snapshot).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Forget(pub String);

/// Shutdown: start no new write and answer how many are still in flight. Sent until the
/// answer is 0 or the shutdown deadline passes.
#[derive(Message)]
#[rtype(result = "usize")]
pub struct Quiesce;

/// This replica became the writer: write every tenant now, from the snapshots kept.
#[derive(Message)]
#[rtype(result = "()")]
struct Takeover;

/// Drives one [`Sink`].
pub struct SinkActor {
    core: DeliveryCore,
    sink: Arc<dyn Sink>,
    /// How often every idle tenant is re-written.
    reconcile_interval: std::time::Duration,
    /// For a shared back end under leader election: writes start only while it allows.
    gate: Option<Leadership>,
    report: Reporter,
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
            core: DeliveryCore::new(name.clone(), delivery, Instant::now(), fastrand::Rng::new()),
            report: Reporter {
                name,
                kind: sink.kind(),
                metrics,
                events,
            },
            sink,
            reconcile_interval: delivery.reconcile_interval,
            gate,
        }
    }

    /// The real time, and whether this replica writes the sink now.
    fn now(&self) -> Now {
        Now {
            clock: Clock::now(),
            writer: self.gate.as_ref().is_none_or(Leadership::may_write),
        }
    }

    /// Runs one step of the core at the current time and carries out what it decided.
    fn step(
        &mut self,
        ctx: &mut Context<Self>,
        decide: impl FnOnce(&mut DeliveryCore, Now, &mut Vec<Effect>),
    ) {
        let now = self.now();
        let mut fx = Vec::new();
        decide(&mut self.core, now, &mut fx);
        self.carry_out(fx, ctx);
        self.report
            .backlog(self.core.pending(now.writer), self.core.queued());
    }

    fn carry_out(&mut self, effects: Vec<Effect>, ctx: &mut Context<Self>) {
        for effect in effects {
            match effect {
                Effect::Write(write) => {
                    let started = SystemTime::now();
                    let apply = self.sink.apply(write.snapshot.clone());
                    ctx.spawn(apply.into_actor(self).map(move |result, act, ctx| {
                        act.finished(&write, started, result, ctx);
                    }));
                }
                Effect::WakeAt { at, wake } => {
                    let delay = at.saturating_duration_since(Instant::now());
                    ctx.run_later(delay, move |act, ctx| {
                        act.step(ctx, |core, now, fx| core.wake(wake, now, fx));
                    });
                }
            }
        }
    }

    fn finished(
        &mut self,
        write: &Write,
        started: SystemTime,
        result: Result<Applied, SinkError>,
        ctx: &mut Context<Self>,
    ) {
        let now = self.now();
        let mut fx = Vec::new();
        let finished = self.core.written(write, &result, now, &mut fx);
        self.report
            .write_finished(write, started, &result, finished.as_ref(), now);
        self.carry_out(fx, ctx);
        self.report
            .backlog(self.core.pending(now.writer), self.core.queued());
    }
}

impl Actor for SinkActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.report.backlog(0, 0);
        ctx.run_interval(self.reconcile_interval, |act, ctx| {
            let sink = act.report.name.clone();
            act.step(ctx, |core, now, fx| {
                if let Some(overrun) = core.reconcile(now, fx) {
                    overrun.warn(&sink);
                }
            });
        });
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
        self.step(ctx, |core, now, fx| core.publish(msg.0, now, fx));
    }
}

impl Handler<PublishLast> for SinkActor {
    type Result = ();

    fn handle(&mut self, msg: PublishLast, ctx: &mut Context<Self>) {
        self.step(ctx, |core, now, fx| core.publish_last(msg.0, now, fx));
    }
}

impl Handler<Takeover> for SinkActor {
    type Result = ();

    fn handle(&mut self, _: Takeover, ctx: &mut Context<Self>) {
        self.step(ctx, DeliveryCore::takeover);
    }
}

impl Handler<Forget> for SinkActor {
    type Result = ();

    fn handle(&mut self, msg: Forget, ctx: &mut Context<Self>) {
        self.step(ctx, |core, _, _| core.forget(&msg.0));
    }
}

impl Handler<Quiesce> for SinkActor {
    type Result = usize;

    fn handle(&mut self, _: Quiesce, _: &mut Context<Self>) -> usize {
        self.core.quiesce()
    }
}

impl Handler<GetSinkStatus> for SinkActor {
    type Result = MessageResult<GetSinkStatus>;

    fn handle(&mut self, _: GetSinkStatus, _: &mut Context<Self>) -> Self::Result {
        MessageResult(SinkStatus {
            name: self.report.name.clone(),
            kind: self.sink.kind(),
            tenants: self.core.status(),
            queued: self.core.queued(),
            standby: !self.now().writer,
        })
    }
}
