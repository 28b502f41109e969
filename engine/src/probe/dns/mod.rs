//! The `dns` kind: one query to the target as a DNS server, over UDP (again over TCP when
//! the answer is truncated) or TCP, judged by its rcode and, if asked, its answer data.

mod settings;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;
use std::sync::atomic::Ordering;

use hickory_proto::op::{Message, Query};
use hickory_proto::rr::{Name, RecordType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UdpSocket;

use super::connect::{self, SocketSetup};
use super::{Attempt, Dial, Failure, KeptConnection, ProbeKind, Progress};
use settings::rcode_name;
pub use settings::{DnsCheck, DnsSettings};

/// Largest answer read over UDP: EDNS's common buffer size; a larger one comes truncated
/// and is asked again over TCP.
const UDP_ANSWER: usize = 4096;

/// A DNS check of one target: the query encoded once (its id is set per probe).
pub(super) struct DnsProbe {
    query: Vec<u8>,
    tcp: bool,
    expect_rcode: u16,
    answer_contains: Option<String>,
}

impl DnsProbe {
    fn new(check: &DnsCheck) -> DnsProbe {
        let name = Name::from_str(&check.query_name).expect("validated name");
        let rtype = RecordType::from_str(&check.query_type).expect("validated type");
        let mut query = Message::query();
        query.metadata.recursion_desired = check.recursion_desired;
        query.add_query(Query::query(name, rtype));
        DnsProbe {
            query: query.to_vec().expect("a query with one question encodes"),
            tcp: check.tcp,
            expect_rcode: check.expect_rcode,
            answer_contains: check.answer_contains.clone(),
        }
    }

    async fn run(&self, dial: &Dial, progress: &Progress) -> Result<(), Failure> {
        let id = fastrand::u16(..);
        let mut query = self.query.clone();
        query[..2].copy_from_slice(&id.to_be_bytes());
        let answer = if self.tcp {
            over_tcp(dial, progress, &query).await?
        } else {
            let answer = over_udp(dial, progress, &query, id).await?;
            if answer.metadata.truncation {
                over_tcp(dial, progress, &query).await?
            } else {
                answer
            }
        };
        if answer.metadata.id != id {
            return Err(Failure::Protocol("answer to another query".into()));
        }
        self.judge(&answer)
    }

    /// The rcode, then the answer data.
    fn judge(&self, answer: &Message) -> Result<(), Failure> {
        let rcode = u16::from(answer.metadata.response_code);
        if rcode != self.expect_rcode {
            return Err(Failure::Answer {
                label: "rcode",
                detail: format!("rcode {}", rcode_name(rcode)),
            });
        }
        let Some(wanted) = &self.answer_contains else {
            return Ok(());
        };
        let found = answer
            .answers
            .iter()
            .any(|r| same_data(&r.data.to_string(), wanted));
        if found {
            Ok(())
        } else {
            Err(Failure::Answer {
                label: "answer",
                detail: format!("answer without {wanted}"),
            })
        }
    }
}

/// Record data compared as DNS writes it; names without case or the final dot.
fn same_data(found: &str, wanted: &str) -> bool {
    found
        .trim_end_matches('.')
        .eq_ignore_ascii_case(wanted.trim_end_matches('.'))
}

/// One query over a connected UDP socket; answers with another id are ignored (a late
/// answer to an earlier probe), until the deadline cuts the wait.
async fn over_udp(
    dial: &Dial,
    progress: &Progress,
    query: &[u8],
    id: u16,
) -> Result<Message, Failure> {
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
        match Message::from_vec(&buf[..n]) {
            Ok(answer) if answer.metadata.id == id => return Ok(answer),
            Ok(_) => continue,
            Err(e) => return Err(Failure::Protocol(format!("unreadable DNS answer: {e}"))),
        }
    }
}

/// One query over a TCP connection (RFC 7766 framing: a two-byte length before each
/// message).
async fn over_tcp(dial: &Dial, progress: &Progress, query: &[u8]) -> Result<Message, Failure> {
    let mut stream = connect::connect(dial.addr, dial.source, SocketSetup::default()).await?;
    progress.connected.store(true, Ordering::Relaxed);
    let answer = exchange_framed(&mut stream, query)
        .await
        .map_err(|e| Failure::from_io(&e))?;
    Message::from_vec(&answer).map_err(|e| Failure::Protocol(format!("unreadable DNS answer: {e}")))
}

/// One query and its answer on a TCP stream, each framed by a two-byte length (RFC 7766):
/// the probe's and the answer canary's TCP exchange.
pub(crate) async fn exchange_framed(
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
