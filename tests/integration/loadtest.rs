//! The `loadtest` tool on a small farm: every injected fault is detected, nothing else
//! flips, and the engine (the real binary, as its own process) keeps its schedule; with one
//! listener per gateway and with the shared-listener farm over several tenants.

use clap::Parser;
use ho_loadtest::run::{run, Args};

async fn detects_every_fault(kind: &str, extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("scenario.toml");
    std::fs::write(
        &scenario,
        format!("[[fault]]\nkind = \"{kind}\"\nshare = 0.1\nat = \"1s\"\nduration = \"2s\"\n"),
    )
    .unwrap();
    let mut argv = vec![
        "loadtest",
        "--endpoints",
        "60",
        "--interval",
        "200ms",
        "--duration",
        "4s",
        "--scenario",
        scenario.to_str().unwrap(),
        "--engine",
        env!("CARGO_BIN_EXE_health-orchestrator"),
    ];
    argv.extend_from_slice(extra);
    let report = run(Args::parse_from(argv)).await.unwrap();
    println!("{}", report.table());
    assert_eq!((report.faulted, report.detected), (6, 6));
    assert_eq!(report.false_transitions, 0);
    let share = report.probes_done as f64 / report.probes_scheduled as f64;
    assert!(
        share > 0.9,
        "probes done {} of {} scheduled",
        report.probes_done,
        report.probes_scheduled
    );
}

#[tokio::test]
async fn loadtest_detects_every_injected_fault() {
    detects_every_fault("refuse", &[]).await;
}

#[tokio::test]
async fn loadtest_on_one_shared_listener_and_many_tenants_detects_every_fault() {
    detects_every_fault("status", &["--shared-listener", "--tenant-size", "7"]).await;
}

/// `--config`: a user's config (two tenants, their own hosts_file sink, a timing of their
/// own) rehearsed on the farm. Every faulted address is withdrawn by the user's sink as
/// well as by the recorder, and the per-sink report times each of those writes.
#[tokio::test]
async fn a_rehearsal_reports_each_sink_of_the_users_config() {
    let dir = tempfile::tempdir().unwrap();
    let hosts = dir.path().join("hosts");
    std::fs::create_dir(&hosts).unwrap();
    let mut config = format!(
        "[defaults.check]\nkind = \"https\"\npath = \"/ready\"\ninterval = \"250ms\"\ntimeout = \"100ms\"\nfast_interval = \"50ms\"\ninsecure = true\n\n[sinks.files]\nkind = \"hosts_file\"\ndir = {:?}\n\n",
        hosts.display().to_string()
    );
    for i in 0..40 {
        // The rehearsal replaces these addresses with the farm's (loopback either way).
        config.push_str(&format!(
            "[[endpoints]]\nname = \"gw-{i}\"\naddress = \"127.255.0.{}\"\nlabels = {{ half = \"{}\" }}\n\n",
            i + 1,
            i % 2
        ));
    }
    for half in 0..2 {
        config.push_str(&format!(
            "[[tenants]]\nname = \"half-{half}\"\ndomains = [\"h{half}.example\"]\nselector = {{ half = \"{half}\" }}\nsinks = [\"files\"]\n\n"
        ));
    }
    let file = dir.path().join("prod.toml");
    std::fs::write(&file, config).unwrap();
    let scenario = dir.path().join("scenario.toml");
    std::fs::write(
        &scenario,
        "[[fault]]\nkind = \"refuse\"\nshare = 0.1\nat = \"1s\"\nduration = \"3s\"\n",
    )
    .unwrap();
    let report = run(Args::parse_from([
        "loadtest",
        "--config",
        file.to_str().unwrap(),
        "--duration",
        "4s",
        "--scenario",
        scenario.to_str().unwrap(),
        "--engine",
        env!("CARGO_BIN_EXE_health-orchestrator"),
    ]))
    .await
    .unwrap();
    println!("{}", report.table());
    assert_eq!(report.endpoints, 40);
    assert_eq!((report.faulted, report.detected), (4, 4));
    assert_eq!(report.false_transitions, 0);
    assert!(report
        .notes
        .iter()
        .any(|n| n.contains("https probed as http")));
    for sink in ["files", ho_loadtest::rehearsal::RECORDER] {
        let s = &report.sinks[sink];
        assert_eq!((s.changes, s.unwritten), (4, 0), "{sink}: {s:?}");
        let p99 = s.fault_to_write_p99_ms.unwrap();
        // The timing's bound (250 + 2 x 100 + 50 + 5 ms) plus a write; generous for CI.
        assert!(p99 < 2000.0, "{sink}: p99 {p99} ms");
        assert!(s.writes >= 2, "{sink}: {s:?}");
    }
    assert_eq!(report.detect_bound_ms, 505.0);
}
