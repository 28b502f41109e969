//! Where PowerDNS answers DNS, read from its settings (`GET .../servers/{id}/config`), so
//! that the answer canary asks it without the address being written twice: the first
//! entry of `local-address` (a list; an entry may carry its own port, `[::1]:5300`) on
//! `local-port`. A wildcard address (`0.0.0.0`, `::`) listens on every interface, of which
//! the canary asks the one it reaches the API on: the API URL's host (the loopback when
//! PowerDNS runs beside the orchestrator).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use bytes::Bytes;
use hyper::Method;

use super::api::ConfigSetting;
use super::Inner;
use ho_engine::sink::listing::{DnsPort, PortError, PortFuture};

/// PowerDNS's port when `local-port` is not listed (its default).
const DEFAULT_PORT: u16 = 53;

/// The sink's [`DnsPort`].
pub(super) struct Port(pub(super) Arc<Inner>);

impl DnsPort for Port {
    fn find(&self) -> PortFuture {
        let inner = self.0.clone();
        Box::pin(async move { inner.dns_port().await })
    }
}

impl Inner {
    /// Where the server's DNS listener is reached, from its settings.
    async fn dns_port(&self) -> Result<SocketAddr, PortError> {
        let what = format!("GET {}", self.config_url);
        let answer = self
            .call_at(Method::GET, &self.config_url, Bytes::new(), &what)
            .await
            .map_err(|e| PortError::Api(e.message))?;
        let settings: Vec<ConfigSetting> = serde_json::from_slice(&answer.body)
            .map_err(|e| PortError::Unusable(format!("{what}: unexpected answer: {e}")))?;
        let mut at = listener(&settings)?;
        if at.ip().is_unspecified() {
            at.set_ip(self.api_host(at.port()).await?);
        }
        Ok(at)
    }

    /// The address the API is reached at: its URL's host, looked up when a name.
    async fn api_host(&self, port: u16) -> Result<IpAddr, PortError> {
        let uri: hyper::Uri = self.config_url.parse().expect("validated URL");
        let host = uri.host().unwrap_or_default();
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Ok(ip);
        }
        let unusable = |why: String| {
            PortError::Unusable(format!(
                "local-address is a wildcard and the API's host {host} {why}"
            ))
        };
        let mut found = tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| unusable(format!("does not resolve: {e}")))?;
        found
            .next()
            .map(|a| a.ip())
            .ok_or_else(|| unusable("has no address".into()))
    }
}

/// The first entry of `local-address` that is an address, on its own port or
/// `local-port`; its IP may be a wildcard.
pub(super) fn listener(settings: &[ConfigSetting]) -> Result<SocketAddr, PortError> {
    let setting = |name: &str| settings.iter().find(|s| s.name == name);
    let Some(addresses) = setting("local-address") else {
        return Err(PortError::Unusable("no local-address listed".into()));
    };
    let port = match setting("local-port") {
        None => DEFAULT_PORT,
        Some(p) => match p.value.trim().parse::<u16>() {
            Ok(port) if port != 0 => port,
            _ => {
                return Err(PortError::Unusable(format!(
                    "local-port {:?} is not a port",
                    p.value
                )))
            }
        },
    };
    (addresses.value.split([',', ' ', '\t']))
        .filter(|entry| !entry.is_empty())
        .find_map(|entry| {
            entry
                .parse::<SocketAddr>()
                .ok()
                .or_else(|| Some(SocketAddr::new(entry.parse().ok()?, port)))
        })
        .ok_or_else(|| {
            PortError::Unusable(format!(
                "local-address {:?} holds no address",
                addresses.value
            ))
        })
}

#[cfg(test)]
#[path = "port_tests.rs"]
mod tests;
