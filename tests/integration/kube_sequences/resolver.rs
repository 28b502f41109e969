//! The sequences' own stub resolver: one A question over UDP on loopback, its answer read
//! into what the oracle compares (the response code, the `aa` flag and each answer record
//! as type, TTL and data). Written here rather than spawning `dig` because it is asked
//! every 20 ms for every name of a sequence.

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use tokio::net::UdpSocket;

/// One answer: RFC 1035 RCODE, the `aa` flag and the answer section, sorted (the
/// embedded server rotates addresses, so order alone is not compared).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub rcode: u8,
    pub authoritative: bool,
    /// (type, TTL, data): an A record's address, a CNAME's target name.
    pub records: BTreeSet<(u16, u32, String)>,
}

pub const NOERROR: u8 = 0;
pub const SERVFAIL: u8 = 2;
pub const NXDOMAIN: u8 = 3;
pub const REFUSED: u8 = 5;
pub const TYPE_A: u16 = 1;
pub const TYPE_CNAME: u16 = 5;

impl Answer {
    /// The addresses of the A records.
    pub fn addresses(&self) -> BTreeSet<String> {
        self.of(TYPE_A)
    }

    /// The data of the records of type `rtype`.
    pub fn of(&self, rtype: u16) -> BTreeSet<String> {
        self.records
            .iter()
            .filter(|r| r.0 == rtype)
            .map(|r| r.2.clone())
            .collect()
    }

    /// Whether the name is published: an answer with records in it.
    pub fn published(&self) -> bool {
        self.rcode == NOERROR && !self.records.is_empty()
    }
}

/// Asks `server` for `name`'s A records; `None` when nothing came back within 300 ms (the
/// server is down, as during a restart).
pub async fn ask(server: SocketAddr, name: &str, id: u16) -> Option<Answer> {
    let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).await.ok()?;
    socket.send_to(&query(name, id), server).await.ok()?;
    let mut buf = [0u8; 1500];
    let deadline = tokio::time::Instant::now() + Duration::from_millis(300);
    loop {
        let got = tokio::time::timeout_at(deadline, socket.recv_from(&mut buf)).await;
        let (n, _) = got.ok()?.ok()?;
        if n >= 2 && u16::from_be_bytes([buf[0], buf[1]]) == id {
            return parse(&buf[..n]);
        }
    }
}

/// A query for `name` A IN, recursion not desired.
fn query(name: &str, id: u16) -> Vec<u8> {
    let mut q = id.to_be_bytes().to_vec();
    q.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.trim_end_matches('.').split('.') {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    q
}

fn parse(m: &[u8]) -> Option<Answer> {
    let rcode = m.get(3)? & 0x0f;
    let authoritative = m.get(2)? & 0x04 != 0;
    let count = |at: usize| u16::from_be_bytes([m[at], m[at + 1]]);
    let (questions, answers) = (count(4), count(6));
    let mut at = 12;
    for _ in 0..questions {
        at = name(m, at)?.1 + 4;
    }
    let mut records = BTreeSet::new();
    for _ in 0..answers {
        at = name(m, at)?.1;
        let fixed = m.get(at..at + 10)?;
        let rtype = u16::from_be_bytes([fixed[0], fixed[1]]);
        let ttl = u32::from_be_bytes([fixed[4], fixed[5], fixed[6], fixed[7]]);
        let len = usize::from(u16::from_be_bytes([fixed[8], fixed[9]]));
        let data = m.get(at + 10..at + 10 + len)?;
        let text = match rtype {
            TYPE_A if len == 4 => Ipv4Addr::new(data[0], data[1], data[2], data[3]).to_string(),
            TYPE_CNAME => name(m, at + 10)?.0,
            _ => format!("{data:?}"),
        };
        records.insert((rtype, ttl, text));
        at += 10 + len;
    }
    Some(Answer {
        rcode,
        authoritative,
        records,
    })
}

/// The name at `at` (compression pointers followed) and where the bytes after it start.
fn name(m: &[u8], mut at: usize) -> Option<(String, usize)> {
    let mut labels = Vec::new();
    let mut end = None;
    for _ in 0..64 {
        let len = *m.get(at)?;
        if len & 0xc0 == 0xc0 {
            end.get_or_insert(at + 2);
            at = usize::from(u16::from_be_bytes([len & 0x3f, *m.get(at + 1)?]));
            continue;
        }
        if len == 0 {
            return Some((labels.join(".").to_lowercase(), end.unwrap_or(at + 1)));
        }
        let label = m.get(at + 1..at + 1 + usize::from(len))?;
        labels.push(String::from_utf8_lossy(label).into_owned());
        at += 1 + usize::from(len);
    }
    None
}
