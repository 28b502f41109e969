//! The `grpc` and `grpcs` kinds: one `grpc.health.v1.Health/Check` call over a fresh
//! HTTP/2 connection (TLS with ALPN `h2` for grpcs), or over the connection the target's
//! previous probe kept (`reuse_connection`); SERVING is healthy, and NOT_SERVING, UNKNOWN,
//! SERVICE_UNKNOWN and every gRPC status each have their reason.

mod settings;
mod wire;

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use hyper::header::HeaderMap;
use hyper::Request;
use tokio::io::{AsyncRead, AsyncWrite};

use super::connect::{self, SocketSetup};
use super::tls::TlsTarget;
use super::{Attempt, Dial, Failure, KeptConnection, Link, ProbeKind, Progress};
pub use settings::{GrpcCheck, GrpcSettings, GrpcsSettings};

/// Largest answer read: a health answer is 7 bytes.
const MAX_ANSWER: usize = 64 * 1024;

/// A gRPC health check: the request prepared once, for one target when its `:authority`
/// is the target's address.
pub(super) struct GrpcProbe {
    /// Parsed once: cloning it per call shares its bytes.
    uri: hyper::Uri,
    body: Bytes,
    service: String,
    tls: Option<TlsTarget>,
    /// Calls one connection carries (1: a fresh connection every probe).
    per_connection: u32,
}

/// An HTTP/2 connection (h2's client): the handle calls are sent on, and the connection
/// itself, driven by the probe that uses it while its call runs (no task of its own, so
/// nothing is spawned per probe). Kept between probes, it is not polled while idle: what the
/// server sent meanwhile (a GOAWAY, a close) is read at the next call.
pub(super) struct Channel {
    sender: h2::client::SendRequest<Bytes>,
    connection: Pin<Box<dyn Future<Output = Result<(), h2::Error>> + Send>>,
}

impl GrpcProbe {
    fn new(check: &GrpcCheck, addr: SocketAddr, tls: Option<TlsTarget>) -> GrpcProbe {
        let scheme = if tls.is_some() { "https" } else { "http" };
        let authority = check.host.clone().unwrap_or_else(|| addr.to_string());
        GrpcProbe {
            uri: format!("{scheme}://{authority}/grpc.health.v1.Health/Check")
                .parse()
                .expect("an authority validated with the config"),
            body: Bytes::from(wire::request(&check.service)),
            service: check.service.clone(),
            tls,
            per_connection: check.probes_per_connection,
        }
    }

    /// One attempt, over the kept connection when there is one (closed while idle: no
    /// verdict, `Progress::kept_verdict`).
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
            progress.reusing();
            let verdict = self.exchange(channel, carried, kept).await;
            if let Some(verdict) = progress.kept_verdict(verdict) {
                return verdict;
            }
        }
        let tcp = connect::connect(dial.addr, dial.source, SocketSetup::default()).await?;
        progress.connected.store(true, Ordering::Relaxed);
        let channel = match &self.tls {
            None => open(tcp).await?,
            Some(tls) => {
                open(Box::pin(tls.handshake(tcp, dial.addr.ip(), progress)).await?).await?
            }
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
        let Channel { sender, connection } = &mut channel;
        let verdict = tokio::select! {
            biased;
            verdict = self.call(sender) => verdict,
            // The connection ended before the answer: closed, or broken with its reason.
            ended = connection => Err(ended.map_or_else(|e| from_h2(&e), |()| Failure::Closed)),
        };
        let carried = carried + 1;
        if verdict.is_ok() && carried < self.per_connection {
            *kept = Some(KeptConnection {
                link: Link::Http2(channel),
                carried,
            });
        }
        verdict
    }

    /// The call, and its answer judged; runs while its caller drives the connection.
    async fn call(&self, sender: &h2::client::SendRequest<Bytes>) -> Result<(), Failure> {
        let h2 = |e: h2::Error| from_h2(&e);
        let mut sender = sender.clone().ready().await.map_err(h2)?;
        let request = Request::post(self.uri.clone())
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())
            .expect("a request from validated parts");
        let (response, mut stream) = sender.send_request(request, false).map_err(h2)?;
        stream.send_data(self.body.clone(), true).map_err(h2)?;
        let (head, mut body) = response.await.map_err(h2)?.into_parts();
        if head.status != 200 {
            return Err(Failure::Status(head.status.as_u16()));
        }
        let mut answer = Vec::new();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.map_err(h2)?;
            // Gives the window back, so a kept connection's next call can be answered.
            let _ = body.flow_control().release_capacity(chunk.len());
            answer.extend_from_slice(&chunk);
            if answer.len() > MAX_ANSWER {
                return Err(Failure::Protocol(format!(
                    "gRPC answer larger than {} KiB",
                    MAX_ANSWER / 1024
                )));
            }
        }
        // A trailers-only answer (an error) carries grpc-status in its headers.
        let trailers = body.trailers().await.map_err(h2)?.unwrap_or(head.headers);
        self.judge(&trailers, &answer)
    }

    /// The verdict of a complete answer: its status trailer, then its message.
    fn judge(&self, trailers: &HeaderMap, answer: &[u8]) -> Result<(), Failure> {
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
        let status = wire::status(answer).map_err(|e| Failure::Protocol(e.0))?;
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

/// An HTTP/2 connection over `stream` (the client preface and settings sent).
async fn open<S>(stream: S) -> Result<Channel, Failure>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sender, connection) = h2::client::handshake(stream)
        .await
        .map_err(|e| from_h2(&e))?;
    Ok(Channel {
        sender,
        connection: Box::pin(connection),
    })
}

/// A socket error inside h2's, as the socket error it is; the server going away or
/// refusing the stream (a kept connection it is done with), `Closed`; any other, a
/// protocol error.
fn from_h2(e: &h2::Error) -> Failure {
    if let Some(io) = e.get_io() {
        return Failure::from_io(io);
    }
    if e.is_go_away() || e.reason() == Some(h2::Reason::REFUSED_STREAM) {
        return Failure::Closed;
    }
    Failure::Protocol(format!("http2: {e}"))
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
