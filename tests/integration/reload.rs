//! Config reload: applied as a diff in the engine (state kept, removed targets stop, new
//! ones start unknown), and in the binary on SIGHUP, on file change with `watch = true`,
//! rejecting invalid configs, and under a storm of reloads.

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use ho_engine::hysteresis::Health;
use ho_testkit::Gateway;
use tokio::time::Instant;

use crate::harness::*;

/// A config over `gws` (all of them) with tenants `a` (every endpoint) and, if `with_b`,
/// `b` (every endpoint), writing hosts files into `dir`; `api` is the listen address.
/// Endpoint names follow the gateway's number (`names`), so a name means the same gateway
/// in every version of the config.
fn version(
    dir: &std::path::Path,
    gws: &[&Gateway],
    names: &[usize],
    with_b: bool,
    api: &str,
) -> TestConfig {
    let mut config = TestConfig::at(&Check::FAST, gws.iter().map(|g| g.addr()), |i| {
        format!("gw-{}", names[i])
    })
    .set("api.listen", api)
    .with("[[tenants]]\nname = \"a\"\ndomains = [\"a.example\"]\nsinks = [\"local\"]\n");
    if with_b {
        config = config
            .with("[[tenants]]\nname = \"b\"\ndomains = [\"b.example\"]\nsinks = [\"local\"]\n");
    }
    config.with(&hosts_sink(dir))
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// Reload in the engine: gw-1 removed, gw-4 and tenant `b` added. gw-2 and gw-3 keep their
/// verdict (never `unknown`, never missing from `a`), gw-1 is no longer probed, gw-4 joins
/// once up, `b` is published after gw-4's verdict.
#[actix_rt::test]
async fn a_reload_keeps_state_stops_removed_and_starts_added_targets() {
    let dir = tempfile::tempdir().unwrap();
    let gws = gateways(4);
    let v1 = version(
        dir.path(),
        &[&gws[0], &gws[1], &gws[2]],
        &[1, 2, 3],
        false,
        "127.0.0.1:0",
    )
    .render();
    let mut engine = start_engine(dir.path(), &v1).await;
    let a = dir.path().join("a.hosts");
    let first3 = sorted(gws[..3].iter().map(ip).collect());
    wait_for_file(&a, "v1 published", |c| sorted(addresses(c)) == first3).await;

    let v2 = version(
        dir.path(),
        &[&gws[1], &gws[2], &gws[3]],
        &[2, 3, 4],
        true,
        "127.0.0.1:0",
    )
    .render();
    let file = dir.path().join("config.toml");
    std::fs::write(&file, &v2).unwrap();
    let plan = ho_kinds::load_plan(&[&file]).unwrap();
    let started = Instant::now();
    let summary = engine.reload(plan).await.unwrap();
    assert!(summary.sinks_rebuilt.is_empty(), "the sink did not change");
    assert_eq!(
        (
            summary.targets_kept,
            summary.targets_added,
            summary.targets_removed
        ),
        (2, 1, 1)
    );
    let status = wait_for_status(&engine, "v2 in the tracker", |s| s.endpoints.len() == 3).await;
    println!(
        "reload applied in the tracker after {:?}",
        started.elapsed()
    );
    assert_eq!(state_of(&status, "gw-2"), Health::Up, "kept its verdict");
    assert_eq!(state_of(&status, "gw-3"), Health::Up, "kept its verdict");

    let last3 = sorted(gws[1..].iter().map(ip).collect());
    let (g2, g3) = (ip(&gws[1]), ip(&gws[2]));
    let took = wait_for_file(&a, "gw-4 joins a, gw-1 leaves", |c| {
        let got = addresses(c);
        assert!(
            got.contains(&g2) && got.contains(&g3),
            "a lost a kept endpoint: {got:?}"
        );
        sorted(got) == last3
    })
    .await;
    println!("gw-4 published {} ms after the reload", took.as_millis());
    wait_for_file(&dir.path().join("b.hosts"), "b published", |c| {
        sorted(addresses(c)) == last3
    })
    .await;

    // A probe in flight at the reload may still land; then, while gw-2 is probed three
    // more times, gw-1 must not be probed at all.
    let g2_before = gws[1].requests();
    eventually("gw-2 probed again", || gws[1].requests() > g2_before).await;
    let before = gws[0].requests();
    let g2_now = gws[1].requests();
    eventually("three more probes of gw-2", || {
        gws[1].requests() >= g2_now + 3
    })
    .await;
    assert_eq!(
        gws[0].requests(),
        before,
        "gw-1 is still probed after its removal"
    );
}

fn reloads(metrics: &str, result: &str) -> u64 {
    metrics
        .lines()
        .find(|l| {
            l.starts_with(&format!(
                "health_orchestrator_config_reloads_total{{result=\"{result}\"}}"
            ))
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn spawn_run(file: &std::path::Path) -> Running {
    Running(
        std::process::Command::new(env!("CARGO_BIN_EXE_health-orchestrator"))
            .args(["run", "--config"])
            .arg(file)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

fn hup(child: &Running) {
    let ok = std::process::Command::new("bash")
        .args(["-c", &format!("kill -HUP {}", child.0.id())])
        .status()
        .unwrap()
        .success();
    assert!(ok);
}

async fn wait_for_reloads(api: SocketAddr, result: &str, n: u64) {
    let start = Instant::now();
    while reloads(&api_get(api, "/metrics").await, result) < n {
        assert!(start.elapsed() < LIMIT, "no {n} {result} reloads");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// SIGHUP with a broken config: rejected, counted, the process and the published set stay.
/// SIGHUP with a valid one: applied. Then `watch = true` applies a file change by itself.
#[tokio::test]
async fn sighup_rejects_invalid_and_applies_valid_configs_and_watch_follows_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let gws = gateways(3);
    let api = SocketAddr::new(loopback_ip().into(), 18080);
    let all: Vec<&Gateway> = gws.iter().collect();
    let file = dir.path().join("config.toml");
    std::fs::write(
        &file,
        version(dir.path(), &all, &[1, 2, 3], false, &api.to_string()).render(),
    )
    .unwrap();
    let mut child = spawn_run(&file);
    let a = dir.path().join("a.hosts");
    let three = sorted(gws.iter().map(ip).collect());
    wait_for_file(&a, "published", |c| sorted(addresses(c)) == three).await;

    std::fs::write(&file, "[[tenants]]\nname = \"a\"\nsinks = [\"nowhere\"]\n").unwrap();
    hup(&child);
    wait_for_reloads(api, "invalid", 1).await;
    assert!(
        child.0.try_wait().unwrap().is_none(),
        "an invalid reload stopped the process"
    );
    assert_eq!(
        sorted(addresses(&std::fs::read_to_string(&a).unwrap())),
        three
    );

    let two = version(dir.path(), &all[..2], &[1, 2], false, &api.to_string())
        .set("reload.watch", true)
        .set("reload.interval", "100ms")
        .render();
    std::fs::write(&file, two).unwrap();
    hup(&child);
    let first2 = sorted(gws[..2].iter().map(ip).collect());
    wait_for_file(&a, "gw-3 removed by SIGHUP", |c| {
        sorted(addresses(c)) == first2
    })
    .await;
    wait_for_reloads(api, "ok", 1).await;

    // No signal now: the watch notices the file.
    let one = version(dir.path(), &all[..1], &[1], false, &api.to_string())
        .set("reload.watch", true)
        .set("reload.interval", "100ms")
        .render();
    std::fs::write(&file, one).unwrap();
    let took = wait_for_file(&a, "gw-2 removed by the watch", |c| {
        addresses(c) == [ip(&gws[0])]
    })
    .await;
    println!(
        "file change applied by the watch after {} ms",
        took.as_millis()
    );
}

/// 100 SIGHUPs, every third config broken, endpoint sets changing: the process stays up,
/// the last valid config wins, and exactly its targets are probed (no prober leaks).
#[tokio::test]
async fn a_reload_storm_ends_on_the_last_valid_config() {
    let dir = tempfile::tempdir().unwrap();
    let gws = gateways(4);
    let api = SocketAddr::new(loopback_ip().into(), 18080);
    let all: Vec<&Gateway> = gws.iter().collect();
    let file = dir.path().join("config.toml");
    std::fs::write(
        &file,
        version(dir.path(), &all, &[1, 2, 3, 4], false, &api.to_string()).render(),
    )
    .unwrap();
    let mut child = spawn_run(&file);
    let a = dir.path().join("a.hosts");
    wait_for_file(&a, "published", |c| addresses(c).len() == 4).await;
    for i in 0..100usize {
        let content = if i % 3 == 2 {
            "this is not toml [".to_string()
        } else {
            let n = 1 + i % 4;
            let names: Vec<usize> = (1..=n).collect();
            version(dir.path(), &all[..n], &names, i % 2 == 0, &api.to_string()).render()
        };
        std::fs::write(&file, content).unwrap();
        hup(&child);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The 100th (i = 99) is valid: 4 endpoints, no tenant b.
    let last = version(dir.path(), &all, &[1, 2, 3, 4], false, &api.to_string()).render();
    std::fs::write(&file, &last).unwrap();
    hup(&child);
    let start = Instant::now();
    loop {
        let status: serde_json::Value =
            serde_json::from_str(&api_get(api, "/status").await).unwrap_or_default();
        let endpoints = status["endpoints"].as_array().map_or(0, Vec::len);
        let tenants = status["tenants"].as_array().map_or(0, Vec::len);
        if endpoints == 4 && tenants == 1 {
            break;
        }
        assert!(start.elapsed() < LIMIT, "last config not applied: {status}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let four = sorted(gws.iter().map(ip).collect());
    wait_for_file(&a, "all four published", |c| sorted(addresses(c)) == four).await;
    let metrics = api_get(api, "/metrics").await;
    let (ok, invalid) = (reloads(&metrics, "ok"), reloads(&metrics, "invalid"));
    println!("storm: {ok} applied, {invalid} rejected (signals arriving together coalesce)");
    assert!(
        ok >= 1 && invalid >= 1 && ok + invalid <= 101,
        "{ok} {invalid}"
    );
    // Exactly four targets are probed: the probes the gateways saw match four probers on
    // their 200 ms schedule over the measured window. A leaked prober doubles a gateway's
    // share; a slow machine only makes probes late, never more, so the upper bound holds at
    // any speed, and the lower one only asks for half the schedule.
    let before: u64 = gws.iter().map(Gateway::requests).sum();
    let window = Instant::now();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let probes: u64 = gws.iter().map(Gateway::requests).sum::<u64>() - before;
    let slots = 4.0 * window.elapsed().as_secs_f64() / 0.2;
    assert!(
        (probes as f64) >= slots / 2.0 && (probes as f64) <= slots + 4.0,
        "{probes} probes in {:?} for 4 targets at 200 ms ({slots:.1} slots)",
        window.elapsed()
    );
    assert!(child.0.try_wait().unwrap().is_none());
}

/// A reload that changes a sink rebuilds it, and the rebuilt sink gets the current state at
/// once, without waiting for a health change.
#[actix_rt::test]
async fn a_changed_sink_is_rebuilt_and_written_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let moved = tempfile::tempdir().unwrap();
    let gws = gateways(2);
    let all: Vec<&Gateway> = gws.iter().collect();
    let v1 = version(dir.path(), &all, &[1, 2], false, "127.0.0.1:0").render();
    let mut engine = start_engine(dir.path(), &v1).await;
    let two = sorted(gws.iter().map(ip).collect());
    wait_for_file(&dir.path().join("a.hosts"), "v1", |c| {
        sorted(addresses(c)) == two
    })
    .await;

    let v2 = version(moved.path(), &all, &[1, 2], false, "127.0.0.1:0").render();
    let file = dir.path().join("config.toml");
    std::fs::write(&file, &v2).unwrap();
    let plan = ho_kinds::load_plan(&[&file]).unwrap();
    let summary = engine.reload(plan).await.unwrap();
    assert_eq!(summary.sinks_rebuilt, vec!["local".to_string()]);
    wait_for_file(
        &moved.path().join("a.hosts"),
        "written by the rebuilt sink",
        |c| sorted(addresses(c)) == two,
    )
    .await;
}

/// A reload that removes tenants: `cleanup_on_remove = true` withdraws the records (the
/// hosts content goes empty), the default leaves them as last written and the sink stops
/// writing them.
#[actix_rt::test]
async fn removed_tenants_are_withdrawn_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let gws = gateways(2);
    let all: Vec<&Gateway> = gws.iter().collect();
    let base = version(dir.path(), &all, &[1, 2], false, "127.0.0.1:0");
    let v1 = base
        .clone()
        .with(
            "[[tenants]]\nname = \"b\"\ndomains = [\"b.example\"]\nsinks = [\"local\"]\ncleanup_on_remove = true\n\n\
             [[tenants]]\nname = \"c\"\ndomains = [\"c.example\"]\nsinks = [\"local\"]\n",
        )
        .render();
    let base = base.render();
    let mut engine = start_engine(dir.path(), &v1).await;
    let two = sorted(gws.iter().map(ip).collect());
    for t in ["a", "b", "c"] {
        let file = dir.path().join(format!("{t}.hosts"));
        wait_for_file(&file, "v1", |c| sorted(addresses(c)) == two).await;
    }
    let file = dir.path().join("config.toml");
    std::fs::write(&file, &base).unwrap();
    let plan = ho_kinds::load_plan(&[&file]).unwrap();
    engine.reload(plan).await.unwrap();
    wait_for_file(&dir.path().join("b.hosts"), "b withdrawn", str::is_empty).await;
    let start = Instant::now();
    loop {
        let status = engine.sink_status("local").await.unwrap();
        let tenants: Vec<&str> = status.tenants.iter().map(|t| t.tenant.as_str()).collect();
        if !tenants.contains(&"c") {
            break;
        }
        assert!(
            start.elapsed() < LIMIT,
            "the sink still writes c: {tenants:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let c = std::fs::read_to_string(dir.path().join("c.hosts")).unwrap();
    assert_eq!(
        sorted(addresses(&c)),
        two,
        "c's records stay as last written"
    );
}
