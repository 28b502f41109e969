//! Config reload while running: on SIGHUP, and with `[reload] watch = true` whenever a
//! config file's content changes. The new config is validated first; an invalid one is
//! logged with every error and counted (`config_reloads_total{result="invalid"}`), and the
//! running config stays. A valid one is applied by [`Engine::reload`] as a diff (by
//! [`Engine::reload_config`], merged with the `DNSFailover` resources, when the engine
//! follows them).

use std::path::PathBuf;
use std::time::Instant;

use ho_config::Plan;
use ho_engine::metrics::ResultLabel;
use ho_engine::{Engine, ReloadError, ReloadSummary};
use tracing::{error, info, warn};

/// The config files of a running process and a digest of what they held at the last
/// (re)load (a digest, not the text: a 10,000-endpoint config is megabytes).
pub struct Reloader {
    files: Vec<PathBuf>,
    seen: u64,
    /// Whether the engine follows `DNSFailover` resources, merged onto the files' config.
    tenants: bool,
}

impl Reloader {
    /// Remembers the files' current content; `tenants`: whether the engine follows
    /// resources (`[kubernetes] tenants`), which then merge onto each new config.
    pub fn new(files: &[PathBuf], tenants: bool) -> Reloader {
        Reloader {
            files: files.to_vec(),
            seen: digest(files),
            tenants,
        }
    }

    /// Whether any file's content differs from the last (re)load.
    pub fn changed(&self) -> bool {
        digest(&self.files) != self.seen
    }

    /// Loads, validates and applies the config, with the resources merged on top when the
    /// engine follows them; `why` names the trigger in logs. Whatever the outcome, the
    /// parse's freed pages go back to the kernel.
    pub async fn reload(&mut self, engine: &mut Engine, why: &str) {
        self.load_and_apply(engine, why).await;
        crate::heap::release_freed_pages();
    }

    async fn load_and_apply(&mut self, engine: &mut Engine, why: &str) {
        self.seen = digest(&self.files);
        let loaded = crate::config_files::plan(&self.files);
        for note in &loaded.notes {
            warn!("{note}");
        }
        let plan = match loaded.result {
            Ok(plan) => plan,
            Err(e) => {
                error!(
                    trigger = why,
                    "config reload rejected; the running config stays:\n{e}"
                );
                count(engine, "invalid");
                return;
            }
        };
        let started = Instant::now();
        let before = engine.plan();
        let applied = match (
            self.tenants,
            crate::config_files::config(&self.files).result,
        ) {
            (true, Ok(base)) => engine.reload_config(plan, base).await,
            _ => engine.reload(plan).await.map_err(ReloadError::from),
        };
        match applied {
            Ok(summary) => {
                count(engine, "ok");
                log_applied(why, started, &summary);
                warn_restart_only(&before, &engine.plan());
            }
            Err(ReloadError::Merge(e)) => {
                error!(trigger = why, "the resources' tenants do not merge with the new config; the running config stays:\n{e}");
                count(engine, "invalid");
            }
            Err(e) => {
                error!(
                    trigger = why,
                    "config reload failed; the running config stays: {e}"
                );
                count(engine, "error");
            }
        }
    }
}

fn log_applied(why: &str, started: Instant, summary: &ReloadSummary) {
    info!(
        trigger = why,
        took_ms = started.elapsed().as_secs_f64() * 1000.0,
        kept = summary.targets_kept,
        added = summary.targets_added,
        removed = summary.targets_removed,
        sinks_rebuilt = ?summary.sinks_rebuilt,
        sinks_removed = ?summary.sinks_removed,
        "config reload applied"
    );
}

/// Says which changed settings wait for a restart (a reload does not apply them).
fn warn_restart_only(before: &Plan, after: &Plan) {
    if before.api_listen != after.api_listen {
        warn!("api.listen changed: it takes effect at the next restart");
    }
    if before.telemetry != after.telemetry {
        warn!("[telemetry] changed: it takes effect at the next restart");
    }
    if before.kubernetes.tenants != after.kubernetes.tenants
        || before.kubernetes.kubeconfig != after.kubernetes.kubeconfig
    {
        warn!("[kubernetes] tenants or kubeconfig changed: it takes effect at the next restart (allowances apply now)");
    }
    if before.leader_election != after.leader_election {
        warn!("[leader_election] changed: it takes effect at the next restart");
    }
    let unverified = after.unverified_tls();
    if before.unverified_tls() != unverified {
        crate::run::warn_unverified_tls(&unverified);
    }
}

/// Counts a reload by its result (`config_reloads_total`).
fn count(engine: &Engine, result: &'static str) {
    engine
        .metrics()
        .config_reloads
        .get_or_create(&ResultLabel { result })
        .inc();
}

/// A digest of the files' names and bytes; unreadable files count as empty (the reload
/// itself then reports the error). SipHash with fixed keys: stable within the process,
/// and an accidental collision (2^-64) would only delay a reload to the next SIGHUP.
fn digest(files: &[PathBuf]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for f in files {
        f.hash(&mut hasher);
        std::fs::read(f).unwrap_or_default().hash(&mut hasher);
    }
    hasher.finish()
}
