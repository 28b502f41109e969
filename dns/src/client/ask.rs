//! One question to the DNS server in front of a back end, asked as a resolver asks it:
//! over UDP, again over TCP when the answer comes truncated.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;
use std::time::Duration;

use hickory_proto::op::{Edns, Message, Query, ResponseCode};
use hickory_proto::rr::rdata::opt::{ClientSubnet, EdnsOption};
use hickory_proto::rr::{Name, RData, RecordType};
use ho_engine::dns_client::{AddressType, Answered, AskError, Asker, Asking};
use ipnet::IpNet;
use tokio::net::UdpSocket;

/// Asks one server, over one UDP socket kept for every question (opened again after an
/// error); late answers to an earlier question are told apart by their id.
pub struct ServerAsker {
    server: SocketAddr,
    socket: Option<UdpSocket>,
}

impl Asker for ServerAsker {
    fn answer<'a>(
        &'a mut self,
        name: &'a str,
        rtype: AddressType,
        client: Option<IpNet>,
        deadline: Duration,
    ) -> Asking<'a, Result<Answered, AskError>> {
        let rtype = match rtype {
            AddressType::A => RecordType::A,
            AddressType::Aaaa => RecordType::AAAA,
        };
        Box::pin(self.ask(name, rtype, client, deadline))
    }
}

impl ServerAsker {
    /// Asks `server`.
    pub fn new(server: SocketAddr) -> ServerAsker {
        ServerAsker {
            server,
            socket: None,
        }
    }

    /// [`Asker::answer`], for one record type.
    async fn ask(
        &mut self,
        name: &str,
        rtype: RecordType,
        client: Option<IpNet>,
        deadline: Duration,
    ) -> Result<Answered, AskError> {
        let qname = Name::from_str(&format!("{name}.")).map_err(|_| AskError::Name(name.into()))?;
        let id = fastrand::u16(..);
        let mut query = Message::query();
        query.metadata.id = id;
        query.add_query(Query::query(qname.clone(), rtype));
        if let Some(client) = client {
            let mut edns = Edns::new();
            edns.options_mut()
                .insert(EdnsOption::Subnet(ClientSubnet::new(
                    client.network(),
                    client.prefix_len(),
                    0,
                )));
            query.set_edns(edns);
        }
        let bytes = query
            .to_vec()
            .map_err(|e| AskError::Unreadable(e.to_string()))?;
        let answer = match tokio::time::timeout(deadline, self.exchange(&bytes, id)).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(e)) => {
                self.socket = None;
                return Err(e);
            }
            Err(_) => return Err(AskError::Timeout(deadline)),
        };
        read(&answer, &qname)
    }

    async fn exchange(&mut self, query: &[u8], id: u16) -> Result<Message, AskError> {
        let answer = self.over_udp(query, id).await?;
        if answer.metadata.truncation {
            over_tcp(self.server, query, id).await
        } else {
            Ok(answer)
        }
    }

    async fn over_udp(&mut self, query: &[u8], id: u16) -> Result<Message, AskError> {
        let socket = match &mut self.socket {
            Some(s) => s,
            None => {
                let local: IpAddr = match self.server {
                    SocketAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
                    SocketAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
                };
                let socket = UdpSocket::bind(SocketAddr::new(local, 0)).await?;
                socket.connect(self.server).await?;
                self.socket.insert(socket)
            }
        };
        socket.send(query).await?;
        let mut buf = [0; 4096];
        loop {
            let n = socket.recv(&mut buf).await?;
            match Message::from_vec(&buf[..n]) {
                Ok(answer) if answer.metadata.id == id => return Ok(answer),
                Ok(_) => continue,
                Err(e) => return Err(AskError::Unreadable(e.to_string())),
            }
        }
    }
}

/// What `answer` to a question for `qname` says the name serves.
fn read(answer: &Message, qname: &Name) -> Result<Answered, AskError> {
    match answer.metadata.response_code {
        ResponseCode::NoError | ResponseCode::NXDomain => {}
        ResponseCode::ServFail => return Ok(Answered::failed("SERVFAIL")),
        ResponseCode::Refused => return Ok(Answered::failed("REFUSED")),
        other => return Err(AskError::Rcode(other.to_string())),
    }
    let cname = answer.answers.iter().find_map(|r| match &r.data {
        RData::CNAME(target) if r.name == *qname => Some(
            target
                .0
                .to_ascii()
                .trim_end_matches('.')
                .to_ascii_lowercase(),
        ),
        _ => None,
    });
    let mut addresses: Vec<IpAddr> = answer
        .answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::A(a) => Some(IpAddr::V4(a.0)),
            RData::AAAA(a) => Some(IpAddr::V6(a.0)),
            _ => None,
        })
        .collect();
    addresses.sort();
    addresses.dedup();
    let referral = (addresses.is_empty() && cname.is_none() && !answer.metadata.authoritative)
        .then(|| referral(answer, qname))
        .flatten();
    Ok(Answered {
        addresses,
        cname,
        failed: None,
        referral,
    })
}

/// The delegation an answer without records points at, if it is one: NS records in the
/// authority section for the name or one above it.
fn referral(answer: &Message, qname: &Name) -> Option<String> {
    let mut cut = None;
    let mut servers = Vec::new();
    for r in &answer.authorities {
        if let RData::NS(ns) = &r.data {
            if r.name.zone_of(qname) {
                cut.get_or_insert_with(|| r.name.to_ascii().trim_end_matches('.').to_owned());
                servers.push(ns.0.to_ascii().trim_end_matches('.').to_owned());
            }
        }
    }
    servers.sort();
    Some(format!(
        "below a delegation at {} (NS {})",
        cut?,
        servers.join(", ")
    ))
}

/// The question again over TCP.
async fn over_tcp(server: SocketAddr, query: &[u8], id: u16) -> Result<Message, AskError> {
    let answer = crate::wire::client::over_tcp(server, query, id).await?;
    Message::from_vec(&answer).map_err(|e| AskError::Unreadable(e.to_string()))
}

#[cfg(test)]
mod tests {
    use hickory_proto::op::OpCode;
    use hickory_proto::rr::rdata::{A, NS};
    use hickory_proto::rr::Record;

    use super::*;

    fn name(s: &str) -> Name {
        Name::from_str(s).unwrap()
    }

    /// A server that hands the question to another zone's servers (NOERROR, nothing
    /// answered, NS below or at the zone cut, not authoritative) is said to refer it, with
    /// the cut and its servers; an authoritative empty answer, or one with records, is not.
    #[test]
    fn a_referral_names_the_delegation() {
        let qname = name("app.team.example.org.");
        let mut m = Message::response(7, OpCode::Query);
        for ns in ["ns2.k8gb.example.net.", "ns1.k8gb.example.net."] {
            let record =
                Record::from_rdata(name("team.example.org."), 300, RData::NS(NS(name(ns))));
            m.authorities.push(record);
        }
        let read_once = |m: &Message| read(m, &qname).unwrap();
        assert_eq!(
            read_once(&m).referral.as_deref(),
            Some("below a delegation at team.example.org (NS ns1.k8gb.example.net, ns2.k8gb.example.net)")
        );
        let mut authoritative = m.clone();
        authoritative.metadata.authoritative = true;
        assert_eq!(
            read_once(&authoritative).referral,
            None,
            "our own zone's empty answer"
        );
        let mut answered = m.clone();
        let a = Record::from_rdata(qname.clone(), 30, RData::A(A::new(192, 0, 2, 1)));
        answered.answers.push(a);
        assert_eq!(read_once(&answered).referral, None);
    }
}
