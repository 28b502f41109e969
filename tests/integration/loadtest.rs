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
