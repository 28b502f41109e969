//! DNS as a client, for the engine: the `dns` check kind's settings and message
//! ([`check`]), host-name lookups of endpoints given by name ([`lookup`]) and the answer
//! canary's questions ([`ask`]), behind the engine's [`DnsClient`] ([`Client`]).

mod ask;
pub mod check;
mod lookup;

use std::net::SocketAddr;
use std::time::Duration;

use ho_engine::dns_client::{Asker, Asking, DnsClient, Found, LookupError};

/// The engine's [`DnsClient`]: lookups and the canary's askers.
pub struct Client;

impl DnsClient for Client {
    fn lookup<'a>(
        &'a self,
        host: &'a str,
        servers: &'a [SocketAddr],
        timeout: Duration,
    ) -> Asking<'a, Result<Found, LookupError>> {
        Box::pin(lookup::lookup(host, servers, timeout))
    }

    fn asker(&self, server: SocketAddr) -> Box<dyn Asker> {
        Box::new(ask::ServerAsker::new(server))
    }
}
