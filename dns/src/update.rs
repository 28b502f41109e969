//! `kind = "rfc2136"`: dynamic updates (RFC 2136) signed with TSIG (RFC 8945), the one
//! protocol BIND, Knot, Windows DNS, Infoblox and PowerDNS (dnsupdate) all accept.
//!
//! A write reads each name of the tenant (A, AAAA, CNAME, and the ownership mark of
//! [`ho_engine::sink::ownership`]) with queries, then sends one UPDATE for the tenant whose
//! prerequisites say "every rrset is still as read": a concurrent edit makes the server
//! refuse the whole update (YXRRSET/NXRRSET) instead of being overwritten, and the sink
//! actor retries with a fresh read. Names without our mark are never touched. An
//! `answer = "cname"` tenant's names below the zone's apex hold one CNAME to the first
//! healthy host by priority; the apex holds the addresses (it cannot hold a CNAME).
//!
//! - [`config`]: settings and checks.
//! - [`update`]: per name, prerequisites and updates from what was read (pure).
//! - [`client`]: the TCP exchange and TSIG signing.

pub mod config;
pub mod plan;

use std::net::IpAddr;
use std::sync::Arc;

use hickory_proto::op::{Message, Query};
use hickory_proto::rr::{DNSClass, Name, RData, RecordType, TSigner};
use ho_engine::sink::{Applied, Sink, SinkError, SinkFuture};
use ho_engine::snapshot::TenantSnapshot;

use crate::wire::client::Connection;
use crate::wire::key::load_signer;
use config::Rfc2136Config;
use ho_engine::sink::ownership::OWNER_PREFIX;
use ho_engine::sink::SetupError;
use plan::{plan_name, Alias, Current, NamePlan, Rrset, Wanted};

/// Writes tenants' names into one zone of one server.
pub struct Rfc2136Sink {
    inner: Arc<Inner>,
}

struct Inner {
    config: Rfc2136Config,
    zone: Name,
    signer: Option<TSigner>,
    owner_id: String,
}

impl Rfc2136Sink {
    /// A sink writing into `config.zone` as `owner_id`; loads the TSIG key.
    pub fn new(config: &Rfc2136Config, owner_id: &str) -> Result<Rfc2136Sink, SetupError> {
        let signer = config
            .tsig
            .as_ref()
            .map(load_signer)
            .transpose()
            .map_err(SetupError::client)?;
        if signer.is_none() {
            tracing::warn!(server = %config.server, zone = %config.zone, "RFC 2136 updates go unsigned (no tsig): only a server that restricts updates by address should accept them");
        }
        let inner = Inner {
            zone: Name::from_ascii(format!("{}.", config.zone)).map_err(|e| {
                SetupError::Setting {
                    field: "zone".into(),
                    reason: e.to_string(),
                }
            })?,
            config: config.clone(),
            signer,
            owner_id: owner_id.to_owned(),
        };
        Ok(Rfc2136Sink {
            inner: Arc::new(inner),
        })
    }
}

impl Inner {
    async fn apply(&self, snapshot: &TenantSnapshot) -> Result<Applied, SinkError> {
        let mut conn = Connection::open(self.config.server, self.config.timeout).await?;
        let wanted: Vec<IpAddr> = snapshot.addresses.iter().map(|a| a.address).collect();
        let ttl = u32::try_from(snapshot.ttl.as_secs().max(1)).unwrap_or(u32::MAX);
        let mut update = Message::query();
        update.add_query(Query::query(self.zone.clone(), RecordType::SOA));
        let mut changed = false;
        let mut foreign = Vec::new();
        for domain in &snapshot.domains {
            let bad = |e| SinkError::permanent(format!("{domain}: not a DNS name: {e}"));
            let name = Name::from_ascii(format!("{domain}.")).map_err(bad)?;
            let mark = Name::from_ascii(format!("{OWNER_PREFIX}{domain}.")).map_err(bad)?;
            let current = read(&mut conn, &name, &mark).await?;
            let host = match snapshot.cname().filter(|_| name != self.zone) {
                Some(host) => Some(Name::from_ascii(format!("{host}.")).map_err(|e| {
                    SinkError::permanent(format!("{domain}: host {host:?} is not a DNS name: {e}"))
                })?),
                None => None,
            };
            let want = host
                .as_ref()
                .map_or(Wanted::Addresses(&wanted), Wanted::Cname);
            match plan_name(&name, &mark, &current, want, ttl, &self.owner_id) {
                NamePlan::Unchanged => {}
                NamePlan::Foreign(why) => foreign.push(why),
                NamePlan::Change {
                    prerequisites,
                    updates,
                } => {
                    update.answers.extend(prerequisites);
                    update.authorities.extend(updates);
                    changed = true;
                }
            }
        }
        if changed {
            conn.update(update, self.signer.as_ref(), &self.config.zone)
                .await?;
        }
        if !foreign.is_empty() {
            return Err(SinkError::permanent(format!(
                "left alone: {}",
                foreign.join("; ")
            )));
        }
        Ok(if changed {
            Applied::Changed
        } else {
            Applied::Unchanged
        })
    }
}

/// What the server holds at `name` and at its mark `mark`.
async fn read(conn: &mut Connection, name: &Name, mark: &Name) -> Result<Current, SinkError> {
    let mut current = Current::default();
    for rtype in [RecordType::A, RecordType::AAAA] {
        let answer = conn.query(name, rtype).await?;
        let mut set = Rrset::default();
        for r in answer.answers.iter().filter(|r| r.name == *name) {
            let ip = match &r.data {
                RData::A(a) if rtype == RecordType::A => IpAddr::V4(a.0),
                RData::AAAA(a) if rtype == RecordType::AAAA => IpAddr::V6(a.0),
                _ => continue,
            };
            set.ttl = r.ttl;
            set.values.push(ip);
        }
        set.values.sort();
        if rtype == RecordType::A {
            current.v4 = set;
        } else {
            current.v6 = set;
        }
    }
    let answer = conn.query(name, RecordType::CNAME).await?;
    current.cname = answer
        .answers
        .iter()
        .filter(|r| r.name == *name)
        .find_map(|r| match &r.data {
            RData::CNAME(target) => Some(Alias {
                ttl: r.ttl,
                target: target.0.clone(),
            }),
            _ => None,
        });
    let answer = conn.query(mark, RecordType::TXT).await?;
    for r in answer
        .answers
        .iter()
        .filter(|r| r.dns_class == DNSClass::IN)
    {
        if let RData::TXT(txt) = &r.data {
            let text: Vec<u8> = txt
                .txt_data
                .iter()
                .flat_map(|s| s.iter().copied())
                .collect();
            current
                .marks
                .push(String::from_utf8_lossy(&text).into_owned());
        }
    }
    Ok(current)
}

impl Sink for Rfc2136Sink {
    fn kind(&self) -> &'static str {
        "rfc2136"
    }

    fn apply(&self, snapshot: Arc<TenantSnapshot>) -> SinkFuture {
        let inner = self.inner.clone();
        Box::pin(async move { inner.apply(&snapshot).await })
    }
}
