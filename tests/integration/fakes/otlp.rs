//! An OTLP trace receiver built from the official OTLP protobuf/gRPC definitions
//! (`opentelemetry-proto`): the gRPC `TraceService` on tonic and the http/protobuf endpoint
//! `POST /v1/traces`, recording every span it receives. No collector binary can be
//! installed on the test machines; this speaks both of the exporter's wire protocols.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
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

/// One received span, flattened.
#[derive(Debug, Clone)]
pub struct Received {
    /// `service.name` of the span's resource.
    pub service: String,
    pub name: String,
    pub trace_id: Vec<u8>,
    pub span_id: Vec<u8>,
    /// The parent's span id; empty for a root span.
    pub parent: Vec<u8>,
    attributes: Vec<(String, String)>,
}

impl Received {
    /// Attribute `key` as text.
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Records every span sent to it over either protocol.
#[derive(Clone, Default)]
pub struct Collector {
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

    pub fn spans(&self) -> Vec<Received> {
        self.spans.lock().unwrap().clone()
    }

    /// Serves gRPC on `addr`.
    pub async fn serve_grpc(&self, addr: SocketAddr) {
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        let service = TraceServiceServer::new(self.clone());
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
        );
    }

    /// Serves http/protobuf `POST /v1/traces` on `addr`.
    pub async fn serve_http(&self, addr: SocketAddr) {
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
