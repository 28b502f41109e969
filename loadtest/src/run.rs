//! One load-test run: farm up, engine up, faults on schedule, measurements.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::farm::Farm;
use crate::fleet::{Fleet, Launch};
use crate::rehearsal::{recorder_sink, Timing, UserConfig, RECORDER};
use crate::report::Report;
use crate::scenario::Scenario;
use crate::window::{observe, FaultPlan, Schedule};
use clap::Parser;
use ho_testkit::endpoints_toml_at;
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
    /// Engine processes. More than one form a ring (`[ring]`) that shares the probing
    /// through Leases on the Kubernetes API test server; the farm is then served from one
    /// listener, which keeps each gateway's probe count and gaps.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    pub replicas: u16,
    /// Owners per target in a ring.
    #[arg(long, default_value_t = 2)]
    pub replication: usize,
    /// SIGKILL the last replica this far into the window (with `--replicas` 2 or more).
    #[arg(long, value_parser = parse_duration)]
    pub kill_at: Option<Duration>,
    /// Keep the engines' configs and logs in this directory (default: a temporary one,
    /// removed at the end).
    #[arg(long)]
    pub keep: Option<PathBuf>,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| e.to_string())
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
    anyhow::ensure!(
        args.kill_at.is_none() || args.replicas > 1,
        "--kill-at needs --replicas 2 or more"
    );
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
    let mut farm = Farm::start(endpoints, shared_listener(&args, endpoints))?;
    let engine_bin = match &args.engine {
        Some(p) => p.clone(),
        None => std::env::current_exe()?.with_file_name("health-orchestrator"),
    };
    let temporary;
    let work = match &args.keep {
        Some(dir) => {
            std::fs::create_dir_all(dir)?;
            dir.clone()
        }
        None => {
            temporary = tempfile::tempdir()?;
            temporary.path().to_owned()
        }
    };
    let secret = work.join("secret");
    std::fs::write(&secret, "loadtest")?;
    let addrs = farm.addrs();
    let mut notes = Vec::new();
    let launch = Launch {
        bin: &engine_bin,
        dir: &work,
        replicas: usize::from(args.replicas),
        replication: args.replication,
        endpoints,
        ready_within: Duration::from_secs(30) + slowest * 5,
    };
    eprintln!("loadtest: {endpoints} gateways up; starting the engine and waiting for it to publish all of them");
    let mut fleet = Fleet::start(&launch, |api, hook| match &user {
        Some(u) => {
            let (text, n) = u.for_farm(&addrs, api, hook, &secret)?;
            notes = n;
            Ok(text)
        }
        None => Ok(engine_config(&args, &addrs, api, hook, &secret)),
    })
    .await?;

    // A ring's later joins moved targets: the old owners probe on for the grace (the Lease
    // duration, or the interval when longer).
    let warm_up = if args.replicas > 1 {
        crate::fleet::LEASE_DURATION.max(slowest) + Duration::from_secs(2)
    } else {
        Duration::from_secs(2)
    };
    eprintln!("loadtest: warming up for {warm_up:?}");
    tokio::time::sleep(warm_up).await;

    let plan = FaultPlan::new(&scenario, endpoints);
    let schedule = Schedule {
        duration: args.duration,
        interval: slowest,
        kill_at: args.kill_at,
    };
    let observed = observe(&schedule, &mut fleet, &mut farm, &plan).await?;
    // Let the last detections and sink writes arrive before counting them (none to wait
    // for without faults).
    if !scenario.faults.is_empty() {
        tokio::time::sleep(slowest * 2).await;
    }
    let tail = fleet.scrape().await?;
    let gaps = farm.gaps(slowest + slowest / 10);
    let visits_at_end = farm.visits().map(|v| (Instant::now(), v));
    fleet.stop();
    crate::summary::Summary {
        endpoints,
        shared_listener: farm.shared().is_some(),
        slowest,
        timings: &timings,
        tenant_sinks: user
            .as_ref()
            .map(|u| u.tenant_sinks.clone())
            .unwrap_or_default(),
        notes,
        replication: if args.replicas > 1 {
            args.replication
        } else {
            1
        },
        gaps,
        visits_at_end,
    }
    .report(&fleet, &plan, observed, &tail)
}

/// Whether to serve every gateway from one listener: asked for, needed for a ring's gap
/// and owner counts, or forced by the open-file limit.
fn shared_listener(args: &Args, endpoints: usize) -> bool {
    if args.shared_listener || args.replicas > 1 {
        return true;
    }
    match open_file_limit() {
        Some(limit) if limit < endpoints + 256 => {
            eprintln!("loadtest: {endpoints} endpoints need about {} open files with one listener each; the limit is {limit}: serving them all from one listener (--shared-listener)", endpoints + 256);
            true
        }
        _ => false,
    }
}
