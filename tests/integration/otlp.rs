//! Traces from `run` (as its own process) into a real OTLP receiver in the test, built from
//! the official OTLP protobuf/gRPC definitions (`opentelemetry-proto`): the gRPC
//! `TraceService` on tonic, and the http/protobuf endpoint `POST /v1/traces`.

use std::net::SocketAddr;
use std::process::Child;
use std::time::Duration;

use ho_testkit::Behaviour;

use crate::fakes::otlp::Collector;
use crate::harness::*;

fn start_run(dir: &std::path::Path, gws: &[ho_testkit::Gateway], telemetry: &str) -> Child {
    let tail = format!(
        "[[tenants]]\nname = \"web\"\ndomains = [\"web.example\"]\nsinks = [\"local\"]\n\n{}\n[telemetry]\n{telemetry}",
        hosts_sink(dir)
    );
    run_command(dir, gws, &tail)
        .env_remove("OTEL_EXPORTER_OTLP_HEADERS")
        .stderr(std::fs::File::create(dir.join("stderr.log")).unwrap())
        .spawn()
        .unwrap()
}

/// A gateway goes down and the process is stopped right after (before the exporter's
/// one-second linger): the spans of transition -> publish -> sink write arrive, linked
/// parent to child in one trace, with their attributes, flushed by the shutdown.
async fn one_failover_trace(collector: &Collector, endpoint: &str, protocol: &str) {
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(2);
    let mut child = start_run(
        dir.path(),
        &gws,
        &format!(
            "otlp_endpoint = \"{endpoint}\"\notlp_protocol = \"{protocol}\"\nservice_name = \"ho-test\"\nprobe_sample_ratio = 0.0\nlog_format = \"json\"\n"
        ),
    );
    let hosts = dir.path().join("web.hosts");
    let all: Vec<String> = gws.iter().map(ip).collect();
    wait_for_file(&hosts, "both published", |c| addresses(c) == all).await;
    gws[1].set(Behaviour::Refuse).unwrap();
    wait_for_file(&hosts, "gw-2 removed", |c| addresses(c) == all[..1]).await;
    terminate(&mut child).await;

    let spans = collector.spans();
    let down = spans
        .iter()
        .find(|s| s.name == "endpoint.transition" && s.attr("to") == Some("down"))
        .unwrap_or_else(|| panic!("no down transition in {spans:#?}"));
    assert_eq!(down.service, "ho-test");
    assert_eq!(down.attr("endpoint.names"), Some("gw-2"));
    assert_eq!(down.attr("reason"), Some("refused"));
    assert_eq!(down.attr("from"), Some("up"));
    assert_eq!(down.attr("consecutive"), Some("2"));
    assert_eq!(down.attr("address"), Some(all[1].as_str()));
    let publish = spans
        .iter()
        .find(|s| s.name == "tenant.publish" && s.parent == down.span_id)
        .unwrap_or_else(|| panic!("no publish under the transition in {spans:#?}"));
    assert_eq!(publish.trace_id, down.trace_id);
    assert_eq!(publish.attr("tenant"), Some("web"));
    assert_eq!(publish.attr("records.addresses"), Some("1"));
    let write = spans
        .iter()
        .find(|s| s.name == "sink.write" && s.parent == publish.span_id)
        .unwrap_or_else(|| panic!("no sink write under the publish in {spans:#?}"));
    assert_eq!(write.trace_id, down.trace_id);
    assert_eq!(write.attr("sink"), Some("local"));
    assert_eq!(write.attr("sink.kind"), Some("hosts_file"));
    assert_eq!(write.attr("result"), Some("changed"));
    assert_eq!(write.attr("attempt"), Some("1"));
    let trace_id: String = down.trace_id.iter().map(|b| format!("{b:02x}")).collect();
    println!(
        "{protocol}: {} spans received; failover trace {trace_id}",
        spans.len()
    );

    // JSON logs: every line is one JSON object; the warning of the transition carries the
    // trace id of its span, so logs and traces join.
    let logs = std::fs::read_to_string(dir.path().join("stderr.log")).unwrap();
    let lines: Vec<serde_json::Value> = logs
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let warning = lines
        .iter()
        .find(|l| l["level"] == "WARN" && l["reason"] == "refused")
        .unwrap_or_else(|| panic!("no transition warning in {logs}"));
    assert_eq!(warning["trace_id"], trace_id.as_str(), "{warning}");
}

#[tokio::test]
async fn a_failover_is_one_trace_over_grpc() {
    let collector = Collector::default();
    let addr = SocketAddr::new(loopback_ip().into(), 4317);
    collector.serve_grpc(addr).await;
    one_failover_trace(&collector, &format!("http://{addr}"), "grpc").await;
}

#[tokio::test]
async fn a_failover_is_one_trace_over_http_protobuf() {
    let collector = Collector::default();
    let addr = SocketAddr::new(loopback_ip().into(), 4318);
    collector.serve_http(addr).await;
    one_failover_trace(&collector, &format!("http://{addr}"), "http/protobuf").await;
}

/// An unreachable collector never holds probing up: the failover happens as fast as
/// without traces, and the process still exits promptly on SIGTERM.
#[tokio::test]
async fn an_unreachable_collector_does_not_slow_failover() {
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(2);
    // Nothing listens on this loopback address.
    let nowhere = SocketAddr::new(loopback_ip().into(), 4318);
    let mut child = start_run(
        dir.path(),
        &gws,
        &format!("otlp_endpoint = \"http://{nowhere}\"\nprobe_sample_ratio = 1.0\ntimeout = \"200ms\"\nqueue_size = 16\n"),
    );
    let hosts = dir.path().join("web.hosts");
    let all: Vec<String> = gws.iter().map(ip).collect();
    wait_for_file(&hosts, "both published", |c| addresses(c) == all).await;
    gws[1].set(Behaviour::Refuse).unwrap();
    let took = wait_for_file(&hosts, "gw-2 removed", |c| addresses(c) == all[..1]).await;
    assert!(took < Duration::from_secs(2), "took {took:?}");
    let exit = terminate(&mut child).await;
    assert!(exit < Duration::from_secs(3), "exit took {exit:?}");
}
