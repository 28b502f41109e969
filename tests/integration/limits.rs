//! Resource bounds with `run` as its own process: under an open-file limit smaller than the
//! probes in flight would need, probes wait for a descriptor (counted, logged) instead of
//! failing with "too many open files" and withdrawing healthy endpoints from DNS.

use std::net::SocketAddr;
use std::time::Duration;

use ho_testkit::Behaviour;
use ho_testkit::SharedFarm;
use tokio::time::Instant;

use crate::harness::*;

/// Open-file limit of the process under test: leaves 400 - 256 = 144 probes in flight.
const NOFILE: u64 = 400;
/// Endpoints that accept and never answer: at 1 s interval and 900 ms timeout about 540
/// of their probes are in flight at once, more sockets than the limit allows.
const HANGING: usize = 600;

fn open_descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

#[tokio::test]
async fn a_small_open_file_limit_delays_probes_but_never_fails_them() {
    let dir = tempfile::tempdir().unwrap();
    let farm = SharedFarm::start(loopback_range(HANGING as u32 + 1), HANGING + 1).unwrap();
    for i in 1..=HANGING {
        farm.set(i, &Behaviour::Hang);
    }
    let api = SocketAddr::new(loopback_ip().into(), 18080);
    let endpoints = ho_testkit::endpoints_toml_at((0..=HANGING).map(|i| farm.addr(i)), |i| {
        if i == 0 {
            "good".into()
        } else {
            format!("hang-{i}")
        }
    });
    let hanging: Vec<String> = (1..=HANGING).map(|i| format!("\"hang-{i}\"")).collect();
    let text = format!(
        "[api]\nlisten = \"{api}\"\n\n\
         [defaults]\nstartup_grace = \"60s\"\n\n\
         [defaults.check]\nkind = \"http\"\npath = \"/healthz\"\ninterval = \"1s\"\ntimeout = \"900ms\"\nfast_interval = \"100ms\"\n\n\
         {endpoints}\n\
         [[tenants]]\nname = \"good\"\ndomains = [\"good.example\"]\nendpoints = [\"good\"]\nsinks = [\"local\"]\n\n\
         [[tenants]]\nname = \"hang\"\ndomains = [\"hang.example\"]\nendpoints = [{}]\nsinks = [\"local\"]\n\n{}",
        hanging.join(", "),
        hosts_sink(dir.path())
    );
    let file = dir.path().join("config.toml");
    std::fs::write(&file, text).unwrap();
    let log = dir.path().join("stderr.log");
    // `ulimit -n` sets the soft and the hard limit: the process cannot raise it.
    let mut child = spawn_logged(
        std::process::Command::new("bash")
            .args([
                "-c",
                &format!("ulimit -n {NOFILE} && exec \"$0\" run --config \"$1\""),
            ])
            .arg(env!("CARGO_BIN_EXE_health-orchestrator"))
            .arg(&file)
            .env("RUST_LOG", "warn"),
        &log,
    );
    let pid = child.0.id();
    let start = Instant::now();
    while tokio::net::TcpStream::connect(api).await.is_err() {
        assert!(
            child.0.try_wait().unwrap().is_none(),
            "exited: {}",
            std::fs::read_to_string(&log).unwrap()
        );
        assert!(start.elapsed() < LIMIT, "the API never listened");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // The healthy endpoint's probe queues behind hundreds of hanging ones, and still gets
    // its verdict.
    let start = Instant::now();
    let mut most_descriptors = 0;
    let good = loop {
        most_descriptors = most_descriptors.max(open_descriptors(pid));
        let status: serde_json::Value =
            serde_json::from_str(&api_get(api, "/status").await).unwrap_or_default();
        let good = status["endpoints"]
            .as_array()
            .and_then(|e| e.iter().find(|e| e["name"] == "good").cloned());
        if let Some(good) = good.filter(|g| g["state"] == "up") {
            break good;
        }
        assert!(
            child.0.try_wait().unwrap().is_none(),
            "exited: {}",
            std::fs::read_to_string(&log).unwrap()
        );
        assert!(
            start.elapsed() < LIMIT * 2,
            "no verdict for the healthy endpoint"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // Keep it under pressure a little longer: several rounds of every hanging probe.
    for _ in 0..30 {
        most_descriptors = most_descriptors.max(open_descriptors(pid));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let metrics = api_get(api, "/metrics").await;
    let status: serde_json::Value = serde_json::from_str(&api_get(api, "/status").await).unwrap();
    let good_now = status["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "good")
        .unwrap();
    assert_eq!(good_now["state"], "up", "{good}");
    assert_eq!(good_now["failures"], 0, "{good_now}");
    assert_eq!(
        metric(&metrics, "health_orchestrator_probe_concurrency_limit"),
        Some((NOFILE - 256) as f64)
    );
    let waited = metric(
        &metrics,
        "health_orchestrator_probes_waited_total{bound=\"sockets\"}",
    )
    .unwrap_or(0.0);
    assert!(waited > 0.0, "the bound was never reached:\n{metrics}");
    assert_eq!(
        metric(
            &metrics,
            "health_orchestrator_probes_total{result=\"local\"}"
        ),
        None,
        "a probe ran out of descriptors:\n{metrics}"
    );
    let timeouts = metric(
        &metrics,
        "health_orchestrator_probes_total{result=\"timeout\"}",
    );
    // At least two full rounds of the limit ran (each hanging probe holds its socket 900 ms).
    assert!(
        timeouts.unwrap_or(0.0) >= 2.0 * (NOFILE - 256) as f64,
        "{metrics}"
    );
    assert!(most_descriptors <= NOFILE as usize, "{most_descriptors}");
    let stderr = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        stderr
            .matches("probes wait for the concurrent-probe limit")
            .count(),
        1,
        "logged once a minute at most:\n{stderr}"
    );
    drop(child);
}
