//! One query in, one answer out: the authoritative logic of the embedded server, kept
//! free of sockets so every case is a unit test. An answer is made in named stages, each in
//! its file, as Knot hooks its modules into stages: [`begin`] (the message, its TSIG
//! signature, EDNS, cookies, one question), [`peers`] (reports other clusters ask for),
//! [`lookup`] (zones, records, routing policy, geo, DNSSEC) and [`finish`] (size, signature).
//! Kept answers ([`PacketCache`]) skip the stages; rate limiting applies after them, in the
//! transport-neutral `transport::respond`. Zone transfers are answered apart ([`axfr`]).

mod axfr;
mod begin;
mod finish;
mod lookup;
pub(crate) use lookup::key_of;
mod peers;

use std::net::IpAddr;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Instant;

use hickory_proto::op::{OpCode, ResponseCode};
use hickory_proto::rr::{Name, TSigner};
use ho_engine::snapshot::TenantSnapshot;

use super::config::DnsServerConfig;
use super::cookies::Cookies;
use super::dnssec::Signer;
use super::geo::Locator;
use super::packet_cache::{Key, PacketCache, Stamp, Variation};
use super::rate_limit::{RateLimiter, Verdict};
use super::records::{Entry, Records};
use super::reports::Shelf;
use super::transfer::journal::{Data, ZoneRecord};
use super::transfer::Transfers;

/// A zone the server is authoritative for.
struct Zone {
    /// Lower case, no trailing dot.
    apex: String,
    /// `.` + apex, to test "inside" without allocating.
    dot_apex: String,
    name: Name,
    mname: Name,
    rname: Name,
    nameservers: Vec<Name>,
}

impl Zone {
    /// The zones of `config`, longest apex first so nested zones answer from the innermost;
    /// each with its SOA names and name servers (`ns1.<apex>` unless given).
    fn all_of(config: &DnsServerConfig) -> Result<Vec<Zone>, String> {
        let mut zones = Vec::new();
        for apex in &config.zones {
            let mname = config.soa.mname.clone().unwrap_or(format!("ns1.{apex}"));
            let rname = config
                .soa
                .rname
                .clone()
                .unwrap_or(format!("hostmaster.{apex}"));
            let nameservers = if config.nameservers.is_empty() {
                vec![name(&mname)?]
            } else {
                config
                    .nameservers
                    .iter()
                    .map(|n| name(n))
                    .collect::<Result<_, _>>()?
            };
            zones.push(Zone {
                apex: apex.clone(),
                dot_apex: format!(".{apex}"),
                name: name(apex)?,
                mname: name(&mname)?,
                rname: name(&rname)?,
                nameservers,
            });
        }
        zones.sort_by_key(|z| std::cmp::Reverse(z.apex.len()));
        Ok(zones)
    }
}

/// Everything a query is answered from: the zones (from the config) and the records (from
/// snapshots).
pub struct Authority {
    /// Longest apex first, so nested zones answer from the innermost.
    zones: Vec<Zone>,
    soa: super::config::SoaConfig,
    locator: Locator,
    answers: usize,
    max_udp_payload: u16,
    /// Replaced per tenant by the sink ([`Authority::publish`]); read by every query.
    pub records: RwLock<Records>,
    /// Moves on with every change of `records`: answers kept under an older one are stale.
    generation: AtomicU64,
    /// Whole answers kept by query.
    packets: PacketCache,
    rotation: AtomicUsize,
    /// Response rate limiting over UDP (`rate_limit`), if configured.
    rate_limit: Option<RateLimiter>,
    /// DNS cookies: made and checked with the server secret.
    cookies: Cookies,
    /// DNSSEC online signing (`dnssec`), if configured.
    signer: Option<Arc<Signer>>,
    /// Zone transfers to secondaries (`transfer`), if configured.
    transfers: Option<Transfers>,
    /// The key peers sign report queries with (`reports`), if configured.
    report_key: Option<TSigner>,
    /// This cluster's reports, answered to peers; kept across a rebuild as `records` are.
    pub shelf: Arc<Shelf>,
    /// ACME DNS-01 challenges taken by update (`acme`), if configured.
    pub acme: Option<super::acme::Acme>,
    /// The records of `static_records`.
    statics: super::statics::Statics,
}

/// Why a `dns_server` sink's settings cannot make a server (files its settings name:
/// DNSSEC keys, TSIG secrets, the GeoIP database, the cookie secret; its listen addresses).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// A zone, SOA or name server name is not a DNS name.
    #[error("{0}")]
    Zone(String),
    /// The DNSSEC keys cannot be used.
    #[error("dnssec: {0}")]
    Dnssec(super::dnssec::DnssecError),
    /// The transfer settings (their TSIG key) cannot be used.
    #[error("transfer: {0}")]
    Transfer(crate::wire::key::KeyError),
    /// The reports' TSIG key cannot be used.
    #[error("reports: {0}")]
    Reports(crate::wire::key::KeyError),
    /// The ACME updates' TSIG key cannot be used.
    #[error("acme: {0}")]
    Acme(crate::wire::key::KeyError),
    /// `static_records` is not zone-file text the server can serve.
    #[error("static_records: {0}")]
    Statics(super::statics::StaticsError),
    /// The GeoIP database cannot be read.
    #[error(transparent)]
    Geo(super::geo::GeoDbError),
    /// A listen address cannot be served.
    #[error("{0}")]
    Listen(#[from] super::transport::ListenError),
    /// The cookie secret cannot be read.
    #[error("{field}: {reason}")]
    Cookies {
        /// The field naming the file.
        field: String,
        /// Why.
        reason: String,
    },
}

/// An answer on the wire, with what metrics label it by.
pub struct Reply {
    /// The response message.
    pub bytes: Vec<u8>,
    /// Query type label.
    pub qtype: &'static str,
    /// Response code label.
    pub rcode: &'static str,
    /// The query carried a valid server cookie: its source address is not spoofed.
    pub proven_client: bool,
}

fn name(s: &str) -> Result<Name, String> {
    let mut n = Name::from_str(s).map_err(|e| format!("\"{s}\" is not a DNS name: {e}"))?;
    n.set_fqdn(true);
    Ok(n)
}

impl Authority {
    /// The authority of `config`, starting from `records` (kept across a rebuild so a
    /// reload never answers from nothing).
    pub fn new(config: &DnsServerConfig, records: Records) -> Result<Authority, ServerError> {
        let zones = Zone::all_of(config).map_err(ServerError::Zone)?;
        let signer = config
            .dnssec
            .as_ref()
            .map(|d| Signer::start(d, &config.zones, config.soa.minimum))
            .transpose()
            .map_err(ServerError::Dnssec)?;
        let transfers = config
            .transfer
            .as_ref()
            .map(Transfers::new)
            .transpose()
            .map_err(ServerError::Transfer)?;
        let report_key = config
            .reports
            .as_ref()
            .map(|r| crate::wire::key::load_signer(&r.tsig))
            .transpose()
            .map_err(ServerError::Reports)?;
        let authority = Authority {
            zones,
            soa: config.soa.clone(),
            locator: Locator::load(&config.geo).map_err(ServerError::Geo)?,
            answers: config.answers,
            max_udp_payload: config.max_udp_payload,
            records: RwLock::new(records),
            generation: AtomicU64::new(0),
            packets: PacketCache::default(),
            rotation: AtomicUsize::new(0),
            rate_limit: config.rate_limit.as_ref().map(RateLimiter::new),
            cookies: Cookies::load(&config.cookies)
                .map_err(|(field, reason)| ServerError::Cookies { field, reason })?,
            signer,
            transfers,
            report_key,
            shelf: Arc::default(),
            acme: config
                .acme
                .as_ref()
                .map(|a| crate::wire::key::load_signer(&a.tsig))
                .transpose()
                .map_err(ServerError::Acme)?
                .map(|key| super::acme::Acme::new(key, None)),
            statics: match &config.static_records {
                Some(text) => super::statics::Statics::parse(text, &config.zones)
                    .map_err(ServerError::Statics)?,
                None => super::statics::Statics::default(),
            },
        };
        authority.remember_zones(&authority.records.read().expect("not poisoned"));
        Ok(authority)
    }

    /// Whether `reply` to `request` may go to `client` over UDP now (`rate_limit`).
    pub fn rate_limit(
        &self,
        client: IpAddr,
        request: &[u8],
        reply: &Reply,
        now: Instant,
    ) -> Verdict {
        match &self.rate_limit {
            // A client that returned a valid server cookie is not spoofed.
            Some(limiter) if !reply.proven_client => {
                limiter.check(client, request, reply.rcode, now)
            }
            _ => Verdict::Send,
        }
    }

    /// Replaces the tenant's set with `snapshot`'s; false when nothing changed. Zones
    /// whose content changed are announced to their secondaries (NOTIFY).
    pub fn publish(&self, snapshot: &TenantSnapshot) -> bool {
        let mut records = self.records.write().expect("not poisoned");
        let changed = records.publish(snapshot);
        if changed {
            self.generation.fetch_add(1, Ordering::Release);
            let serial = records.serial();
            for zone in self.remember_zones(&records) {
                if let Some(t) = &self.transfers {
                    t.notify(&self.soa_record(zone, serial));
                }
            }
        }
        changed
    }

    /// Follows the tenants a new plan gives this server (see [`Records::follow_plan`]);
    /// `source_arrived`: a tenant source's first round is applied, so a name it did not
    /// declare does not exist (see [`Records::source_arrived`]).
    pub fn follow_plan<'a>(
        &self,
        tenants: impl IntoIterator<Item = (&'a str, &'a [String])>,
        source_arrived: bool,
    ) {
        let mut records = self.records.write().expect("not poisoned");
        if source_arrived {
            records.source_arrived();
        }
        // A name that came may have been answered NXDOMAIN and kept: no longer.
        if records.follow_plan(tenants) {
            self.generation.fetch_add(1, Ordering::Release);
        }
    }

    /// Notes each zone's content at the current serial for transfers (a zone with a name
    /// awaiting its first snapshot is not noted: it is not transferred); the zones whose
    /// content changed.
    fn remember_zones(&self, records: &Records) -> Vec<&Zone> {
        let Some(transfers) = &self.transfers else {
            return Vec::new();
        };
        let mut contents: Vec<Option<std::collections::BTreeSet<ZoneRecord>>> =
            vec![Some(Default::default()); self.zones.len()];
        let challenges = self.acme.as_ref().map(super::acme::Acme::all);
        for (name, texts) in challenges.iter().flatten() {
            let zone = self.zones.iter().position(|z| name.ends_with(&z.dot_apex));
            if let Some(Some(content)) = zone.map(|i| &mut contents[i]) {
                content.extend(texts.iter().map(|text| ZoneRecord {
                    name: name.clone(),
                    ttl: super::acme::TTL,
                    data: Data::Text(text.clone()),
                }));
            }
        }
        for (name, entry) in records.entries() {
            let Some(i) = self
                .zones
                .iter()
                .position(|z| name == z.apex || name.ends_with(&z.dot_apex))
            else {
                continue;
            };
            match (entry, &mut contents[i]) {
                (Entry::Pending, slot) => *slot = None,
                (Entry::Ready(set), Some(content)) => {
                    let record = |data| ZoneRecord {
                        name: name.to_owned(),
                        ttl: set.ttl,
                        data,
                    };
                    match set.hosts.first() {
                        Some(host) if name != self.zones[i].apex => {
                            content.insert(record(Data::Cname(key_of(&host.name))));
                        }
                        _ => content.extend(
                            set.v4
                                .iter()
                                .chain(&set.v6)
                                .map(|t| record(Data::Address(t.ip))),
                        ),
                    }
                }
                (Entry::Ready(_), None) => {}
            }
        }
        self.zones
            .iter()
            .zip(contents)
            .filter_map(|(zone, content)| {
                let changed = transfers
                    .journal
                    .record(&zone.apex, records.serial(), content?);
                changed.then_some(zone)
            })
            .collect()
    }

    /// What answers were made from: a kept answer of another generation is stale.
    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire) + self.signer.as_ref().map_or(0, |s| s.generation())
    }

    /// The answer to `request` from `client`; `udp` limits its size (EDNS or 512 bytes).
    /// `None` for what must not be answered (responses, garbage shorter than a header).
    pub fn answer(&self, request: &[u8], client: IpAddr, udp: bool) -> Option<Reply> {
        let turn = self.rotation.fetch_add(1, Ordering::Relaxed);
        let Some(key) = Key::of(request, udp) else {
            return self.make_answer(request, client, udp, turn).map(|(r, _)| r);
        };
        // Read before anything is answered: a change after this makes what is kept
        // below stale, never the reverse.
        let stamp = Stamp {
            generation: self.generation(),
            turn,
            now: Instant::now(),
        };
        if let Some(hit) = self.packets.get(&key, request, stamp) {
            return Some(Reply {
                bytes: hit.bytes,
                qtype: hit.qtype,
                rcode: hit.rcode,
                proven_client: false,
            });
        }
        let (reply, variation) = self.make_answer(request, client, udp, turn)?;
        self.packets.put(
            key,
            &reply.bytes,
            (reply.qtype, reply.rcode),
            variation,
            stamp,
        );
        Some(reply)
    }

    /// The answer to `request` made from the records, with rotation `turn`, and how it
    /// varies between queries of the same bytes: the stages in order.
    fn make_answer(
        &self,
        request: &[u8],
        client: IpAddr,
        udp: bool,
        turn: usize,
    ) -> Option<(Reply, Variation)> {
        let mut query = match self.begin(request, client, udp) {
            Ok(query) => query,
            Err(done) => return done,
        };
        if query.query.metadata.op_code == OpCode::Update {
            self.update(&mut query);
            return finish::signed(query, false).map(per_query);
        }
        if let Some(asked) = self.asks_for_reports(query.question().name()) {
            self.answer_reports(&mut query, asked, client);
            return finish::signed(query, false).map(per_query);
        }
        let variation = self.look_up(&mut query, client, turn);
        // A signed answer carries its signing time: never kept.
        let kept = query.signed.is_none();
        let reply = finish::signed(query, true)?;
        Some(if kept {
            (reply, variation)
        } else {
            per_query(reply)
        })
    }

    /// The TSIG keys requests may be signed with.
    fn keys(&self) -> Vec<&TSigner> {
        let transfer = self.transfers.as_ref().and_then(Transfers::key);
        let acme = self.acme.as_ref().map(|a| &a.key);
        transfer
            .into_iter()
            .chain(&self.report_key)
            .chain(acme)
            .collect()
    }

    /// Applies an RFC 2136 update (ACME challenges) and answers its status.
    fn update(&self, query: &mut begin::Begun) {
        let code = match &self.acme {
            None => ResponseCode::NotImp,
            Some(acme) => {
                let zones: Vec<&str> = self.zones.iter().map(|z| z.apex.as_str()).collect();
                let signer = query.signed.as_ref().map(|s| s.key_name());
                let records = self.records.read().expect("not poisoned");
                acme.apply(&query.query, signer, &zones, &records)
            }
        };
        if code == ResponseCode::NoError {
            // Answers kept from before the update are stale.
            self.generation.fetch_add(1, Ordering::Relaxed);
            if let Some(t) = &self.transfers {
                let mut records = self.records.write().expect("not poisoned");
                records.bump_serial();
                let serial = records.serial();
                for zone in self.remember_zones(&records) {
                    t.notify(&self.soa_record(zone, serial));
                }
            }
        }
        query.response.metadata.response_code = code;
    }
}

/// The answer to a zone transfer request.
pub enum Transfer {
    /// These messages, in order.
    Answer(Vec<Vec<u8>>),
    /// The zone has a name awaiting its first snapshot: ask again shortly; these messages
    /// (SERVFAIL) if it stays so.
    NotReady(Vec<Vec<u8>>),
}

use finish::per_query;

#[cfg(test)]
mod awaiting_tests;
#[cfg(test)]
mod cname_tests;
#[cfg(test)]
mod signed_tests;
#[cfg(test)]
mod tests;
