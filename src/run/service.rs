//! The service's life after the config loaded: built (the API's socket, its tokens, the
//! cluster id, the engine, operator state shared through Kubernetes), then spawned (the
//! API, leader election, the ring's Leases, the reloader, the DNSFailover controller),
//! run until a signal to stop, and stopped in the order that keeps writes single.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use ho_config::model::KubernetesConfig;
use ho_config::{LeaderElectionConfig, Plan, RingConfig};
use ho_engine::metrics::Metrics;
use ho_engine::{Engine, EngineError};
use tokio::signal::unix::{signal, SignalKind};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::reload::Reloader;
use ho_kube::lease::Elector;
use ho_kube::ring_leases::RingLeases;

use super::{advertised, start_tenants, watch_timer, REQUEST_TIMEOUT};

/// The engine started, and what the rest of the service needs of the config.
pub(super) struct Built {
    engine: Engine,
    listener: tokio::net::TcpListener,
    tokens: ho_engine::api::ApiTokens,
    election: LeaderElectionConfig,
    ring: RingConfig,
    kubernetes: KubernetesConfig,
}

/// Everything spawned, until a signal stops it.
pub(super) struct Running {
    engine: Engine,
    api: JoinHandle<()>,
    stop_election: tokio::sync::watch::Sender<bool>,
    elector: Option<JoinHandle<Elector>>,
    ring_leases: Option<JoinHandle<()>>,
    reloader: Reloader,
}

impl Built {
    /// Binds the API, reads its tokens, resolves the cluster id and starts the engine;
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
        let cluster = ho_kube::cluster_id::resolve(&plan.cluster).await;
        info!(cluster = %cluster.id, source = cluster.source, "cluster id");
        let (election, ring) = (plan.leader_election.clone(), plan.ring.clone());
        let (kubernetes, state_dir) = (plan.kubernetes.clone(), plan.state_dir.clone());
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
        engine.set_cluster(cluster);
        share_operator_state(&engine, &kubernetes, state_dir).await?;
        Ok(Ok(Built {
            engine,
            listener,
            tokens,
            election,
            ring,
            kubernetes,
        }))
    }

    /// Spawns the API, leader election, the ring's Leases and the DNSFailover controller.
    pub(super) async fn spawn(self, files: &[PathBuf]) -> anyhow::Result<Running> {
        let Built {
            mut engine,
            listener,
            tokens,
            election,
            ring,
            kubernetes,
        } = self;
        crate::heap::release_freed_pages();
        let api = actix::spawn(ho_engine::api::serve(listener, engine.api_state(tokens)));
        let (stop_election, stopped) = tokio::sync::watch::channel(false);
        let elector = match election.enabled {
            true => {
                let elector = Elector::connect(&election, engine.leadership().clone()).await?;
                Some(actix::spawn(elector.run(stopped)))
            }
            false => None,
        };
        let ring_leases = match engine.ring() {
            Some(link) => {
                let leases = RingLeases::connect(&ring, link.identity, advertised(&ring)).await?;
                Some(actix::spawn(
                    leases.run(stop_election.subscribe(), link.listings),
                ))
            }
            None => None,
        };
        let reloader = Reloader::new(files, kubernetes.tenants);
        if kubernetes.tenants {
            let tenants = start_tenants(files, &kubernetes, &engine).await?;
            engine.follow_tenants(Box::new(tenants)).await;
        }
        Ok(Running {
            engine,
            api,
            stop_election,
            elector,
            ring_leases,
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
        let _ = self.stop_election.send(true);
        let elector = match self.elector {
            Some(task) => Some(task.await.context("the leader election task failed")?),
            None => None,
        };
        if let Some(leases) = self.ring_leases {
            // Deletes this replica's Lease: the others take its targets at their next listing.
            let _ = leases.await;
        }
        let unfinished = self.engine.shutdown(deadline).await;
        if let Some(elector) = elector {
            elector.release().await;
        }
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

/// `[kubernetes] operator_state`: drains and forced health, and the embedded server's ACME
/// challenges under `state_dir` (an update reaches one replica, the ACME server asks any),
/// shared with the other replicas through a ConfigMap.
async fn share_operator_state(
    engine: &Engine,
    kubernetes: &KubernetesConfig,
    state_dir: Option<PathBuf>,
) -> anyhow::Result<()> {
    let Some(name) = &kubernetes.operator_state else {
        return Ok(());
    };
    let kube =
        ho_kube::client::connect_for_watches(kubernetes.kubeconfig.as_deref(), REQUEST_TIMEOUT)
            .await
            .context("[kubernetes] operator_state")?;
    if let Some(dir) = state_dir {
        let files = ho_kube::shared_files::SharedFiles {
            prefix: "acme-",
            merge: ho_dns::server::merge_acme_challenges,
        };
        ho_kube::shared_files::share(
            kube.client.clone(),
            &kube.default_namespace,
            name,
            dir,
            files,
        );
    }
    ho_kube::operator_state::share(engine, kube.client, &kube.default_namespace, name).await;
    Ok(())
}
