//! The `grpc` and `grpcs` kinds: one `grpc.health.v1.Health/Check` call over a fresh
//! HTTP/2 connection (TLS with ALPN `h2` for grpcs), or over the connection the target's
//! previous probe kept (`reuse_connection`); SERVING is healthy, and NOT_SERVING, UNKNOWN,
//! SERVICE_UNKNOWN and every gRPC status each have their reason.

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
use super::{Attempt, Dial, Failure, KeptConnection, Link, ProbeKind, Progress};
pub use settings::{GrpcCheck, GrpcSettings, GrpcsSettings};

/// A gRPC health check of one target: the request prepared once.
pub(super) struct GrpcProbe {
    uri: String,
    body: Bytes,
    service: String,
    tls: Option<TlsTarget>,
    /// Calls one connection carries (1: a fresh connection every probe).
    per_connection: u32,
}

/// An HTTP/2 connection kept between probes: the handle calls are sent on, and the task
/// driving the connection (stopped when the channel is dropped).
pub(super) struct Channel {
    sender: http2::SendRequest<Full<Bytes>>,
    _driver: AbortOnDrop<Result<(), hyper::Error>>,
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
            per_connection: check.probes_per_connection,
        }
    }

    /// One attempt, over the kept connection when there is one. As for HTTP/1.1, a kept
    /// connection the server closed while idle (a GOAWAY, its idle timeout, a restart) is
    /// not a verdict: the attempt goes on over a fresh connection.
    async fn run(
        &self,
        dial: &Dial,
        progress: &Progress,
        kept: &mut Option<KeptConnection>,
    ) -> Result<(), Failure> {
        if let Some(KeptConnection {
            link: Link::Http2(channel),
            carried,
        }) = kept.take()
        {
            progress.connected.store(true, Ordering::Relaxed);
            progress.reused.store(true, Ordering::Relaxed);
            match self.exchange(channel, carried, kept).await {
                Err(Failure::Closed | Failure::Reset) => {
                    progress.connected.store(false, Ordering::Relaxed);
                    progress.reused.store(false, Ordering::Relaxed);
                }
                verdict => return verdict,
            }
        }
        let tcp = connect::connect(dial.addr, dial.source, SocketSetup::default()).await?;
        progress.connected.store(true, Ordering::Relaxed);
        let channel = match &self.tls {
            None => open(tcp).await?,
            Some(tls) => open(Box::pin(tls.handshake(tcp, progress)).await?).await?,
        };
        self.exchange(channel, 0, kept).await
    }

    /// One call on `channel`, which has carried `carried` calls before; a connection that
    /// answered and can carry more goes into `kept`, any other is dropped.
    async fn exchange(
        &self,
        mut channel: Channel,
        carried: u32,
        kept: &mut Option<KeptConnection>,
    ) -> Result<(), Failure> {
        let verdict = self.call(&mut channel.sender).await;
        let carried = carried + 1;
        if verdict.is_ok() && carried < self.per_connection {
            *kept = Some(KeptConnection {
                link: Link::Http2(channel),
                carried,
            });
        }
        verdict
    }

    /// The call, and its answer judged.
    async fn call(&self, sender: &mut http2::SendRequest<Full<Bytes>>) -> Result<(), Failure> {
        sender.ready().await.map_err(|e| from_hyper(&e))?;
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

/// An HTTP/2 connection over `stream`, its task driving it.
async fn open<S>(stream: S) -> Result<Channel, Failure>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sender, connection) = http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
        .await
        .map_err(|e| from_hyper(&e))?;
    Ok(Channel {
        sender,
        _driver: AbortOnDrop(tokio::spawn(connection)),
    })
}

/// A socket error inside hyper's, as the socket error it is; a connection hyper already
/// knows is closed, `Closed`; any other, a protocol error.
fn from_hyper(e: &hyper::Error) -> Failure {
    if e.is_closed() || e.is_canceled() {
        return Failure::Closed;
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            return Failure::from_io(io);
        }
        source = err.source();
    }
    Failure::Protocol(format!("http2: {e}"))
}

/// The connection's task, stopped when its channel is dropped (the call is over, the
/// deadline cut it, or the kept connection ends).
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
        kept: &'a mut Option<KeptConnection>,
    ) -> Attempt<'a> {
        Box::pin(self.run(dial, progress, kept))
    }
}
