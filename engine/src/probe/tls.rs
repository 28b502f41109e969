//! TLS for the kinds that speak it (https, grpcs): their trust keys, one rustls client
//! configuration per trust setting and protocol, shared by every target that uses it, and
//! the handshake with the right server name.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use ho_config::TlsCheck;
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use super::registry::Problems;
use super::Failure;
use crate::tls_client::{client_config, TlsError};

/// The trust keys of a kind over TLS.
#[derive(Debug, Clone, Default, serde::Deserialize, schemars::JsonSchema)]
pub struct TlsSettings {
    /// Accept any certificate. Opt-in because it hides a broken certificate.
    pub insecure: Option<bool>,
    /// PEM file of CA certificates to trust instead of the system roots.
    pub ca_file: Option<std::path::PathBuf>,
}

impl TlsSettings {
    /// The trust, checked.
    pub(super) fn resolve(self, problems: &mut Problems<'_>) -> TlsCheck {
        let insecure = self.insecure.unwrap_or(false);
        if insecure && self.ca_file.is_some() {
            problems.push(
                "insecure",
                "insecure = true ignores ca_file; set one or the other",
            );
        }
        TlsCheck {
            insecure,
            ca_file: self.ca_file,
        }
    }
}

/// Client configurations by trust setting and application protocol, built once at start-up.
#[derive(Default)]
pub struct TlsCache {
    configs: HashMap<(TlsCheck, Alpn), Arc<ClientConfig>>,
}

/// The application protocol a probe offers in the handshake (ALPN).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Alpn {
    /// `http/1.1`: https checks.
    Http1,
    /// `h2`: grpcs checks (gRPC servers refuse a TLS connection without it).
    H2,
}

/// A connector plus the name to verify, for one https target.
#[derive(Clone)]
pub struct TlsTarget {
    connector: TlsConnector,
    server_name: ServerName<'static>,
}

impl TlsCache {
    /// The TLS side of one https target: SNI and verification name = `host`, or the address.
    pub fn target(
        &mut self,
        trust: &TlsCheck,
        alpn: Alpn,
        host: Option<&str>,
        addr: IpAddr,
    ) -> Result<TlsTarget, TlsError> {
        let key = (trust.clone(), alpn);
        let config = match self.configs.get(&key) {
            Some(c) => c.clone(),
            None => {
                let mut config = client_config(trust)?;
                if alpn == Alpn::H2 {
                    config.alpn_protocols = vec![b"h2".to_vec()];
                }
                let c = Arc::new(config);
                self.configs.insert(key, c.clone());
                c
            }
        };
        let server_name = match host {
            Some(h) => ServerName::try_from(h.to_owned())
                .map_err(|_| TlsError::ServerName(h.to_owned()))?,
            None => ServerName::IpAddress(addr.into()),
        };
        Ok(TlsTarget {
            connector: TlsConnector::from(config),
            server_name,
        })
    }
}

impl TlsTarget {
    /// Runs the handshake; certificate problems become [`Failure::Tls`].
    pub async fn handshake(&self, tcp: TcpStream) -> Result<TlsStream<TcpStream>, Failure> {
        self.connector
            .connect(self.server_name.clone(), tcp)
            .await
            .map_err(|e| {
                match e
                    .get_ref()
                    .and_then(|inner| inner.downcast_ref::<rustls::Error>())
                {
                    Some(tls) => Failure::Tls(tls.to_string()),
                    None => Failure::from_io(&e),
                }
            })
    }
}
