//! `run`: the service. The config is loaded and checked, then the service is built and
//! spawned ([`service`]), runs until a signal, and stops.

mod service;

use std::path::PathBuf;
use std::process::ExitCode;

use std::sync::Arc;
use std::time::Duration;

use ho_config::{LogFormat, Plan};
use ho_engine::metrics::Metrics;
use ho_kube::tenants::kuadrant::Kuadrant;
use ho_kube::Tenants;
use tracing::{info, warn};

use service::Built;

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
    let served = system.block_on(serve(files, plan, metrics, telemetry));
    // A start that failed half way leaves actors spawned but never polled. Dropped so,
    // actix starts each one as the runtime goes away, outside it, and its first timer
    // panics; started here, inside the runtime, they stop quietly when it goes.
    system.block_on(tokio::task::yield_now());
    served
}

/// Builds the service, spawns it, runs it until a signal to stop, and stops it.
async fn serve(
    files: &[PathBuf],
    plan: Plan,
    metrics: Arc<Metrics>,
    telemetry: Option<crate::telemetry::Telemetry>,
) -> anyhow::Result<ExitCode> {
    let deadline = plan.shutdown_timeout;
    let built = match Built::build(plan, metrics).await? {
        Ok(built) => built,
        Err(code) => return Ok(code),
    };
    let mut running = built.spawn(files).await?;
    running.until_stopped().await?;
    running.stop(deadline, telemetry).await
}

/// What the DNSFailover controller lays resources on (`[kubernetes] tenants`): the config
/// files' config, the sink kinds, and the translation of Kuadrant's resources.
fn tenants(files: &[PathBuf]) -> anyhow::Result<Tenants> {
    Ok(Tenants {
        base: crate::config_files::config(files).result?,
        catalog: ho_kinds::CATALOG,
        kuadrant: Kuadrant {
            dns: Arc::new(ho_dns::Client),
        },
    })
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
