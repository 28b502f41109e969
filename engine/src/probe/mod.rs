//! One health-check attempt against one target: TCP connect, HTTP/1.1 or HTTPS, under a
//! single hard deadline, with a reason for every failure.
//!
//! A probe opens a fresh connection each time by default (that is what detects a dead
//! listener) and closes it with an RST (SO_LINGER 0), so thousands of probes per second
//! leave no TIME_WAIT behind on either side. With `reuse_connection`, an HTTP/1.1 or HTTPS
//! connection is kept for the target's next probes ([`KeptConnection`]).

mod body;
mod connect;
mod http;
mod outcome;
mod tls;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ho_config::{Protocol, Target};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::client::TlsStream;

pub use crate::tls_client::TlsError;
pub use outcome::{Failure, ProbeResult};
pub use tls::TlsCache;

use connect::SocketSetup;
use http::HttpRequest;

/// A ready-to-run health check for one target: everything parsed and allocated once.
#[derive(Clone)]
pub struct Probe {
    addr: SocketAddr,
    /// Local address to connect from (`source_address`).
    source: Option<std::net::IpAddr>,
    timeout: Duration,
    kind: ProbeKind,
    /// Probes one connection carries (1: a fresh connection every probe).
    per_connection: u32,
}

#[derive(Clone)]
enum ProbeKind {
    Tcp,
    Http(Arc<HttpRequest>),
    Https(Arc<HttpRequest>, tls::TlsTarget),
}

/// An HTTP/1.1 or HTTPS connection left open by one probe for the target's next ones
/// (`reuse_connection`). Its owner (the target's prober) passes it back to
/// [`Probe::run`]; a failure or the `fresh_connection_every` count ends it.
pub struct KeptConnection {
    stream: Stream,
    /// Probes this connection has carried.
    carried: u32,
}

enum Stream {
    Plain(TcpStream),
    // Boxed: rustls's connection state is ~1 KB, which a plain connection need not carry.
    Tls(Box<TlsStream<TcpStream>>),
}

/// How far an attempt got, readable after the deadline cut it.
#[derive(Default)]
struct Progress {
    /// The TCP handshake is done: a timeout is then `Timeout`, not `ConnectTimeout`.
    connected: AtomicBool,
    /// The verdict came over a kept connection.
    reused: AtomicBool,
}

impl Probe {
    /// Builds the probe for `target`, loading TLS trust through `tls` (shared between
    /// targets with the same trust settings).
    pub fn new(target: &Target, tls: &mut TlsCache) -> Result<Probe, TlsError> {
        let addr = SocketAddr::new(target.address, target.check.port);
        let (kind, per_connection) = match &target.check.protocol {
            Protocol::Tcp => (ProbeKind::Tcp, 1),
            Protocol::Http(h) => (
                ProbeKind::Http(Arc::new(HttpRequest::new(h, addr))),
                h.probes_per_connection,
            ),
            Protocol::Https { http, tls: trust } => (
                ProbeKind::Https(
                    Arc::new(HttpRequest::new(http, addr)),
                    tls.target(trust, http.host.as_deref(), target.address)?,
                ),
                http.probes_per_connection,
            ),
        };
        Ok(Probe {
            addr,
            source: target.check.source_address,
            timeout: target.check.timing.timeout,
            kind,
            per_connection,
        })
    }

    /// Runs one attempt over `kept` when it holds a connection, else over a fresh one; on
    /// return `kept` holds the connection to use next time, if any. Never takes longer
    /// than the timeout (plus scheduling noise).
    pub async fn run(&self, kept: &mut Option<KeptConnection>) -> ProbeResult {
        let start = Instant::now();
        let progress = Progress::default();
        let outcome = match tokio::time::timeout(self.timeout, self.attempt(&progress, kept)).await
        {
            Ok(result) => result,
            Err(_) if progress.connected.load(Ordering::Relaxed) => Err(Failure::Timeout),
            Err(_) => Err(Failure::ConnectTimeout),
        };
        ProbeResult {
            outcome,
            latency: start.elapsed(),
            reused: progress.reused.load(Ordering::Relaxed),
        }
    }

    /// One attempt, recording in `progress` how far it got.
    ///
    /// A kept connection that the server closed or reset while idle (its keep-alive
    /// timeout, a restart) is not a verdict: the attempt goes on over a fresh connection,
    /// so a dead gateway is reported as refused, exactly as without reuse, and a live one
    /// that merely dropped an idle connection is not reported down. Any other failure ends
    /// the connection and is the verdict.
    ///
    /// An async fn's state is as large as its largest path, and every probe in flight holds
    /// one: with the TLS handshake inline that was ~8 KB per probe (a heap profile of
    /// 2,000 hanging probes: 15.7 MB in the prober's spawned futures). TLS is boxed, so a
    /// plain probe carries only its own state and a TLS probe pays one more allocation.
    async fn attempt(
        &self,
        progress: &Progress,
        kept: &mut Option<KeptConnection>,
    ) -> Result<(), Failure> {
        let (req, tls) = match &self.kind {
            ProbeKind::Tcp => {
                let stream =
                    connect::connect(self.addr, self.source, SocketSetup::default()).await?;
                progress.connected.store(true, Ordering::Relaxed);
                return connect::handshake_error(&stream);
            }
            ProbeKind::Http(req) => (req, None),
            ProbeKind::Https(req, tls) => (req, Some(tls)),
        };
        if let Some(conn) = kept.take() {
            progress.connected.store(true, Ordering::Relaxed);
            progress.reused.store(true, Ordering::Relaxed);
            match self.exchange(req, conn, kept).await {
                Err(Failure::Closed | Failure::Reset) => {
                    progress.connected.store(false, Ordering::Relaxed);
                    progress.reused.store(false, Ordering::Relaxed);
                }
                verdict => return verdict,
            }
        }
        let setup = SocketSetup {
            nodelay: tls.is_some() || !req.fits_one_segment(),
            ack_with_first_write: true,
        };
        let tcp = connect::connect(self.addr, self.source, setup).await?;
        progress.connected.store(true, Ordering::Relaxed);
        let stream = match tls {
            None => Stream::Plain(tcp),
            Some(tls) => Stream::Tls(Box::new(Box::pin(tls.handshake(tcp)).await?)),
        };
        self.exchange(req, KeptConnection { stream, carried: 0 }, kept)
            .await
    }

    /// One request on `conn`; a connection that can carry more probes goes into `kept`,
    /// any other is dropped (closed with an RST).
    async fn exchange(
        &self,
        req: &HttpRequest,
        mut conn: KeptConnection,
        kept: &mut Option<KeptConnection>,
    ) -> Result<(), Failure> {
        conn.carried += 1;
        let keep = conn.carried < self.per_connection;
        let reusable = match &mut conn.stream {
            Stream::Plain(tcp) => req.exchange(tcp, keep).await?,
            Stream::Tls(tls) => Box::pin(req.exchange(tls.as_mut(), keep)).await?,
        };
        if reusable {
            *kept = Some(conn);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every probe in flight holds this future: it must stay far below the ~8 KB it had
    /// when the TLS and body-check paths were inline: a mass hang holds one per endpoint.
    #[test]
    fn a_probe_in_flight_is_small() {
        let check = ho_config::CheckOverrides {
            kind: Some(ho_config::CheckKind::Http),
            path: Some("/healthz".into()),
            port: Some(8080),
            interval: Some(Duration::from_secs(1)),
            timeout: Some(Duration::from_millis(500)),
            ..Default::default()
        };
        let target = Target {
            address: "127.0.0.1".parse().unwrap(),
            check: ho_config::resolve_standalone_check(&check).unwrap().into(),
        };
        let probe = Probe::new(&target, &mut TlsCache::default()).unwrap();
        let mut kept = None;
        let size = std::mem::size_of_val(&probe.run(&mut kept));
        assert!(size <= 1024, "a probe future is {size} bytes");
    }
}
