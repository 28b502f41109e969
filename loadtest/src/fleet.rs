//! The engines under test: one process, or with `--replicas N` a ring of N processes that
//! share the probing (`[ring]`) through Leases of their own on the Kubernetes API test
//! server (`ho_testkit::kube_api`: no real API server can run here; it implements the Lease
//! calls the ring makes). Each replica delivers to a recording sink of its own, so what each
//! one would serve is measured on its own, as each would answer from its own DNS server.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::bail;
use ho_testkit::kube_api::KubeApi;

use crate::engine_proc::EngineProcess;
use crate::recorder::Recorder;

/// One engine process and what it delivered.
pub struct Replica {
    /// Its ring identity (`r0`, `r1`, ...).
    pub identity: String,
    /// `None` once killed.
    process: Option<EngineProcess>,
    /// Its recording sink.
    pub recorder: Recorder,
    /// Its log.
    pub log: PathBuf,
}

impl Replica {
    /// Waits until this replica has published every endpoint.
    async fn published_all(&mut self, launch: &Launch<'_>) -> anyhow::Result<()> {
        let start = tokio::time::Instant::now();
        while self.recorder.published() < launch.endpoints {
            if let Some(process) = &mut self.process {
                if !process.alive() {
                    bail!(
                        "engine {} exited; its log: {}",
                        self.identity,
                        std::fs::read_to_string(&self.log).unwrap_or_default()
                    );
                }
            }
            anyhow::ensure!(
                start.elapsed() < launch.ready_within,
                "engine {} published {} of {} endpoints within {:?}",
                self.identity,
                self.recorder.published(),
                launch.endpoints,
                launch.ready_within
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        eprintln!(
            "loadtest: engine {} published all {} endpoints after {:.1} s",
            self.identity,
            launch.endpoints,
            start.elapsed().as_secs_f64()
        );
        Ok(())
    }
}

/// One scrape of one replica.
#[derive(Debug, Clone)]
pub struct Scrape {
    /// `/metrics`.
    pub metrics: String,
    /// User + system CPU so far, in ms.
    pub cpu_ms: u64,
    /// Resident memory now, in MiB.
    pub rss_mib: f64,
    /// Peak resident memory so far, in MiB.
    pub rss_peak_mib: f64,
}

/// The replicas of a run.
pub struct Fleet {
    /// In identity order.
    pub replicas: Vec<Replica>,
}

/// How to start a fleet.
pub struct Launch<'a> {
    /// The engine binary.
    pub bin: &'a Path,
    /// Where configs, logs and the ring's secret go.
    pub dir: &'a Path,
    /// Processes; more than one forms a ring.
    pub replicas: usize,
    /// Owners per target in a ring.
    pub replication: usize,
    /// Endpoints each replica must have published before the next starts (a rolling start:
    /// replicas starting together on a small machine starve each other and the farm).
    pub endpoints: usize,
    /// How long one replica may take to publish them.
    pub ready_within: std::time::Duration,
}

impl Fleet {
    /// Starts the replicas one after the other, each on the config `config(api, hook)` (its
    /// API address, its recording sink) with, for a ring, its `[ring]` table after it; each
    /// has published every endpoint before the next starts.
    pub async fn start(
        launch: &Launch<'_>,
        mut config: impl FnMut(SocketAddr, SocketAddr) -> anyhow::Result<String>,
    ) -> anyhow::Result<Fleet> {
        let ring = if launch.replicas > 1 {
            let kube = KubeApi::default().start().await;
            let secret = launch.dir.join("ring-secret");
            std::fs::write(&secret, "loadtest ring secret")?;
            Some((kube, secret))
        } else {
            None
        };
        let mut replicas = Vec::with_capacity(launch.replicas);
        for i in 0..launch.replicas {
            let identity = format!("r{i}");
            let dir = launch.dir.join(&identity);
            std::fs::create_dir_all(&dir)?;
            let recorder = Recorder::default();
            let hook = recorder.start().await?;
            let api = free_port()?;
            let mut text = config(api, hook)?;
            if let Some((kube, secret)) = &ring {
                text.push_str(&ring_table(
                    &identity,
                    launch.replication,
                    secret,
                    &KubeApi::kubeconfig_with(*kube, &dir, &format!("test-{identity}")),
                )?);
            }
            let config = dir.join("engine.toml");
            std::fs::write(&config, text)?;
            let log = dir.join("engine.log");
            let process = EngineProcess::spawn(launch.bin, &config, api, &log)?;
            let mut replica = Replica {
                identity,
                process: Some(process),
                recorder,
                log,
            };
            replica.published_all(launch).await?;
            replicas.push(replica);
        }
        Ok(Fleet { replicas })
    }

    /// A scrape of each replica; `None` for one that was killed.
    pub async fn scrape(&self) -> anyhow::Result<Vec<Option<Scrape>>> {
        let mut scrapes = Vec::with_capacity(self.replicas.len());
        for replica in &self.replicas {
            scrapes.push(match &replica.process {
                Some(p) => Some(Scrape {
                    metrics: metrics(p).await?,
                    cpu_ms: p.cpu_ms()?,
                    rss_mib: p.rss_mib()?,
                    rss_peak_mib: p.rss_peak_mib()?,
                }),
                None => None,
            });
        }
        Ok(scrapes)
    }

    /// SIGKILLs replica `i`: no Lease release, no goodbye to the others.
    pub fn kill(&mut self, i: usize) {
        self.replicas[i].process = None; // killed (SIGKILL) and reaped on drop
    }

    /// Stops every replica; what they delivered and logged stays.
    pub fn stop(&mut self) {
        for replica in &mut self.replicas {
            replica.process = None;
        }
    }
}

/// `/metrics` of `process`, asked again while this process is out of descriptors (the farm
/// holds one per open probe connection, and a burst can take the last of them).
async fn metrics(process: &EngineProcess) -> anyhow::Result<String> {
    let mut tries = 0;
    loop {
        match process.metrics().await {
            Err(e) if tries < 100 && is_out_of_descriptors(&e) => {
                tries += 1;
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            other => return other,
        }
    }
}

fn is_out_of_descriptors(e: &anyhow::Error) -> bool {
    e.downcast_ref::<std::io::Error>()
        .is_some_and(|e| e.raw_os_error() == Some(24))
}

/// The ring's Lease duration: the production default.
pub const LEASE_DURATION: std::time::Duration = std::time::Duration::from_secs(15);

/// The `[ring]` table of replica `identity`: the ring's production timing (15 s Leases
/// renewed every 5 s) on loopback.
fn ring_table(
    identity: &str,
    replication: usize,
    secret: &Path,
    kubeconfig: &Path,
) -> anyhow::Result<String> {
    Ok(format!(
        "\n[ring]\nenabled = true\nname = \"loadtest\"\nnamespace = \"default\"\nidentity = \"{identity}\"\n\
         replication = {replication}\nlease_duration = \"{}s\"\nrenew_period = \"5s\"\nlisten = \"{}\"\nsecret_file = {:?}\nkubeconfig = {:?}\n",
        LEASE_DURATION.as_secs(),
        free_port()?,
        secret.display().to_string(),
        kubeconfig.display().to_string(),
    ))
}

/// A port of 127.0.0.1 free now (bound, then let go for the engine to take).
fn free_port() -> std::io::Result<SocketAddr> {
    std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()
}
