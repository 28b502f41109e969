//! Tenants declared outside the config files (the `DNSFailover` resources and Kuadrant's,
//! which ho-kube watches) reach the running plan the way rediscovered and resolved addresses
//! do: the engine follows them itself. Each change of the source is one round, under one
//! lock: merge them onto the files' config, apply the merge as a reload, report back. Once a
//! second the source reports again, so statuses follow what the engine decided in between.
//!
//! A merge that does not validate leaves the running plan as it is: the tenants accepted
//! before keep serving until a valid merge replaces them.

use std::future::Future;
use std::pin::Pin;
use std::sync::Weak;

use ho_config::validate::ValidationErrors;
use ho_config::Config;
use tokio::sync::{Mutex, Notify};
use tracing::error;

use super::*;
use crate::metrics::ResultLabel;

/// How often the source is asked to report even without a change: statuses say what the
/// engine decided, which changes between the source's own changes.
const REPORT_EVERY: Duration = Duration::from_secs(1);

/// A future a [`TenantSource`] returns.
pub type SourceFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// Where tenants beside the config files come from, and where what became of them goes.
pub trait TenantSource: Send + 'static {
    /// Raised whenever what the source contributes may have changed. The engine waits on it
    /// without holding the source, so a reload of the files never waits for a change.
    fn changes(&self) -> Arc<Notify>;
    /// The config files changed: the next merge starts from `base` (and is never
    /// [`Merge::Unchanged`]).
    fn rebase(&mut self, base: Config);
    /// One round: the files' config with the source's tenants merged and validated.
    fn merge<'a>(&'a mut self, engine: &'a EngineReader) -> SourceFuture<'a, Merge>;
    /// Brings what the source reports (statuses, finalizers) up to date with the engine.
    fn report<'a>(&'a mut self, engine: &'a EngineReader) -> SourceFuture<'a, ()>;
}

/// What a round of a [`TenantSource`] yields.
#[derive(Debug)]
pub enum Merge {
    /// What the source contributes is what the running plan already holds (or the engine
    /// stopped answering): nothing to apply.
    Unchanged,
    /// The merged plan to run (boxed: a plan is a kilobyte, the other variants words).
    Plan(Box<Plan>),
    /// The merge does not validate; the running plan stays.
    Invalid(ValidationErrors),
}

/// Why a reload of the files' config did not apply.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReloadError {
    /// The followed tenant source's tenants do not merge with the new config.
    #[error("the resources' tenants do not merge with the new config:\n{0}")]
    Merge(ValidationErrors),
    /// The merged (or, without a source, the files') plan cannot run.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// What a tenant source may read of the running engine: the `/status` parts it reports
/// from. Cheap to clone.
#[derive(Clone)]
pub struct EngineReader {
    pub(super) tracker: Addr<HealthTracker>,
    pub(super) sinks: Arc<RwLock<Vec<Addr<SinkActor>>>>,
}

impl EngineReader {
    pub(super) fn of(
        tracker: &Addr<HealthTracker>,
        sinks: &Arc<RwLock<Vec<Addr<SinkActor>>>>,
    ) -> Self {
        EngineReader {
            tracker: tracker.clone(),
            sinks: sinks.clone(),
        }
    }

    /// Every tenant's summary and every sink's rows (see [`Engine::overview`]); `None` once
    /// the engine has stopped.
    pub async fn overview(&self) -> Option<Overview> {
        let tenants = self.tracker.send(GetSummaries).await.ok()?;
        let actors = self.sinks.read().expect("not poisoned").clone();
        let mut sinks = Vec::with_capacity(actors.len());
        for sink in &actors {
            sinks.push(sink.send(GetSinkStatus).await.ok()?);
        }
        Some(Overview { tenants, sinks })
    }

    /// The endpoints named in `names` as `/status` shows them (those of them that run);
    /// `None` once the engine has stopped.
    pub async fn endpoints(
        &self,
        names: std::collections::HashSet<String>,
    ) -> Option<Vec<crate::status::EndpointStatus>> {
        self.tracker.send(GetEndpoints(names)).await.ok()
    }
}

/// A followed source, shared by its task and the engine's reloads (the source first, then
/// the applier: every path takes the two locks in that order).
pub(super) struct Following {
    source: Arc<Mutex<Box<dyn TenantSource>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Following {
    /// Applies the source's first round (then tells the sinks it has been, whatever came of
    /// it), then follows it until dropped.
    pub(super) async fn start(
        source: Box<dyn TenantSource>,
        applier: &Arc<Mutex<Applier>>,
        reader: EngineReader,
        metrics: Arc<Metrics>,
    ) -> Following {
        let changes = source.changes();
        let source = Arc::new(Mutex::new(source));
        {
            let mut held = source.lock().await;
            round(held.as_mut(), applier, &reader, &metrics).await;
            applier.lock().await.source_arrived();
            held.report(&reader).await;
        }
        let task = actix::spawn(follow(
            Arc::downgrade(&source),
            Arc::downgrade(applier),
            changes,
            reader,
            metrics,
        ));
        Following { source, task }
    }

    /// Merges the source onto the files' new `base` and applies the result.
    pub(super) async fn reload(
        &self,
        base: Config,
        applier: &Mutex<Applier>,
        reader: &EngineReader,
    ) -> Result<ReloadSummary, ReloadError> {
        let mut source = self.source.lock().await;
        source.rebase(base);
        match source.merge(reader).await {
            Merge::Unchanged => Ok(ReloadSummary::default()),
            Merge::Invalid(e) => Err(ReloadError::Merge(e)),
            Merge::Plan(plan) => Ok(applier.lock().await.reload(*plan).await?),
        }
    }
}

impl Drop for Following {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A round on every change, a report every second, until the engine is gone.
async fn follow(
    source: Weak<Mutex<Box<dyn TenantSource>>>,
    applier: Weak<Mutex<Applier>>,
    changes: Arc<Notify>,
    reader: EngineReader,
    metrics: Arc<Metrics>,
) {
    let mut reports = tokio::time::interval(REPORT_EVERY);
    reports.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let changed = tokio::select! {
            _ = changes.notified() => true,
            _ = reports.tick() => false,
        };
        let (Some(source), Some(applier)) = (source.upgrade(), applier.upgrade()) else {
            return;
        };
        let mut source = source.lock().await;
        if changed {
            round(source.as_mut(), &applier, &reader, &metrics).await;
        }
        source.report(&reader).await;
    }
}

/// Merges the source and applies the merge, counted in `config_reloads_total`.
async fn round(
    source: &mut dyn TenantSource,
    applier: &Mutex<Applier>,
    reader: &EngineReader,
    metrics: &Metrics,
) {
    let result = match source.merge(reader).await {
        Merge::Unchanged => return,
        Merge::Invalid(e) => {
            error!("the resources' tenants do not merge with the config files; the running config stays:\n{e}");
            "invalid"
        }
        Merge::Plan(plan) => match applier.lock().await.reload(*plan).await {
            Ok(_) => "ok",
            Err(e) => {
                error!("the resources' tenants cannot run; the running config stays: {e}");
                "error"
            }
        },
    };
    metrics
        .config_reloads
        .get_or_create(&ResultLabel { result })
        .inc();
}
