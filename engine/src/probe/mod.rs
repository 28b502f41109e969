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
    ///
    /// An async fn's state is as large as its largest path, and every probe in flight holds
    /// one: with the TLS handshake and hyper's body check inline, that was ~8 KB per probe
    /// (a heap profile of 2,000 hanging probes: 15.7 MB in the prober's spawned futures).
    /// Those two paths are boxed, so a plain status probe carries only its own state and
    /// TLS and body probes pay one more allocation of their own size.
    async fn attempt(&self, connected: &AtomicBool) -> Result<(), Failure> {
        let stream = connect::connect(self.addr).await?;
        connected.store(true, Ordering::Relaxed);
        match &self.kind {
            ProbeKind::Tcp => connect::handshake_error(&stream),
            ProbeKind::Http(req) => req.exchange(stream).await,
            ProbeKind::Https(req, tls) => {
                Box::pin(async move { req.exchange(tls.handshake(stream).await?).await }).await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every probe in flight holds this future: it must stay far below the ~8 KB it had
    /// when the TLS and body-check paths were inline (the mass-hang memory of #14).
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
            check: ho_config::resolve_standalone_check(&check).unwrap(),
        };
        let probe = Probe::new(&target, &mut TlsCache::default()).unwrap();
        let size = std::mem::size_of_val(&probe.run());
        assert!(size <= 1024, "a probe future is {size} bytes");
    }
}
