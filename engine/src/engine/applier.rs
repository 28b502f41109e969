//! What changes the running plan, as a diff: a new plan (from the operator's config, or
//! the configured plan plus the addresses of its host names and what other clusters
//! contribute) keeps unchanged targets' probers and verdicts and unchanged sinks' actors,
//! and replaces only what changed.
//!
//! The [`Applier`] owns everything a plan change touches (probers, sink actors, the plan)
//! behind one lock, so a reload and a recomposition never interleave; the engine follows
//! the other clusters' contributions and its host names by itself ([`follow`]), whoever
//! started it.

use std::sync::Weak;

use tracing::warn;

use super::probers::ProberPool;
use super::*;
use crate::hosts::{Hosts, Resolved};

/// The part of a running engine a plan change rewrites.
pub(super) struct Applier {
    pub(super) tracker: Addr<HealthTracker>,
    /// Sink actors by sink name.
    pub(super) sinks: BTreeMap<String, Addr<SinkActor>>,
    /// The same actors, as the API reads them.
    pub(super) api_sinks: Arc<RwLock<Vec<Addr<SinkActor>>>>,
    pub(super) metrics: Arc<Metrics>,
    /// Builds sinks at start and on every reload.
    pub(super) factory: Arc<dyn SinkFactory>,
    /// The plan running now, also read through the engine ([`Engine::plan`]).
    pub(super) plan: Arc<RwLock<Arc<Plan>>>,
    /// The same plan for the answer canary and the ledger, which follow it.
    pub(super) plans: watch::Sender<Arc<Plan>>,
    /// One prober per target of the plan.
    pub(super) probers: ProberPool,
    pub(super) leadership: Leadership,
    pub(super) events: Events,
    pub(super) coordinator: Addr<Coordinator>,
    /// Report stores of the running sinks that have one, by sink name.
    pub(super) stores: BTreeMap<String, Arc<dyn ReportStore>>,
    /// The running sinks, told of each plan applied ([`Sink::plan_applied`]).
    pub(super) handles: BTreeMap<String, Arc<dyn Sink>>,
    /// Whether the followed tenant source's first round is applied (see
    /// [`Applier::source_arrived`]).
    pub(super) source_arrived: bool,
    /// Listings of the running sinks that have one, which the canary reads.
    pub(super) listings: Listings,
    /// The plan as configured; the running plan is it plus the addresses of its host
    /// names and the discovered endpoints ([`Applier::effective`]).
    pub(super) configured: Arc<Plan>,
    /// Addresses other clusters contribute, as the coordinator last found them.
    pub(super) discovered: watch::Receiver<Vec<Discovered>>,
    /// The host names of the configured plan, looked up.
    pub(super) hosts: Hosts,
    /// Their addresses as last resolved.
    pub(super) resolved: watch::Receiver<Resolved>,
    /// The heartbeat board: new `heartbeat` targets read it; reloads say who pushes.
    pub(super) heartbeats: Heartbeats,
    /// External health feeds, shared by the probes of every plan.
    pub(super) feeds: crate::probe::Feeds,
}

/// Recomposes the running plan each time `changed` changes (what other clusters
/// contribute, what host names resolve to), until its sender or the engine is gone.
pub(super) fn follow<T: Send + Sync + 'static>(
    applier: Weak<tokio::sync::Mutex<Applier>>,
    mut changed: watch::Receiver<T>,
    what: &'static str,
) {
    actix::spawn(async move {
        while changed.changed().await.is_ok() {
            changed.borrow_and_update();
            let Some(applier) = applier.upgrade() else {
                return;
            };
            let mut applier = applier.lock().await;
            if let Err(e) = applier.recompose(what).await {
                warn!("could not follow {what}: {e}");
            }
        }
    });
}

impl Applier {
    /// Shares the applier and has it recompose the running plan as the other clusters'
    /// reports and the endpoints' host names change.
    pub(super) fn follow(self) -> Arc<tokio::sync::Mutex<Applier>> {
        let (discovered, resolved) = (self.discovered.clone(), self.resolved.clone());
        let hosts = self.hosts.clone();
        let applier = Arc::new(tokio::sync::Mutex::new(self));
        follow(
            Arc::downgrade(&applier),
            discovered,
            "the other clusters' reports",
        );
        follow(
            Arc::downgrade(&applier),
            resolved,
            "the endpoints' host names",
        );
        hosts.follow();
        applier
    }

    /// The plan running now.
    fn running(&self) -> Arc<Plan> {
        self.plan.read().expect("not poisoned").clone()
    }

    /// Applies `plan` as a diff: unchanged targets keep their prober, verdict and
    /// schedule; removed targets stop being probed at once; added ones start `unknown`;
    /// sinks that are new or configured differently are built with the engine's factory
    /// and replace or join the running ones, removed sinks stop. Tenants keep what they
    /// published and are re-decided. Nothing changes unless every new sink builds and every
    /// new target's TLS settings load. The API address and telemetry settings are not
    /// changed by a reload.
    pub(super) async fn reload(&mut self, plan: Plan) -> Result<ReloadSummary, EngineError> {
        self.hosts.prepare(&plan).await?;
        let plan = Arc::new(plan);
        let summary = self.apply(self.effective(&plan)).await?;
        self.configured = plan;
        info!(
            targets_kept = summary.targets_kept,
            targets_added = summary.targets_added,
            targets_removed = summary.targets_removed,
            sinks_rebuilt = %listed(&summary.sinks_rebuilt),
            sinks_removed = %listed(&summary.sinks_removed),
            "config reloaded"
        );
        Ok(summary)
    }

    /// `configured` plus the addresses its host names resolve to and what other clusters
    /// contribute that it does not probe yet.
    fn effective(&self, configured: &Arc<Plan>) -> Arc<Plan> {
        configured.compose(&self.resolved.borrow(), &self.discovered.borrow())
    }

    /// Follows a change of what the running plan is composed of (`what`): starts probing
    /// what joined and stops probing what left, applied as a reload would.
    async fn recompose(&mut self, what: &str) -> Result<ReloadSummary, EngineError> {
        let configured = self.configured.clone();
        let summary = self.apply(self.effective(&configured)).await?;
        if summary.targets_added + summary.targets_removed > 0 {
            info!(
                added = summary.targets_added,
                removed = summary.targets_removed,
                "probe targets follow {what}"
            );
        }
        Ok(summary)
    }

    /// Applies `plan` as a diff (see [`Engine::reload`]).
    async fn apply(&mut self, plan: Arc<Plan>) -> Result<ReloadSummary, EngineError> {
        let mut summary = ReloadSummary::default();
        let mut built = BTreeMap::new();
        let old_plan = self.running();
        for (name, config) in &plan.sinks {
            if old_plan.sinks.get(name) != Some(config) {
                built.insert(
                    name.clone(),
                    self.factory.build(name, &plan, &self.metrics).await?,
                );
            }
        }
        let old: HashMap<&Target, usize> = old_plan
            .targets
            .iter()
            .enumerate()
            .map(|(i, t)| (t, i))
            .collect();
        let new_targets: Vec<&Target> = plan
            .targets
            .iter()
            .filter(|t| !old.contains_key(*t))
            .collect();
        let probes = make_probes(new_targets, &self.heartbeats, &self.feeds)?;
        self.heartbeats.learn(&plan);
        self.replace_sinks(&plan, &old_plan, built, &mut summary);
        self.probers.replace(&plan, &old, probes, &mut summary);
        for sink in self.handles.values() {
            sink.plan_applied(&plan, self.source_arrived);
        }
        *self.plan.write().expect("not poisoned") = plan.clone();
        self.plans.send_replace(plan.clone());
        let ids = self.probers.ids();
        self.tracker.do_send(Reload {
            plan: plan.clone(),
            ids,
            sinks: self.sinks.clone(),
        });
        self.coordinator.do_send(Retarget {
            plan,
            stores: self.stores.clone(),
        });
        Ok(summary)
    }

    /// The followed tenant source's first round is applied, whatever came of it: the sinks
    /// are told, so names it did not declare stop waiting for it.
    pub(super) fn source_arrived(&mut self) {
        self.source_arrived = true;
        let plan = self.running();
        for sink in self.handles.values() {
            sink.plan_applied(&plan, true);
        }
    }

    /// Stops removed and replaced sinks, starts the `built` ones.
    fn replace_sinks(
        &mut self,
        plan: &Plan,
        old_plan: &Plan,
        built: BTreeMap<String, Arc<dyn Sink>>,
        summary: &mut ReloadSummary,
    ) {
        for (name, addr) in std::mem::take(&mut self.sinks) {
            match plan.sinks.get(&name) {
                Some(config) if old_plan.sinks.get(&name) == Some(config) => {
                    self.sinks.insert(name, addr);
                }
                Some(_) => addr.do_send(Stop),
                None => {
                    addr.do_send(Stop);
                    summary.sinks_removed.push(name);
                }
            }
        }
        self.stores.retain(|name, _| plan.sinks.contains_key(name));
        self.handles.retain(|name, _| plan.sinks.contains_key(name));
        self.listings.retain(|name| plan.sinks.contains_key(name));
        for (name, sink) in built {
            self.handles.insert(name.clone(), sink.clone());
            self.listings.set(&name, &*sink);
            match sink.reports() {
                Some(store) => self.stores.insert(name.clone(), store),
                None => self.stores.remove(&name),
            };
            let actor = start_sink(
                &name,
                &plan.sinks[&name],
                sink,
                &self.metrics,
                &self.leadership,
                &self.events,
            );
            self.sinks.insert(name.clone(), actor);
            summary.sinks_rebuilt.push(name);
        }
        *self.api_sinks.write().expect("not poisoned") = self.sinks.values().cloned().collect();
    }
}

/// Dropping the engine drops its applier: the probers' threads, the tracker and the sink
/// actors stop.
impl Drop for Applier {
    fn drop(&mut self) {
        self.probers.stop();
        self.tracker.do_send(Stop);
        for sink in self.sinks.values() {
            sink.do_send(Stop);
        }
    }
}

/// Sink names for a log line: "none" rather than an empty value, which reads as a value
/// missing from the line.
fn listed(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}
