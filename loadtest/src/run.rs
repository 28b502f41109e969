//! One load-test run: farm up, engine up, faults on schedule, measurements.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use crate::engine_proc::{histogram, metric_sum, quantile_between, share_above, EngineProcess};
use crate::recorder::Recorder;
use crate::report::{quantile, KindDetection, Report};
use crate::scenario::{FaultKind, Scenario};
use crate::{endpoints_toml_at, Behaviour, Gateway, SharedFarm};
use anyhow::{bail, Context};
use clap::Parser;
use tokio::time::Instant;

/// Load test: N loopback gateways, the real engine, injected faults.
#[derive(Parser, Debug, Clone)]
#[command(name = "loadtest")]
pub struct Args {
    /// Gateways in the farm (each needs one file descriptor here).
    #[arg(long, default_value_t = 1000)]
    pub endpoints: usize,
    /// Check interval.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub interval: Duration,
    /// Measured window (after start-up and a 2 s warm-up).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Fault scenario (TOML, see loadtest/scenarios/).
    #[arg(long)]
    pub scenario: Option<PathBuf>,
    /// Write the report as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write the plots as SVG here.
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// The engine binary (default: health-orchestrator next to this binary).
    #[arg(long)]
    pub engine: Option<PathBuf>,
    /// Consecutive failures to turn down.
    #[arg(long, default_value_t = 2)]
    pub fall: u32,
    /// Consecutive successes to turn up.
    #[arg(long, default_value_t = 1)]
    pub rise: u32,
    /// Endpoints per tenant (tenant k publishes `tK.load.test`); 0 puts every endpoint in
    /// one tenant. Large farms are many tenants in practice, and one huge record set per
    /// change measures the webhook payload, not the engine.
    #[arg(long, default_value_t = 0)]
    pub tenant_size: usize,
    /// Threads of the harness (farm, recorder, fault injection); its CPU is not counted, but
    /// it shares the machine with the engine: on 2 cores, 2 harness threads starve the engine
    /// (measured: 21,058 false transitions at 10,000 endpoints in one tenant; 0 with 1).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Serve every gateway from one listener on 0.0.0.0 (loopback peers only) instead of
    /// one listener each: for farms beyond the open-file limit. Refusals become resets.
    /// Chosen automatically when the limit is too low for one listener each.
    #[arg(long)]
    pub shared_listener: bool,
}

/// The gateways of a run.
enum Farm {
    /// One listener each.
    Separate(Vec<Gateway>),
    /// All behind one listener.
    Shared(SharedFarm),
}

impl Farm {
    fn start(count: usize, shared: bool) -> anyhow::Result<Farm> {
        if shared {
            return Ok(Farm::Shared(SharedFarm::start(address(0)?, count)?));
        }
        let mut gateways = Vec::with_capacity(count);
        for i in 0..count {
            let addr = SocketAddr::new(IpAddr::V4(address(i)?), 0);
            gateways.push(
                Gateway::start(addr, Behaviour::Healthy)
                    .with_context(|| format!("starting gateway {addr}"))?,
            );
        }
        Ok(Farm::Separate(gateways))
    }

    fn addrs(&self) -> Vec<SocketAddr> {
        match self {
            Farm::Separate(g) => g.iter().map(Gateway::addr).collect(),
            Farm::Shared(f) => (0..f.len()).map(|i| f.addr(i)).collect(),
        }
    }

    fn set(&mut self, i: usize, behaviour: &Behaviour) -> std::io::Result<()> {
        match self {
            Farm::Separate(g) => g[i].set(behaviour.clone()),
            Farm::Shared(f) => {
                f.set(i, behaviour);
                Ok(())
            }
        }
    }
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| e.to_string())
}

/// Gateway `i`'s address: 127.16.0.1 + i, inside 127.16.0.0/12.
fn address(i: usize) -> anyhow::Result<Ipv4Addr> {
    let ip = u32::from(Ipv4Addr::new(127, 16, 0, 1)) + u32::try_from(i)?;
    anyhow::ensure!(
        ip < u32::from(Ipv4Addr::new(127, 32, 0, 0)),
        "too many endpoints for 127.16.0.0/12"
    );
    Ok(Ipv4Addr::from(ip))
}

/// Every endpoint index once, consecutive positions far apart: `i * stride mod n` with a
/// stride coprime to `n`.
fn spread_order(n: usize) -> Vec<usize> {
    let gcd = |mut a: usize, mut b: usize| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let mut stride = 7919;
    while n > 1 && gcd(stride, n) != 1 {
        stride += 2;
    }
    (0..n).map(|i| (i * stride) % n.max(1)).collect()
}

/// The soft limit on open files, from /proc (no unsafe call needed).
fn open_file_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

fn engine_config(
    args: &Args,
    gateways: &[SocketAddr],
    api: SocketAddr,
    hook: SocketAddr,
    secret: &std::path::Path,
) -> String {
    let interval_ms = args.interval.as_millis() as u64;
    let timeout_ms = (interval_ms / 2).clamp(1, 1000);
    let fast_ms = (interval_ms / 10).clamp(1, 100);
    let mut text = format!(
        "[api]\nlisten = \"{api}\"\n\n[defaults]\nstartup_grace = \"{}ms\"\n\n[defaults.check]\nkind = \"http\"\npath = \"/healthz\"\ninterval = \"{interval_ms}ms\"\ntimeout = \"{timeout_ms}ms\"\nfast_interval = \"{fast_ms}ms\"\nrise = {}\nfall = {}\n\n",
        interval_ms * 5,
        args.rise,
        args.fall
    );
    text.push_str(&endpoints_toml_at(gateways.iter().copied(), |i| {
        format!("e{i}")
    }));
    text.push('\n');
    let size = if args.tenant_size == 0 {
        gateways.len().max(1)
    } else {
        args.tenant_size
    };
    for (k, start) in (0..gateways.len()).step_by(size).enumerate() {
        let names: Vec<String> = (start..(start + size).min(gateways.len()))
            .map(|i| format!("\"e{i}\""))
            .collect();
        text.push_str(&format!(
            "[[tenants]]\nname = \"t{k}\"\ndomains = [\"t{k}.load.test\"]\nendpoints = [{}]\nsinks = [\"recorder\"]\n\n",
            names.join(", ")
        ));
    }
    text.push_str(&format!(
        "[sinks.recorder]\nkind = \"webhook\"\nurl = \"http://{hook}/\"\nsecret_file = {:?}\n# Measure detection, not the rate limit: the recorder takes any rate.\ndelivery = {{ max_writes_per_second = 100000, burst = 10000 }}\n",
        secret.display().to_string()
    ));
    text
}

/// Runs one load test and returns its report.
pub async fn run(args: Args) -> anyhow::Result<Report> {
    let scenario = match &args.scenario {
        Some(path) => Scenario::load(path)?,
        None => Scenario::default(),
    };
    let mut shared = args.shared_listener;
    if let Some(limit) = open_file_limit() {
        if !shared && limit < args.endpoints + 256 {
            eprintln!("loadtest: {} endpoints need about {} open files with one listener each; the limit is {limit}: serving them all from one listener (--shared-listener)", args.endpoints, args.endpoints + 256);
            shared = true;
        }
    }
    let engine_bin = match &args.engine {
        Some(p) => p.clone(),
        None => std::env::current_exe()?.with_file_name("health-orchestrator"),
    };
    let work = tempfile::tempdir()?;
    let recorder = Recorder::default();
    let hook = recorder.start().await?;
    let mut farm = Farm::start(args.endpoints, shared)?;
    let api = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0")?;
        probe.local_addr()?
    };
    let secret = work.path().join("secret");
    std::fs::write(&secret, "loadtest")?;
    let config = work.path().join("engine.toml");
    std::fs::write(
        &config,
        engine_config(&args, &farm.addrs(), api, hook, &secret),
    )?;
    let mut engine =
        EngineProcess::spawn(&engine_bin, &config, api, &work.path().join("engine.log"))?;

    eprintln!(
        "loadtest: {} gateways up, waiting for the engine to publish all of them",
        args.endpoints
    );
    let start = Instant::now();
    let ready_limit = Duration::from_secs(30) + args.interval * 5;
    while recorder.published() < args.endpoints {
        if !engine.alive() {
            bail!(
                "the engine exited; see its log: {}",
                std::fs::read_to_string(work.path().join("engine.log")).unwrap_or_default()
            );
        }
        anyhow::ensure!(
            start.elapsed() < ready_limit,
            "the engine published {} of {} endpoints within {ready_limit:?}",
            recorder.published(),
            args.endpoints
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!(
        "loadtest: all published after {:.1} s; warming up",
        start.elapsed().as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;

    // Faults take disjoint groups of endpoints, spread over the farm (and so over the
    // tenants): contiguous groups would take whole tenants down, whose fail-open publish of
    // every endpoint is correct but hides the detection being measured.
    let order = spread_order(args.endpoints);
    let mut plan = Vec::new();
    let mut next = args.endpoints;
    for fault in &scenario.faults {
        let count = ((fault.share * args.endpoints as f64).round() as usize).min(next);
        plan.push((fault.clone(), next - count..next));
        next -= count;
    }
    let mut faulted = vec![false; args.endpoints];
    for &i in &order[next..] {
        faulted[i] = true;
    }

    let metrics_before = engine.metrics().await?;
    let cpu_before = engine.cpu_ms()?;
    let window = Instant::now();
    let mut down_since: Vec<Option<Instant>> = vec![None; args.endpoints];
    let mut kind_of: Vec<Option<FaultKind>> = vec![None; args.endpoints];
    let mut series = Vec::new();
    let mut last_probes = metric_sum(&metrics_before, "health_orchestrator_probes_total");
    let mut next_sample = window + Duration::from_secs(1);
    let mut state: Vec<Option<bool>> = vec![None; plan.len()]; // Some(down?) while active
    while window.elapsed() < args.duration {
        let t = window.elapsed();
        for (fi, (fault, range)) in plan.iter().enumerate() {
            let active = t >= fault.at && t < fault.at + fault.duration;
            let down = active
                && match (fault.kind, fault.period) {
                    (FaultKind::Flap, Some(period)) => ((t - fault.at).as_nanos()
                        / (period.as_nanos() / 2).max(1))
                    .is_multiple_of(2),
                    _ => true,
                };
            let want = active.then_some(down);
            if state[fi] != want {
                let behaviour = if down {
                    fault.behaviour()
                } else {
                    Behaviour::Healthy
                };
                for &i in &order[range.clone()] {
                    farm.set(i, &behaviour)?;
                    if down && fault.kind != FaultKind::Flap && down_since[i].is_none() {
                        down_since[i] = Some(Instant::now());
                        kind_of[i] = Some(fault.kind);
                    }
                }
                state[fi] = want;
            }
        }
        if Instant::now() >= next_sample {
            let probes = metric_sum(&engine.metrics().await?, "health_orchestrator_probes_total");
            series.push(probes - last_probes);
            last_probes = probes;
            next_sample += Duration::from_secs(1);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let elapsed = window.elapsed().as_secs_f64();
    let cpu_ms = engine.cpu_ms()? - cpu_before;
    let metrics_after = engine.metrics().await?;
    let rss_peak_mib = engine.rss_peak_mib()?;
    // Let the last detections arrive before counting them.
    tokio::time::sleep(args.interval * 2).await;
    drop(engine);

    let probes_done = (metric_sum(&metrics_after, "health_orchestrator_probes_total")
        - metric_sum(&metrics_before, "health_orchestrator_probes_total"))
        as u64;
    let delay = "health_orchestrator_probe_start_delay_seconds";
    let (delay_before, delay_after) = (
        histogram(&metrics_before, delay),
        histogram(&metrics_after, delay),
    );
    let late_p99 = quantile_between(&delay_before, &delay_after, 0.99).map(|s| s * 1000.0);
    let late_over_5ms_pct =
        share_above(&delay_before, &delay_after, 0.005).map(|share| share * 100.0);
    let seen = recorder.seen();
    let detections: Vec<(FaultKind, f64)> = down_since
        .iter()
        .enumerate()
        .filter_map(|(i, since)| {
            let since = (*since)?;
            let ip = IpAddr::V4(address(i).ok()?);
            let left = seen
                .iter()
                .find(|s| s.address == ip && !s.published && s.at >= since)?;
            Some((kind_of[i]?, (left.at - since).as_secs_f64() * 1000.0))
        })
        .collect();
    let sorted = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v
    };
    let detect_ms = sorted(detections.iter().map(|d| d.1).collect());
    let mut detect_by_kind = BTreeMap::new();
    for kind in [
        FaultKind::Refuse,
        FaultKind::Status,
        FaultKind::Reset,
        FaultKind::Hang,
    ] {
        let times = sorted(
            detections
                .iter()
                .filter(|d| d.0 == kind)
                .map(|d| d.1)
                .collect(),
        );
        if !times.is_empty() {
            detect_by_kind.insert(
                format!("{kind:?}").to_lowercase(),
                KindDetection::of(&times),
            );
        }
    }
    let faulted_ips: std::collections::HashSet<IpAddr> = (0..args.endpoints)
        .filter(|&i| faulted[i])
        .filter_map(|i| address(i).ok().map(IpAddr::V4))
        .collect();
    let false_transitions = seen
        .iter()
        .filter(|s| s.at >= window && !faulted_ips.contains(&s.address))
        .count();
    let report = Report {
        endpoints: args.endpoints,
        shared_listener: shared,
        interval_ms: args.interval.as_millis() as u64,
        duration_s: elapsed,
        probes_scheduled: (args.endpoints as f64 * elapsed / args.interval.as_secs_f64()) as u64,
        probes_done,
        probes_per_sec: probes_done as f64 / elapsed,
        late_probe_p99_ms: late_p99,
        late_over_5ms_pct,
        cpu_ms_per_1k_probes: cpu_ms as f64 * 1000.0 / (probes_done.max(1) as f64),
        rss_peak_mib,
        faulted: down_since.iter().filter(|s| s.is_some()).count(),
        detected: detect_ms.len(),
        detect_p50_ms: quantile(&detect_ms, 0.5),
        detect_p99_ms: quantile(&detect_ms, 0.99),
        detect_by_kind,
        false_transitions,
        probes_per_sec_series: series,
        detect_ms,
    };
    Ok(report)
}
