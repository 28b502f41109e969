//! The availability ledger is optional: whatever state its files or its folder are in, the
//! engine starts, probes and publishes, and the ledger alone is reported degraded
//! (`/status`, the `ledger_degraded` gauge). One test per case: a foreign file (moved aside,
//! counted, the name recording again), an empty one, one of a newer format, a torn last
//! record, a name whose file cannot be written (and is then fixed), and, with the real
//! binary run as an unprivileged user, a `state_dir` that user cannot write, which
//! `check-config` refuses; a malformed drains file still stops `run`, with its way out and
//! no panic.

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use ho_testkit::{Behaviour, Gateway};
use tokio::time::Instant;

use crate::harness::*;
use crate::services::dig::wait_for_answer;

const ZONE: &str = "example.org";
const NAME: &str = "shop.example.org";
fn gateway() -> Gateway {
    Gateway::start(loopback(), Behaviour::Healthy).unwrap()
}

/// One tenant on the embedded server at `server`, its ledger under `state`.
fn config(gw: &Gateway, server: SocketAddr, state: &Path) -> TestConfig {
    TestConfig::new(&Check::FAST, &[gw]).with(&format!(
        "state_dir = {state:?}\n\n\
         [[tenants]]\nname = \"shop\"\ndomains = [\"{NAME}\"]\nsinks = [\"dns\"]\n\n\
         [sinks.dns]\nkind = \"dns_server\"\nlisten = [\"{server}\"]\nzones = [\"{ZONE}\"]\n",
        state = state.display().to_string(),
    ))
}

/// `/status`'s ledger once its state is `state` with a problem containing `problem` (any,
/// for an empty one), within 30 s.
async fn wait_ledger(api: SocketAddr, state: &str, problem: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status: serde_json::Value =
            serde_json::from_str(&api_get(api, "/status").await).unwrap();
        let ledger = status["ledger"].clone();
        let problems = ledger["problems"].as_array().cloned().unwrap_or_default();
        let said = problem.is_empty()
            || (problems.iter()).any(|p| p.as_str().is_some_and(|p| p.contains(problem)));
        if ledger["state"] == state && said {
            return ledger;
        }
        assert!(
            Instant::now() < deadline,
            "ledger not {state} with {problem:?}: {ledger}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn degraded_gauge(api: SocketAddr) -> String {
    let metrics = api_get(api, "/metrics").await;
    (metrics.lines())
        .find(|l| l.starts_with("health_orchestrator_ledger_degraded "))
        .unwrap_or_else(|| panic!("no ledger_degraded gauge in {metrics}"))
        .to_owned()
}

/// Starts the engine on a ledger folder whose name file `prepare` set up, waits until the
/// name is published, and returns the API with the folder's path.
async fn published_with(
    prepare: impl FnOnce(&Path),
) -> (tempfile::TempDir, ho_engine::Engine, SocketAddr, Gateway) {
    let gw = gateway();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(state.join("ledger/names")).unwrap();
    prepare(&state.join("ledger/names").join(NAME));
    let server = SocketAddr::new(loopback_ip().into(), free_port_pair());
    let engine = start_engine(dir.path(), &config(&gw, server, &state).render()).await;
    let api = serve_api(&engine, None, None).await;
    wait_for_answer(server, NAME, &[ip(&gw)]).await;
    (dir, engine, api, gw)
}

#[actix_rt::test]
async fn a_foreign_ledger_file_is_moved_aside_and_the_engine_publishes() {
    // The name's own file, and a stray file no name of the config is.
    let (dir, _engine, api, _gw) = published_with(|f| {
        std::fs::write(f, "junk").unwrap();
        std::fs::write(f.with_file_name("notes.txt"), "not a ledger").unwrap();
    })
    .await;
    let metrics = api_get(api, "/metrics").await;
    assert!(
        metrics.contains("\nhealth_orchestrator_ledger_files_set_aside_total 2\n"),
        "{metrics}"
    );
    let every: serde_json::Value =
        serde_json::from_str(&api_get(api, "/v1/availability").await).unwrap();
    assert!(
        !every.to_string().contains("notes.txt"),
        "a file set aside is no name: {every}"
    );
    let aside: Vec<_> = std::fs::read_dir(dir.path().join("state/ledger/aside"))
        .unwrap()
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    assert_eq!(aside.len(), 2, "kept aside");
    assert!(aside.contains(&b"junk".to_vec()), "kept aside as it was");
    // The name starts again in a file of its own, and the ledger is no longer degraded:
    // the file aside is the record.
    recording_again(dir.path(), api).await;
}

/// Waits until the name has records in a current file and the ledger records, not
/// degraded.
async fn recording_again(dir: &Path, api: SocketAddr) {
    let file = dir.join("state/ledger/names").join(NAME);
    wait_until("the name recorded", || {
        std::fs::read(&file).is_ok_and(|b| b.starts_with(b"HOL2") && b.len() > 4)
    })
    .await;
    wait_ledger(api, "recording", "").await;
    assert_eq!(
        degraded_gauge(api).await,
        "health_orchestrator_ledger_degraded 0"
    );
}

#[actix_rt::test]
async fn an_empty_or_torn_ledger_file_is_read_as_far_as_it_goes() {
    for bytes in [b"".as_slice(), b"HOL2\x80".as_slice()] {
        let (dir, _engine, api, _gw) = published_with(|f| std::fs::write(f, bytes).unwrap()).await;
        recording_again(dir.path(), api).await;
    }
}

#[actix_rt::test]
async fn a_newer_versions_ledger_file_is_left_alone_and_the_engine_publishes() {
    let (dir, _engine, api, _gw) =
        published_with(|f| std::fs::write(f, b"HOL9\x01\x02").unwrap()).await;
    wait_ledger(api, "degraded", "newer version").await;
    let file = dir.path().join("state/ledger/names").join(NAME);
    assert_eq!(std::fs::read(file).unwrap(), b"HOL9\x01\x02");
}

/// A name's file that cannot be written (here a folder in its place, as a full or broken
/// disk refuses writes) degrades the ledger and counts failed writes; once it can be
/// written, what waited is appended and the ledger records again.
#[actix_rt::test]
async fn failing_writes_are_retried_until_the_file_can_be_written() {
    let (dir, _engine, api, _gw) =
        published_with(|f| std::fs::create_dir_all(f.join("in-the-way")).unwrap()).await;
    wait_ledger(api, "degraded", "cannot append").await;
    let metrics = api_get(api, "/metrics").await;
    let failures = (metrics.lines())
        .find_map(|l| l.strip_prefix("health_orchestrator_ledger_write_failures_total "))
        .unwrap_or_else(|| panic!("no write failures counted in {metrics}"));
    assert!(failures.parse::<f64>().unwrap() >= 1.0, "{failures}");
    let file = dir.path().join("state/ledger/names").join(NAME);
    std::fs::remove_dir_all(&file).unwrap();
    wait_ledger(api, "recording", "").await;
    let bytes = std::fs::read(&file).unwrap();
    assert!(bytes.starts_with(b"HOL2") && bytes.len() > 4, "{bytes:?}");
    assert_eq!(
        degraded_gauge(api).await,
        "health_orchestrator_ledger_degraded 0"
    );
}

async fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "not within 30 s: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `cmd` run as the unprivileged user `nobody` (as the shipped image runs, on a volume
/// owned by root), from a copy of its program in `dir` (where the build lives may be closed
/// to other users).
fn as_nobody(cmd: std::process::Command, dir: &Path) -> std::process::Command {
    let program = dir.join("health-orchestrator");
    if !program.exists() {
        std::fs::copy(cmd.get_program(), &program).unwrap();
    }
    let mut wrapped = std::process::Command::new("setpriv");
    wrapped
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(program)
        .args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => wrapped.env(k, v),
            None => wrapped.env_remove(k),
        };
    }
    wrapped
}

/// The real binary as a non-root user whose `state_dir` belongs to root: `check-config`
/// says the folder cannot be written (exit 2); `run` starts anyway, publishes, and reports
/// the ledger degraded with the way out, without a panic.
#[actix_rt::test]
async fn an_unwritable_state_dir_is_refused_by_check_config_and_degrades_run_alone() {
    let gw = gateway();
    // Under /tmp, which every user may traverse, whatever TMPDIR says.
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let server = SocketAddr::new(loopback_ip().into(), free_port_pair());
    let api = SocketAddr::new(loopback_ip().into(), free_port_pair());
    let config = config(&gw, server, &state).set("api.listen", api.to_string());
    let mut cmd = run_config(dir.path(), &config);
    std::fs::set_permissions(
        dir.path().join("config.toml"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();

    let mut check = binary();
    check
        .args(["check-config", "--config"])
        .arg(dir.path().join("config.toml"));
    let out = as_nobody(check, dir.path()).output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains("state_dir") && said.contains("fsGroup"),
        "{said}"
    );

    let log = dir.path().join("run.log");
    cmd.stderr(std::fs::File::create(&log).unwrap());
    let _running = Running(as_nobody(cmd, dir.path()).spawn().unwrap());
    let deadline = Instant::now() + Duration::from_secs(30);
    while try_api_get(api, "/healthz").await.is_none() {
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(Instant::now() < deadline, "run did not come up: {said}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    wait_for_answer(server, NAME, &[ip(&gw)]).await;
    let ledger = wait_ledger(api, "degraded", "fsGroup").await;
    assert!(ledger.to_string().contains("cannot write"), "{ledger}");
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(!said.contains("panicked"), "{said}");
}

/// A malformed drains file still stops `run` (starting without it would publish endpoints
/// an operator took out): exit 2 with the file and the way out, and no panic on the way.
#[actix_rt::test]
async fn a_malformed_drains_file_stops_run_with_its_way_out_and_no_panic() {
    let gw = gateway();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    std::fs::write(state.join("drains.json"), "{not json").unwrap();
    let server = SocketAddr::new(loopback_ip().into(), free_port_pair());
    let mut cmd = run_config(dir.path(), &config(&gw, server, &state));
    let out = cmd.stderr(std::process::Stdio::piped()).output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains("drains.json") && said.contains("move it aside"),
        "{said}"
    );
    assert!(!said.contains("panicked"), "{said}");
}

/// A start that fails half way (here the ring's port taken, after the sinks started) exits
/// with its error, never with a panic of the actors it leaves behind.
#[actix_rt::test]
async fn a_start_that_fails_half_way_exits_with_its_error_and_no_panic() {
    let gw = gateway();
    let dir = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind(loopback()).unwrap();
    let secret = dir.path().join("ring.secret");
    std::fs::write(&secret, "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTMyYg==").unwrap();
    let server = SocketAddr::new(loopback_ip().into(), free_port_pair());
    let config = config(&gw, server, &dir.path().join("state"))
        .set("ring.enabled", true)
        .set("ring.listen", taken.local_addr().unwrap().to_string())
        .set("ring.secret_file", secret.display().to_string());
    let out = run_config(dir.path(), &config)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("ring: listen") && said.contains("in use"),
        "{said}"
    );
    assert!(!said.contains("panicked"), "{said}");
}
