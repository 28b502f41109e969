//! Config reload while running: on SIGHUP, and with `[reload] watch = true` whenever a
//! config file's content changes. The new config is validated first; an invalid one is
//! logged with every error and counted (`config_reloads_total{result="invalid"}`), and the
//! running config stays. A valid one is applied by [`Engine::reload`] as a diff.

use std::path::PathBuf;
use std::time::Instant;

use ho_config::Plan;
use ho_engine::metrics::ResultLabel;
use ho_engine::Engine;
use ho_kube::tenants::controller::Controller;
use tracing::{error, info, warn};

/// The config files of a running process and a digest of what they held at the last
/// (re)load (a digest, not the text: a 10,000-endpoint config is megabytes).
pub struct Reloader {
    files: Vec<PathBuf>,
    seen: u64,
}

impl Reloader {
    /// Remembers the files' current content.
    pub fn new(files: &[PathBuf]) -> Reloader {
        Reloader {
            files: files.to_vec(),
            seen: digest(files),
        }
    }

    /// Whether any file's content differs from the last (re)load.
    pub fn changed(&self) -> bool {
        digest(&self.files) != self.seen
    }

    /// Loads, validates and applies the config, with the `DNSFailover` resources merged
    /// on top when `tenants` runs; `why` names the trigger in logs. Whatever the outcome,
    /// the parse's freed pages go back to the kernel.
    pub async fn reload(
        &mut self,
        engine: &mut Engine,
        why: &str,
        tenants: Option<&mut Controller>,
    ) {
        self.load_and_apply(engine, why, tenants).await;
        crate::heap::release_freed_pages();
    }

    /// The resources (or the gateways they name) changed: applies the new merge, if it
    /// changes anything, and brings their statuses up to date.
    pub async fn resources_changed(&mut self, engine: &mut Engine, tenants: &mut Controller) {
        match tenants.round(engine).await {
            Some(Ok(plan)) => self.apply(engine, plan, "resources").await,
            Some(Err(e)) => {
                error!("the resources' tenants do not merge with the config files; the running config stays:\n{e}");
                count(engine, "invalid");
            }
            None => {}
        }
        tenants.report(engine).await;
    }

    async fn load_and_apply(
        &mut self,
        engine: &mut Engine,
        why: &str,
        tenants: Option<&mut Controller>,
    ) {
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
        let plan = match (tenants, crate::config_files::config(&self.files).result) {
            (Some(tenants), Ok(base)) => {
                tenants.set_base(base);
                match tenants.round(engine).await {
                    Some(Ok(merged)) => merged,
                    Some(Err(e)) => {
                        error!(trigger = why, "the resources' tenants do not merge with the new config; the running config stays:\n{e}");
                        count(engine, "invalid");
                        return;
                    }
                    None => return,
                }
            }
            _ => plan,
        };
        self.apply(engine, plan, why).await;
    }

    async fn apply(&mut self, engine: &mut Engine, plan: Plan, why: &str) {
        let started = Instant::now();
        let unchanged_listen = engine.plan().api_listen == plan.api_listen;
        let unchanged_telemetry = engine.plan().telemetry == plan.telemetry;
        let unchanged_election = engine.plan().leader_election == plan.leader_election;
        let unchanged_watch = engine.plan().kubernetes.tenants == plan.kubernetes.tenants
            && engine.plan().kubernetes.kubeconfig == plan.kubernetes.kubeconfig;
        let unverified = plan.unverified_tls();
        let unverified_changed = engine.plan().unverified_tls() != unverified;
        match engine.reload(plan).await {
            Ok(summary) => {
                count(engine, "ok");
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
                if !unchanged_listen {
                    warn!("api.listen changed: it takes effect at the next restart");
                }
                if !unchanged_telemetry {
                    warn!("[telemetry] changed: it takes effect at the next restart");
                }
                if !unchanged_watch {
                    warn!("[kubernetes] tenants or kubeconfig changed: it takes effect at the next restart (allowances apply now)");
                }
                if !unchanged_election {
                    warn!("[leader_election] changed: it takes effect at the next restart");
                }
                if unverified_changed {
                    crate::run::warn_unverified_tls(&unverified);
                }
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
