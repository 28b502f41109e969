//! Secrets and the API, with `run` as its own process: the API token guards `/status` and
//! `/metrics` (not the probes' `/healthz` and `/readyz`), the API takes only small GETs, and
//! no secret (API token, webhook secret, PowerDNS key) appears in anything the process
//! emits: debug logs, `/status`, `/metrics`, or the trace spans it exports.

use std::net::SocketAddr;
use std::time::Duration;

use ho_testkit::Behaviour;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use crate::fakes::otlp::Collector;
use crate::fakes::webhook::{Receiver, SECRET};
use crate::harness::*;

const TOKEN: &str = "api-token-7c1f0e";
const PDNS_KEY: &str = "pdns-key-52ab9d";

/// The raw answer (status line, headers, body) to `request`.
async fn raw(addr: SocketAddr, request: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let _ = s.write_all(request.as_bytes()).await;
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out).await;
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn the_api_token_guards_status_and_no_secret_is_ever_emitted() {
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(2);
    let api = SocketAddr::new(loopback_ip().into(), 18080);
    let collector = Collector::default();
    let otlp = SocketAddr::new(loopback_ip().into(), 4318);
    // Nothing listens here: the PowerDNS sink fails, and its error must not carry the key.
    let pdns = SocketAddr::new(loopback_ip().into(), 1);
    collector.serve_http(otlp).await;
    let rx = Receiver::default();
    let hook = rx.clone().start().await;
    for (name, value) in [("token", TOKEN), ("hook", SECRET), ("pdns", PDNS_KEY)] {
        std::fs::write(dir.path().join(name), format!("{value}\n")).unwrap();
    }
    let path = |n: &str| dir.path().join(n).display().to_string();
    let tail = format!(
        "[[tenants]]\nname = \"web\"\ndomains = [\"web.tenant-a.io\"]\nsinks = [\"hook\", \"pdns\"]\n\n\
         [sinks.hook]\nkind = \"webhook\"\nurl = \"http://{hook}/\"\nsecret_file = {:?}\n\n\
         [sinks.pdns]\nkind = \"powerdns\"\nurl = \"http://{pdns}\"\napi_key_file = {:?}\nzone = \"tenant-a.io\"\ntimeout = \"200ms\"\n\
         delivery = {{ backoff_min = \"50ms\", backoff_max = \"200ms\" }}\n\n\
         [telemetry]\notlp_endpoint = \"http://{otlp}\"\nprobe_sample_ratio = 1.0\n",
        path("hook"),
        path("pdns")
    );
    let text = TestConfig::new(&Check::FAST, &gws.iter().collect::<Vec<_>>())
        .with(&tail)
        .set("api.listen", api.to_string())
        .set("api.token_file", path("token"))
        .render();
    let file = dir.path().join("config.toml");
    std::fs::write(&file, text).unwrap();
    let log = dir.path().join("stderr.log");
    let mut child = spawn_logged(
        std::process::Command::new(env!("CARGO_BIN_EXE_health-orchestrator"))
            .args(["run", "--config"])
            .arg(&file)
            .env("RUST_LOG", "debug"),
        &log,
    );

    let start = Instant::now();
    while rx.accepted().is_empty() {
        assert!(start.elapsed() < LIMIT, "nothing delivered");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    gws[1].set(Behaviour::Refuse).unwrap();
    while rx.accepted().len() < 2 {
        assert!(start.elapsed() < LIMIT, "the change was not delivered");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let get = |path: &str, auth: Option<&str>| {
        let header = auth.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
        format!("GET {path} HTTP/1.0\r\nHost: x\r\n{header}\r\n")
    };
    for path in ["/status", "/metrics"] {
        let denied = raw(api, &get(path, None)).await;
        assert!(denied.starts_with("HTTP/1.0 401"), "{path}: {denied}");
        assert!(denied.contains("www-authenticate: Bearer"), "{denied}");
        let wrong = raw(api, &get(path, Some("api-token-7c1f0f"))).await;
        assert!(wrong.starts_with("HTTP/1.0 401"), "{path}: {wrong}");
        assert!(raw(api, &get(path, Some(TOKEN)))
            .await
            .starts_with("HTTP/1.0 200"));
    }
    for path in ["/healthz", "/readyz"] {
        assert!(
            raw(api, &get(path, None)).await.starts_with("HTTP/1.0 200"),
            "{path}"
        );
    }
    let post = raw(api, "POST /status HTTP/1.0\r\nContent-Length: 2\r\n\r\n{}").await;
    assert!(post.starts_with("HTTP/1.0 405"), "{post}");
    let huge = format!(
        "GET /healthz HTTP/1.0\r\nX-Pad: {}\r\n\r\n",
        "a".repeat(64 * 1024)
    );
    let answer = raw(api, &huge).await;
    assert!(
        !answer.starts_with("HTTP/1.0 200"),
        "a 64 KiB request head was served"
    );

    // The PowerDNS sink keeps failing (nothing listens there): its errors are logged.
    let status = raw(api, &get("/status", Some(TOKEN))).await;
    let metrics = raw(api, &get("/metrics", Some(TOKEN))).await;
    assert!(
        status.contains("\"last_error\": {"),
        "no sink error in /status: {status}"
    );
    terminate(&mut child.0).await;
    let logs = std::fs::read_to_string(&log).unwrap();
    assert!(logs.contains("write failed"), "debug logs were captured");
    let spans = format!("{:?}", collector.spans());
    assert!(
        spans.contains("sink.write"),
        "no spans captured; telemetry log lines:\n{}",
        logs.lines()
            .filter(|l| l.contains("telemetry")
                || l.contains("otlp")
                || l.contains("opentelemetry"))
            .take(20)
            .collect::<Vec<_>>()
            .join("\n")
    );
    for (what, text) in [
        ("logs", &logs),
        ("/status", &status),
        ("/metrics", &metrics),
        ("spans", &spans),
    ] {
        for secret in [TOKEN, SECRET, PDNS_KEY] {
            assert!(
                !text.contains(secret),
                "{what} contains the secret {secret}"
            );
        }
    }
}
