//! One health-check attempt against one target: TCP connect, HTTP/1.1 or HTTPS, under a
//! single hard deadline, with a reason for every failure.
//!
//! A probe opens a fresh connection each time (that is what detects a dead listener) and
//! closes it with an RST (SO_LINGER 0), so thousands of probes per second leave no
//! TIME_WAIT behind on either side.

mod connect;
mod http;
mod outcome;
mod tls;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ho_config::{Protocol, Target};
use tokio::time::Instant;

pub use outcome::{Failure, ProbeResult};
pub use tls::{client_config, TlsCache, TlsError};

use http::HttpRequest;

/// A ready-to-run health check for one target: everything parsed and allocated once.
#[derive(Clone)]
pub struct Probe {
    addr: SocketAddr,
    timeout: Duration,
    kind: ProbeKind,
}

#[derive(Clone)]
enum ProbeKind {
    Tcp,
    Http(Arc<HttpRequest>),
    Https(Arc<HttpRequest>, tls::TlsTarget),
}

impl Probe {
    /// Builds the probe for `target`, loading TLS trust through `tls` (shared between
    /// targets with the same trust settings).
    pub fn new(target: &Target, tls: &mut TlsCache) -> Result<Probe, TlsError> {
        let addr = SocketAddr::new(target.address, target.check.port);
        let kind = match &target.check.protocol {
            Protocol::Tcp => ProbeKind::Tcp,
            Protocol::Http(h) => ProbeKind::Http(Arc::new(HttpRequest::new(h, addr))),
            Protocol::Https { http, tls: trust } => ProbeKind::Https(
                Arc::new(HttpRequest::new(http, addr)),
                tls.target(trust, http.host.as_deref(), target.address)?,
            ),
        };
        Ok(Probe {
            addr,
            timeout: target.check.timing.timeout,
            kind,
        })
    }

    /// Runs one attempt. Never takes longer than the timeout (plus scheduling noise).
    pub async fn run(&self) -> ProbeResult {
        let start = Instant::now();
        let connected = AtomicBool::new(false);
        let outcome = match tokio::time::timeout(self.timeout, self.attempt(&connected)).await {
            Ok(result) => result,
            Err(_) if connected.load(Ordering::Relaxed) => Err(Failure::Timeout),
            Err(_) => Err(Failure::ConnectTimeout),
        };
        ProbeResult {
            outcome,
            latency: start.elapsed(),
        }
    }

    /// One attempt; sets `connected` once the TCP handshake is done, so a timeout can say
    /// which side of it the probe was on.
    async fn attempt(&self, connected: &AtomicBool) -> Result<(), Failure> {
        let stream = connect::connect(self.addr).await?;
        connected.store(true, Ordering::Relaxed);
        match &self.kind {
            ProbeKind::Tcp => connect::handshake_error(&stream),
            ProbeKind::Http(req) => req.exchange(stream).await,
            ProbeKind::Https(req, tls) => req.exchange(tls.handshake(stream).await?).await,
        }
    }
}
