//! One lookup of a host name: A and AAAA asked of a recursive resolver (UDP, again over
//! TCP when truncated), each server in turn until one answers, the answer's CNAME chain
//! followed as the resolver gives it, and the shortest TTL of what was used.

use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;
use std::time::Duration;

use hickory_proto::op::{Message, Query, ResponseCode};
use hickory_proto::rr::{Name, RData, RecordType};
use ho_engine::dns_client::{Found, LookupError};
use tokio::net::UdpSocket;

/// `host`'s addresses from the first of `servers` that answers within `timeout`.
pub async fn lookup(
    host: &str,
    servers: &[SocketAddr],
    timeout: Duration,
) -> Result<Found, LookupError> {
    let name = Name::from_str(&format!("{host}.")).map_err(|e| LookupError::Name {
        host: host.to_owned(),
        reason: e.to_string(),
    })?;
    let mut last = LookupError::NoServer;
    for &server in servers {
        let asked = tokio::time::timeout(timeout, async {
            let v4 = ask(server, &name, RecordType::A).await?;
            let v6 = ask(server, &name, RecordType::AAAA).await?;
            Ok::<_, String>((v4, v6))
        })
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {timeout:?}")));
        match asked.and_then(|(v4, v6)| combine(host, v4, v6)) {
            Ok(found) => return Ok(found),
            Err(reason) => last = LookupError::Unanswered { server, reason },
        }
    }
    Err(last)
}

/// One type's answer: its addresses and the shortest TTL of its answer section, or the
/// response code of a negative answer.
type Answer = Result<(Vec<IpAddr>, u32), ResponseCode>;

/// Both answers as one result: NXDOMAIN or no address at all is an error.
fn combine(host: &str, v4: Answer, v6: Answer) -> Result<Found, String> {
    let mut addresses = Vec::new();
    let mut ttl = u32::MAX;
    for (found, t) in [&v4, &v6].into_iter().flatten() {
        if !found.is_empty() {
            addresses.extend(found);
            ttl = ttl.min(*t);
        }
    }
    if addresses.is_empty() {
        let code = [v4, v6].into_iter().find_map(Result::err);
        return Err(match code {
            Some(ResponseCode::NXDomain) => format!("{host} does not exist (NXDOMAIN)"),
            Some(code) => format!("{host}: {code}"),
            None => format!("{host} has no A or AAAA record"),
        });
    }
    addresses.sort();
    addresses.dedup();
    Ok(Found {
        addresses,
        ttl: Duration::from_secs(u64::from(ttl)),
    })
}

/// Asks `server` for `name`'s `rtype` records over UDP (again over TCP when truncated).
async fn ask(server: SocketAddr, name: &Name, rtype: RecordType) -> Result<Answer, String> {
    let mut query = Message::query();
    query.metadata.recursion_desired = true;
    query.add_query(Query::query(name.clone(), rtype));
    let id = query.metadata.id;
    let bytes = query.to_vec().map_err(|e| e.to_string())?;
    let bind: SocketAddr = if server.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let socket = UdpSocket::bind(bind).await.map_err(|e| e.to_string())?;
    socket.connect(server).await.map_err(|e| e.to_string())?;
    socket.send(&bytes).await.map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; 4096];
    let answer = loop {
        let n = socket.recv(&mut buf).await.map_err(|e| e.to_string())?;
        match Message::from_vec(&buf[..n]) {
            Ok(m) if m.metadata.id == id => break m,
            _ => continue,
        }
    };
    let answer = if answer.metadata.truncation {
        ask_tcp(server, &bytes, id).await?
    } else {
        answer
    };
    Ok(read(&answer, rtype))
}

async fn ask_tcp(server: SocketAddr, query: &[u8], id: u16) -> Result<Message, String> {
    let answer = crate::wire::client::over_tcp(server, query, id)
        .await
        .map_err(|e| e.to_string())?;
    Message::from_vec(&answer).map_err(|e| e.to_string())
}

/// The `rtype` addresses of `answer` and the shortest TTL of its answer section (the
/// CNAMEs leading to them included: the answer is only as fresh as its chain).
fn read(answer: &Message, rtype: RecordType) -> Answer {
    match answer.metadata.response_code {
        ResponseCode::NoError => {}
        code => return Err(code),
    }
    let mut ttl = u32::MAX;
    let mut addresses = Vec::new();
    for record in &answer.answers {
        match (&record.data, rtype) {
            (RData::A(a), RecordType::A) => addresses.push(IpAddr::V4(a.0)),
            (RData::AAAA(a), RecordType::AAAA) => addresses.push(IpAddr::V6(a.0)),
            (RData::CNAME(_), _) => {}
            _ => continue,
        }
        ttl = ttl.min(record.ttl);
    }
    Ok((addresses, ttl))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::rdata::{A, CNAME};
    use hickory_proto::rr::Record;

    #[test]
    fn a_cname_chain_counts_its_shortest_ttl_and_only_addresses_of_the_type_asked() {
        let mut m = Message::query();
        let name = |s: &str| Name::from_str(s).unwrap();
        m.answers.push(Record::from_rdata(
            name("lb.example.com."),
            30,
            RData::CNAME(CNAME(name("lb-1.elb.amazonaws.com."))),
        ));
        m.answers.push(Record::from_rdata(
            name("lb-1.elb.amazonaws.com."),
            60,
            RData::A(A::new(192, 0, 2, 1)),
        ));
        m.answers.push(Record::from_rdata(
            name("lb-1.elb.amazonaws.com."),
            60,
            RData::A(A::new(192, 0, 2, 2)),
        ));
        assert_eq!(
            read(&m, RecordType::A),
            Ok((
                vec!["192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap()],
                30
            ))
        );
        assert_eq!(read(&m, RecordType::AAAA).unwrap().0, Vec::<IpAddr>::new());
        m.metadata.response_code = ResponseCode::NXDomain;
        assert_eq!(read(&m, RecordType::A), Err(ResponseCode::NXDomain));
    }

    #[test]
    fn no_address_of_either_family_is_an_error_saying_why() {
        let v4: Answer = Ok((vec!["192.0.2.1".parse().unwrap()], 60));
        let none: Answer = Ok((Vec::new(), u32::MAX));
        let found = combine("lb.example.com", v4.clone(), none.clone()).unwrap();
        assert_eq!(found.ttl, Duration::from_secs(60));
        assert_eq!(
            combine("lb.example.com", none.clone(), none.clone()),
            Err("lb.example.com has no A or AAAA record".into())
        );
        assert_eq!(
            combine(
                "lb.example.com",
                Err(ResponseCode::NXDomain),
                Err(ResponseCode::NXDomain)
            ),
            Err("lb.example.com does not exist (NXDOMAIN)".into())
        );
        assert_eq!(
            combine("lb.example.com", Err(ResponseCode::ServFail), none),
            Err("lb.example.com: Server Failure".into())
        );
    }
}
