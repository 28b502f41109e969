//! Zone transfers to secondaries: AXFR and IXFR over TCP (RFC 5936, RFC 1995), NOTIFY on
//! every change (RFC 1996), TSIG-authenticated (RFC 8945) and allowed only to configured
//! networks. The common production shape is a hidden primary feeding a fleet of
//! secondaries (BIND, Knot, NSD, or a provider's secondary DNS on anycast).
//!
//! A transfer carries the zone as data: every published address of every name, the SOA,
//! NS and static records. What the server decides per query (rotation, weighted draws,
//! locations) cannot travel in zone data, so a secondary answers every name with its full
//! published set, and an `answer = "cname"` name with one CNAME: the host a sink holding
//! one record per name publishes (`TenantSnapshot::cname`).
//! A zone with a name still awaiting its first snapshot is not transferred: the request
//! waits for it (up to 10 s, then SERVFAIL), so a secondary never takes a copy missing
//! names.
//!
//! - [`feed`]: each zone's content noted after every change.
//! - [`journal`]: recent versions, for IXFR.
//! - [`tsig`]: verifying requests and signing answers.

mod feed;
pub mod journal;

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use hickory_proto::op::{Message, MessageType, OpCode, Query};
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType, TSigner};
use ipnet::IpNet;
use tracing::{debug, info, warn};

use super::config::TransferConfig;
use journal::{Content, Data, Journal, ZoneRecord};

/// Records per transfer message: well under 64 KB with names compressed.
const RECORDS_PER_MESSAGE: usize = 500;
/// NOTIFY attempts per secondary and change, the wait doubling from [`NOTIFY_WAIT`].
const NOTIFY_ATTEMPTS: u32 = 5;
/// How long the first NOTIFY waits for its answer.
const NOTIFY_WAIT: Duration = Duration::from_secs(1);

/// The transfer side of a `dns_server` sink.
pub struct Transfers {
    allow: Vec<IpNet>,
    key: Option<TSigner>,
    notify: Vec<SocketAddr>,
    /// The runtime NOTIFYs are sent from: a change may come from a serving thread (an
    /// ACME update), which runs outside it.
    runtime: Option<tokio::runtime::Handle>,
    /// Recent versions of every zone.
    pub journal: Journal,
}

impl Transfers {
    /// The transfers of `config`; loads the TSIG key.
    pub fn new(config: &TransferConfig) -> Result<Transfers, crate::wire::key::KeyError> {
        let key = config
            .tsig
            .as_ref()
            .map(crate::wire::key::load_signer)
            .transpose()?;
        Ok(Transfers {
            allow: config
                .allow
                .iter()
                .filter_map(|n| n.parse::<IpNet>().ok())
                .collect(),
            key,
            notify: config.notify.clone(),
            runtime: tokio::runtime::Handle::try_current().ok(),
            journal: Journal::default(),
        })
    }

    /// The key requests must be signed with, if any.
    pub fn key(&self) -> Option<&TSigner> {
        self.key.as_ref()
    }

    /// Whether `client` may transfer zones: inside `allow`, and signed with the key when
    /// one is configured (`signed`).
    pub fn allows(&self, client: IpAddr, signed: bool) -> bool {
        let client = match client {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(client, IpAddr::V4),
            v4 => v4,
        };
        (signed || self.key.is_none()) && self.allow.iter().any(|n| n.contains(&client))
    }

    /// Tells every configured secondary that the zone of `soa` changed to its serial, in
    /// the background, each retried with a doubling wait until it answers. The SOA rides
    /// along (RFC 1996 3.7), so a secondary need not ask for it before transferring.
    pub fn notify(&self, soa: &Record) {
        let runtime = self
            .runtime
            .clone()
            .or_else(|| tokio::runtime::Handle::try_current().ok());
        let Some(runtime) = runtime.filter(|_| !self.notify.is_empty()) else {
            return;
        };
        for target in &self.notify {
            let (soa, key, target) = (soa.clone(), self.key.clone(), *target);
            runtime.spawn(async move { notify_one(&soa, key.as_ref(), target).await });
        }
    }
}

/// The records a transfer of `apex` carries after the leading SOA: NS and the static
/// records (`fixed`), then the tenants' records of `content`.
pub fn zone_records(fixed: &[Record], content: &Content) -> Vec<Record> {
    let mut records = fixed.to_vec();
    records.extend(content.iter().filter_map(zone_record));
    records
}

/// A tenant's record of the zone as a DNS record.
pub fn zone_record(r: &ZoneRecord) -> Option<Record> {
    let absolute = |name: &str| -> Option<Name> {
        let mut name = Name::from_ascii(name).ok()?;
        name.set_fqdn(true);
        Some(name)
    };
    let data = match &r.data {
        Data::Address(IpAddr::V4(v4)) => RData::A((*v4).into()),
        Data::Address(IpAddr::V6(v6)) => RData::AAAA((*v6).into()),
        Data::Cname(host) => RData::CNAME(hickory_proto::rr::rdata::CNAME(absolute(host)?)),
        Data::Text(text) => RData::TXT(hickory_proto::rr::rdata::TXT::new(vec![text.clone()])),
    };
    Some(Record::from_rdata(absolute(&r.name)?, r.ttl, data))
}

/// What changed from `old` to `new`: (deleted, added) records.
pub fn difference(old: &Content, new: &Content) -> (Vec<Record>, Vec<Record>) {
    let records = |from: &BTreeSet<ZoneRecord>, without: &BTreeSet<ZoneRecord>| -> Vec<Record> {
        from.difference(without).filter_map(zone_record).collect()
    };
    (records(old, new), records(new, old))
}

/// `records` as the messages of one transfer answering `query` (id and question), at
/// most [`RECORDS_PER_MESSAGE`] each; the question in the first only (RFC 5936 2.2).
pub fn messages(query: &Message, records: &[Record]) -> Option<Vec<Vec<u8>>> {
    records
        .chunks(RECORDS_PER_MESSAGE)
        .enumerate()
        .map(|(i, chunk)| {
            let mut m = Message::response(query.metadata.id, OpCode::Query);
            m.metadata.authoritative = true;
            if i == 0 {
                m.queries.clone_from(&query.queries);
            }
            m.answers = chunk.to_vec();
            m.to_vec().ok()
        })
        .collect()
}

/// Sends one NOTIFY of `soa` to `target` until it is answered.
async fn notify_one(soa: &Record, key: Option<&TSigner>, target: SocketAddr) {
    let (zone, serial) = match &soa.data {
        RData::SOA(s) => (&soa.name, s.serial),
        _ => return,
    };
    let bind: SocketAddr = if target.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let socket = match tokio::net::UdpSocket::bind(bind).await {
        Ok(s) => s,
        Err(e) => {
            warn!(%target, error = %e, "NOTIFY not sent: no socket");
            return;
        }
    };
    let mut wait = NOTIFY_WAIT;
    for attempt in 1..=NOTIFY_ATTEMPTS {
        let id = fastrand::u16(..);
        let Some(request) = notify_message(soa, id, key) else {
            return;
        };
        if socket.send_to(&request, target).await.is_ok() {
            let mut buf = [0u8; 1024];
            let deadline = tokio::time::Instant::now() + wait;
            while let Ok(Ok((n, from))) =
                tokio::time::timeout_at(deadline, socket.recv_from(&mut buf)).await
            {
                let answered = from == target
                    && Message::from_vec(&buf[..n]).is_ok_and(|m| {
                        m.metadata.id == id
                            && m.metadata.message_type == MessageType::Response
                            && m.metadata.op_code == OpCode::Notify
                    });
                if answered {
                    debug!(%target, %zone, serial, attempt, "NOTIFY answered");
                    return;
                }
            }
        }
        wait *= 2;
    }
    info!(%target, %zone, serial, "NOTIFY not answered after {NOTIFY_ATTEMPTS} attempts; the secondary will see the change at its next SOA refresh");
}

/// A NOTIFY of `soa` (RFC 1996: opcode NOTIFY, AA, the zone's SOA as the question and
/// the answer), signed with `key` when given.
fn notify_message(soa: &Record, id: u16, key: Option<&TSigner>) -> Option<Vec<u8>> {
    let mut m = Message::query();
    m.metadata.id = id;
    m.metadata.op_code = OpCode::Notify;
    m.metadata.authoritative = true;
    m.metadata.recursion_desired = false;
    let mut q = Query::query(soa.name.clone(), RecordType::SOA);
    q.set_query_class(DNSClass::IN);
    m.add_query(q);
    m.answers.push(soa.clone());
    if let Some(key) = key {
        let now = ho_engine::clock::unix_now();
        let (tsig, _) = key.sign_message(&m, now).ok()?;
        m.signature = Some(tsig);
    }
    m.to_vec().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transfers(allow: &[&str]) -> Transfers {
        Transfers::new(&TransferConfig {
            notify: Vec::new(),
            allow: allow.iter().map(|s| (*s).to_owned()).collect(),
            tsig: None,
        })
        .unwrap()
    }

    #[test]
    fn only_allowed_networks_transfer_and_a_key_makes_signing_required() {
        let t = transfers(&["192.0.2.0/24", "2001:db8::/32"]);
        assert!(t.allows("192.0.2.53".parse().unwrap(), false));
        assert!(
            t.allows("::ffff:192.0.2.53".parse().unwrap(), false),
            "v4-mapped"
        );
        assert!(t.allows("2001:db8::53".parse().unwrap(), false));
        assert!(!t.allows("198.51.100.1".parse().unwrap(), false));
        let mut keyed = transfers(&["192.0.2.0/24"]);
        keyed.key = Some(
            TSigner::new(
                vec![7; 32],
                hickory_proto::rr::rdata::tsig::TsigAlgorithm::HmacSha256,
                Name::from_ascii("k.").unwrap(),
                300,
            )
            .unwrap(),
        );
        assert!(
            !keyed.allows("192.0.2.53".parse().unwrap(), false),
            "unsigned"
        );
        assert!(keyed.allows("192.0.2.53".parse().unwrap(), true));
    }
}
