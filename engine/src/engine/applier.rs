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

use super::*;
use crate::hosts::{Hosts, Resolved};
use crate::prober::Sampling;

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
    /// One per target of the plan, in the same order.
    pub(super) probers: Vec<RunningProber>,
    pub(super) next_id: TargetId,
    /// Where new probers go, round robin.
    pub(super) next_arbiter: usize,
    pub(super) arbiters: Vec<Arbiter>,
    /// Schedules' common origin, so probers started by a reload keep their stable phase.
    pub(super) origin: Instant,
    /// Probes start on this tick ([`schedule::tick_for`] the load at start).
    pub(super) tick: Duration,
    /// Bounds every probe; set at start (a reload does not change it).
    pub(super) limits: Arc<ProbeLimits>,
    pub(super) leadership: Leadership,
    pub(super) events: Events,
    pub(super) coordinator: Addr<Coordinator>,
    /// Report stores of the running sinks that have one, by sink name.
    pub(super) stores: BTreeMap<String, Arc<dyn ReportStore>>,
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
    /// `[ring]`: which targets this replica probes (each prober's gate).
    pub(super) ownership: Option<Arc<crate::ring::ownership::Ownership>>,
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

    /// Starts a prober for each of `targets`, with its probe and stable id.
    pub(super) fn start_probers(
        &mut self,
        targets: &[Target],
        probes: Vec<Probe>,
        ids: Vec<TargetId>,
    ) {
        for ((target, probe), id) in targets.iter().zip(probes).zip(ids) {
            let prober = self.start_prober(target, probe, id);
            self.probers.push(prober);
        }
        self.fit_grace(targets);
    }

    /// `[ring]`: a lost target is probed on for at least its longest check interval, so its
    /// new owner's first probe comes before the old owner's last.
    fn fit_grace(&self, targets: &[Target]) {
        if let Some(ownership) = &self.ownership {
            let longest = targets.iter().map(|t| t.check.timing.interval).max();
            ownership.fit_grace(longest.unwrap_or_default());
        }
    }

    fn start_prober(&mut self, target: &Target, probe: Probe, id: TargetId) -> RunningProber {
        let schedule = Schedule::new(&target.key(), &target.check.timing, self.origin, self.tick);
        let timing = target.check.timing;
        let recipient = self.tracker.clone().recipient();
        let telemetry = &self.running().telemetry;
        let share = if telemetry.otlp_endpoint.is_some() {
            telemetry.probe_sample_ratio
        } else {
            0.0
        };
        // The key labels sampled spans; not kept when nothing is sampled.
        let key = if share > 0.0 {
            target.key()
        } else {
            String::new()
        };
        let sample = Sampling { share, key };
        let arbiter = &self.arbiters[self.next_arbiter % self.arbiters.len()];
        self.next_arbiter += 1;
        let limits = self.limits.clone();
        let mut prober = Prober::new(id, probe, schedule, &timing, recipient, sample, limits);
        if let Some(ownership) = &self.ownership {
            prober = prober.gated(ownership.gate(&target.key()));
        }
        let handle = prober.start(&arbiter.handle());
        RunningProber { id, handle }
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
        let summary = self.apply(self.effective(&plan)).await?;
        self.configured = Arc::new(plan);
        info!(
            targets_kept = summary.targets_kept,
            targets_added = summary.targets_added,
            targets_removed = summary.targets_removed,
            sinks_rebuilt = %summary.sinks_rebuilt.join(", "),
            sinks_removed = %summary.sinks_removed.join(", "),
            "config reloaded"
        );
        Ok(summary)
    }

    /// `configured` plus the addresses its host names resolve to and what other clusters
    /// contribute that it does not probe yet.
    fn effective(&self, configured: &Plan) -> Plan {
        configured
            .with_resolved(&self.resolved.borrow())
            .with_discovered(&self.discovered.borrow())
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
    async fn apply(&mut self, plan: Plan) -> Result<ReloadSummary, EngineError> {
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
        self.replace_probers(&plan, &old, probes, &mut summary);
        let plan = Arc::new(plan);
        *self.plan.write().expect("not poisoned") = plan.clone();
        self.plans.send_replace(plan.clone());
        let ids = self.probers.iter().map(|p| p.id).collect();
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
        for (name, sink) in built {
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

    /// Keeps the probers of targets that stay, starts new ones (`probes`: one per target of
    /// `plan` not in `old`, in order), stops the rest.
    fn replace_probers(
        &mut self,
        plan: &Plan,
        old: &HashMap<&Target, usize>,
        probes: Vec<Probe>,
        summary: &mut ReloadSummary,
    ) {
        let mut running: Vec<Option<RunningProber>> = std::mem::take(&mut self.probers)
            .into_iter()
            .map(Some)
            .collect();
        let mut probes = probes.into_iter();
        let mut probers = Vec::with_capacity(plan.targets.len());
        for target in &plan.targets {
            let kept = old.get(target).and_then(|&i| running[i].take());
            let prober = match kept {
                Some(prober) => {
                    summary.targets_kept += 1;
                    prober
                }
                None => {
                    let id = self.next_id;
                    self.next_id += 1;
                    summary.targets_added += 1;
                    let probe = probes.next().expect("one probe per new target");
                    self.start_prober(target, probe, id)
                }
            };
            probers.push(prober);
        }
        for removed in running.into_iter().flatten() {
            removed.handle.stop();
            summary.targets_removed += 1;
        }
        if let Some(ownership) = &self.ownership {
            ownership.retain(&plan.targets.iter().map(Target::key).collect());
        }
        self.fit_grace(&plan.targets);
        self.probers = probers;
    }
}

/// Dropping the engine drops its applier: the probers' threads, the tracker and the sink
/// actors stop.
impl Drop for Applier {
    fn drop(&mut self) {
        for arbiter in &self.arbiters {
            arbiter.stop();
        }
        self.tracker.do_send(Stop);
        for sink in self.sinks.values() {
            sink.do_send(Stop);
        }
    }
}
