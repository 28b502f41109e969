//! What every test needs: engines started on real sinks, configs built as data, loopback
//! addresses no two tests share, waits bounded by [`LIMIT`], child processes that die with
//! the test, TLS material.

mod config;
mod kuadrant;
mod listing_canary;
mod net;
mod netns;
mod pki;
mod probe;
mod rounds;
mod source_tree;
pub mod use_paths;

use std::path::Path;
use std::time::Duration;

use ho_engine::hysteresis::Health;
use ho_engine::status::TrackerStatus;
use ho_engine::Engine;
use ho_testkit::{Behaviour, Gateway};
use tokio::time::Instant;

pub use config::{Check, TestConfig};
pub use kuadrant::{kube_condition, probe_state, KuadrantSetup};
pub use listing_canary::listing_canary_sees_lost_records;
pub use net::{free_port_pair, loopback, loopback_ip, loopback_range};
pub use netns::{run_checked, VethNamespace};
pub use pki::{test_pki, test_pki_with, TestPki};
pub use probe::probe_within;
pub use rounds::thirty_tenants_lose_a_shared_gateway;
pub use source_tree::{rust_files, SOURCE_DIRS};

/// Longest any test waits for a condition; tests normally finish far sooner.
pub const LIMIT: Duration = Duration::from_secs(10);

/// Waits, polling every 20 ms, until `ready` holds; fails the test after [`LIMIT`] naming
/// `what`. Tests wait for what they need this way, never by a fixed sleep: a slow machine
/// only makes them take longer.
pub async fn eventually(what: &str, mut ready: impl FnMut() -> bool) {
    let start = tokio::time::Instant::now();
    while !ready() {
        assert!(start.elapsed() < LIMIT, "waited {LIMIT:?} for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// [`eventually`] for a condition that must ask something (an API, a server).
pub async fn eventually_async(what: &str, mut ready: impl AsyncFnMut() -> bool) {
    let start = tokio::time::Instant::now();
    while !ready().await {
        assert!(start.elapsed() < LIMIT, "waited {LIMIT:?} for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Asserts `holds` at every look (every 20 ms) for `window`: that something does not
/// happen, checked all along rather than once at the end of a sleep.
pub async fn holds_for(what: &str, window: Duration, mut holds: impl FnMut() -> bool) {
    let start = tokio::time::Instant::now();
    while start.elapsed() < window {
        assert!(holds(), "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(holds(), "{what}");
}

/// Writes sink `sink` has finished so far, whatever their result: a clock made of the
/// engine's own work, for tests that check nothing happens over several reconciles.
pub fn sink_writes(engine: &Engine, sink: &str) -> u64 {
    ["changed", "unchanged", "error"]
        .into_iter()
        .map(|result| sink_writes_with(engine, sink, result))
        .sum()
}

/// Writes sink `sink` has finished with `result` (`changed`, `unchanged`, `error`).
pub fn sink_writes_with(engine: &Engine, sink: &str, result: &'static str) -> u64 {
    engine
        .metrics()
        .sink_writes
        .get_or_create(&ho_engine::metrics::SinkResultLabels {
            sink: sink.into(),
            result,
        })
        .get()
}

/// Starts `n` healthy gateways, each on its own loopback address.
pub fn gateways(n: usize) -> Vec<Gateway> {
    (0..n)
        .map(|_| Gateway::start(loopback(), Behaviour::Healthy).unwrap())
        .collect()
}

/// The config text most tests use: `check` as the default check, one endpoint per gateway
/// (`gw-1`, ...), and `tail` (tenants and sinks) merged in.
pub fn config(check: &Check, gateways: &[&Gateway], tail: &str) -> String {
    TestConfig::new(check, gateways).with(tail).render()
}

/// Writes `text` to `dir/config.toml`, loads it through the real loader and starts the
/// engine with the real sinks. Route53 sinks get fixed test credentials (the standard AWS
/// chain could ask an instance metadata service, which tests must never contact).
pub async fn start_engine(dir: &Path, text: &str) -> Engine {
    let file = dir.join("config.toml");
    std::fs::write(&file, text).unwrap();
    let plan = ho_kinds::load_plan(&[&file]).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let aws = crate::fakes::route53::sdk_config();
    Engine::start(plan, ho_kinds::parts(ho_kinds::Sinks::with_aws(aws)))
        .await
        .unwrap()
}

/// Waits until sink `sink` reports an error for its first tenant; `what` names the expected problem.
pub async fn wait_for_sink_error(engine: &Engine, sink: &str, what: &str) -> String {
    let start = tokio::time::Instant::now();
    loop {
        if let Some(e) = sink_error(engine, sink).await {
            return e;
        }
        assert!(start.elapsed() < LIMIT, "no sink error for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The last error of the sink's first tenant, if any.
pub async fn sink_error(engine: &Engine, sink: &str) -> Option<String> {
    let status = engine.sink_status(sink).await.unwrap();
    status
        .tenants
        .first()
        .and_then(|t| t.last_error.as_ref().map(|e| e.message.clone()))
}

/// The body of `GET path` on the API at `addr` (HTTP/1.0, connection closed by the server).
pub async fn api_get(addr: std::net::SocketAddr, path: &str) -> String {
    try_api_get(addr, path)
        .await
        .unwrap_or_else(|| panic!("no answer from the API at {addr} for {path}"))
}

/// [`api_get`], or `None` while nothing answers at `addr` (a process starting or killed).
pub async fn try_api_get(addr: std::net::SocketAddr, path: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).await.ok()?;
    Some(
        out.split_once("\r\n\r\n")
            .map(|(_, body)| body.to_string())
            .unwrap_or_default(),
    )
}

/// Serves `engine`'s API on a free port of 127.0.0.1, with the read `token` and the
/// `admin` token given; its address.
pub async fn serve_api(
    engine: &Engine,
    token: Option<&str>,
    admin: Option<&str>,
) -> std::net::SocketAddr {
    let tokens = ho_engine::api::ApiTokens {
        read: token.map(Into::into),
        admin: admin.map(Into::into),
        heartbeat: None,
    };
    serve_api_with(engine, tokens).await
}

/// [`serve_api`] asking `tokens`.
pub async fn serve_api_with(
    engine: &Engine,
    tokens: ho_engine::api::ApiTokens,
) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    actix::spawn(ho_engine::api::serve(listener, engine.api_state(tokens)));
    addr
}

/// Sends `METHOD path` (HTTP/1.0, so the server closes) with a bearer `token` if given;
/// the status code and body.
pub async fn api_request(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
) -> (u16, String) {
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let (head, body) = raw_request(addr, &format!("{method} {path} HTTP/1.0\r\n{auth}\r\n")).await;
    let code = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (code, body)
}

/// Sends `request` (a whole HTTP/1.0 request head) to the API at `addr`; the response's
/// head and body (the server closes the connection).
pub async fn raw_request(addr: std::net::SocketAddr, request: &str) -> (String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).await.unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    (head.to_owned(), body.to_owned())
}

/// Spawns `cmd` with its standard error written to `log` (read back by the test) and its
/// output discarded; killed when dropped.
pub fn spawn_logged(cmd: &mut std::process::Command, log: &Path) -> Running {
    Running(
        cmd.stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap(),
    )
}

/// `run` as a child process, killed when dropped (also when a test fails midway, so its
/// API port is free for the next run).
pub struct Running(pub std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The binary under test, without the caller's `HO_*` variables (they are configuration):
/// cargo's build, or `TEST_BINARY` when set (a long soak runs a copy, which a rebuild
/// meanwhile leaves alone).
pub fn binary() -> std::process::Command {
    let path = std::env::var_os("TEST_BINARY")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_health-orchestrator").into());
    let mut cmd = std::process::Command::new(path);
    for (key, _) in std::env::vars() {
        if key.starts_with("HO_") {
            cmd.env_remove(key);
        }
    }
    cmd
}

/// `health-orchestrator run` on a config over `gateways` with `tail` (written to
/// `dir/config.toml`), logging warnings to nowhere and with no inherited `HO_*` variable:
/// callers add environment and spawn.
pub fn run_command(dir: &Path, gateways: &[Gateway], tail: &str) -> std::process::Command {
    run_config(
        dir,
        &TestConfig::new(&Check::FAST, &gateways.iter().collect::<Vec<_>>()).with(tail),
    )
}

/// [`run_command`] on a config the caller built.
pub fn run_config(dir: &Path, config: &TestConfig) -> std::process::Command {
    let file = dir.join("config.toml");
    std::fs::write(&file, config.render()).unwrap();
    let mut cmd = binary();
    cmd.args(["run", "--config"])
        .arg(&file)
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    cmd
}

/// Sends SIGTERM to `child` and polls (never blocks: receivers on the test's runtime must
/// keep answering while the process flushes) until it exits; asserts a clean exit and
/// returns how long it took.
pub async fn terminate(child: &mut std::process::Child) -> Duration {
    // bash's builtin `kill`: no dependency on procps being installed.
    let term = std::process::Command::new("bash")
        .args(["-c", &format!("kill -TERM {}", child.id())])
        .status()
        .unwrap();
    assert!(term.success());
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(start.elapsed() < LIMIT, "no exit after SIGTERM");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert!(status.success(), "{status:?}");
    start.elapsed()
}

/// The test receivers' (webhook, Kubernetes API) common accept loop.
pub use ho_testkit::serve_http;

/// `[[endpoints]]` for gateways (`gw-1`, ...) with extra fields each (e.g. `priority = 1`).
pub fn endpoints(gws: &[Gateway], extra: &[&str]) -> String {
    gws.iter()
        .zip(extra)
        .enumerate()
        .map(|(i, (g, extra))| {
            format!(
                "[[endpoints]]\nname = \"gw-{}\"\naddress = \"{}\"\n{extra}\ncheck = {{ port = {} }}\n\n",
                i + 1,
                g.addr().ip(),
                g.addr().port()
            )
        })
        .collect()
}

/// A `[sinks.local]` table writing into `dir`.
pub fn hosts_sink(dir: &Path) -> String {
    format!(
        "[sinks.local]\nkind = \"hosts_file\"\ndir = {:?}\n",
        dir.display().to_string()
    )
}

/// Polls `file` until `ready(content)`; panics with the content after [`LIMIT`].
pub async fn wait_for_file(file: &Path, what: &str, ready: impl Fn(&str) -> bool) -> Duration {
    let start = Instant::now();
    loop {
        let content = std::fs::read_to_string(file).unwrap_or_default();
        if ready(&content) {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < LIMIT,
            "timed out waiting for {what}; {} holds:\n{content}",
            file.display()
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Polls the tracker until `ready(status)`.
pub async fn wait_for_status(
    engine: &Engine,
    what: &str,
    ready: impl Fn(&TrackerStatus) -> bool,
) -> TrackerStatus {
    let start = Instant::now();
    loop {
        let status = engine.status().await.unwrap().tracker;
        if ready(&status) {
            return status;
        }
        assert!(
            start.elapsed() < LIMIT,
            "timed out waiting for {what}; status: {status:#?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The state of endpoint `name` in `status`.
pub fn state_of(status: &TrackerStatus, name: &str) -> Health {
    status
        .endpoints
        .iter()
        .find(|e| e.name == name)
        .unwrap()
        .state
}

/// The addresses listed in a hosts file's text.
pub fn addresses(content: &str) -> Vec<String> {
    content
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// The address of gateway `g` as text.
pub fn ip(g: &Gateway) -> String {
    g.addr().ip().to_string()
}

/// `/status`'s stale names (`canaries[].stale`) of sink `sink`'s answer canary.
pub async fn canary_stale(api: std::net::SocketAddr, sink: &str) -> Vec<serde_json::Value> {
    let status: serde_json::Value = serde_json::from_str(&api_get(api, "/status").await).unwrap();
    status["canaries"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["sink"] == sink)
        .flat_map(|c| c["stale"].as_array().cloned().unwrap_or_default())
        .collect()
}

/// Polls `/status` until each of `names` is stale at `sink`'s canary (`want`), or none is
/// (`!want`); how long that took.
pub async fn wait_stale(
    api: std::net::SocketAddr,
    sink: &str,
    names: &[String],
    want: bool,
) -> Duration {
    let start = tokio::time::Instant::now();
    loop {
        let stale: Vec<String> = (canary_stale(api, sink).await.iter())
            .map(|s| s["name"].as_str().unwrap().to_owned())
            .collect();
        if names.iter().all(|n| stale.contains(n) == want) {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < LIMIT,
            "{sink}: stale={want} never held for {names:?}: {stale:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The answer canary's questions to `sink` answered with `result` (`match`, `differs`,
/// `error`) so far.
pub async fn canary_questions(api: std::net::SocketAddr, sink: &str, result: &str) -> f64 {
    let sample =
        format!("health_orchestrator_canary_queries_total{{sink=\"{sink}\",result=\"{result}\"}}");
    metric(&api_get(api, "/metrics").await, &sample).unwrap_or(0.0)
}

/// Polls until the canary asked `sink` `more` further questions answered with `result`:
/// what a stretch of a script lasts, counted in the canary's own observations.
pub async fn wait_questions(api: std::net::SocketAddr, sink: &str, result: &str, more: f64) {
    let from = canary_questions(api, sink, result).await;
    eventually_async(
        &format!("{more} more {result} answers from {sink}"),
        async || canary_questions(api, sink, result).await >= from + more,
    )
    .await;
}

/// The value of sample `name` (with its labels, e.g. `x_total{a="b"}`) in a Prometheus
/// text exposition; `None` when absent.
pub fn metric(metrics: &str, name: &str) -> Option<f64> {
    metrics
        .lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// A tool from the virtualenv `.ci/test` installs: `$VAR`, else its default place.
pub fn python_tool(var: &str, name: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| {
        format!(
            "{}/.cache/health-orchestrator/py-tools-1/bin/{name}",
            std::env::var("HOME").unwrap_or_default()
        )
    })
}

/// Reads `data:` lines of an open `/events` response until `done` holds for the events
/// seen (each parsed as JSON); all of them.
pub async fn read_events(
    stream: &mut tokio::net::TcpStream,
    done: impl Fn(&[serde_json::Value]) -> bool,
) -> Vec<serde_json::Value> {
    let mut raw = Vec::new();
    let mut events = Vec::new();
    let start = Instant::now();
    while !done(&events) {
        assert!(start.elapsed() < LIMIT, "events so far: {events:?}");
        let mut buf = [0u8; 4096];
        let n = tokio::time::timeout(LIMIT, tokio::io::AsyncReadExt::read(stream, &mut buf))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "the stream ended; events so far: {events:?}");
        raw.extend_from_slice(&buf[..n]);
        events = String::from_utf8_lossy(&raw)
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|j| serde_json::from_str(j).unwrap())
            .collect();
    }
    events
}
