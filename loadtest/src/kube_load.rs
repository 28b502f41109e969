//! `kubeload`: the orchestrator's Kubernetes side under load. The Kubernetes API test
//! server (`ho_testkit::kube_api`) runs in this process, the real binary as its own, its
//! embedded DNS server answering the names. Two measurements:
//!
//! - **apply -> answer**: a `DNSFailover` is created and its name queried over UDP every
//!   millisecond until the answer carries its address (`trials` times, one new resource
//!   each, on a running orchestrator);
//! - **scale**: `resources` resources of `addresses` static addresses each exist before the
//!   orchestrator starts: time until every name answers, then (after 5 s for statuses to
//!   follow) a steady period counting the
//!   API requests it sends (watches only: a list happens only when a watch ends) and the
//!   status writes, with its memory and CPU.
//!
//! Every address is on loopback (the gateways of a `SharedFarm` in 127.16.0.0/12).

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use ho_testkit::kube_api::{KubeApi, TOKEN};
use ho_testkit::SharedFarm;
use serde::Serialize;
use serde_json::json;

use crate::engine_proc::EngineProcess;

/// What to run.
#[derive(clap::Parser, Debug, Clone)]
pub struct Args {
    /// The orchestrator binary.
    #[arg(long, default_value = "target/dist/health-orchestrator")]
    pub bin: PathBuf,
    /// Resources present at start.
    #[arg(long, default_value_t = 1000)]
    pub resources: usize,
    /// Static addresses per resource.
    #[arg(long, default_value_t = 10)]
    pub addresses: usize,
    /// apply -> answer trials.
    #[arg(long, default_value_t = 20)]
    pub trials: usize,
    /// The steady period after every name answers.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub steady: Duration,
    /// Write the report as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Keep the orchestrator's config and log in this folder (default: a temporary one).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Log filter of the orchestrator (`RUST_LOG`).
    #[arg(long, default_value = "warn")]
    pub log: String,
}

/// The figures.
#[derive(Debug, Serialize)]
pub struct Report {
    /// apply -> answer, milliseconds, each trial.
    pub apply_to_answer_ms: Vec<f64>,
    /// Their median and 99th percentile (the largest of 20).
    pub apply_to_answer_p50_ms: f64,
    /// 99th percentile.
    pub apply_to_answer_p99_ms: f64,
    /// Resources and endpoints at start.
    pub resources: usize,
    /// Endpoints in all.
    pub endpoints: usize,
    /// Start -> every name answers, seconds.
    pub first_publish_s: f64,
    /// API requests per second in the steady period (status writes included).
    pub api_requests_per_s: f64,
    /// Of which status writes per second.
    pub status_writes_per_s: f64,
    /// Lists in the steady period (0: watches only).
    pub steady_lists: usize,
    /// The steady period's requests other than status writes, by method and path.
    pub steady_other: std::collections::BTreeMap<String, usize>,
    /// Resident memory at the end, MiB.
    pub rss_mib: f64,
    /// CPU in the steady period, share of one core.
    pub steady_cpu_share: f64,
}

/// From every name answering to the start of the steady period.
const SETTLE: Duration = Duration::from_secs(5);

const PROBE: &str = "[defaults.check]\nkind = \"http\"\npath = \"/healthz\"\ninterval = \"1s\"\ntimeout = \"500ms\"\nrise = 1\nfall = 2\n";

/// Runs both measurements.
pub async fn run(args: Args) -> anyhow::Result<Report> {
    let endpoints = args.resources * args.addresses;
    let farm = SharedFarm::start(Ipv4Addr::new(127, 16, 0, 1), endpoints.max(1) + args.trials)?;
    let kube = KubeApi::default();
    let kube_addr = kube.start().await;
    let temp = tempfile::tempdir()?;
    let dir = args.dir.clone().unwrap_or_else(|| temp.path().to_owned());
    std::fs::create_dir_all(&dir)?;
    let dns = free_udp()?;
    let api = SocketAddr::from(([127, 0, 0, 1], free_tcp()?));
    let config = dir.join("config.toml");
    std::fs::write(dir.join("kubeconfig"), kubeconfig(kube_addr))?;
    std::fs::write(
        &config,
        format!(
            "[api]\nlisten = \"{api}\"\nmax_requests_per_second = 1000.0\n\n{PROBE}port = {}\n\n\
             [sinks.dns]\nkind = \"dns_server\"\nlisten = [\"{dns}\"]\nzones = [\"load.test\"]\n\n\
             [kubernetes]\ntenants = true\nkubeconfig = {:?}\n\n\
             [[kubernetes.allow]]\nnamespace = \"load\"\ndomains = [\"load.test\"]\nsinks = [\"dns\"]\n",
            farm.addr(0).port(),
            dir.join("kubeconfig").display().to_string()
        ),
    )?;
    for r in 0..args.resources {
        let addresses: Vec<String> = (0..args.addresses)
            .map(|a| farm.addr(r * args.addresses + a).ip().to_string())
            .collect();
        kube.apply(resource(&format!("t{r}"), &addresses));
    }
    let started = Instant::now();
    let engine =
        EngineProcess::spawn_with_log(&args.bin, &config, api, &dir.join("log"), &args.log)?;
    let names: Vec<String> = (0..args.resources)
        .map(|r| format!("t{r}.load.test"))
        .collect();
    wait_all_answer(dns, &names, Duration::from_secs(300)).await?;
    let first_publish_s = started.elapsed().as_secs_f64();

    // Statuses follow the first writes within a second or two: the steady period starts
    // once they have.
    tokio::time::sleep(SETTLE).await;
    let before = kube.requests_with_tokens().len();
    let cpu_before = engine.cpu_ms()?;
    tokio::time::sleep(args.steady).await;
    let steady: Vec<String> = kube.requests_with_tokens()[before..]
        .iter()
        .filter(|(_, token)| token == TOKEN)
        .map(|(r, _)| r.clone())
        .collect();
    let cpu = (engine.cpu_ms()? - cpu_before) as f64 / 1000.0;
    let secs = args.steady.as_secs_f64();
    let status_writes = steady.iter().filter(|r| r.contains("/status")).count();
    let steady_lists = steady
        .iter()
        .filter(|r| r.starts_with("GET") && !r.contains("watch"))
        .count();

    let mut steady_other = std::collections::BTreeMap::new();
    for r in steady.iter().filter(|r| !r.contains("/status")) {
        *steady_other.entry(r.clone()).or_insert(0) += 1;
    }
    let mut trials = Vec::new();
    for t in 0..args.trials {
        let address = farm.addr(endpoints + t).ip().to_string();
        let name = format!("new{t}.load.test");
        let at = Instant::now();
        kube.apply(resource(&format!("new{t}"), &[address]));
        wait_all_answer(dns, &[name], Duration::from_secs(30)).await?;
        trials.push(at.elapsed().as_secs_f64() * 1000.0);
    }
    let mut sorted = trials.clone();
    sorted.sort_by(f64::total_cmp);
    let quantile = |q: f64| sorted[((sorted.len() as f64 - 1.0) * q).round() as usize];
    Ok(Report {
        apply_to_answer_p50_ms: quantile(0.5),
        apply_to_answer_p99_ms: quantile(0.99),
        apply_to_answer_ms: trials,
        resources: args.resources,
        endpoints,
        first_publish_s,
        api_requests_per_s: steady.len() as f64 / secs,
        status_writes_per_s: status_writes as f64 / secs,
        steady_lists,
        steady_other,
        rss_mib: engine.rss_mib()?,
        steady_cpu_share: cpu / secs,
    })
}

fn resource(name: &str, addresses: &[String]) -> serde_json::Value {
    json!({
        "apiVersion": "healthorchestrator.io/v1alpha1", "kind": "DNSFailover",
        "metadata": {"name": name, "namespace": "load"},
        "spec": {"domains": [format!("{name}.load.test")], "sinks": ["dns"], "ttl": "5s",
                 "endpoints": [{"addresses": addresses}]},
    })
}

fn kubeconfig(addr: SocketAddr) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: http://{addr}\n\
         users:\n- name: t\n  user:\n    token: {TOKEN}\ncontexts:\n- name: t\n  context:\n    cluster: t\n    user: t\n\
         current-context: t\n"
    )
}

fn free_udp() -> anyhow::Result<SocketAddr> {
    Ok(UdpSocket::bind("127.0.0.1:0")?.local_addr()?)
}

fn free_tcp() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Queries every name (type A) until each answers with at least one address.
async fn wait_all_answer(dns: SocketAddr, names: &[String], limit: Duration) -> anyhow::Result<()> {
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await?;
    let started = Instant::now();
    let mut pending: Vec<&String> = names.iter().collect();
    let mut buf = [0u8; 1500];
    while !pending.is_empty() {
        anyhow::ensure!(
            started.elapsed() < limit,
            "{} names still unanswered after {limit:?}",
            pending.len()
        );
        let mut still = Vec::new();
        for name in pending {
            socket.send_to(&query(name), dns).await?;
            let answered = match tokio::time::timeout(
                Duration::from_millis(50),
                socket.recv(&mut buf),
            )
            .await
            {
                Ok(Ok(n)) => {
                    n >= 12 && buf[3] & 0x0f == 0 && u16::from_be_bytes([buf[6], buf[7]]) > 0
                }
                _ => false,
            };
            if !answered {
                still.push(name);
            }
        }
        pending = still;
        if !pending.is_empty() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    Ok(())
}

/// A DNS query for `name` A, without recursion.
fn query(name: &str) -> Vec<u8> {
    let mut q = vec![0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
    for label in name.split('.') {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    q
}

/// Prints the report as a table.
pub fn table(r: &Report) -> String {
    format!(
        "apply -> answer: p50 {:.1} ms, p99 {:.1} ms ({} trials)\n\
         {} resources, {} endpoints: every name answers {:.2} s after start\n\
         steady: {:.2} API requests/s ({:.2} status writes/s, {} lists), CPU {:.1} % of a core, RSS {:.1} MiB\n",
        r.apply_to_answer_p50_ms,
        r.apply_to_answer_p99_ms,
        r.apply_to_answer_ms.len(),
        r.resources,
        r.endpoints,
        r.first_publish_s,
        r.api_requests_per_s,
        r.status_writes_per_s,
        r.steady_lists,
        r.steady_cpu_share * 100.0,
        r.rss_mib
    )
}
