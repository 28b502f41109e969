//! DNS as a client, for the engine: the `dns` check kind's settings and message
//! ([`check`]), host-name lookups of endpoints given by name ([`lookup`]) and the answer
//! canary's questions ([`ask`]), behind the engine's [`DnsClient`] ([`Client`]).

mod ask;
pub mod check;
mod lookup;

use std::net::SocketAddr;
use std::time::Duration;

use ho_engine::dns_client::{Asker, Asking, DnsClient, Found, LookupError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

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

/// `query` (whose id is `id`) over a new TCP connection to `server`, each message framed by
/// a two-byte length (RFC 7766): the answer with that id, unparsed.
async fn over_tcp(server: SocketAddr, query: &[u8], id: u16) -> std::io::Result<Vec<u8>> {
    let mut stream = TcpStream::connect(server).await?;
    let mut framed = Vec::with_capacity(query.len() + 2);
    framed.extend_from_slice(&(query.len() as u16).to_be_bytes());
    framed.extend_from_slice(query);
    stream.write_all(&framed).await?;
    loop {
        let len = stream.read_u16().await?;
        let mut answer = vec![0; usize::from(len)];
        stream.read_exact(&mut answer).await?;
        if answer.get(..2) == Some(&id.to_be_bytes()[..]) {
            return Ok(answer);
        }
    }
}
