//! The actor that runs report rounds: the thin actix shell around [`RoundsCore`] (see
//! [`super::rounds`] for what a round does). It runs the round timer, carries out each
//! round's exchange with the zone's [`ReportStore`], hands tallies to the tracker and
//! tells the engine which addresses other clusters contribute ([`Discovered`]), so each
//! cluster only lists its own gateways.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use actix::prelude::*;
use ho_config::{Discovered, Plan};
use tokio::sync::watch;
use tracing::{info, warn};

use super::leave::{remaining_snapshot, Leaving};
use super::rounds::{tally_without, Answers, Effect, RoundsCore};
use super::vote::Tally;
use super::LocalView;
use crate::clock::{Clock, Now};
use crate::leadership::Leadership;
use crate::metrics::Metrics;
use crate::sink::reports::ReportStore;
use crate::snapshot::TenantSnapshot;

pub use super::rounds::unix_ms;

/// The tally of one round, for the tracker to publish.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Voted {
    /// Tenant name.
    pub tenant: String,
    /// The vote over the live reports.
    pub tally: Arc<Tally>,
}

/// What a voting tenant's zone should hold now that this cluster left it: the tracker
/// writes it once to the tenant's sinks holding reports (it no longer runs the tenant).
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Left {
    /// The tenant's sinks holding reports.
    pub sinks: Vec<String>,
    /// The remaining clusters' set.
    pub snapshot: Arc<TenantSnapshot>,
}

/// This instance's cluster id, known once the binary resolved it; no round runs before.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct SetCluster(pub String);

/// A reload: the new plan and the report stores of its sinks.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Retarget {
    /// The plan now running.
    pub plan: Arc<Plan>,
    /// Report stores by sink name.
    pub stores: BTreeMap<String, Arc<dyn ReportStore>>,
}

/// The coordinator actor (see the module doc).
pub(crate) struct Coordinator {
    core: RoundsCore,
    stores: BTreeMap<String, Arc<dyn ReportStore>>,
    tracker: Recipient<Voted>,
    left: Recipient<Left>,
    leadership: Leadership,
    discovered: watch::Sender<Vec<Discovered>>,
    ticker: Option<(Duration, SpawnHandle)>,
}

impl Coordinator {
    /// A coordinator for `plan`, sending tallies and what tenants that left should publish
    /// to `tracker`, and discoveries to `discovered`.
    pub fn new<T>(
        plan: Arc<Plan>,
        stores: BTreeMap<String, Arc<dyn ReportStore>>,
        tracker: Addr<T>,
        leadership: Leadership,
        metrics: Arc<Metrics>,
        discovered: watch::Sender<Vec<Discovered>>,
    ) -> Coordinator
    where
        T: Actor<Context = Context<T>> + Handler<Voted> + Handler<Left>,
    {
        Coordinator {
            core: RoundsCore::new(plan, stores.keys().cloned().collect(), metrics),
            stores,
            left: tracker.clone().recipient(),
            tracker: tracker.recipient(),
            leadership,
            discovered,
            ticker: None,
        }
    }

    /// The real time, and whether this replica writes shared back ends now.
    fn now(&self) -> Now {
        Now {
            clock: Clock::now(),
            writer: self.leadership.may_write(),
        }
    }

    /// Runs one step of the core at the current time and carries out what it decided.
    fn step(
        &mut self,
        ctx: &mut Context<Self>,
        decide: impl FnOnce(&mut RoundsCore, Now, &mut Vec<Effect>),
    ) {
        let now = self.now();
        let mut fx = Vec::new();
        decide(&mut self.core, now, &mut fx);
        self.carry_out(fx, ctx);
    }

    fn carry_out(&mut self, effects: Vec<Effect>, ctx: &mut Context<Self>) {
        for effect in effects {
            match effect {
                Effect::Exchange(round) => {
                    let Some(store) = self.stores.get(&round.sink).cloned() else {
                        continue; // unreachable: the core only knows sinks with a store
                    };
                    let (writes, suffixes) = (round.writes.clone(), round.suffixes.clone());
                    let reads = round.read;
                    let exchange = async move {
                        let written = if writes.is_empty() {
                            None
                        } else {
                            Some(store.write(writes).await)
                        };
                        let read = if reads {
                            Some(store.read(suffixes).await)
                        } else {
                            None
                        };
                        (written, read)
                    };
                    ctx.spawn(
                        exchange
                            .into_actor(self)
                            .map(move |(written, read), act, ctx| {
                                act.step(ctx, |core, now, fx| {
                                    core.finished(round, Answers { written, read }, now, fx);
                                });
                            }),
                    );
                }
                Effect::Voted { tenant, tally } => self.tracker.do_send(Voted { tenant, tally }),
                Effect::Discovered(all) => {
                    self.discovered.send_replace(all);
                }
                Effect::Leave(leaving) => self.leave(leaving, ctx),
            }
        }
    }

    /// Removes this cluster's report of a tenant that left, then hands what the remaining
    /// clusters decide to the tracker. A zone that cannot be changed is logged: the report
    /// then ages out of the others' count after `report_ttl`, as a stopped cluster's does.
    fn leave(&mut self, leaving: Box<Leaving>, ctx: &mut Context<Self>) {
        let Some(store) = self.stores.get(&leaving.sink).cloned() else {
            return;
        };
        let (report, suffix) = (leaving.report.clone(), leaving.suffix.clone());
        let exchange = async move {
            store.remove(report).await?;
            store.read(vec![suffix]).await
        };
        ctx.spawn(exchange.into_actor(self).map(move |read, act, _| {
            let Leaving { tenant, sinks, .. } = *leaving;
            let rrsets = match read {
                Ok(rrsets) => rrsets,
                Err(e) => {
                    warn!(tenant = %tenant.name, error = %e, "this cluster's report could not be taken out of the shared zone: the other clusters stop counting it after report_ttl");
                    return;
                }
            };
            let plan = act.core.plan();
            let Some(cluster) = act.core.cluster() else {
                return;
            };
            let tally = tally_without(&plan, cluster, rrsets, SystemTime::now());
            match remaining_snapshot(&tenant, &tally, SystemTime::now()) {
                Some(snapshot) => {
                    info!(tenant = %tenant.name, addresses = snapshot.addresses.len(), "left the shared name: the remaining clusters' set is published");
                    act.left.do_send(Left {
                        sinks,
                        snapshot: Arc::new(snapshot),
                    });
                }
                None => info!(tenant = %tenant.name, "left the shared name; no other cluster reports, so its records stay as they are (the name is never emptied)"),
            }
        }));
    }

    /// (Re)starts the round timer when the interval changed.
    fn tick_every(&mut self, ctx: &mut Context<Self>) {
        let every = self.core.interval();
        if self.ticker.as_ref().is_some_and(|(d, _)| *d == every) {
            return;
        }
        if let Some((_, handle)) = self.ticker.take() {
            ctx.cancel_future(handle);
        }
        let handle = ctx.run_interval(every, |act, ctx| act.step(ctx, RoundsCore::tick));
        self.ticker = Some((every, handle));
    }
}

impl Actor for Coordinator {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.tick_every(ctx);
    }
}

impl Handler<LocalView> for Coordinator {
    type Result = ();

    fn handle(&mut self, view: LocalView, ctx: &mut Context<Self>) {
        self.step(ctx, |core, now, fx| core.view(view, now, fx));
    }
}

impl Handler<SetCluster> for Coordinator {
    type Result = ();

    fn handle(&mut self, SetCluster(id): SetCluster, ctx: &mut Context<Self>) {
        self.step(ctx, |core, now, fx| core.set_cluster(id, now, fx));
    }
}

impl Handler<Retarget> for Coordinator {
    type Result = ();

    fn handle(&mut self, msg: Retarget, ctx: &mut Context<Self>) {
        let names = msg.stores.keys().cloned().collect();
        self.stores = msg.stores;
        self.step(ctx, |core, now, fx| core.retarget(msg.plan, names, now, fx));
        self.tick_every(ctx);
    }
}
