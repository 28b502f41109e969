//! The service's life after the config loaded, as linkerd's `Config::build` then
//! `App::spawn`: built (the API's socket, its tokens, the cluster, the engine, operator
//! state shared through Kubernetes), then spawned (the API, the reloader, and what joins the
//! cluster: leader election, the ring's Leases, the DNSFailover controller), run until a
//! signal to stop, and stopped in the order that keeps writes single. Everything of
//! Kubernetes is reached through `ho_kube::Cluster`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use ho_config::Plan;
use ho_engine::metrics::Metrics;
use ho_engine::{Engine, EngineError};
use ho_kube::shared_files::SharedFiles;
use ho_kube::{Cluster, Joined};
use tokio::signal::unix::{signal, SignalKind};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::reload::Reloader;

use super::{tenants, watch_timer};

/// The engine started, and what the rest of the service needs of the config.
pub(super) struct Built {
    engine: Engine,
    listener: tokio::net::TcpListener,
    tokens: ho_engine::api::ApiTokens,
    cluster: Cluster,
}

/// Everything spawned, until a signal stops it.
pub(super) struct Running {
    engine: Engine,
    api: JoinHandle<()>,
    joined: Joined,
    reloader: Reloader,
}

impl Built {
    /// Binds the API, reads its tokens, connects the cluster (its id) and starts the engine;
    /// `Err(exit code)` when the engine refuses what the preflight could not see (a socket
    /// the DNS server cannot bind, a state file changed since): a config problem too.
    pub(super) async fn build(
        plan: Plan,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<Result<Built, ExitCode>> {
        let listener = tokio::net::TcpListener::bind(plan.api_listen)
            .await
            .with_context(|| format!("api.listen {}", plan.api_listen))?;
        info!(
            api = %listener.local_addr()?,
            endpoints = plan.endpoints.len(),
            targets = plan.targets.len(),
            tenants = plan.tenants.len(),
            "starting"
        );
        let tokens = ho_engine::api::ApiTokens {
            read: token(&plan.api_token_file, "api.token_file")?,
            admin: token(&plan.api_admin_token_file, "api.admin_token_file")?,
            heartbeat: token(&plan.api_heartbeat_token_file, "api.heartbeat_token_file")?,
        };
        let cluster = Cluster::connect(&plan).await;
        let parts = ho_kinds::parts(ho_kinds::Sinks::default());
        let mut engine = match Engine::start_with(plan, parts, metrics).await {
            Ok(engine) => engine,
            Err(
                e @ (EngineError::Probe { .. }
                | EngineError::SinkBuild(_)
                | EngineError::Host(_)
                | EngineError::Drains(_)),
            ) => {
                eprintln!("{e}");
                return Ok(Err(ExitCode::from(2)));
            }
            Err(e) => return Err(e.into()),
        };
        engine.set_cluster(cluster.status());
        // An ACME update reaches one replica, the ACME server asks any.
        let acme = SharedFiles {
            prefix: "acme-",
            merge: ho_dns::server::merge_acme_challenges,
        };
        cluster.share_operator_state(&engine, acme).await?;
        Ok(Ok(Built {
            engine,
            listener,
            tokens,
            cluster,
        }))
    }

    /// Spawns the API and the reloader, and joins the cluster: leader election, the ring's
    /// Leases and the DNSFailover controller.
    pub(super) async fn spawn(self, files: &[PathBuf]) -> anyhow::Result<Running> {
        let Built {
            mut engine,
            listener,
            tokens,
            cluster,
        } = self;
        crate::heap::release_freed_pages();
        let api = actix::spawn(ho_engine::api::serve(listener, engine.api_state(tokens)));
        let reloader = Reloader::new(files, cluster.follows_tenants());
        let tenants = (cluster.follows_tenants())
            .then(|| tenants(files))
            .transpose()?;
        let joined = cluster.join(&mut engine, tenants).await?;
        Ok(Running {
            engine,
            api,
            joined,
            reloader,
        })
    }
}

impl Running {
    /// Runs until SIGINT or SIGTERM, reloading the config on SIGHUP and, with `[reload]
    /// watch`, when the files change.
    pub(super) async fn until_stopped(&mut self) -> anyhow::Result<()> {
        let mut hup = signal(SignalKind::hangup()).context("installing the SIGHUP handler")?;
        let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
        let watching = |engine: &Engine| {
            let reload = &engine.plan().reload;
            reload.watch.then_some(reload.interval)
        };
        let mut watch = watching(&self.engine);
        let mut poll = watch_timer(watch);
        loop {
            tokio::select! {
                r = tokio::signal::ctrl_c() => { r.context("waiting for SIGINT")?; return Ok(()); }
                _ = term.recv() => return Ok(()),
                _ = hup.recv() => self.reloader.reload(&mut self.engine, "SIGHUP").await,
                _ = poll.tick(), if watch.is_some() => {
                    if self.reloader.changed() {
                        self.reloader.reload(&mut self.engine, "file change").await;
                    }
                }
            }
            // A reload may turn the watch on or off, or change its interval.
            if watching(&self.engine) != watch {
                watch = watching(&self.engine);
                poll = watch_timer(watch);
            }
        }
    }

    /// Stops: the elector stops renewing and closes the fence first; the Lease is handed
    /// over only after the writes in flight have finished (within `deadline`), so a
    /// standby's first write never overlaps ours. Published records stay as they are.
    pub(super) async fn stop(
        self,
        deadline: Duration,
        telemetry: Option<crate::telemetry::Telemetry>,
    ) -> anyhow::Result<ExitCode> {
        info!("shutting down; published records stay as they are");
        let started = Instant::now();
        let leaving = (self.joined.stop().await).context("the leader election task failed")?;
        let unfinished = self.engine.shutdown(deadline).await;
        leaving.release().await;
        self.api.abort();
        if unfinished > 0 {
            warn!(
                unfinished,
                ?deadline,
                "sink writes still in flight at the shutdown deadline were abandoned"
            );
        }
        if let Some(telemetry) = telemetry {
            telemetry.shutdown(deadline.saturating_sub(started.elapsed()));
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// An API token read from `file`, if one is configured.
fn token(file: &Option<PathBuf>, field: &str) -> anyhow::Result<Option<Arc<str>>> {
    file.as_ref()
        .map(|f| {
            ho_engine::secret::Secret::load(Some(f), None)
                .map(|s| Arc::<str>::from(s.expose()))
                .map_err(|e| anyhow::anyhow!("{field}: {e}"))
        })
        .transpose()
}
