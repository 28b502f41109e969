//! TLS for https probes: one rustls client configuration per trust setting, shared by every
//! target that uses it, and the handshake with the right server name.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use ho_config::TlsCheck;
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use super::Failure;
use crate::tls_client::{client_config, TlsError};

/// Client configurations by trust setting, built once at start-up.
#[derive(Default)]
pub struct TlsCache {
    configs: HashMap<TlsCheck, Arc<ClientConfig>>,
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
        host: Option<&str>,
        addr: IpAddr,
    ) -> Result<TlsTarget, TlsError> {
        let config = match self.configs.get(trust) {
            Some(c) => c.clone(),
            None => {
                let c = Arc::new(client_config(trust)?);
                self.configs.insert(trust.clone(), c.clone());
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
