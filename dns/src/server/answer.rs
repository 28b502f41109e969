//! One query in, one answer out: the authoritative logic of the embedded server, kept
//! free of sockets so every case is a unit test.

use std::net::IpAddr;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Instant;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::rdata::opt::{ClientSubnet, EdnsCode, EdnsOption};
use hickory_proto::rr::rdata::{A, AAAA, NS, SOA};
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType, TSigner};
use ho_config::RoutingPolicy;
use ho_engine::snapshot::TenantSnapshot;
use tracing::{debug, info};

use super::config::DnsServerConfig;
use super::cookies::{CookieCheck, Cookies};
use super::dnssec::Signer;
use super::geo::Locator;
use super::packet_cache::{Key, PacketCache, Stamp, Variation};
use super::rate_limit::{RateLimiter, Verdict};
use super::records::{Entry, NameSet, Records, Target};
use super::reports::{report_question, Shelf};
use super::transfer::journal::Address;
use super::transfer::tsig::{self, Check};
use super::transfer::{self as xfr, Transfers};
use ho_engine::multi_cluster::report::REPORT_LABEL;
use ho_engine::sink::geo::{continent_label, nearest};

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
    pub fn new(config: &DnsServerConfig, records: Records) -> Result<Authority, String> {
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
        let signer = config
            .dnssec
            .as_ref()
            .map(|d| Signer::start(d, &config.zones, config.soa.minimum))
            .transpose()
            .map_err(|e| format!("dnssec: {e}"))?;
        let transfers = config
            .transfer
            .as_ref()
            .map(Transfers::new)
            .transpose()
            .map_err(|e| format!("transfer: {e}"))?;
        let report_key = config
            .reports
            .as_ref()
            .map(|r| crate::update::load_signer(&r.tsig))
            .transpose()
            .map_err(|e| format!("reports: {e}"))?;
        let authority = Authority {
            zones,
            soa: config.soa.clone(),
            locator: Locator::load(&config.geo)?,
            answers: config.answers,
            max_udp_payload: config.max_udp_payload,
            records: RwLock::new(records),
            generation: AtomicU64::new(0),
            packets: PacketCache::default(),
            rotation: AtomicUsize::new(0),
            rate_limit: config.rate_limit.as_ref().map(RateLimiter::new),
            cookies: Cookies::load(&config.cookies)
                .map_err(|(field, e)| format!("{field}: {e}"))?,
            signer,
            transfers,
            report_key,
            shelf: Arc::default(),
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

    /// Notes each zone's content at the current serial for transfers (a zone with a name
    /// awaiting its first snapshot is not noted: it is not transferred); the zones whose
    /// content changed.
    fn remember_zones(&self, records: &Records) -> Vec<&Zone> {
        let Some(transfers) = &self.transfers else {
            return Vec::new();
        };
        let mut contents: Vec<Option<std::collections::BTreeSet<Address>>> =
            vec![Some(Default::default()); self.zones.len()];
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
                    content.extend(set.v4.iter().chain(&set.v6).map(|t| Address {
                        name: name.to_owned(),
                        ttl: set.ttl,
                        ip: t.ip,
                    }));
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

    /// The answer to `request` when it asks for a zone transfer (AXFR, IXFR) over TCP;
    /// `None` for any other request (answered by [`Authority::answer`]), or when transfers
    /// are off (then AXFR and IXFR are refused there).
    pub fn transfer(&self, request: &[u8], client: IpAddr) -> Option<Transfer> {
        let transfers = self.transfers.as_ref()?;
        let query = Message::from_vec(request).ok()?;
        let question = query.queries.first()?;
        let qtype = question.query_type();
        if query.metadata.message_type != MessageType::Query
            || !matches!(qtype, RecordType::AXFR | RecordType::IXFR)
        {
            return None;
        }
        let now = ho_engine::clock::unix_now();
        let key: Vec<&TSigner> = transfers.key().into_iter().collect();
        let signed = match tsig::check(&key, request, &query, now) {
            Check::Refused(bytes) => return Some(Transfer::Answer(vec![bytes])),
            Check::Signed(s) => Some(s),
            Check::Unsigned => None,
        };
        let send = |messages: Vec<Vec<u8>>| match &signed {
            Some(s) => s.sign(messages, now).map(Transfer::Answer),
            None => Some(Transfer::Answer(messages)),
        };
        let refuse = |code: ResponseCode| {
            let mut m = Message::response(query.metadata.id, OpCode::Query);
            m.queries.clone_from(&query.queries);
            m.metadata.response_code = code;
            send(vec![m.to_vec().ok()?])
        };
        if !transfers.allows(client, signed.is_some()) {
            info!(%client, zone = %question.name(), "zone transfer refused: not in transfer.allow, or not signed with transfer.tsig");
            return refuse(ResponseCode::Refused);
        }
        let key = key_of(question.name());
        let Some(zone) = self.zones.iter().find(|z| z.apex == key) else {
            return refuse(ResponseCode::NotAuth);
        };
        let serial = self.records.read().expect("not poisoned").serial();
        let Some(content) = transfers.journal.at(&zone.apex, serial) else {
            // A name awaits its first snapshot: the caller waits for it, then answers
            // SERVFAIL (the secondary keeps its copy) if it never comes.
            return match refuse(ResponseCode::ServFail)? {
                Transfer::Answer(m) | Transfer::NotReady(m) => Some(Transfer::NotReady(m)),
            };
        };
        let soa = self.soa_record(zone, serial);
        let asked_from = (qtype == RecordType::IXFR)
            .then(|| {
                query.authorities.iter().find_map(|r| match &r.data {
                    RData::SOA(s) => Some(s.serial),
                    _ => None,
                })
            })
            .flatten();
        let mut list = vec![soa.clone()];
        match asked_from.map(|s| (s, transfers.journal.at(&zone.apex, s))) {
            // Up to date: the SOA alone says so.
            Some((s, _)) if s == serial => {}
            Some((s, Some(old))) => {
                let (deleted, added) = xfr::difference(&old, &content);
                list.push(self.soa_record(zone, s));
                list.extend(deleted);
                list.push(soa.clone());
                list.extend(added);
                list.push(soa);
            }
            _ => {
                list.extend(xfr::zone_records(
                    &self.ns_records(zone, &zone.name),
                    &content,
                ));
                list.push(soa);
            }
        }
        debug!(%client, zone = %zone.apex, serial, ?asked_from, records = list.len(), "zone transfer");
        send(xfr::messages(&query, &list)?)
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
    /// varies between queries of the same bytes.
    fn make_answer(
        &self,
        request: &[u8],
        client: IpAddr,
        udp: bool,
        turn: usize,
    ) -> Option<(Reply, Variation)> {
        let query = match Message::from_vec(request) {
            Ok(q) => q,
            Err(_) if request.len() >= 12 && request[2] & 0x80 == 0 => {
                let id = u16::from_be_bytes([request[0], request[1]]);
                let mut m = Message::error_msg(id, OpCode::Query, ResponseCode::FormErr);
                return finish(&mut m, "invalid", None).map(per_query);
            }
            Err(_) => return None,
        };
        if query.metadata.message_type != MessageType::Query {
            return None;
        }
        // A signed query (a secondary's SOA check, a peer's report query) gets a signed
        // answer.
        let signed = if query.signature().is_some() {
            match tsig::check(&self.keys(), request, &query, ho_engine::clock::unix_now()) {
                Check::Refused(bytes) => {
                    let reply = Reply {
                        bytes,
                        qtype: "other",
                        rcode: "NOTAUTH",
                        proven_client: false,
                    };
                    return Some(per_query(reply));
                }
                Check::Signed(s) => Some(s),
                Check::Unsigned => None,
            }
        } else {
            None
        };
        let mut response = Message::response(query.metadata.id, query.metadata.op_code);
        response.metadata.recursion_desired = query.metadata.recursion_desired;
        response.metadata.checking_disabled = query.metadata.checking_disabled;
        response.queries.clone_from(&query.queries);
        let qtype = query
            .queries
            .first()
            .map_or("none", |q| type_label(q.query_type()));
        let Some(limit) = self.negotiate_edns(&query, &mut response) else {
            response.metadata.response_code = ResponseCode::BADVERS;
            return finish(&mut response, qtype, None).map(per_query);
        };
        let cookie = self.cookies.answer(&query, &mut response, client);
        let limit = udp.then_some(usize::from(limit));
        if cookie == CookieCheck::Malformed {
            return finish(&mut response, qtype, limit).map(per_query);
        }
        if query.metadata.op_code != OpCode::Query {
            response.metadata.response_code = ResponseCode::NotImp;
            return finish(&mut response, qtype, limit).map(per_query);
        }
        let [question] = query.queries.as_slice() else {
            response.metadata.response_code = ResponseCode::FormErr;
            return finish(&mut response, qtype, limit).map(per_query);
        };
        if let Some((suffix, cluster)) = self.asks_for_reports(question.name()) {
            let key = self.report_key.as_ref().map(TSigner::signer_name);
            match &signed {
                Some(s) if Some(s.key_name()) == key => {
                    response.metadata.authoritative = true;
                    if matches!(question.query_type(), RecordType::TXT | RecordType::ANY) {
                        match self.shelf.answer(
                            question.name(),
                            &suffix,
                            cluster.as_deref(),
                            client,
                        ) {
                            Some(records) => response.answers = records,
                            None => response.metadata.response_code = ResponseCode::ServFail,
                        }
                    }
                }
                _ => response.metadata.response_code = ResponseCode::Refused,
            }
            let mut reply = finish(&mut response, qtype, limit)?;
            if let Some(signed) = signed {
                reply.bytes = signed
                    .sign(vec![reply.bytes], ho_engine::clock::unix_now())?
                    .pop()?;
            }
            return Some(per_query(reply));
        }
        let subnet = query
            .edns
            .as_ref()
            .and_then(|e| match e.option(EdnsCode::Subnet) {
                Some(EdnsOption::Subnet(s)) => Some(*s),
                _ => None,
            });
        let dnssec_ok = query.edns.as_ref().is_some_and(|e| e.flags().dnssec_ok);
        let (located, variation) = self.resolve(
            &mut response,
            Question {
                name: question.name(),
                qtype: question.query_type(),
                qclass: question.query_class(),
                dnssec_ok,
            },
            subnet
                .as_ref()
                .filter(|s| s.source_prefix() > 0)
                .map_or(client, ClientSubnet::addr),
            turn,
        );
        if let (Some(mut s), Some(edns)) = (subnet, response.edns.as_mut()) {
            // RFC 7871 7.2.1: echo the option; the scope says how much of the client's
            // subnet the answer depended on (all of it for a location, none otherwise).
            s.set_scope_prefix(if located { s.source_prefix() } else { 0 });
            edns.options_mut().insert(EdnsOption::Subnet(s));
        }
        let proven_client = cookie == CookieCheck::Valid;
        let mut reply = finish(&mut response, qtype, limit)?;
        reply.proven_client = proven_client;
        if let Some(signed) = signed {
            reply.bytes = signed
                .sign(vec![reply.bytes], ho_engine::clock::unix_now())?
                .pop()?;
            return Some(per_query(reply));
        }
        Some((reply, variation))
    }

    /// The TSIG keys requests may be signed with.
    fn keys(&self) -> Vec<&TSigner> {
        let transfer = self.transfers.as_ref().and_then(Transfers::key);
        transfer.into_iter().chain(&self.report_key).collect()
    }

    /// The report suffix and cluster label `qname` asks for, when this server holds
    /// reports (`reports`) and it is a report name.
    fn asks_for_reports(&self, qname: &Name) -> Option<(String, Option<String>)> {
        self.report_key.as_ref()?;
        // Every query passes here on a server with reports: look at the labels before
        // making the lower-case key.
        let label = REPORT_LABEL.as_bytes();
        if !qname.iter().any(|l| l.eq_ignore_ascii_case(label)) {
            return None;
        }
        let key = key_of(qname);
        report_question(&key).map(|(suffix, cluster)| (suffix, cluster.map(str::to_owned)))
    }

    /// Answers EDNS with ours and returns the UDP payload size both sides allow (512
    /// without EDNS); `None` for an EDNS version we do not speak (BADVERS).
    fn negotiate_edns(&self, query: &Message, response: &mut Message) -> Option<u16> {
        let Some(edns) = &query.edns else {
            return Some(512);
        };
        let mut ours = Edns::new();
        ours.set_max_payload(self.max_udp_payload);
        ours.set_version(0);
        // RFC 3225: the DO bit is copied into the response.
        ours.set_dnssec_ok(edns.flags().dnssec_ok);
        response.set_edns(ours);
        (edns.version() == 0).then(|| edns.max_payload().clamp(512, self.max_udp_payload))
    }

    /// The zone that answers `key` for this type and class; `None` is REFUSED: a name
    /// outside every zone, a class other than IN, or a zone transfer (off: the data changes
    /// per query and lives in one process).
    fn zone_answering(&self, key: &str, qtype: RecordType, qclass: DNSClass) -> Option<&Zone> {
        if qclass != DNSClass::IN && qclass != DNSClass::ANY {
            return None;
        }
        if matches!(qtype, RecordType::AXFR | RecordType::IXFR) {
            return None;
        }
        self.zones
            .iter()
            .find(|z| key == z.apex || key.ends_with(&z.dot_apex))
    }

    /// Fills `response` for one question (rotated by `turn`); whether the answer depended
    /// on the client's location, and how it varies between queries.
    fn resolve(
        &self,
        response: &mut Message,
        question: Question<'_>,
        client: IpAddr,
        turn: usize,
    ) -> (bool, Variation) {
        let Question {
            name: qname,
            qtype,
            qclass,
            dnssec_ok,
        } = question;
        let key = key_of(qname);
        let Some(zone) = self.zone_answering(&key, qtype, qclass) else {
            response.metadata.response_code = ResponseCode::Refused;
            return (false, Variation::Fixed);
        };
        let records = self.records.read().expect("not poisoned");
        response.metadata.authoritative = true;
        let mut located = false;
        let mut variation = Variation::Fixed;
        // What exists at the name, for the NSEC of a signed negative answer.
        let mut exists = true;
        let mut types = Vec::new();
        match records.get(&key) {
            Some(Entry::Pending) => {
                response.metadata.authoritative = false;
                response.metadata.response_code = ResponseCode::ServFail;
                return (false, Variation::Fixed);
            }
            Some(Entry::Ready(set)) => {
                for (family, wanted) in [(RecordType::A, &set.v4), (RecordType::AAAA, &set.v6)] {
                    if !wanted.is_empty() {
                        types.push(family);
                    }
                    if qtype == family || qtype == RecordType::ANY {
                        let (picked, varies) = self.pick(set, wanted, client, turn);
                        located |= set.policy == RoutingPolicy::Geo;
                        variation = variation.and(varies);
                        for t in picked {
                            response.answers.push(address_record(qname, set.ttl, t.ip));
                        }
                    }
                }
            }
            None if key != zone.apex && !records.is_empty_non_terminal(&key) => {
                response.metadata.response_code = ResponseCode::NXDomain;
                exists = false;
            }
            None => {}
        }
        if key == zone.apex {
            types.extend([RecordType::SOA, RecordType::NS]);
            if self.signer.is_some() {
                types.push(RecordType::DNSKEY);
            }
            self.apex_records(response, zone, qname, qtype, records.serial());
        }
        if response.answers.is_empty() {
            // NODATA or NXDOMAIN: the SOA tells resolvers how long to remember it.
            response
                .authorities
                .push(self.soa_record(zone, records.serial()));
        }
        drop(records);
        if let Some(signer) = self.signer.as_ref().filter(|_| dnssec_ok) {
            signer.sign(response, &zone.apex, &zone.name, qname, exists, &types);
        }
        (located, variation)
    }

    /// The SOA or NS records of `zone`'s apex, when asked for.
    fn apex_records(
        &self,
        response: &mut Message,
        zone: &Zone,
        qname: &Name,
        qtype: RecordType,
        serial: u32,
    ) {
        match qtype {
            RecordType::SOA => response.answers.push(self.soa_record(zone, serial)),
            RecordType::DNSKEY => {
                if let Some(signer) = &self.signer {
                    response.answers.extend(signer.dnskeys(&zone.apex, qname));
                }
            }
            RecordType::NS => response.answers.extend(self.ns_records(zone, qname)),
            _ => {}
        }
    }

    /// The addresses answered from `targets` of `set` for this query (rotated by `turn`),
    /// and how they vary between queries.
    fn pick<'a>(
        &self,
        set: &NameSet,
        targets: &'a [Target],
        client: IpAddr,
        turn: usize,
    ) -> (Vec<&'a Target>, Variation) {
        match set.policy {
            RoutingPolicy::Weighted => (
                weighted_pick(targets.iter().collect(), self.answers),
                Variation::PerQuery,
            ),
            RoutingPolicy::Geo => {
                let here = self.locator.locate(client);
                let of = |geo: Option<&str>| -> Vec<&'a Target> {
                    geo.map_or_else(Vec::new, |g| {
                        targets
                            .iter()
                            .filter(|t| t.geo.as_deref() == Some(g))
                            .collect()
                    })
                };
                let mut chosen = of(here.geo.as_deref());
                if chosen.is_empty() {
                    // The client's continent, when the tenant has a location for it.
                    chosen = of(here.geo.as_deref().and_then(continent_label));
                }
                if chosen.is_empty() {
                    // No endpoint up where the client is (down, or none there): the
                    // nearest location that has one.
                    if let Some(position) = here.position() {
                        let mut up: Vec<&str> =
                            targets.iter().filter_map(|t| t.geo.as_deref()).collect();
                        up.sort_unstable();
                        up.dedup();
                        chosen = of(nearest(position, up));
                    }
                }
                if chosen.is_empty() {
                    chosen = of(set.default_geo.as_deref());
                }
                if chosen.is_empty() {
                    chosen = targets.iter().collect();
                }
                if chosen.windows(2).any(|w| w[0].weight != w[1].weight) {
                    // Weights inside the geo (Kuadrant): drawn like a weighted tenant.
                    chosen = weighted_pick(chosen, self.answers);
                } else {
                    rotate(&mut chosen, turn);
                }
                (chosen, Variation::PerQuery)
            }
            RoutingPolicy::All | RoutingPolicy::Failover => {
                let mut all: Vec<&Target> = targets.iter().collect();
                rotate(&mut all, turn);
                let n = all.len();
                (
                    all,
                    if n > 1 {
                        Variation::Rotated(n)
                    } else {
                        Variation::Fixed
                    },
                )
            }
        }
    }

    /// The NS records of `zone`, owned by `owner` (the apex as asked).
    fn ns_records(&self, zone: &Zone, owner: &Name) -> Vec<Record> {
        zone.nameservers
            .iter()
            .map(|ns| {
                Record::from_rdata(owner.clone(), self.soa.refresh, RData::NS(NS(ns.clone())))
            })
            .collect()
    }

    fn soa_record(&self, zone: &Zone, serial: u32) -> Record {
        let s = &self.soa;
        let as_i32 = |v: u32| i32::try_from(v).unwrap_or(i32::MAX);
        Record::from_rdata(
            zone.name.clone(),
            s.minimum,
            RData::SOA(SOA::new(
                zone.mname.clone(),
                zone.rname.clone(),
                serial,
                as_i32(s.refresh),
                as_i32(s.retry),
                as_i32(s.expire),
                s.minimum,
            )),
        )
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

/// One question as [`Authority::resolve`] answers it.
struct Question<'a> {
    name: &'a Name,
    qtype: RecordType,
    qclass: DNSClass,
    /// The query's DO bit: sign the answer (when the zone is signed).
    dnssec_ok: bool,
}

/// Every address in a different order per query (what CoreDNS `loadbalance` does), so
/// resolvers that take the first address spread over all of them.
fn rotate<T>(list: &mut [T], turn: usize) {
    if !list.is_empty() {
        let n = list.len();
        list.rotate_left(turn % n);
    }
}

/// `count` distinct addresses of `left`, each drawn in proportion to its weight among
/// those left; all-zero weights count as equal (an answer is never empty while addresses
/// exist).
fn weighted_pick(mut left: Vec<&Target>, count: usize) -> Vec<&Target> {
    let mut picked = Vec::with_capacity(count.min(left.len()));
    while picked.len() < count && !left.is_empty() {
        let total: u64 = left.iter().map(|t| u64::from(t.weight)).sum();
        let i = if total == 0 {
            fastrand::usize(..left.len())
        } else {
            let mut x = fastrand::u64(..total);
            left.iter()
                .position(|t| {
                    let w = u64::from(t.weight);
                    if x < w {
                        true
                    } else {
                        x -= w;
                        false
                    }
                })
                .expect("x < total")
        };
        picked.push(left.swap_remove(i));
    }
    picked
}

fn address_record(qname: &Name, ttl: u32, ip: IpAddr) -> Record {
    let data = match ip {
        IpAddr::V4(v4) => RData::A(A(v4)),
        IpAddr::V6(v6) => RData::AAAA(AAAA(v6)),
    };
    Record::from_rdata(qname.clone(), ttl, data)
}

/// Lower case, no trailing dot: how [`Records`] keys names. Built from the labels without
/// escaping (this runs for every query); a name with a byte a host name cannot hold (a
/// dot inside a label, say) takes the escaped form, which matches no configured domain.
fn key_of(name: &Name) -> String {
    let plain = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'*');
    if !name.iter().all(|label| label.iter().all(plain)) {
        let mut escaped = name.to_ascii();
        escaped.make_ascii_lowercase();
        if escaped.ends_with('.') {
            escaped.pop();
        }
        return escaped;
    }
    let mut key = String::with_capacity(name.len());
    for label in name.iter() {
        if !key.is_empty() {
            key.push('.');
        }
        key.extend(label.iter().map(|b| char::from(b.to_ascii_lowercase())));
    }
    key
}

/// An answer that is not kept (an error made before the question was looked at).
fn per_query(reply: Reply) -> (Reply, Variation) {
    (reply, Variation::PerQuery)
}

/// Encodes `response`, truncated (TC, answers dropped) when it exceeds `limit`.
fn finish(response: &mut Message, qtype: &'static str, limit: Option<usize>) -> Option<Reply> {
    let rcode = rcode_label(response.metadata.response_code);
    let mut bytes = response.to_vec().ok()?;
    if limit.is_some_and(|l| bytes.len() > l) {
        bytes = response.truncate().to_vec().ok()?;
    }
    Some(Reply {
        bytes,
        qtype,
        rcode,
        proven_client: false,
    })
}

fn type_label(t: RecordType) -> &'static str {
    match t {
        RecordType::A => "A",
        RecordType::AAAA => "AAAA",
        RecordType::ANY => "ANY",
        RecordType::SOA => "SOA",
        RecordType::NS => "NS",
        RecordType::TXT => "TXT",
        RecordType::MX => "MX",
        RecordType::CNAME => "CNAME",
        RecordType::HTTPS => "HTTPS",
        RecordType::SRV => "SRV",
        RecordType::AXFR => "AXFR",
        RecordType::IXFR => "IXFR",
        RecordType::DNSKEY => "DNSKEY",
        RecordType::DS => "DS",
        _ => "other",
    }
}

fn rcode_label(r: ResponseCode) -> &'static str {
    match r {
        ResponseCode::NoError => "NOERROR",
        ResponseCode::NXDomain => "NXDOMAIN",
        ResponseCode::ServFail => "SERVFAIL",
        ResponseCode::Refused => "REFUSED",
        ResponseCode::FormErr => "FORMERR",
        ResponseCode::NotImp => "NOTIMP",
        ResponseCode::BADVERS => "BADVERS",
        ResponseCode::NotAuth => "NOTAUTH",
        _ => "other",
    }
}

#[cfg(test)]
mod signed_tests;
#[cfg(test)]
mod tests;
