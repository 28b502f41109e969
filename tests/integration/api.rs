//! The operator API over a real socket.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::harness::*;

/// Tenant `t` (`t.example`) published by sink `local` to a hosts file in `dir`.
fn hosts_tenant(dir: &std::path::Path) -> String {
    format!(
        "[[tenants]]\nname = \"t\"\ndomains = [\"t.example\"]\nsinks = [\"local\"]\n\n{}",
        hosts_sink(dir)
    )
}

/// An engine over `gws` (the fast check) publishing [`hosts_tenant`] in `dir`.
async fn hosts_engine(dir: &std::path::Path, gws: &[ho_testkit::Gateway]) -> ho_engine::Engine {
    let refs: Vec<&ho_testkit::Gateway> = gws.iter().collect();
    start_engine(dir, &config(&Check::FAST, &refs, &hosts_tenant(dir))).await
}

/// Sends `GET path` and returns status code and body.
async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    api_request(addr, "GET", path, None).await
}

#[actix_rt::test]
async fn healthz_readyz_status_and_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(2);
    let engine = hosts_engine(dir.path(), &gws).await;
    let addr = serve_api(&engine, None, None).await;

    assert_eq!(get(addr, "/healthz").await, (200, "ok\n".into()));
    // The OpenOva spec's manifests probe /health.
    assert_eq!(get(addr, "/health").await, (200, "ok\n".into()));
    let start = tokio::time::Instant::now();
    while get(addr, "/readyz").await.0 != 200 {
        assert!(start.elapsed() < LIMIT, "never ready");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    gws[1].set(ho_testkit::Behaviour::Status(503)).unwrap();
    wait_for_file(&dir.path().join("t.hosts"), "gw-2 to leave", |c| {
        addresses(c) == [ip(&gws[0])]
    })
    .await;

    // The file is renamed into place a moment before the sink actor records the write.
    let start = tokio::time::Instant::now();
    let status = loop {
        let (code, body) = get(addr, "/status").await;
        assert_eq!(code, 200);
        let status: serde_json::Value = serde_json::from_str(&body).unwrap();
        if status["sinks"][0]["tenants"][0]["pending"] == false {
            break status;
        }
        assert!(
            start.elapsed() < LIMIT,
            "the sink never caught up: {status:#}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    assert_eq!(status["ready"], true);
    // The OpenOva spec's fields.
    assert_eq!(status["healthy_nodes"], serde_json::json!([ip(&gws[0])]));
    assert_eq!(status["healthy_endpoints"], serde_json::json!(["gw-1"]));
    assert_eq!(status["total_nodes"], 2);
    let last_check = status["last_check"].as_str().unwrap();
    let at = humantime::parse_rfc3339(last_check).unwrap();
    assert!(
        at.elapsed().unwrap() < Duration::from_secs(5),
        "{last_check}"
    );
    assert_eq!(status["leadership"]["role"], "single");
    // One format for every timestamp a person reads: RFC 3339.
    for at in [
        &status["endpoints"][1]["since"],
        &status["endpoints"][1]["last"]["at"],
        &status["tenants"][0]["published"]["at"],
        &status["sinks"][0]["tenants"][0]["last_success"],
    ] {
        let text = at
            .as_str()
            .unwrap_or_else(|| panic!("{at} is not RFC 3339 text"));
        humantime::parse_rfc3339(text).unwrap();
    }
    assert_eq!(status["endpoints"][1]["name"], "gw-2");
    assert_eq!(status["endpoints"][1]["state"], "down");
    assert_eq!(status["endpoints"][1]["last"]["reason"], "status 503");
    assert_eq!(
        status["tenants"][0]["published"]["addresses"],
        serde_json::json!([ip(&gws[0])])
    );
    assert_eq!(status["tenants"][0]["published"]["mode"], "healthy");
    let sink = &status["sinks"][0];
    assert_eq!(sink["name"], "local");
    assert_eq!(sink["kind"], "hosts_file");
    assert_eq!(
        sink["tenants"][0]["written_seq"],
        sink["tenants"][0]["desired_seq"]
    );
    assert!(sink["tenants"][0]["last_error"].is_null());
    assert_eq!(sink["queued"], 0, "nothing waits for a place or a token");

    let (code, metrics) = get(addr, "/metrics").await;
    assert_eq!(code, 200);
    for needle in [
        "health_orchestrator_healthy_nodes{tenant=\"t\"} 1",
        &format!(
            "health_orchestrator_node_status{{node_name=\"gw-2\",node_ip=\"{}\"}} 0",
            ip(&gws[1])
        ),
        &format!(
            "health_orchestrator_node_status{{node_name=\"gw-1\",node_ip=\"{}\"}} 1",
            ip(&gws[0])
        ),
        "health_orchestrator_probes_total{result=\"status\"}",
        "health_orchestrator_probes_total{result=\"ok\"}",
        "health_orchestrator_check_duration_seconds_bucket",
        "health_orchestrator_dns_updates_total{tenant=\"t\"}",
        "health_orchestrator_sink_writes_total{sink=\"local\",result=\"changed\"}",
        "health_orchestrator_failover_seconds_count{sink=\"local\"}",
        "health_orchestrator_sink_writes_queued{sink=\"local\"} 0",
    ] {
        assert!(metrics.contains(needle), "missing {needle} in\n{metrics}");
    }
    assert_eq!(get(addr, "/nope").await.0, 404);
}

/// `/status` and `/metrics` answer at most `api.max_requests_per_second` (bursts of twice
/// that), then 429 with Retry-After, counted; `/healthz` and `/readyz` are never limited.
#[actix_rt::test]
async fn status_and_metrics_are_rate_limited_but_probes_of_the_process_are_not() {
    let dir = tempfile::tempdir().unwrap();
    let gws = gateways(1);
    let text = TestConfig::new(&Check::FAST, &gws.iter().collect::<Vec<_>>())
        .with(&hosts_tenant(dir.path()))
        .set("api.max_requests_per_second", 2)
        .render();
    let engine = start_engine(dir.path(), &text).await;
    let addr = serve_api(&engine, None, None).await;

    let mut codes = Vec::new();
    let burst = Instant::now();
    for i in 0..12 {
        let path = if i % 2 == 0 { "/status" } else { "/metrics" };
        codes.push(get(addr, path).await.0);
        // Interleaved liveness checks: never limited.
        assert_eq!(get(addr, "/healthz").await.0, 200);
    }
    let ok = codes.iter().filter(|&&c| c == 200).count();
    let limited = codes.iter().filter(|&&c| c == 429).count();
    assert_eq!(ok + limited, codes.len(), "{codes:?}");
    // A burst of 4, plus the tokens refilled (2 a second) while the 12 requests ran, counted
    // from their measured duration so a slow machine cannot fail the bound.
    let refilled = (burst.elapsed().as_secs_f64() * 2.0).ceil() as usize;
    assert!(
        (4..=4 + refilled).contains(&ok),
        "{codes:?} in {:?}",
        burst.elapsed()
    );
    assert_eq!(&codes[..4], &[200; 4], "the burst is answered: {codes:?}");

    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").await.unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).await.unwrap();
    assert!(raw.starts_with("HTTP/1.0 429"), "{raw}");
    assert!(raw.to_ascii_lowercase().contains("retry-after: 1"), "{raw}");

    tokio::time::sleep(Duration::from_millis(600)).await;
    let (code, metrics) = get(addr, "/metrics").await;
    assert_eq!(code, 200, "a token comes back after 1/rate seconds");
    let refused = limited + 1;
    assert!(
        metrics.contains(&format!(
            "health_orchestrator_api_rate_limited_total {refused}"
        )),
        "{metrics}"
    );
}

/// `/events`: one JSON object per event, as Server-Sent Events: a gateway failing shows
/// as its transition, the tenant's publish and the sink's write; the stream needs the
/// token `/status` needs, and open streams are bounded.
#[actix_rt::test]
async fn events_stream_transitions_publishes_and_writes() {
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(2);
    let engine = hosts_engine(dir.path(), &gws).await;
    let addr = serve_api(&engine, Some("read-token"), None).await;
    wait_for_file(&dir.path().join("t.hosts"), "both", |c| {
        addresses(c).len() == 2
    })
    .await;
    assert_eq!(api_request(addr, "GET", "/events", None).await.0, 401);

    let open = || async {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer read-token\r\n\r\n")
            .await
            .unwrap();
        s
    };
    let mut stream = open().await;
    let mut head = [0u8; 512];
    let n = stream.read(&mut head).await.unwrap();
    let head = String::from_utf8_lossy(&head[..n]).to_string();
    assert!(
        head.starts_with("HTTP/1.1 200") && head.contains("text/event-stream"),
        "{head}"
    );

    gws[1].set(ho_testkit::Behaviour::Refuse).unwrap();
    let has = |events: &[serde_json::Value], kind: &str| events.iter().any(|e| e["type"] == kind);
    let events = read_events(&mut stream, |e| {
        has(e, "transition") && has(e, "publish") && has(e, "sink_write")
    })
    .await;
    let transition = events.iter().find(|e| e["type"] == "transition").unwrap();
    assert_eq!(transition["endpoints"][0], "gw-2");
    assert_eq!(
        (transition["from"].as_str(), transition["to"].as_str()),
        (Some("up"), Some("down"))
    );
    let publish = events.iter().find(|e| e["type"] == "publish").unwrap();
    assert_eq!(publish["addresses"], serde_json::json!([ip(&gws[0])]));
    let write = events.iter().find(|e| e["type"] == "sink_write").unwrap();
    assert_eq!(
        (write["sink"].as_str(), write["result"].as_str()),
        (Some("local"), Some("changed"))
    );

    // 16 streams at most: this one and 15 more fill it, the next gets 503.
    let mut others = Vec::new();
    for _ in 0..15 {
        let mut s = open().await;
        let mut head = [0u8; 256];
        let n = s.read(&mut head).await.unwrap();
        assert!(String::from_utf8_lossy(&head[..n]).starts_with("HTTP/1.1 200"));
        others.push(s);
    }
    let mut extra = open().await;
    let mut head = [0u8; 256];
    let n = extra.read(&mut head).await.unwrap();
    assert!(String::from_utf8_lossy(&head[..n]).starts_with("HTTP/1.1 503"));
}

/// A listener arriving late asks for what happened before (`/events?since=`): the kept
/// events come first, marked as replayed and oldest first; a `since` that is not a time is
/// a 400.
#[actix_rt::test]
async fn a_late_listener_gets_the_recent_events_first() {
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(2);
    let engine = hosts_engine(dir.path(), &gws).await;
    let addr = serve_api(&engine, None, None).await;
    let file = dir.path().join("t.hosts");
    wait_for_file(&file, "both", |c| addresses(c).len() == 2).await;
    gws[1].set(ho_testkit::Behaviour::Refuse).unwrap();
    wait_for_file(&file, "gw-2 gone", |c| addresses(c).len() == 1).await;

    let mut late = tokio::net::TcpStream::connect(addr).await.unwrap();
    late.write_all(b"GET /events?since=1970-01-01T00%3A00%3A00Z HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let events = read_events(&mut late, |e| {
        e.iter()
            .any(|e| e["type"] == "transition" && e["to"] == "down")
    })
    .await;
    // The kept events first, then live ones (a write finishing as the listener arrives may
    // be either), never a replayed one after a live one.
    let replayed = events.iter().take_while(|e| e["replay"] == true).count();
    assert!(
        events[replayed..].iter().all(|e| e.get("replay").is_none()),
        "{events:?}"
    );
    let replayed = &events[..replayed];
    assert_eq!(
        (replayed[0]["type"].as_str(), replayed[0]["from"].as_str()),
        (Some("transition"), Some("unknown")),
        "oldest first: {events:?}"
    );
    assert!(
        replayed
            .iter()
            .any(|e| e["type"] == "transition" && e["to"] == "down"),
        "the failure happened before the listener came: {events:?}"
    );
    assert_eq!(
        api_request(addr, "GET", "/events?since=yesterday", None)
            .await
            .0,
        400
    );
}
