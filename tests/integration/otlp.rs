//! Traces from `run` (as its own process) into a real OTLP receiver in the test, built from
//! the official OTLP protobuf/gRPC definitions (`opentelemetry-proto`): the gRPC
//! `TraceService` on tonic, and the http/protobuf endpoint `POST /v1/traces`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::process::Child;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use ho_loadtest::Behaviour;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use prost::Message;

use crate::support::*;

/// One received span, flattened.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    service: String,
    name: String,
    trace_id: Vec<u8>,
    span_id: Vec<u8>,
    parent: Vec<u8>,
    attributes: Vec<(String, String)>,
}

impl Received {
    fn attr(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Clone, Default)]
pub(crate) struct Collector {
    spans: Arc<Mutex<Vec<Received>>>,
}

impl Collector {
    fn take(&self, request: ExportTraceServiceRequest) {
        let mut spans = self.spans.lock().unwrap();
        for rs in request.resource_spans {
            let service = rs
                .resource
                .iter()
                .flat_map(|r| r.attributes.iter())
                .find(|a| a.key == "service.name")
                .map(|a| text(a.value.as_ref().and_then(|v| v.value.as_ref())))
                .unwrap_or_default();
            for ss in rs.scope_spans {
                for span in ss.spans {
                    spans.push(Received {
                        service: service.clone(),
                        name: span.name,
                        trace_id: span.trace_id,
                        span_id: span.span_id,
                        parent: span.parent_span_id,
                        attributes: span
                            .attributes
                            .iter()
                            .map(|a| {
                                (
                                    a.key.clone(),
                                    text(a.value.as_ref().and_then(|v| v.value.as_ref())),
                                )
                            })
                            .collect(),
                    });
                }
            }
        }
    }

    pub(crate) fn spans(&self) -> Vec<Received> {
        self.spans.lock().unwrap().clone()
    }

    /// Serves gRPC on `addr`.
    async fn serve_grpc(&self, addr: SocketAddr) {
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        let service = TraceServiceServer::new(self.clone());
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
        );
    }

    /// Serves http/protobuf `POST /v1/traces` on `addr`.
    pub(crate) async fn serve_http(&self, addr: SocketAddr) {
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        let me = self.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let me = me.clone();
                tokio::spawn(async move {
                    let service =
                        hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                            let me = me.clone();
                            async move {
                                let ok = req.uri().path() == "/v1/traces"
                                    && req
                                        .headers()
                                        .get("content-type")
                                        .and_then(|v| v.to_str().ok())
                                        == Some("application/x-protobuf");
                                let body = req.into_body().collect().await.unwrap().to_bytes();
                                let status = match ExportTraceServiceRequest::decode(body) {
                                    Ok(request) if ok => {
                                        me.take(request);
                                        200
                                    }
                                    _ => 400,
                                };
                                let answer = ExportTraceServiceResponse::default().encode_to_vec();
                                Ok::<_, Infallible>(
                                    Response::builder()
                                        .status(status)
                                        .header("content-type", "application/x-protobuf")
                                        .body(Full::new(Bytes::from(answer)))
                                        .unwrap(),
                                )
                            }
                        });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
    }
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.take(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

fn text(value: Option<&Value>) -> String {
    match value {
        Some(Value::StringValue(s)) => s.clone(),
        Some(Value::IntValue(i)) => i.to_string(),
        Some(Value::DoubleValue(d)) => d.to_string(),
        Some(Value::BoolValue(b)) => b.to_string(),
        _ => String::new(),
    }
}

fn start_run(dir: &std::path::Path, gws: &[ho_loadtest::Gateway], telemetry: &str) -> Child {
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
async fn one_failover_trace(collector: &Collector, endpoint: &str, protocol: &str, test: u8) {
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(test, 2);
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
    let addr = SocketAddr::from(([127, 25, 1, 1], 4317));
    collector.serve_grpc(addr).await;
    one_failover_trace(&collector, &format!("http://{addr}"), "grpc", 90).await;
}

#[tokio::test]
async fn a_failover_is_one_trace_over_http_protobuf() {
    let collector = Collector::default();
    let addr = SocketAddr::from(([127, 25, 2, 1], 4318));
    collector.serve_http(addr).await;
    one_failover_trace(&collector, &format!("http://{addr}"), "http/protobuf", 91).await;
}

/// An unreachable collector never holds probing up: the failover happens as fast as
/// without traces, and the process still exits promptly on SIGTERM.
#[tokio::test]
async fn an_unreachable_collector_does_not_slow_failover() {
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(92, 2);
    // Nothing listens on this loopback address.
    let mut child = start_run(
        dir.path(),
        &gws,
        "otlp_endpoint = \"http://127.25.3.1:4318\"\nprobe_sample_ratio = 1.0\ntimeout = \"200ms\"\nqueue_size = 16\n",
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
