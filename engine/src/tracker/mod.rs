//! The health tracker (the design's "supervisor"; not actix's `Supervisor`, which restarts
//! actors): applies hysteresis to every observation, keeps what `/status` shows, decides
//! each tenant's record set and sends a snapshot to the tenant's sinks only when that set
//! changes.
//!
//! The decisions are plain code in [`core`] (clock passed in, effects returned); this
//! module is the thin actor around it that feeds it and carries out its effects.

mod carried;
#[cfg(test)]
mod carried_tests;
mod core;
mod health;
#[cfg(test)]
mod health_tests;
mod index;
mod operator;
mod pacing;
mod pending;
mod publisher;
#[cfg(test)]
mod publisher_tests;
mod report;
#[cfg(test)]
mod ring_listing_tests;
#[cfg(test)]
mod ring_takeover_tests;
#[cfg(test)]
mod ring_tests;
#[cfg(test)]
pub(crate) mod tests;
mod verdicts;
#[cfg(test)]
mod verdicts_tests;
mod view;

use std::collections::BTreeMap;
use std::sync::Arc;

use actix::prelude::*;
use ho_config::Plan;
use tokio::sync::mpsc::UnboundedSender;
use tokio::time::Instant;

use crate::delivery::{Forget, Publish, PublishLast, SinkActor};
use crate::drain::{DrainStore, OperatorState};
use crate::events::Events;
use crate::hysteresis::Health;
use crate::metrics::Metrics;
use crate::multi_cluster::coordinator::{Left, Voted};
use crate::multi_cluster::LocalView;
use crate::observation::TargetId;
use crate::outbox::Observations;
use crate::probe_limits::ProbeLimits;
use crate::ring::combine::Vantage;
use crate::ring::ownership::Ownership;
use crate::status::TrackerStatus;

pub use self::core::{Clock, Effect, OwnState, Part, TrackerCore};
pub(crate) use self::operator::{
    Adopt, Applied, DrainError, OperatorAction, Selection, SetByOperator, Share,
};

/// Asks for the `/status` view.
#[derive(Message)]
#[rtype(result = "TrackerStatus")]
pub(crate) struct GetStatus;

/// Asks for every tenant's summary.
#[derive(Message)]
#[rtype(result = "Vec<crate::status::TenantSummary>")]
pub(crate) struct GetSummaries;

/// Asks for the named endpoints as `/status` shows them.
#[derive(Message)]
#[rtype(result = "Vec<crate::status::EndpointStatus>")]
pub(crate) struct GetEndpoints(pub std::collections::HashSet<String>);

/// Asks whether `/readyz` should pass: every target has a verdict, or the grace passed.
#[derive(Message)]
#[rtype(result = "bool")]
pub(crate) struct IsReady;

/// Replaces the plan (a config reload): see [`TrackerCore::reload`].
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Reload {
    /// The new plan.
    pub plan: Arc<Plan>,
    /// Stable id of each of its targets.
    pub ids: Vec<TargetId>,
    /// Every sink actor of the new plan, by name.
    pub sinks: BTreeMap<String, Addr<SinkActor>>,
}

/// The actor around a [`TrackerCore`].
pub(crate) struct HealthTracker {
    core: TrackerCore,
    /// The sink actors, by name, that effects are delivered to.
    sinks: BTreeMap<String, Addr<SinkActor>>,
    /// Freed once per batch of observations taken (the tracker's mailbox bound).
    limits: Arc<ProbeLimits>,
    /// Where drains are saved.
    drains: DrainStore,
    /// Where views of voting tenants go (`[multi_cluster]`).
    coordinator: Recipient<LocalView>,
    /// `[ring]`: where this replica's own verdict changes go, for the other members.
    shares: Option<UnboundedSender<(String, Health)>>,
}

/// `[ring]`: verdicts another member streamed (see [`TrackerCore::vantages`]).
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct PeerVerdicts {
    pub from: String,
    pub part: Part,
    pub verdicts: Vec<(String, Vantage)>,
}

/// `[ring]`: a member left the ring ([`TrackerCore::forget_member`]).
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct MemberLeft(pub String);

/// `[ring]`: this replica's own verdicts: what a member that connects is sent first
/// ([`TrackerCore::own_verdicts`]), a byte a target; keys are written as they are sent.
#[derive(Message)]
#[rtype(result = "OwnState")]
pub(crate) struct OwnVerdicts;

/// `[ring]`: this replica started or stopped probing targets ([`TrackerCore::probing`]).
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Probing {
    /// The targets, by their keys' [`crate::ring::rendezvous::target_hash`] (as the gates).
    pub hashes: Vec<u64>,
    pub on: bool,
}

/// An operator's release of the blast-radius brake (`POST /v1/brake/release`): every
/// withdrawal it holds goes through now; answers how many addresses were released.
#[derive(Message)]
#[rtype(result = "usize")]
pub(crate) struct ReleaseBrake;

/// What a tracker works with besides its plan and its sinks.
pub struct Surroundings {
    /// Where it counts.
    pub metrics: Arc<Metrics>,
    /// What bounds the probes (their self-check reads the tracker's counts).
    pub limits: Arc<ProbeLimits>,
    /// Where operator actions are kept (`state_dir`).
    pub drains: DrainStore,
    /// The operator actions kept there, applied from the start.
    pub operator: OperatorState,
    /// Whom it announces transitions and publishes to (`/events`).
    pub events: Events,
    /// Whom it hands the views of voting tenants (`[multi_cluster]`).
    pub coordinator: Recipient<LocalView>,
    /// `[ring]`: turns shared verdicts on.
    pub ring: Option<Sharing>,
}

/// `[ring]`: where the tracker's own verdict changes go, and which targets this replica
/// probes (read when a plan brings new targets; later changes arrive as [`Probing`]).
pub struct Sharing {
    pub shares: UnboundedSender<(String, Health)>,
    pub ownership: Arc<Ownership>,
}

impl HealthTracker {
    /// A tracker for `plan` (`ids`: each target's stable id) publishing to `sinks`,
    /// with what [`Surroundings`] gives it.
    pub fn new(
        plan: Arc<Plan>,
        ids: Vec<TargetId>,
        sinks: BTreeMap<String, Addr<SinkActor>>,
        around: Surroundings,
    ) -> HealthTracker {
        let Surroundings {
            metrics,
            limits,
            drains,
            operator: set,
            events,
            coordinator,
            ring,
        } = around;
        let mut core = TrackerCore::new(plan, ids, metrics, events, Clock::now());
        let shares = ring.map(|ring| {
            core.share_verdicts(ring.ownership);
            ring.shares
        });
        // Nothing is published before the first verdicts: no effects to carry out yet.
        core.set_drained(set.drained, Clock::now(), &mut Vec::new());
        core.set_forced(set.forced, Clock::now(), &mut Vec::new());
        HealthTracker {
            core,
            sinks,
            limits,
            drains,
            coordinator,
            shares,
        }
    }

    /// Carries out what the core decided.
    fn carry_out(&mut self, effects: Vec<Effect>, ctx: &mut Context<Self>) {
        for effect in effects {
            match effect {
                Effect::Publish { sinks, snapshot } => {
                    for sink in sinks.iter().filter_map(|s| self.sinks.get(s)) {
                        sink.do_send(Publish(snapshot.clone()));
                    }
                }
                Effect::Forget { sinks, tenant } => {
                    for sink in sinks.iter().filter_map(|s| self.sinks.get(s)) {
                        sink.do_send(Forget(tenant.clone()));
                    }
                }
                Effect::Vote(view) => self.coordinator.do_send(view),
                Effect::Share { key, health } => {
                    if let Some(shares) = &self.shares {
                        let _ = shares.send((key, health));
                    }
                }
                Effect::Remember(state) => {
                    if let Err(e) = self.drains.save(&state) {
                        tracing::error!("an endpoint held by hold_failback is not saved: {e}");
                    }
                }
                Effect::WakeAt { at, wake } => {
                    let delay = at.saturating_duration_since(Instant::now());
                    ctx.run_later(delay, move |act, ctx| {
                        let mut fx = Vec::new();
                        act.core.wake(wake, Clock::now(), &mut fx);
                        act.carry_out(fx, ctx);
                    });
                }
            }
        }
    }
}

impl Actor for HealthTracker {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let mut fx = Vec::new();
        self.core.start(Clock::now(), &mut fx);
        self.carry_out(fx, ctx);
    }
}

impl Handler<Observations> for HealthTracker {
    type Result = ();

    fn handle(&mut self, batch: Observations, ctx: &mut Context<Self>) {
        self.limits.results_taken(batch.0.len());
        let mut fx = Vec::new();
        self.core.observe(batch.0, Clock::now(), &mut fx);
        self.carry_out(fx, ctx);
    }
}

impl Handler<Reload> for HealthTracker {
    type Result = ();

    fn handle(&mut self, msg: Reload, ctx: &mut Context<Self>) {
        self.sinks = msg.sinks;
        let mut fx = Vec::new();
        self.core.reload(msg.plan, msg.ids, Clock::now(), &mut fx);
        self.carry_out(fx, ctx);
    }
}

impl Handler<PeerVerdicts> for HealthTracker {
    type Result = ();

    fn handle(&mut self, msg: PeerVerdicts, ctx: &mut Context<Self>) {
        let mut fx = Vec::new();
        self.core
            .vantages(&msg.from, msg.part, msg.verdicts, Clock::now(), &mut fx);
        self.carry_out(fx, ctx);
    }
}

impl Handler<MemberLeft> for HealthTracker {
    type Result = ();

    fn handle(&mut self, msg: MemberLeft, ctx: &mut Context<Self>) {
        let mut fx = Vec::new();
        self.core.forget_member(&msg.0, Clock::now(), &mut fx);
        self.carry_out(fx, ctx);
    }
}

impl Handler<OwnVerdicts> for HealthTracker {
    type Result = MessageResult<OwnVerdicts>;

    fn handle(&mut self, _: OwnVerdicts, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.core.own_verdicts())
    }
}

impl Handler<Probing> for HealthTracker {
    type Result = ();

    fn handle(&mut self, msg: Probing, ctx: &mut Context<Self>) {
        let mut fx = Vec::new();
        self.core
            .probing(&msg.hashes, msg.on, Clock::now(), &mut fx);
        self.carry_out(fx, ctx);
    }
}

impl Handler<ReleaseBrake> for HealthTracker {
    type Result = usize;

    fn handle(&mut self, _: ReleaseBrake, ctx: &mut Context<Self>) -> usize {
        let mut fx = Vec::new();
        let released = self.core.release_brake(Clock::now(), &mut fx);
        self.carry_out(fx, ctx);
        released
    }
}

impl Handler<Voted> for HealthTracker {
    type Result = ();

    fn handle(&mut self, msg: Voted, ctx: &mut Context<Self>) {
        let mut fx = Vec::new();
        self.core
            .voted(&msg.tenant, msg.tally, Clock::now(), &mut fx);
        self.carry_out(fx, ctx);
    }
}

/// A voting tenant this cluster left (it is no longer in the plan): its zone gets the
/// remaining clusters' set once, and the sinks forget it once that is written.
impl Handler<Left> for HealthTracker {
    type Result = ();

    fn handle(&mut self, msg: Left, _: &mut Context<Self>) {
        for sink in msg.sinks.iter().filter_map(|s| self.sinks.get(s)) {
            sink.do_send(PublishLast(msg.snapshot.clone()));
        }
    }
}

impl Handler<IsReady> for HealthTracker {
    type Result = bool;

    fn handle(&mut self, _: IsReady, _: &mut Context<Self>) -> bool {
        self.core.ready()
    }
}

impl Handler<GetSummaries> for HealthTracker {
    type Result = MessageResult<GetSummaries>;

    fn handle(&mut self, _: GetSummaries, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.core.summaries())
    }
}

impl Handler<GetEndpoints> for HealthTracker {
    type Result = MessageResult<GetEndpoints>;

    fn handle(&mut self, msg: GetEndpoints, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.core.endpoints_named(&msg.0, Clock::now()))
    }
}

impl Handler<GetStatus> for HealthTracker {
    type Result = MessageResult<GetStatus>;

    fn handle(&mut self, _: GetStatus, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.core.status(Clock::now()))
    }
}
