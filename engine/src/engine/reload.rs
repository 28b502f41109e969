//! Reloads as a diff: a new plan (from the operator's config, or the configured plan plus
//! what other clusters contribute) keeps unchanged targets' probers and verdicts and
//! unchanged sinks' actors, and replaces only what changed.

use super::*;

impl Engine {
    /// Applies `plan` as a diff: unchanged targets keep their prober, verdict and
    /// schedule; removed targets stop being probed at once; added ones start `unknown`;
    /// sinks that are new or configured differently are built with the engine's factory
    /// and replace or join the running ones, removed sinks stop. Tenants keep what they
    /// published and are re-decided. Nothing changes unless every new sink builds and every
    /// new target's TLS settings load. The API address and telemetry settings are not
    /// changed by a reload.
    pub async fn reload(&mut self, plan: Plan) -> Result<ReloadSummary, EngineError> {
        let effective = plan.with_discovered(&self.discovered.borrow());
        let summary = self.apply(effective).await?;
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

    /// Addresses other clusters contribute changed: a receiver that wakes when they do,
    /// for the caller to run [`Engine::rediscover`].
    pub fn discoveries(&self) -> watch::Receiver<Vec<Discovered>> {
        self.discovered.clone()
    }

    /// Starts probing what other clusters contribute and this cluster does not probe yet,
    /// and stops probing what they no longer contribute: the configured plan plus the
    /// latest discoveries, applied as a reload would.
    pub async fn rediscover(&mut self) -> Result<ReloadSummary, EngineError> {
        let effective = self
            .configured
            .with_discovered(&self.discovered.borrow_and_update());
        let summary = self.apply(effective).await?;
        if summary.targets_added + summary.targets_removed > 0 {
            info!(
                added = summary.targets_added,
                removed = summary.targets_removed,
                "probe targets follow the other clusters' reports"
            );
        }
        Ok(summary)
    }

    /// Applies `plan` as a diff (see [`Engine::reload`]).
    async fn apply(&mut self, plan: Plan) -> Result<ReloadSummary, EngineError> {
        let mut summary = ReloadSummary::default();
        let mut built = BTreeMap::new();
        for (name, config) in &plan.sinks {
            if self.plan.sinks.get(name) != Some(config) {
                built.insert(
                    name.clone(),
                    self.factory.build(name, &plan, &self.metrics).await?,
                );
            }
        }
        let old_plan = self.plan.clone();
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
        let probes = make_probes(new_targets)?;
        self.replace_sinks(&plan, built, &mut summary);
        self.replace_probers(&plan, &old, probes, &mut summary);
        self.plan = Arc::new(plan);
        let ids = self.probers.iter().map(|p| p.id).collect();
        self.tracker.do_send(Reload {
            plan: self.plan.clone(),
            ids,
            sinks: self.sinks.clone(),
        });
        self.coordinator.do_send(Retarget {
            plan: self.plan.clone(),
            stores: self.stores.clone(),
        });
        Ok(summary)
    }

    /// Stops removed and replaced sinks, starts the `built` ones.
    fn replace_sinks(
        &mut self,
        plan: &Plan,
        built: BTreeMap<String, Arc<dyn Sink>>,
        summary: &mut ReloadSummary,
    ) {
        for (name, addr) in std::mem::take(&mut self.sinks) {
            match plan.sinks.get(&name) {
                Some(config) if self.plan.sinks.get(&name) == Some(config) => {
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
        self.probers = probers;
    }
}
