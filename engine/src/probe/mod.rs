//! One health-check attempt against one target: TCP connect, HTTP/1.1 or HTTPS, under a
//! single hard deadline, with a reason for every failure.
//!
//! A probe opens a fresh connection each time by default (that is what detects a dead
//! listener) and closes it with an RST (SO_LINGER 0), so thousands of probes per second
//! leave no TIME_WAIT behind on either side. With `reuse_connection`, an HTTP/1.1 or HTTPS
//! connection, or a gRPC check's HTTP/2 connection, is kept for the target's next probes
//! ([`KeptConnection`]).

mod connect;
pub mod dns;
mod feed;
mod grpc;
pub mod heartbeat;
mod http;
mod icmp;
mod outcome;
mod registry;
mod reuse;
mod tcp;
mod tls;
mod weight;

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ho_config::{CheckSpec, Target};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::client::TlsStream;

pub use crate::tls_client::TlsError;

/// Why a target's probe cannot be prepared (at start-up or reload, not per probe).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProbeError {
    /// Its TLS settings cannot be loaded.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// This host cannot run the kind (ICMP without unprivileged ping sockets), with what
    /// allows it.
    #[error("{0}")]
    Host(String),
}
pub use feed::{FeedCheck, Feeds};
pub use heartbeat::HeartbeatCheck;
pub use http::{HttpCheck, HttpsCheck};
pub use outcome::{Failure, ProbeResult};
pub use registry::{
    kinds, CheckKind, CheckList, CheckSettings, Prepare, Problems, Registered, UrlError, UrlTarget,
    BUILT_IN,
};
pub use tls::TlsCache;
use weight::{Damper, ReportedWeight};

/// What preparing probes shares between targets: TLS client configurations and session
/// caches (one per trust setting), the board the heartbeats pushed to the API land on
/// (read by checks of kind `heartbeat`), and the attempts prepared so far, one per distinct
/// check. A default one has no heartbeats: `probe` and tests.
#[derive(Default)]
pub struct ProbeContext {
    /// TLS configurations, shared by targets with equal trust settings.
    pub tls: TlsCache,
    /// Heartbeats received by the API.
    pub heartbeats: heartbeat::Heartbeats,
    /// External health feeds, each fetched once per interval for all its endpoints.
    pub feeds: feed::Feeds,
    /// Attempts prepared so far.
    pub prepared: PreparedChecks,
}

/// Attempts prepared, by check and scope (`registry::scope`): thousands of targets of one
/// check differ only by address, which each attempt is given.
#[derive(Default)]
pub struct PreparedChecks(HashMap<(Arc<CheckSpec>, IpAddr), Arc<Prepared>>);

impl PreparedChecks {
    /// How many attempts are prepared: one per distinct check (and address family).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A kind's attempt for the targets of one check, prepared once by [`Prepare::prepare`].
/// The engine's kinds make theirs in their modules; a kind registered by another crate
/// makes one through a constructor of the probe path's ([`PreparedProbe::dns`]).
pub struct PreparedProbe(Box<dyn ProbeKind>);

impl PreparedProbe {
    fn new(kind: impl ProbeKind + 'static) -> PreparedProbe {
        PreparedProbe(Box::new(kind))
    }
}

/// A ready-to-run health check for one target: the attempt prepared for its check (shared
/// with every target of an equal check) and what is the target's own.
pub struct Probe {
    prepared: Arc<Prepared>,
    /// The address dialled.
    address: IpAddr,
    /// The weight in effect (`reported_weight`): the target's own, as the weight it
    /// reports is.
    weight: Damper,
}

/// What every target of one check shares: the kind's attempt, where and how long it dials.
struct Prepared {
    kind: Box<dyn ProbeKind>,
    port: u16,
    /// Local address to connect from (`source_address`).
    source: Option<IpAddr>,
    timeout: Duration,
}

/// Where an attempt connects.
#[derive(Clone, Copy)]
struct Dial {
    addr: SocketAddr,
    /// Local address to connect from (`source_address`).
    source: Option<IpAddr>,
}

/// One check kind's attempt. A kind is its settings (`registry::CheckSettings`) and one
/// implementation of this trait in its own module (`tcp`, `http` for http and https), built
/// for a target by [`Probe::new`] through the registry; the deadline, the timing of the
/// result and the failure taxonomy ([`Failure`]) are shared.
trait ProbeKind: Send + Sync {
    /// One attempt against `dial`, cut by the caller at the check's timeout. It records in
    /// `progress` how far it got (a timeout after the connection is up is `Timeout`, not
    /// `ConnectTimeout`); a kind that keeps connections takes one from `kept` and leaves
    /// the one to use next there.
    fn attempt<'a>(
        &'a self,
        dial: &'a Dial,
        progress: &'a Progress,
        kept: &'a mut Option<KeptConnection>,
    ) -> Attempt<'a>;

    /// Where a healthy answer reports the target's weight, if it does: the weight a
    /// probe records in its [`Progress`] is damped by the target's own [`Damper`].
    fn reported_weight(&self) -> Option<&ReportedWeight> {
        None
    }
}

/// A kind's attempt in flight: boxed, so a probe in flight holds only its own kind's state
/// (one allocation per probe).
type Attempt<'a> = Pin<Box<dyn Future<Output = Result<(), Failure>> + Send + 'a>>;

/// A connection left open by one probe for the target's next ones (`reuse_connection`).
/// Its owner (the target's prober) passes it back to [`Probe::run`]; a failure or the
/// `fresh_connection_every` count ends it.
pub struct KeptConnection {
    link: Link,
    /// Probes this connection has carried.
    carried: u32,
}

/// What a kept connection is, as the kind that opened it left it: a target's probes are
/// always of one kind, so each kind finds only its own.
enum Link {
    /// A byte stream carrying HTTP/1.1.
    Stream(Stream),
    /// An HTTP/2 connection carrying gRPC calls.
    Http2(grpc::Channel),
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
    /// The presented certificate's `notAfter`, Unix seconds (0: no certificate seen).
    cert_not_after: AtomicU64,
    /// The weight the target reported (`reported_weight`), as the bits of an `f64`,
    /// before its damper; read when `weighed`.
    weight: AtomicU64,
    weighed: AtomicBool,
}

impl Progress {
    /// The healthy answer reported this weight (the probe damps it).
    fn report_weight(&self, raw: f64) {
        self.weight.store(raw.to_bits(), Ordering::Relaxed);
        self.weighed.store(true, Ordering::Relaxed);
    }

    /// The weight the answer reported, if it did.
    fn reported_weight(&self) -> Option<f64> {
        let weighed = self.weighed.load(Ordering::Relaxed);
        weighed.then(|| f64::from_bits(self.weight.load(Ordering::Relaxed)))
    }

    /// The attempt runs over a kept connection (see [`Progress::kept_verdict`]).
    fn reusing(&self) {
        self.connected.store(true, Ordering::Relaxed);
        self.reused.store(true, Ordering::Relaxed);
    }

    /// The verdict of an exchange over a kept connection. One the server closed or reset
    /// while idle (its keep-alive timeout, a GOAWAY, a restart) is no verdict: `None`, and
    /// the attempt goes on over a fresh connection, so a dead gateway is reported as without
    /// reuse and a live one that merely dropped an idle connection is not reported down.
    /// (A plain function the caller awaits around, not a wrapper future: the exchange stays
    /// inline in the attempt, which every probe in flight holds.)
    fn kept_verdict<T>(&self, verdict: Result<T, Failure>) -> Option<Result<T, Failure>> {
        match verdict {
            Err(Failure::Closed | Failure::Reset) => {
                self.connected.store(false, Ordering::Relaxed);
                self.reused.store(false, Ordering::Relaxed);
                None
            }
            verdict => Some(verdict),
        }
    }
}

impl Probe {
    /// Builds the probe for `target` with what `ctx` shares between targets: the attempt
    /// prepared for an equal check before, or one prepared now.
    pub fn new(target: &Target, ctx: &mut ProbeContext) -> Result<Probe, ProbeError> {
        let key = (target.check.clone(), registry::scope(target));
        let prepared = match ctx.prepared.0.get(&key) {
            Some(prepared) => prepared.clone(),
            None => {
                let PreparedProbe(kind) = registry::probe_for(target, ctx)?;
                let prepared = Arc::new(Prepared {
                    kind,
                    port: target.check.port,
                    source: target.check.source_address,
                    timeout: target.check.timing.timeout,
                });
                ctx.prepared.0.insert(key, prepared.clone());
                prepared
            }
        };
        Ok(Probe {
            prepared,
            address: target.address,
            weight: Damper::default(),
        })
    }

    /// Runs one attempt over `kept` when it holds a connection, else over a fresh one; on
    /// return `kept` holds the connection to use next time, if any. Never takes longer
    /// than the timeout (plus scheduling noise).
    pub async fn run(&self, kept: &mut Option<KeptConnection>) -> ProbeResult {
        let start = Instant::now();
        let progress = Progress::default();
        let prepared = &*self.prepared;
        let dial = Dial {
            addr: SocketAddr::new(self.address, prepared.port),
            source: prepared.source,
        };
        let attempt = prepared.kind.attempt(&dial, &progress, kept);
        let outcome = match tokio::time::timeout(prepared.timeout, attempt).await {
            Ok(result) => result,
            Err(_) if progress.connected.load(Ordering::Relaxed) => Err(Failure::Timeout),
            Err(_) => Err(Failure::ConnectTimeout),
        };
        let not_after = progress.cert_not_after.load(Ordering::Relaxed);
        ProbeResult {
            outcome,
            latency: start.elapsed(),
            reused: progress.reused.load(Ordering::Relaxed),
            cert_not_after: (not_after > 0)
                .then(|| crate::clock::after_epoch(Duration::from_secs(not_after))),
            weight: progress.reported_weight().and_then(|raw| {
                let weight = prepared.kind.reported_weight()?;
                Some(self.weight.admit(weight, raw))
            }),
        }
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
            port: Some(8080),
            interval: Some(Duration::from_secs(1)),
            timeout: Some(Duration::from_millis(500)),
            ..ho_config::CheckOverrides::of_kind("http").with("path", "/healthz")
        };
        let target = Target {
            address: "127.0.0.1".parse().unwrap(),
            check: ho_config::resolve_standalone_check(&check, &BUILT_IN)
                .unwrap()
                .into(),
        };
        let probe = Probe::new(&target, &mut ProbeContext::default()).unwrap();
        let mut kept = None;
        let size = std::mem::size_of_val(&probe.run(&mut kept));
        assert!(size <= 1024, "a probe future is {size} bytes");
        let progress = Progress::default();
        let dial = Dial {
            addr: SocketAddr::new(probe.address, 8080),
            source: None,
        };
        let attempt = probe.prepared.kind.attempt(&dial, &progress, &mut kept);
        let size = std::mem::size_of_val(&*attempt);
        assert!(size <= 1024, "an HTTP attempt is {size} bytes");
    }
}
