//! TLS for the kinds that speak it (https, grpcs): their keys ([`settings`]), one rustls
//! client configuration per trust setting and protocol, shared by every target that uses
//! it, and the handshake with the right server name, which also reads when the presented
//! certificate expires ([`cert_expiry`]) and fails one closer than `min_cert_validity`.

mod cert_expiry;
mod settings;

pub use settings::{TlsProbe, TlsSettings};

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use ho_config::TlsCheck;
use rustls::client::Resumption;
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use super::{Failure, Progress};
use crate::tls_client::{client_config, TlsError};

/// Client configurations by trust setting and application protocol, built once at start-up.
#[derive(Default)]
pub struct TlsCache {
    configs: HashMap<(TlsCheck, Alpn), Arc<ClientConfig>>,
    /// Servers each configuration remembers sessions of: every target it serves, so
    /// targets do not evict each other's sessions and every probe after the first resumes.
    sessions: usize,
}

/// Servers remembered when the number of targets is not known.
const DEFAULT_SERVERS: usize = 32;

/// rustls sizes its session cache in tickets, eight per server (its
/// `MAX_TLS13_TICKETS_PER_SERVER`): its default of 256 remembers 32 servers, so with more
/// targets than that no probe ever resumed.
const TICKETS_PER_SERVER: usize = 8;

/// The application protocol a probe offers in the handshake (ALPN).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Alpn {
    /// `http/1.1`: https checks.
    Http1,
    /// `h2`: grpcs checks (gRPC servers refuse a TLS connection without it).
    H2,
}

/// A connector plus the name to verify, for the targets of one https or grpcs check.
#[derive(Clone)]
pub struct TlsTarget {
    connector: TlsConnector,
    /// The `host` the check names; `None`: each target's address.
    server_name: Option<ServerName<'static>>,
    /// A certificate expiring sooner than this fails the probe.
    min_validity: Option<Duration>,
}

impl TlsCache {
    /// A cache for configurations shared by up to `targets` targets over TLS.
    pub fn for_targets(targets: usize) -> TlsCache {
        TlsCache {
            sessions: targets,
            ..TlsCache::default()
        }
    }

    /// The TLS side of an https or grpcs check: SNI and verification name = `host`, or the
    /// address each handshake dials.
    pub fn target(
        &mut self,
        probe: &TlsProbe,
        alpn: Alpn,
        host: Option<&str>,
    ) -> Result<TlsTarget, TlsError> {
        let trust = &probe.trust;
        let key = (trust.clone(), alpn);
        let config = match self.configs.get(&key) {
            Some(c) => c.clone(),
            None => {
                let mut config = client_config(trust)?;
                config.resumption = Resumption::in_memory_sessions(
                    self.sessions.max(DEFAULT_SERVERS) * TICKETS_PER_SERVER,
                );
                if alpn == Alpn::H2 {
                    config.alpn_protocols = vec![b"h2".to_vec()];
                }
                let c = Arc::new(config);
                self.configs.insert(key, c.clone());
                c
            }
        };
        let server_name = match host {
            Some(h) => Some(
                ServerName::try_from(h.to_owned())
                    .map_err(|_| TlsError::ServerName(h.to_owned()))?,
            ),
            None => None,
        };
        Ok(TlsTarget {
            connector: TlsConnector::from(config),
            server_name,
            min_validity: probe.min_cert_validity,
        })
    }
}

impl TlsTarget {
    /// Runs the handshake with `addr`, the address dialled; certificate problems become
    /// [`Failure::Tls`], a certificate closer to its expiry than `min_cert_validity`
    /// becomes `cert_expiring`. The certificate's expiry is recorded in `progress` either
    /// way.
    pub(in crate::probe) async fn handshake(
        &self,
        tcp: TcpStream,
        addr: IpAddr,
        progress: &Progress,
    ) -> Result<TlsStream<TcpStream>, Failure> {
        let server_name = match &self.server_name {
            Some(name) => name.clone(),
            None => ServerName::IpAddress(addr.into()),
        };
        let stream = self
            .connector
            .connect(server_name, tcp)
            .await
            .map_err(|e| {
                match e
                    .get_ref()
                    .and_then(|inner| inner.downcast_ref::<rustls::Error>())
                {
                    Some(tls) => Failure::Tls(tls.to_string()),
                    None => Failure::from_io(&e),
                }
            })?;
        let leaf = stream
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|c| c.first());
        if let Some(not_after) = leaf.and_then(|cert| cert_expiry::not_after(cert).ok()) {
            let at = crate::clock::since_epoch(not_after);
            progress
                .cert_not_after
                .store(at.as_secs().max(1), Ordering::Relaxed);
            if let Some(min) = self.min_validity {
                let left = not_after
                    .duration_since(SystemTime::now())
                    .unwrap_or_default();
                if left < min {
                    return Err(Failure::Answer {
                        label: "cert_expiring",
                        detail: format!(
                            "certificate expires in {} (min_cert_validity {})",
                            humantime::format_duration(Duration::from_secs(left.as_secs())),
                            humantime::format_duration(min)
                        ),
                    });
                }
            }
        }
        Ok(stream)
    }
}
