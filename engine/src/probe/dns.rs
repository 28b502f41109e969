//! The `dns` kind's attempt: one query to the target as a DNS server, over UDP (again over
//! TCP when the answer is truncated) or TCP. The message itself, the question encoded and
//! the answer judged, is `ho-dns`'s ([`DnsQuestion`]), which registers the kind's settings;
//! the sockets, the deadline and the failure taxonomy are the probe path's, as for every
//! kind.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UdpSocket;

use super::connect::{self, SocketSetup};
use super::{Attempt, Dial, Failure, KeptConnection, PreparedProbe, ProbeKind, Progress};

/// Largest answer read over UDP: EDNS's common buffer size; a larger one comes truncated
/// and is asked again over TCP.
const UDP_ANSWER: usize = 4096;

/// A `dns` check's message: the query, encoded once, and the verdict on an answer.
pub trait DnsQuestion: Send + Sync + 'static {
    /// The query; its first two bytes (the id) are replaced in each probe.
    fn query(&self) -> &[u8];

    /// Reads `answer`: its header, and the verdict on it (the rcode, then the data the
    /// check expects). An answer that does not parse is a [`Failure::Protocol`].
    fn read(&self, answer: &[u8]) -> Result<DnsAnswer, Failure>;
}

/// What an answer says, as the attempt needs it.
pub struct DnsAnswer {
    /// The answer's id: an answer to another query (a late one to an earlier probe) is
    /// ignored over UDP.
    pub id: u16,
    /// The TC bit: the answer did not fit a datagram.
    pub truncated: bool,
    /// Healthy, or why not.
    pub verdict: Result<(), Failure>,
}

impl PreparedProbe {
    /// The attempt of a `dns` check asking `question`, over TCP from the start when `tcp`.
    pub fn dns(question: Arc<dyn DnsQuestion>, tcp: bool) -> PreparedProbe {
        PreparedProbe::new(DnsProbe { question, tcp })
    }
}

struct DnsProbe {
    question: Arc<dyn DnsQuestion>,
    tcp: bool,
}

impl DnsProbe {
    async fn run(&self, dial: &Dial, progress: &Progress) -> Result<(), Failure> {
        let id = fastrand::u16(..);
        let mut query = self.question.query().to_vec();
        query[..2].copy_from_slice(&id.to_be_bytes());
        let answer = if self.tcp {
            self.over_tcp(dial, progress, &query).await?
        } else {
            let answer = self.over_udp(dial, progress, &query, id).await?;
            if answer.truncated {
                self.over_tcp(dial, progress, &query).await?
            } else {
                answer
            }
        };
        if answer.id != id {
            return Err(Failure::Protocol("answer to another query".into()));
        }
        answer.verdict
    }

    /// One query over a connected UDP socket; answers with another id are ignored (a late
    /// answer to an earlier probe), until the deadline cuts the wait.
    async fn over_udp(
        &self,
        dial: &Dial,
        progress: &Progress,
        query: &[u8],
        id: u16,
    ) -> Result<DnsAnswer, Failure> {
        let local = match (dial.source, dial.addr.ip()) {
            (Some(source), _) => source,
            (None, IpAddr::V4(_)) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            (None, IpAddr::V6(_)) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        };
        let io = |e: std::io::Error| Failure::from_io(&e);
        let socket = UdpSocket::bind(SocketAddr::new(local, 0))
            .await
            .map_err(io)?;
        socket.connect(dial.addr).await.map_err(io)?;
        socket.send(query).await.map_err(io)?;
        // Sent: no answer in time is a timeout of the server, not of a connection.
        progress.connected.store(true, Ordering::Relaxed);
        let mut buf = vec![0; UDP_ANSWER];
        loop {
            let n = socket.recv(&mut buf).await.map_err(io)?;
            let answer = self.question.read(&buf[..n])?;
            if answer.id == id {
                return Ok(answer);
            }
        }
    }

    /// One query over a TCP connection (RFC 7766 framing: a two-byte length before each
    /// message).
    async fn over_tcp(
        &self,
        dial: &Dial,
        progress: &Progress,
        query: &[u8],
    ) -> Result<DnsAnswer, Failure> {
        let mut stream = connect::connect(dial.addr, dial.source, SocketSetup::default()).await?;
        progress.connected.store(true, Ordering::Relaxed);
        let answer = exchange_framed(&mut stream, query)
            .await
            .map_err(|e| Failure::from_io(&e))?;
        self.question.read(&answer)
    }
}

/// One query and its answer on a TCP stream, each framed by a two-byte length (RFC 7766).
async fn exchange_framed(
    stream: &mut tokio::net::TcpStream,
    query: &[u8],
) -> std::io::Result<Vec<u8>> {
    let mut framed = Vec::with_capacity(query.len() + 2);
    framed.extend_from_slice(&(query.len() as u16).to_be_bytes());
    framed.extend_from_slice(query);
    stream.write_all(&framed).await?;
    let len = stream.read_u16().await?;
    let mut answer = vec![0; usize::from(len)];
    stream.read_exact(&mut answer).await?;
    Ok(answer)
}

impl ProbeKind for DnsProbe {
    fn attempt<'a>(
        &'a self,
        dial: &'a Dial,
        progress: &'a Progress,
        _kept: &'a mut Option<KeptConnection>,
    ) -> Attempt<'a> {
        Box::pin(self.run(dial, progress))
    }
}
