//! `demo`: DNS failover on this machine with nothing installed and nothing configured.
//!
//! Three gateways on 127.0.0.11-13, the real engine probing them every 200 ms, the real
//! hosts_file sink and the real embedded DNS server (`dns_server` sink) on a free port of
//! 127.0.0.1. A script of faults runs against the gateways; for each, the demo prints the
//! time from the fault to the hosts file's change and to the DNS answer's change, and the
//! file itself.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use ho_engine::snapshot::PublishMode;
use ho_engine::Engine;
use ho_testkit::{endpoints_toml, Behaviour, Gateway};
use tokio::time::Instant;

/// Arguments of `demo`.
#[derive(clap::Args)]
pub struct DemoArgs {
    /// Folder for the config and the hosts file (default: the system temp folder).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Keep running after the script (gateways and API stay up) until Ctrl-C.
    #[arg(long)]
    keep_running: bool,
}

const TENANT: &str = "demo";
const WAIT_LIMIT: Duration = Duration::from_secs(10);

fn config_text(dir: &Path, gateways: &[Gateway], dns: SocketAddr) -> String {
    let mut text = String::from(
        r#"# Written by `health-orchestrator demo`.
[api]
listen = "127.0.0.1:0"

[defaults.check]
kind = "http"
path = "/healthz"
interval = "200ms"
timeout = "100ms"
fast_interval = "50ms"
rise = 2
fall = 2
"#,
    );
    text.push_str(&endpoints_toml(gateways, |i| format!("gateway-{}", i + 1)));
    text.push_str(&format!(
        "\n[[tenants]]\nname = \"{TENANT}\"\ndomains = [\"app.demo.test\", \"api.demo.test\"]\nsinks = [\"local\", \"dns\"]\nttl = \"5s\"\n\n[sinks.local]\nkind = \"hosts_file\"\ndir = {:?}\n\n[sinks.dns]\nkind = \"dns_server\"\nlisten = [\"{dns}\"]\nzones = [\"demo.test\"]\n",
        dir.display().to_string()
    ));
    text
}

/// Polls `file` every millisecond until `ready(content)` holds; returns the time it took.
async fn wait_for_file(
    file: &Path,
    what: &str,
    ready: impl Fn(&str) -> bool,
) -> anyhow::Result<Duration> {
    let start = Instant::now();
    loop {
        let content = std::fs::read_to_string(file).unwrap_or_default();
        if ready(&content) {
            return Ok(start.elapsed());
        }
        if start.elapsed() > WAIT_LIMIT {
            bail!("timed out after {WAIT_LIMIT:?} waiting for {what}; hosts file now:\n{content}");
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// A port of 127.0.0.1 free for both UDP and TCP, for the demo's DNS server.
fn free_dns_addr() -> anyhow::Result<SocketAddr> {
    for _ in 0..50 {
        let udp = std::net::UdpSocket::bind("127.0.0.1:0")?;
        let addr = udp.local_addr()?;
        if std::net::TcpListener::bind(addr).is_ok() {
            return Ok(addr);
        }
    }
    bail!("no port of 127.0.0.1 is free for both UDP and TCP")
}

/// The A records the server at `server` answers for `name` (empty until it answers).
async fn dns_answer(server: SocketAddr, name: &str) -> Vec<IpAddr> {
    use hickory_proto::op::{Message, Query};
    use hickory_proto::rr::{Name, RData, RecordType};
    let Ok(qname) = Name::from_ascii(name) else {
        return Vec::new();
    };
    let mut query = Message::query();
    query.add_query(Query::query(qname, RecordType::A));
    let (Ok(bytes), Ok(socket)) = (
        query.to_vec(),
        tokio::net::UdpSocket::bind("127.0.0.1:0").await,
    ) else {
        return Vec::new();
    };
    let mut buf = [0u8; 1500];
    let exchange = async {
        socket.send_to(&bytes, server).await.ok()?;
        let n = socket.recv(&mut buf).await.ok()?;
        Message::from_vec(&buf[..n]).ok()
    };
    let Ok(Some(answer)) = tokio::time::timeout(Duration::from_millis(200), exchange).await else {
        return Vec::new();
    };
    let mut ips: Vec<IpAddr> = answer
        .answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::A(a) => Some(IpAddr::V4(a.0)),
            _ => None,
        })
        .collect();
    ips.sort();
    ips
}

/// Polls the DNS server until its answer for `api.demo.test` is `want` (sorted).
async fn wait_for_answer(server: SocketAddr, want: &[IpAddr]) -> anyhow::Result<Duration> {
    let start = Instant::now();
    loop {
        let got = dns_answer(server, "api.demo.test.").await;
        if got == want {
            return Ok(start.elapsed());
        }
        if start.elapsed() > WAIT_LIMIT {
            bail!(
                "timed out after {WAIT_LIMIT:?} waiting for the DNS answer {want:?}; it is {got:?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

fn print_file(file: &Path) {
    let content = std::fs::read_to_string(file).unwrap_or_default();
    outln!("    {} :", file.display());
    for line in content.lines() {
        outln!("    | {line}");
    }
    if content.is_empty() {
        outln!("    | (empty)");
    }
}

fn has(content: &str, ip: IpAddr) -> bool {
    let ip = ip.to_string();
    content
        .lines()
        .any(|l| l.split_whitespace().next() == Some(ip.as_str()))
}

/// Runs the scripted demo.
pub fn demo(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let dir = args
        .dir
        .unwrap_or_else(|| std::env::temp_dir().join("health-orchestrator-demo"));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let file = dir.join(format!("{TENANT}.hosts"));
    let _ = std::fs::remove_file(&file);

    actix_rt::System::new().block_on(async move {
        let mut gateways = Vec::new();
        for i in 1..=3u8 {
            let addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 10 + i)), 0);
            gateways.push(Gateway::start(addr, Behaviour::Healthy).with_context(|| format!("starting gateway on {addr}"))?);
        }
        let dns = free_dns_addr()?;
        let config_file = dir.join("demo.toml");
        std::fs::write(&config_file, config_text(&dir, &gateways, dns))?;
        let plan = ho_kinds::load_plan(&[&config_file]).map_err(|e| anyhow::anyhow!("{e}"))?;
        let started = Instant::now();
        let engine = Engine::start(plan, ho_kinds::parts(ho_kinds::Sinks::default())).await?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let api_url = format!("http://{}", listener.local_addr()?);
        actix::spawn(ho_engine::api::serve(listener, engine.api_state(Default::default())));

        outln!("Health Orchestrator demo");
        outln!("  3 gateways: {}", gateways.iter().map(|g| g.addr().to_string()).collect::<Vec<_>>().join(", "));
        outln!("  probing every 200 ms (timeout 100 ms, fall 2, rise 2, re-check 50 ms while unsettled)");
        outln!("  config {}   API {api_url}/status", config_file.display());
        outln!("  DNS server (dns_server sink): dig @{} -p {} api.demo.test", dns.ip(), dns.port());
        outln!();

        let ips: Vec<IpAddr> = gateways.iter().map(|g| g.addr().ip()).collect();
        wait_for_file(&file, "all three gateways", |c| ips.iter().all(|ip| has(c, *ip))).await?;
        outln!("[{:>6} ms] first verdicts in: all three gateways published", started.elapsed().as_millis());
        print_file(&file);

        let mut sorted = ips.clone();
        sorted.sort();
        wait_for_answer(dns, &sorted).await?;
        outln!("    dig api.demo.test -> {}", join(&sorted));

        let mut rows = Vec::new();
        for (gateway, fault, name) in [(1usize, Behaviour::Refuse, "connection refused"), (2, Behaviour::Status(503), "HTTP 503")] {
            let ip = ips[gateway];
            let without: Vec<IpAddr> = sorted.iter().copied().filter(|a| *a != ip).collect();
            pause().await;
            outln!("\n>> gateway-{} goes down ({name})", gateway + 1);
            gateways[gateway].set(fault)?;
            let (file_took, dns_took) = tokio::try_join!(
                wait_for_file(&file, "the address to leave", |c| !has(c, ip) && !c.is_empty()),
                wait_for_answer(dns, &without)
            )?;
            outln!("[{:>6} ms] {ip} removed: hosts file after {:.0} ms, DNS answer after {:.0} ms", started.elapsed().as_millis(), ms(file_took), ms(dns_took));
            print_file(&file);
            outln!("    dig api.demo.test -> {}", join(&without));
            rows.push((format!("gateway-{} down ({name})", gateway + 1), file_took, dns_took));

            pause().await;
            outln!("\n>> gateway-{} comes back", gateway + 1);
            gateways[gateway].set(Behaviour::Healthy)?;
            let (file_took, dns_took) = tokio::try_join!(
                wait_for_file(&file, "the address to return", |c| has(c, ip)),
                wait_for_answer(dns, &sorted)
            )?;
            outln!("[{:>6} ms] {ip} back: hosts file after {:.0} ms, DNS answer after {:.0} ms", started.elapsed().as_millis(), ms(file_took), ms(dns_took));
            print_file(&file);
            rows.push((format!("gateway-{} back", gateway + 1), file_took, dns_took));
        }

        pause().await;
        outln!("\n>> every gateway hangs (accepts, never answers): fail-open keeps all addresses");
        for g in &mut gateways {
            g.set(Behaviour::Hang)?;
        }
        let t0 = Instant::now();
        loop {
            let status = engine.status().await.context("the engine stopped")?;
            let mode = status.tracker.tenants[0].published.as_ref().map(|p| p.mode);
            if mode == Some(PublishMode::FailOpenAllUnhealthy) {
                break;
            }
            if t0.elapsed() > WAIT_LIMIT {
                bail!("timed out waiting for the fail-open decision");
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // The decision is made; the sink writes it right after. Show the file once it does.
        let ips: Vec<IpAddr> = gateways.iter().map(|g| g.addr().ip()).collect();
        wait_for_file(&file, "the fail-open set", |c| ips.iter().all(|&ip| has(c, ip))).await?;
        outln!(
            "[{:>6} ms] all three down after {:.0} ms; on_all_unhealthy = \"publish_all\": the file still lists them all",
            started.elapsed().as_millis(),
            ms(t0.elapsed())
        );
        print_file(&file);
        for g in &mut gateways {
            g.set(Behaviour::Healthy)?;
        }

        outln!("\nSummary (fault or recovery -> hosts file changed / DNS answer changed):");
        for (what, file_took, dns_took) in &rows {
            outln!("  {what:<40} {:>6.0} ms / {:>6.0} ms", ms(*file_took), ms(*dns_took));
        }
        outln!("  expected detection bound: interval + (fall-1) x fast_interval + timeout = 200 + 50 + 100 = 350 ms");

        if args.keep_running {
            outln!("\nStill running: curl {api_url}/status  (Ctrl-C to stop)");
            tokio::signal::ctrl_c().await?;
        }
        drop(engine);
        Ok(ExitCode::SUCCESS)
    })
}

/// A pause between steps, so each fault lands at a different point of the probe schedule
/// and a reader can follow.
async fn pause() {
    tokio::time::sleep(Duration::from_millis(700 + fastrand::u64(0..600))).await;
}

fn join(ips: &[IpAddr]) -> String {
    ips.iter()
        .map(IpAddr::to_string)
        .collect::<Vec<_>>()
        .join(" ")
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
