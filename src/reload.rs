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
use ho_engine::{Engine, ReloadError};
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
            Ok(_) => {
                count(engine, "ok");
                log_applied(why, started);
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

/// What started the reload and how long it took; what it changed (targets kept, added and
/// removed, sinks rebuilt and removed) is the engine's "config reloaded" line just before,
/// which reloads from resources write too.
fn log_applied(why: &str, started: Instant) {
    info!(
        trigger = why,
        took_ms = started.elapsed().as_secs_f64() * 1000.0,
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
/// and an accidental collision (2^-64) would only delay a reload to the next SIGHUP. Each
/// file is hashed as it is read, a few KiB at a time: a whole copy of it (9 MB at 100,000
/// endpoints) beside the running state was the heap's peak at start.
fn digest(files: &[PathBuf]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for f in files {
        f.hash(&mut hasher);
        let read = std::fs::File::open(f)
            .and_then(|mut file| std::io::copy(&mut file, &mut Hashing(&mut hasher)));
        // Where one file's bytes end, so they never run on into the next name.
        hasher.write_u64(read.unwrap_or_default());
    }
    hasher.finish()
}

/// Feeds what is written into a hasher.
struct Hashing<'a, H>(&'a mut H);

impl<H: std::hash::Hasher> std::io::Write for Hashing<'_, H> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.write(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The digest read in pieces tells apart what the whole-file digest told apart: a byte
    /// changed anywhere in a file larger than one piece, and bytes moved from one file to
    /// the next; it is the same for the same bytes.
    #[test]
    fn the_digest_follows_every_byte_of_every_file() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.toml"), dir.path().join("b.toml"));
        let files = [a.clone(), b.clone()];
        let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&a, &big).unwrap();
        std::fs::write(&b, b"z").unwrap();
        let first = digest(&files);
        assert_eq!(digest(&files), first);
        for at in [0, 8191, 8192, 100_000, 199_999] {
            let mut changed = big.clone();
            changed[at] ^= 1;
            std::fs::write(&a, &changed).unwrap();
            assert_ne!(digest(&files), first, "byte {at}");
        }
        std::fs::write(&a, &big[..199_999]).unwrap();
        let mut moved = big[199_999..].to_vec();
        moved.push(b'z');
        std::fs::write(&b, &moved).unwrap();
        assert_ne!(digest(&files), first, "a byte moved to the next file");
        std::fs::remove_file(&b).unwrap();
        assert_ne!(digest(&files), first, "a file gone");
    }
}
