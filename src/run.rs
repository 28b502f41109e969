//! `run`: the service.

use std::path::PathBuf;
use std::process::ExitCode;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::signal::unix::{signal, SignalKind};

use ho_config::LogFormat;
use ho_engine::metrics::Metrics;
use ho_engine::{Engine, EngineError};
use tracing::{info, warn};

use crate::reload::Reloader;
use ho_kube::lease::Elector;
use ho_kube::ring_leases::RingLeases;
use ho_kube::tenants::controller::Controller;

/// Loads the config (exit 2 with every problem if it is invalid or names a secret, file or
/// socket that cannot be used), starts telemetry, the engine and
/// the API, and runs until SIGINT or SIGTERM, reloading the config on SIGHUP (and on file
/// changes with `[reload] watch = true`). Shutdown stops probing, lets sink writes in
/// flight finish within `defaults.shutdown_timeout`, flushes spans, and leaves published
/// records in place.
pub fn run(files: &[PathBuf], log_format: Option<LogFormat>) -> anyhow::Result<ExitCode> {
    let (plan, notes) = crate::check_config::load_checked(files);
    let plan = match plan {
        Ok(plan) => plan,
        Err(code) => return Ok(code),
    };
    crate::logging::init(false, log_format.unwrap_or(plan.telemetry.log_format));
    for note in notes {
        warn!("{note}");
    }
    // Thousands of probes in flight need thousands of descriptors: use all we may.
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => info!(limit, "open-file limit"),
        Err(e) => warn!("could not raise the open-file limit: {e}"),
    }
    warn_unverified_tls(&plan.unverified_tls());
    let metrics = Arc::new(Metrics::new());
    let telemetry = crate::telemetry::init(&plan.telemetry, &metrics)?;
    let system = actix_rt::System::new();
    let served = system.block_on(async move {
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
        let deadline = plan.shutdown_timeout;
        let read_token = |file: &Option<std::path::PathBuf>, field: &str| {
            file.as_ref()
                .map(|f| {
                    ho_engine::secret::Secret::load(Some(f), None)
                        .map(|s| Arc::<str>::from(s.expose()))
                        .map_err(|e| anyhow::anyhow!("{field}: {e}"))
                })
                .transpose()
        };
        let tokens = ho_engine::api::ApiTokens {
            read: read_token(&plan.api_token_file, "api.token_file")?,
            admin: read_token(&plan.api_admin_token_file, "api.admin_token_file")?,
            heartbeat: read_token(&plan.api_heartbeat_token_file, "api.heartbeat_token_file")?,
        };
        let watch = plan.reload.watch.then_some(plan.reload.interval);
        let cluster = ho_kube::cluster_id::resolve(&plan.cluster).await;
        info!(cluster = %cluster.id, source = cluster.source, "cluster id");
        let election = plan.leader_election.clone();
        let ring = plan.ring.clone();
        let kubernetes = plan.kubernetes.clone();
        let plan_state_dir = plan.state_dir.clone();
        let parts = ho_kinds::parts(ho_kinds::Sinks::default());
        let mut engine = match Engine::start_with(plan, parts, metrics).await {
            Ok(engine) => engine,
            // What the preflight could not see (a socket the DNS server cannot bind, a state
            // file changed since) is a config problem too.
            Err(
                e @ (EngineError::Probe { .. }
                | EngineError::SinkBuild(_)
                | EngineError::Host(_)
                | EngineError::Drains(_)),
            ) => {
                eprintln!("{e}");
                return Ok(ExitCode::from(2));
            }
            Err(e) => return Err(e.into()),
        };
        engine.set_cluster(cluster);
        if let Some(name) = &kubernetes.operator_state {
            let kube = ho_kube::client::connect_for_watches(
                kubernetes.kubeconfig.as_deref(),
                REQUEST_TIMEOUT,
            )
            .await
            .context("[kubernetes] operator_state")?;
            if let Some(dir) = &plan_state_dir {
                // The embedded server's ACME challenges: an update reaches one replica, the
                // ACME server asks any of them.
                let files = ho_kube::shared_files::SharedFiles {
                    prefix: "acme-",
                    merge: ho_dns::server::merge_acme_challenges,
                };
                ho_kube::shared_files::share(
                    kube.client.clone(),
                    &kube.default_namespace,
                    name,
                    dir.clone(),
                    files,
                );
            }
            ho_kube::operator_state::share(&engine, kube.client, &kube.default_namespace, name)
                .await;
        }
        crate::heap::release_freed_pages();
        let api = actix::spawn(ho_engine::api::serve(listener, engine.api_state(tokens)));
        let (stop_election, stopped) = tokio::sync::watch::channel(false);
        let elector = if election.enabled {
            let elector = Elector::connect(&election, engine.leadership().clone()).await?;
            Some(actix::spawn(elector.run(stopped)))
        } else {
            None
        };
        let ring_leases = match engine.ring() {
            Some(link) => {
                let peer = advertised(&ring);
                let leases = RingLeases::connect(&ring, link.identity, peer).await?;
                Some(actix::spawn(
                    leases.run(stop_election.subscribe(), link.listings),
                ))
            }
            None => None,
        };
        let mut reloader = Reloader::new(files, kubernetes.tenants);
        if kubernetes.tenants {
            let tenants = start_tenants(files, &kubernetes, &engine).await?;
            engine.follow_tenants(Box::new(tenants)).await;
        }
        let mut hup = signal(SignalKind::hangup()).context("installing the SIGHUP handler")?;
        let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
        let mut watch = watch;
        let mut poll = watch_timer(watch);
        loop {
            tokio::select! {
                r = tokio::signal::ctrl_c() => { r.context("waiting for SIGINT")?; break; }
                _ = term.recv() => break,
                _ = hup.recv() => reloader.reload(&mut engine, "SIGHUP").await,
                _ = poll.tick(), if watch.is_some() => {
                    if reloader.changed() {
                        reloader.reload(&mut engine, "file change").await;
                    }
                }
            }
            // A reload may turn the watch on or off, or change its interval.
            let now = engine
                .plan()
                .reload
                .watch
                .then_some(engine.plan().reload.interval);
            if now != watch {
                watch = now;
                poll = watch_timer(watch);
            }
        }
        info!("shutting down; published records stay as they are");
        let started = Instant::now();
        // The elector stops renewing and closes the fence first; the Lease is handed over
        // only after the writes in flight have finished, so a standby's first write never
        // overlaps ours.
        let _ = stop_election.send(true);
        let elector = match elector {
            Some(task) => Some(task.await.context("the leader election task failed")?),
            None => None,
        };
        if let Some(leases) = ring_leases {
            // Deletes this replica's Lease: the others take its targets at their next listing.
            let _ = leases.await;
        }
        let unfinished = engine.shutdown(deadline).await;
        if let Some(elector) = elector {
            elector.release().await;
        }
        api.abort();
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
    });
    // A start that failed half way leaves actors spawned but never polled. Dropped so,
    // actix starts each one as the runtime goes away, outside it, and its first timer
    // panics; started here, inside the runtime, they stop quietly when it goes.
    system.block_on(tokio::task::yield_now());
    served
}

/// Where the other ring members reach this replica's verdict stream: `advertise`, else
/// `$POD_IP` with `listen`'s port (the Deployment sets it from the downward API), else
/// `listen` itself.
fn advertised(ring: &ho_config::RingConfig) -> String {
    if let Some(address) = &ring.advertise {
        return address.clone();
    }
    let pod_ip = std::env::var("POD_IP").ok();
    match pod_ip.and_then(|ip| ip.parse::<std::net::IpAddr>().ok()) {
        Some(ip) => std::net::SocketAddr::new(ip, ring.listen.port()).to_string(),
        None => ring.listen.to_string(),
    }
}

/// How long a request to the API server may take (connect, send; watches read longer).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Connects to the API server and starts watching `DNSFailover` resources on top of the
/// config files (`[kubernetes] tenants = true`); the engine follows them from then on.
async fn start_tenants(
    files: &[PathBuf],
    kubernetes: &ho_config::model::KubernetesConfig,
    engine: &Engine,
) -> anyhow::Result<Controller> {
    let base = crate::config_files::config(files).result?;
    let kube =
        ho_kube::client::connect_for_watches(kubernetes.kubeconfig.as_deref(), REQUEST_TIMEOUT)
            .await
            .context("[kubernetes]")?;
    info!(server = %kube.server, "watching DNSFailover resources");
    let kuadrant = kubernetes
        .kuadrant
        .then(|| ho_kube::tenants::kuadrant::Kuadrant {
            translate: Box::new(crate::import::kuadrant::LiveTranslation),
            dns: std::sync::Arc::new(ho_dns::Client),
        });
    Ok(Controller::start(
        kube.client,
        base,
        ho_kinds::CATALOG,
        engine.leadership().clone(),
        kuadrant,
    )
    .await)
}

/// Says, once, what runs without TLS verification.
pub fn warn_unverified_tls(parts: &[String]) {
    if !parts.is_empty() {
        warn!(
            unverified = ?parts,
            "TLS certificates are NOT verified (insecure = true) for {} part(s): a broken or forged certificate goes unnoticed there",
            parts.len()
        );
    }
}

/// The timer of `[reload] watch` (idle when the watch is off).
fn watch_timer(watch: Option<Duration>) -> tokio::time::Interval {
    let mut poll = tokio::time::interval(watch.unwrap_or(Duration::from_secs(3600)));
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    poll
}
