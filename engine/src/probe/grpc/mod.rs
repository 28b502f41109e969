//! The `grpc` and `grpcs` kinds: one `grpc.health.v1.Health/Check` call over a fresh
//! HTTP/2 connection (TLS with ALPN `h2` for grpcs); SERVING is healthy, and NOT_SERVING,
//! UNKNOWN, SERVICE_UNKNOWN and every gRPC status each have their reason.

mod settings;
mod wire;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http2;
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncWrite};

use super::connect::{self, SocketSetup};
use super::tls::TlsTarget;
use super::{Attempt, Dial, Failure, KeptConnection, ProbeKind, Progress};
pub use settings::{GrpcCheck, GrpcSettings, GrpcsSettings};

/// A gRPC health check of one target: the request prepared once.
pub(super) struct GrpcProbe {
    uri: String,
    body: Bytes,
    service: String,
    tls: Option<TlsTarget>,
}

impl GrpcProbe {
    fn new(check: &GrpcCheck, addr: SocketAddr, tls: Option<TlsTarget>) -> GrpcProbe {
        let scheme = if tls.is_some() { "https" } else { "http" };
        let authority = check.host.clone().unwrap_or_else(|| addr.to_string());
        GrpcProbe {
            uri: format!("{scheme}://{authority}/grpc.health.v1.Health/Check"),
            body: Bytes::from(wire::request(&check.service)),
            service: check.service.clone(),
            tls,
        }
    }

    async fn run(&self, dial: &Dial, progress: &Progress) -> Result<(), Failure> {
        let tcp = connect::connect(dial.addr, dial.source, SocketSetup::default()).await?;
        progress.connected.store(true, Ordering::Relaxed);
        match &self.tls {
            None => self.call(tcp).await,
            Some(tls) => {
                self.call(Box::pin(tls.handshake(tcp, progress)).await?)
                    .await
            }
        }
    }

    /// The call over an established stream; the connection's task ends with the call.
    async fn call<S>(&self, stream: S) -> Result<(), Failure>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (mut sender, connection) = http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .map_err(|e| from_hyper(&e))?;
        let driver = AbortOnDrop(tokio::spawn(connection));
        let request = Request::post(&self.uri)
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(Full::new(self.body.clone()))
            .expect("a request from validated parts");
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| from_hyper(&e))?;
        if response.status() != 200 {
            return Err(Failure::Status(response.status().as_u16()));
        }
        let (head, body) = response.into_parts();
        let collected = body.collect().await.map_err(|e| from_hyper(&e))?;
        drop(driver);
        // A trailers-only answer (an error) carries grpc-status in its headers.
        let trailers = collected.trailers().cloned().unwrap_or(head.headers);
        let code = trailers
            .get("grpc-status")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u32>().ok())
            .ok_or_else(|| Failure::Protocol("gRPC answer without grpc-status".into()))?;
        if code != 0 {
            let message = trailers
                .get("grpc-message")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            return Err(self.status_failure(code, message));
        }
        let status = wire::status(&collected.to_bytes()).map_err(Failure::Protocol)?;
        serving(status)
    }

    /// A call that failed with gRPC status `code`.
    fn status_failure(&self, code: u32, message: &str) -> Failure {
        match code {
            // The health service's answer for a service it does not know.
            5 => Failure::Answer {
                label: "service_unknown",
                detail: format!("service {:?} unknown to the server", self.service),
            },
            12 => Failure::Answer {
                label: "grpc_status",
                detail: "grpc status 12 UNIMPLEMENTED: the server has no health service".into(),
            },
            _ => Failure::Answer {
                label: "grpc_status",
                detail: format!("grpc status {code}: {message}"),
            },
        }
    }
}

/// The health status of a completed call.
fn serving(status: u64) -> Result<(), Failure> {
    let (label, detail) = match status {
        1 => return Ok(()),
        2 => ("not_serving", "NOT_SERVING"),
        3 => ("service_unknown", "SERVICE_UNKNOWN"),
        0 => ("unknown", "UNKNOWN"),
        _ => ("unknown", "an unknown health status"),
    };
    Err(Failure::Answer {
        label,
        detail: detail.into(),
    })
}

/// A socket error inside hyper's, as the socket error it is; any other, a protocol error.
fn from_hyper(e: &(dyn std::error::Error + 'static)) -> Failure {
    let mut source = Some(e);
    while let Some(err) = source {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            return Failure::from_io(io);
        }
        source = err.source();
    }
    Failure::Protocol(format!("http2: {e}"))
}

/// The connection's task, stopped when the call is over or the deadline drops it.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl ProbeKind for GrpcProbe {
    fn attempt<'a>(
        &'a self,
        dial: &'a Dial,
        progress: &'a Progress,
        _kept: &'a mut Option<KeptConnection>,
    ) -> Attempt<'a> {
        Box::pin(self.run(dial, progress))
    }
}
