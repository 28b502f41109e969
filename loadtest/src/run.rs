//! One load-test run: farm up, engine up, faults on schedule, measurements.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use crate::engine_proc::{histogram, metric_sum, quantile_between, share_above, EngineProcess};
use crate::recorder::Recorder;
use crate::rehearsal::{recorder_sink, Timing, UserConfig, RECORDER};
use crate::report::{quantile, KindDetection, Report, Sample, Series};
use crate::scenario::{FaultKind, Scenario};
use crate::{per_sink, sink_log};
use anyhow::{bail, Context};
use clap::Parser;
use ho_testkit::{endpoints_toml_at, Behaviour, Gateway, SharedFarm};
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
    /// Rehearse this configuration: its tenants, policies, sinks and check timing, with
    /// endpoint i probed at farm gateway i (see `rehearsal`). The farm has as many
    /// gateways as the config has endpoints. Pass the fully layered config as one file.
    #[arg(long, conflicts_with_all = ["endpoints", "interval", "fall", "rise", "tenant_size"])]
    pub config: Option<PathBuf>,
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

/// The synthetic run's check: `--interval`, `--fall`, `--rise`, with a timeout of half the
/// interval (at most 1 s) and re-checks at a tenth of it (at most 100 ms).
fn synthetic_timing(args: &Args) -> Timing {
    let interval_ms = args.interval.as_millis() as u64;
    Timing {
        interval: args.interval,
        timeout: Duration::from_millis((interval_ms / 2).clamp(1, 1000)),
        fast_interval: Duration::from_millis((interval_ms / 10).clamp(1, 100)),
        fall: args.fall,
    }
}

fn engine_config(
    args: &Args,
    gateways: &[SocketAddr],
    api: SocketAddr,
    hook: SocketAddr,
    secret: &std::path::Path,
) -> String {
    let t = synthetic_timing(args);
    let ms = |d: Duration| d.as_millis();
    let mut text = format!(
        "[api]\nlisten = \"{api}\"\n\n[telemetry]\nlog_format = \"json\"\n\n[defaults]\nstartup_grace = \"{}ms\"\n\n[defaults.check]\nkind = \"http\"\npath = \"/healthz\"\ninterval = \"{}ms\"\ntimeout = \"{}ms\"\nfast_interval = \"{}ms\"\nrise = {}\nfall = {}\n\n",
        ms(t.interval) * 5,
        ms(t.interval),
        ms(t.timeout),
        ms(t.fast_interval),
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
            "[[tenants]]\nname = \"t{k}\"\ndomains = [\"t{k}.load.test\"]\nendpoints = [{}]\nsinks = [\"{RECORDER}\"]\n\n",
            names.join(", ")
        ));
    }
    text.push_str(&format!(
        "[sinks.{RECORDER}]\n{}",
        recorder_sink(hook, secret)
    ));
    text
}

/// Runs one load test and returns its report.
pub async fn run(args: Args) -> anyhow::Result<Report> {
    let scenario = match &args.scenario {
        Some(path) => Scenario::load(path)?,
        None => Scenario::default(),
    };
    let user = args.config.as_deref().map(UserConfig::read).transpose()?;
    let endpoints = user.as_ref().map_or(args.endpoints, |u| u.endpoints);
    let timings = match &user {
        Some(u) => u.timings.clone(),
        None => vec![synthetic_timing(&args); endpoints],
    };
    let slowest = timings
        .iter()
        .map(|t| t.interval)
        .max()
        .unwrap_or(args.interval);
    let mut shared = args.shared_listener;
    if let Some(limit) = open_file_limit() {
        if !shared && limit < endpoints + 256 {
            eprintln!("loadtest: {endpoints} endpoints need about {} open files with one listener each; the limit is {limit}: serving them all from one listener (--shared-listener)", endpoints + 256);
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
    let mut farm = Farm::start(endpoints, shared)?;
    let api = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0")?;
        probe.local_addr()?
    };
    let secret = work.path().join("secret");
    std::fs::write(&secret, "loadtest")?;
    let (config_text, notes) = match &user {
        Some(u) => u.for_farm(&farm.addrs(), api, hook, &secret)?,
        None => (
            engine_config(&args, &farm.addrs(), api, hook, &secret),
            Vec::new(),
        ),
    };
    let tenant_sinks = match &user {
        Some(u) => u.tenant_sinks.clone(),
        None => BTreeMap::new(),
    };
    let config = work.path().join("engine.toml");
    std::fs::write(&config, config_text)?;
    let log = work.path().join("engine.log");
    let mut engine = EngineProcess::spawn(&engine_bin, &config, api, &log)?;

    eprintln!("loadtest: {endpoints} gateways up, waiting for the engine to publish all of them");
    let start = Instant::now();
    let ready_limit = Duration::from_secs(30) + slowest * 5;
    while recorder.published() < endpoints {
        if !engine.alive() {
            bail!(
                "the engine exited; see its log: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        anyhow::ensure!(
            start.elapsed() < ready_limit,
            "the engine published {} of {endpoints} endpoints within {ready_limit:?}",
            recorder.published(),
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
    let order = spread_order(endpoints);
    let mut plan = Vec::new();
    let mut next = endpoints;
    for fault in &scenario.faults {
        let count = ((fault.share * endpoints as f64).round() as usize).min(next);
        plan.push((fault.clone(), next - count..next));
        next -= count;
    }
    let mut faulted = vec![false; endpoints];
    for &i in &order[next..] {
        faulted[i] = true;
    }

    let metrics_before = engine.metrics().await?;
    let cpu_before = engine.cpu_ms()?;
    let window = Instant::now();
    let window_wall = SystemTime::now();
    let mut down_since: Vec<Option<(Instant, SystemTime)>> = vec![None; endpoints];
    let mut kind_of: Vec<Option<FaultKind>> = vec![None; endpoints];
    let mut series = Series::default();
    let mut last = Sample {
        metrics: metrics_before.clone(),
        cpu_ms: cpu_before,
        at: window,
    };
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
                        down_since[i] = Some((Instant::now(), SystemTime::now()));
                        kind_of[i] = Some(fault.kind);
                    }
                }
                state[fi] = want;
            }
        }
        if Instant::now() >= next_sample {
            let now = Sample {
                metrics: engine.metrics().await?,
                cpu_ms: engine.cpu_ms()?,
                at: Instant::now(),
            };
            series.sample(&last, &now, engine.rss_mib()?);
            last = now;
            next_sample += Duration::from_secs(1);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let elapsed = window.elapsed().as_secs_f64();
    let cpu_ms = engine.cpu_ms()? - cpu_before;
    let metrics_after = engine.metrics().await?;
    let rss_peak_mib = engine.rss_peak_mib()?;
    // Let the last detections and sink writes arrive before counting them.
    tokio::time::sleep(slowest * 2).await;
    let metrics_end = engine.metrics().await?;
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
    let ip_of = |i: usize| address(i).ok().map(IpAddr::V4);
    let detections: Vec<(FaultKind, f64)> = down_since
        .iter()
        .enumerate()
        .filter_map(|(i, since)| {
            let (since, _) = (*since)?;
            let ip = ip_of(i)?;
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
    let faulted_ips: std::collections::HashSet<IpAddr> = (0..endpoints)
        .filter(|&i| faulted[i])
        .filter_map(ip_of)
        .collect();
    let false_transitions = seen
        .iter()
        .filter(|s| s.at >= window && !faulted_ips.contains(&s.address))
        .count();
    let faults: Vec<(IpAddr, SystemTime)> = down_since
        .iter()
        .enumerate()
        .filter_map(|(i, since)| Some((ip_of(i)?, since.as_ref()?.1)))
        .collect();
    let activity = sink_log::read(&std::fs::read_to_string(&log)?, window_wall);
    let sinks = per_sink::report(&activity, &tenant_sinks, &seen, &faults, &metrics_end);
    let probes_per_second: f64 = timings.iter().map(|t| 1.0 / t.interval.as_secs_f64()).sum();
    let report = Report {
        endpoints,
        shared_listener: shared,
        interval_ms: slowest.as_millis() as u64,
        duration_s: elapsed,
        probes_scheduled: (probes_per_second * elapsed) as u64,
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
        detect_bound_ms: timings
            .iter()
            .map(|t| t.detection_bound().as_secs_f64() * 1000.0)
            .fold(0.0, f64::max),
        detect_by_kind,
        false_transitions,
        sinks,
        notes,
        series,
        detect_ms,
    };
    Ok(report)
}
