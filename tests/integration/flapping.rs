//! Flapping and noisy endpoints through the real engine: hysteresis keeps DNS still when
//! an endpoint flaps faster than `fall` probes can see, DNS changes only when a verdict
//! changes, and flap damping bounds the churn of an endpoint that keeps failing at random.
//!
//! Each endpoint is a scripted server on loopback whose answer is decided per request.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ho_engine::Engine;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::fakes::gateways::scripted;
use crate::harness::*;

const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
const DOWN: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\ndown";

async fn answer(mut s: TcpStream, ok: bool) {
    let _ = s.write_all(if ok { OK } else { DOWN }).await;
}

/// A tenant over `flappy` and a steady healthy endpoint (started here), so a withdrawn
/// `flappy` leaves a non-empty set (no fail-open).
/// Returns the engine and the steady endpoint's address.
async fn engine(dir: &std::path::Path, flappy: SocketAddr, check: &str) -> (Engine, SocketAddr) {
    let (steady, _) = scripted(loopback(), |s| answer(s, true)).await;
    // The steady endpoint's check is lenient (a loaded machine must not fail it: the test
    // is about the noisy one, and a steady endpoint down too would publish both fail-open).
    let endpoints =
        ho_testkit::endpoints_toml_at([flappy, steady], |i| ["flappy", "steady"][i].to_string())
            .replace(
                &format!("check = {{ port = {} }}", steady.port()),
                &format!(
                    "check = {{ port = {}, interval = \"200ms\", timeout = \"150ms\", fall = 5 }}",
                    steady.port()
                ),
            );
    let text = format!(
        "[api]\nlisten = \"127.0.0.1:0\"\n\n[defaults.check]\nkind = \"http\"\npath = \"/healthz\"\n{check}\n\n{endpoints}\n\
         [[tenants]]\nname = \"t\"\ndomains = [\"t.example\"]\nsinks = [\"local\"]\n\n{}",
        hosts_sink(dir)
    );
    (start_engine(dir, &text).await, steady)
}

/// DNS updates of the tenant, verdict changes to down, to up, since start.
fn counts(engine: &Engine) -> (f64, f64, f64) {
    let m = engine.metrics().encode();
    (
        metric(&m, "health_orchestrator_dns_updates_total{tenant=\"t\"}").unwrap_or(0.0),
        metric(&m, "health_orchestrator_transitions_total{to=\"down\"}").unwrap_or(0.0),
        metric(&m, "health_orchestrator_transitions_total{to=\"up\"}").unwrap_or(0.0),
    )
}

/// Waits for the first publish, lets the endpoint flap for `run`, and returns the counts.
async fn churn(engine: &Engine, dir: &std::path::Path, run: Duration) -> (f64, f64, f64) {
    wait_for_file(&dir.join("t.hosts"), "the first publish", |c| !c.is_empty()).await;
    tokio::time::sleep(run).await;
    counts(engine)
}

/// Waits until `enough` holds for the counts (bounded by [`LIMIT`]), and returns them.
async fn churn_until(
    engine: &Engine,
    what: &str,
    enough: impl Fn((f64, f64, f64)) -> bool,
) -> (f64, f64, f64) {
    let start = Instant::now();
    loop {
        let now = counts(engine);
        if enough(now) {
            return now;
        }
        assert!(start.elapsed() < LIMIT, "{what}: {now:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every other probe fails (fall 2): the fast re-check after a failure always passes, so the
/// verdict never changes and DNS is written once.
#[actix_rt::test]
async fn alternating_results_never_change_dns() {
    let dir = tempfile::tempdir().unwrap();
    let n = Arc::new(AtomicUsize::new(0));
    let (flappy, _) = scripted(loopback(), move |s| {
        let ok = n.fetch_add(1, Ordering::SeqCst).is_multiple_of(2);
        answer(s, ok)
    })
    .await;
    let check =
        "interval = \"100ms\"\ntimeout = \"50ms\"\nfast_interval = \"20ms\"\nrise = 1\nfall = 2";
    let (engine, _) = engine(dir.path(), flappy, check).await;
    let (updates, downs, _) = churn(&engine, dir.path(), Duration::from_secs(2)).await;
    assert_eq!((updates, downs), (1.0, 0.0));
}

/// A square wave whose down phase (60 ms) is shorter than three probes 50 ms apart: with
/// fall 3 no run of failures is long enough, so DNS never changes.
#[actix_rt::test]
async fn down_phases_shorter_than_fall_probes_never_change_dns() {
    let dir = tempfile::tempdir().unwrap();
    let epoch = Instant::now();
    let (flappy, _) = scripted(loopback(), move |s| {
        let in_period = epoch.elapsed().as_millis() % 300;
        answer(s, in_period >= 60)
    })
    .await;
    let check =
        "interval = \"100ms\"\ntimeout = \"40ms\"\nfast_interval = \"50ms\"\nrise = 1\nfall = 3";
    let (engine, _) = engine(dir.path(), flappy, check).await;
    let (updates, downs, _) = churn(&engine, dir.path(), Duration::from_secs(3)).await;
    assert_eq!((updates, downs), (1.0, 0.0));
}

/// The noisy endpoints: one failing 1 probe in 3 at random, one answering around its
/// timeout (latency jittering 40 ± 20 ms against a 40 ms timeout).
async fn noisy(kind: &str) -> SocketAddr {
    let (addr, _) = match kind {
        "random" => scripted(loopback(), |s| answer(s, fastrand::u8(0..3) != 0)).await,
        _ => {
            scripted(loopback(), |s| async move {
                tokio::time::sleep(Duration::from_millis(fastrand::u64(20..=60))).await;
                answer(s, true).await;
            })
            .await
        }
    };
    addr
}

const NOISY_CHECK: &str =
    "interval = \"60ms\"\ntimeout = \"40ms\"\nfast_interval = \"20ms\"\nrise = 1\nfall = 2";

/// Without damping a noisy endpoint goes in and out of DNS, but only on verdict changes:
/// every DNS update is a verdict change (plus the first publish), never more.
#[actix_rt::test]
async fn without_damping_dns_changes_only_with_the_verdict() {
    for kind in ["random", "latency"] {
        let dir = tempfile::tempdir().unwrap();
        let flappy = noisy(kind).await;
        let (engine, _) = engine(dir.path(), flappy, NOISY_CHECK).await;
        let started = Instant::now();
        let (updates, downs, ups) = churn_until(&engine, kind, |(_, downs, _)| downs >= 4.0).await;
        eprintln!(
            "{kind}: {updates} DNS updates, {downs} downs, {ups} ups in {:?} without damping",
            started.elapsed()
        );
        // Start-up: the first verdicts (two ups, or an up and a down) make one publish.
        assert!(
            updates <= downs + ups,
            "{kind}: {updates} updates for {downs}+{ups} changes"
        );
    }
}

/// Waits for `file` to hold `only_steady`; past [`LIMIT`] fails with what `/status` says of
/// each endpoint, so a failure tells a hold never published from a steady endpoint that went
/// down too (both down publish both, fail-open).
async fn hold_written(engine: &Engine, file: &std::path::Path, only_steady: &[String]) {
    let start = Instant::now();
    loop {
        let content = std::fs::read_to_string(file).unwrap_or_default();
        if addresses(&content) == only_steady {
            return;
        }
        if start.elapsed() >= LIMIT {
            let status = engine.status().await.unwrap().tracker;
            panic!(
                "timed out waiting for the hold written; {} holds:\n{content}\n/status:\n{}",
                file.display(),
                serde_json::to_string_pretty(&status).unwrap()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// With flap damping the third down within seconds holds the endpoint out: after that,
/// DNS stays still however much it keeps flapping (two more downs are awaited), and
/// `/status` says why.
#[actix_rt::test]
async fn damping_holds_a_noisy_endpoint_out_and_dns_stays_still() {
    for kind in ["random", "latency"] {
        let dir = tempfile::tempdir().unwrap();
        let flappy = noisy(kind).await;
        let check = format!(
            "{NOISY_CHECK}\ndamping = {{ half_life = \"5s\", penalty = 1000, suppress = 2000, reuse = 750, max_suppress = \"60s\" }}"
        );
        let (engine, steady) = engine(dir.path(), flappy, &check).await;
        let started = Instant::now();
        let held = |_: (f64, f64, f64)| {
            metric(
                &engine.metrics().encode(),
                "health_orchestrator_damping_holds_total",
            ) == Some(1.0)
        };
        let at_hold = churn_until(&engine, kind, held).await;
        // The hold's publish is counted when it is sent to the sink; the file follows once
        // the sink has written it (a rename and an fsync, which a loaded machine can hold
        // up for longer than the next flaps take).
        let file = dir.path().join("t.hosts");
        let only_steady = [steady.ip().to_string()];
        hold_written(&engine, &file, &only_steady).await;
        // The endpoint keeps flapping while held.
        let (updates, downs, _) =
            churn_until(&engine, kind, |(_, downs, _)| downs >= at_hold.1 + 2.0).await;
        eprintln!(
            "{kind}: {updates} DNS updates, {downs} downs in {:?} with damping",
            started.elapsed()
        );
        // First publish, then at most down, up, down, up, down: the third down holds it.
        assert!(updates <= 6.0, "{kind}: {updates} DNS updates");
        assert_eq!(updates, at_hold.0, "{kind}: DNS changed while held");
        let m = engine.metrics().encode();
        assert_eq!(
            metric(&m, "health_orchestrator_damping_holds_total"),
            Some(1.0),
            "{m}"
        );
        // Held: DNS has only the steady endpoint, and stays so while the flapping goes on.
        assert_eq!(
            addresses(&std::fs::read_to_string(&file).unwrap()),
            only_steady
        );
        let status = engine.status().await.unwrap().tracker;
        let why = serde_json::to_value(status.tenants[0].endpoints[0].why).unwrap();
        assert_eq!(why, "damped", "{kind}");
        let flappy_status = serde_json::to_value(&status.endpoints[0]).unwrap();
        assert_eq!(flappy_status["damping"]["held"], true, "{flappy_status}");
    }
}

/// Once the endpoint is steady again, the hold ends when the penalty decays below `reuse`
/// and the endpoint returns to DNS by itself.
#[actix_rt::test]
async fn a_held_endpoint_returns_once_calm() {
    let dir = tempfile::tempdir().unwrap();
    let failing = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let n = Arc::new(AtomicUsize::new(0));
    let flags = (failing.clone(), n.clone());
    let (flappy, _) = scripted(loopback(), move |s| {
        // While "failing", every third probe passes: down, up, down, ... quickly.
        let ok = !flags.0.load(Ordering::SeqCst) || flags.1.fetch_add(1, Ordering::SeqCst) % 3 == 2;
        answer(s, ok)
    })
    .await;
    let check = format!(
        "{NOISY_CHECK}\ndamping = {{ half_life = \"1s\", penalty = 1000, suppress = 2000, reuse = 750, max_suppress = \"3s\" }}"
    );
    let (engine, steady) = engine(dir.path(), flappy, &check).await;
    let file = dir.path().join("t.hosts");
    let both = |c: &str| addresses(c).len() == 2;
    wait_for_file(&file, "both endpoints", both).await;
    failing.store(true, Ordering::SeqCst);
    wait_for_file(&file, "the hold", |c| {
        addresses(c) == [steady.ip().to_string()]
            && metric(
                &engine.metrics().encode(),
                "health_orchestrator_damping_holds_total",
            ) == Some(1.0)
    })
    .await;
    failing.store(false, Ordering::SeqCst);
    let calm = Instant::now();
    wait_for_file(&file, "the release", both).await;
    // Held on after the flapping stopped, until the penalty decayed: a release can come no
    // sooner (a timer never fires early). That it comes within max_suppress (the penalty,
    // capped at 750 * 2^3 = 6000, decays below 750 in 3 s) is the damping core's
    // `a_hold_never_outlasts_max_suppress_after_the_last_flap`, in virtual time; here the
    // release arriving at all (within the wait's bound) is what the real engine adds.
    let held_for = calm.elapsed();
    assert!(
        held_for > Duration::from_millis(300),
        "released too early: {held_for:?}"
    );
}
