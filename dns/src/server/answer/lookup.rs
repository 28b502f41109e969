//! The lookup stage: the zone that answers, the records published for the name, the
//! tenant's routing policy (all, failover, weighted, geo with the client's or its subnet's
//! location), the apex's SOA and NS, and DNSSEC signatures when asked for.

use std::net::IpAddr;
use std::time::Instant;

use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::rdata::opt::{ClientSubnet, EdnsCode, EdnsOption};
use hickory_proto::rr::rdata::{A, AAAA, CNAME, NS, SOA};
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};
use ho_config::RoutingPolicy;
use ho_engine::sink::geo::{continent_label, nearest};

use super::begin::Begun;
use super::Authority;
use crate::server::names::key_of;
use crate::server::packet_cache::Variation;
use crate::server::records::{Choice, Entry, NameSet};
use crate::server::zones::Zone;

impl Authority {
    /// Fills the response for the query's question (rotated by `turn`) from the records,
    /// located by the EDNS Client Subnet when the query gives one (echoed with the scope the
    /// answer depended on), else by `client`; how the answer varies between queries.
    pub(super) fn look_up(&self, query: &mut Begun, client: IpAddr, turn: usize) -> Variation {
        let subnet = query
            .query
            .edns
            .as_ref()
            .and_then(|e| match e.option(EdnsCode::Subnet) {
                Some(EdnsOption::Subnet(s)) => Some(*s),
                _ => None,
            });
        let dnssec_ok = query
            .query
            .edns
            .as_ref()
            .is_some_and(|e| e.flags().dnssec_ok);
        // The fields apart, not `question()`: the response is filled while the question is read.
        let question = &query.query.queries[0];
        let (located, variation) = self.resolve(
            &mut query.response,
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
        if let (Some(mut s), Some(edns)) = (subnet, query.response.edns.as_mut()) {
            // RFC 7871 7.2.1: echo the option; the scope says how much of the client's
            // subnet the answer depended on (all of it for a location, none otherwise).
            s.set_scope_prefix(if located { s.source_prefix() } else { 0 });
            edns.options_mut().insert(EdnsOption::Subnet(s));
        }
        variation
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
        self.zones.iter().find(|z| z.holds(key))
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
        let key = key_of(question.name);
        let Some(zone) = self.answering(response, &key, &question) else {
            return (false, Variation::Fixed);
        };
        let records = self.records.read().expect("not poisoned");
        response.metadata.authoritative = true;
        let mut found = Found::new();
        let challenge = match (&self.acme, records.get(&key)) {
            (Some(acme), None) => acme.texts(&key),
            _ => None,
        };
        let fixed = self.statics.get(&key);
        let missing = key != zone.apex
            && challenge.is_none()
            && fixed.is_none()
            && !(records.is_empty_non_terminal(&key) || self.statics.is_parent(&key));
        // A name that does not exist may be answered by a wildcard (RFC 4592). The answer
        // is signed as the name's own (online signing): a validator sees a name that exists.
        let entry = match records.get(&key) {
            None if missing => records.wildcard_for(&key, &zone.apex),
            found => found,
        };
        match entry {
            Some(Entry::Pending) => return not_yet(response, Variation::Fixed),
            Some(Entry::Ready(set)) => {
                let apex = key == zone.apex;
                self.answer_published(response, &mut found, set, &question, apex, (client, turn));
            }
            // A tenant source's first round may still declare it: not "does not exist"
            // yet, and never kept (the hold ends by time too).
            None if missing && records.awaits_source(Instant::now()) => {
                return not_yet(response, Variation::PerQuery)
            }
            None if missing => response.metadata.response_code = ResponseCode::NXDomain,
            None => {}
        }
        answer_kept(
            response,
            &mut found.types,
            fixed,
            challenge.as_deref(),
            &question,
        );
        let serial = records.serial();
        drop(records);
        if key == zone.apex {
            self.answer_apex(response, &mut found.types, zone, &question, serial);
        }
        self.finish(response, zone, &question, &found.types, serial);
        (found.located, found.variation)
    }

    /// The zone that answers `key` itself; `None` when the response is already made: REFUSED
    /// outside the zones, a referral below a delegation.
    fn answering(
        &self,
        response: &mut Message,
        key: &str,
        question: &Question<'_>,
    ) -> Option<&Zone> {
        let Some(zone) = self.zone_answering(key, question.qtype, question.qclass) else {
            response.metadata.response_code = ResponseCode::Refused;
            return None;
        };
        (!self.refer(response, key, question.qtype)).then_some(zone)
    }

    /// Refers a question for `key` at or below a delegation to its name servers (RFC 1034
    /// 4.3.2): not authoritative, their NS in the authority section, the addresses the
    /// static records hold for them as glue. Whether it did: DS at the cut itself is the
    /// parent's own to answer (none is held: no data).
    fn refer(&self, response: &mut Message, key: &str, qtype: RecordType) -> bool {
        let Some(cut) = self.statics.delegation(key) else {
            return false;
        };
        if key == cut && qtype == RecordType::DS {
            return false;
        }
        response.metadata.authoritative = false;
        let servers = self.statics.get(cut).unwrap_or_default();
        for ns in servers.iter().filter(|r| r.record_type() == RecordType::NS) {
            response.authorities.push(ns.clone());
            let RData::NS(NS(target)) = &ns.data else {
                continue;
            };
            let glue = self.statics.get(&key_of(target)).unwrap_or_default();
            response.additionals.extend(
                (glue.iter())
                    .filter(|r| matches!(r.record_type(), RecordType::A | RecordType::AAAA))
                    .cloned(),
            );
        }
        true
    }

    /// A negative answer's SOA, and the signatures when the query asked for them (`types`:
    /// what exists at the name, for the NSEC of a signed negative answer).
    fn finish(
        &self,
        response: &mut Message,
        zone: &Zone,
        question: &Question<'_>,
        types: &[RecordType],
        serial: u32,
    ) {
        if response.answers.is_empty() {
            // NODATA or NXDOMAIN: the SOA tells resolvers how long to remember it.
            response.authorities.push(self.soa_record(zone, serial));
        }
        if let Some(signer) = self.signer.as_ref().filter(|_| question.dnssec_ok) {
            let exists = response.metadata.response_code != ResponseCode::NXDomain;
            let (apex, name) = (&zone.apex, &zone.name);
            signer.sign(response, apex, name, question.name, exists, types);
        }
    }

    /// The tenant's published `set` at the name: one CNAME below the apex when it publishes
    /// host names (a CNAME answers every type, RFC 1034 3.6.2, and is the name's only
    /// data), else its addresses of the type asked, picked by its policy for `client`.
    fn answer_published(
        &self,
        response: &mut Message,
        found: &mut Found,
        set: &NameSet,
        question: &Question<'_>,
        apex: bool,
        (client, turn): (IpAddr, usize),
    ) {
        if !set.hosts.is_empty() && !apex {
            found.types.push(RecordType::CNAME);
            let (picked, varies) = self.pick(set, &set.hosts, client, turn);
            found.chose(set, varies);
            if let Some(host) = picked.first() {
                response.answers.push(Record::from_rdata(
                    question.name.clone(),
                    set.ttl,
                    RData::CNAME(CNAME(host.name.clone())),
                ));
            }
            return;
        }
        for (family, wanted) in [(RecordType::A, &set.v4), (RecordType::AAAA, &set.v6)] {
            if !wanted.is_empty() {
                found.types.push(family);
            }
            if question.qtype == family || question.qtype == RecordType::ANY {
                let (picked, varies) = self.pick(set, wanted, client, turn);
                found.chose(set, varies);
                for t in picked {
                    response
                        .answers
                        .push(address_record(question.name, set.ttl, t.ip));
                }
            }
        }
    }

    /// The SOA, NS or DNSKEY records of `zone`'s apex, when asked for (and that they exist,
    /// in `types`).
    fn answer_apex(
        &self,
        response: &mut Message,
        types: &mut Vec<RecordType>,
        zone: &Zone,
        question: &Question<'_>,
        serial: u32,
    ) {
        types.extend([RecordType::SOA, RecordType::NS]);
        if self.signer.is_some() {
            types.push(RecordType::DNSKEY);
        }
        let qname = question.name;
        match question.qtype {
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

    /// What is answered from `targets` (addresses, or host names of which the first is
    /// answered) of `set` for this query (rotated by `turn`), and how it varies between
    /// queries.
    fn pick<'a, T: Choice>(
        &self,
        set: &NameSet,
        targets: &'a [T],
        client: IpAddr,
        turn: usize,
    ) -> (Vec<&'a T>, Variation) {
        match set.policy {
            RoutingPolicy::Weighted => (
                weighted_pick(targets.iter().collect(), self.answers),
                Variation::PerQuery,
            ),
            RoutingPolicy::Geo => (
                self.pick_geo(set, targets, client, turn),
                Variation::PerQuery,
            ),
            RoutingPolicy::All | RoutingPolicy::Failover => {
                let mut all: Vec<&T> = targets.iter().collect();
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

    /// A `geo` set's targets for `client`: those of its location, else its continent's,
    /// else the nearest location's with one up, else the default geo's, else all of them
    /// (weights inside the chosen location drawn as a weighted tenant's).
    fn pick_geo<'a, T: Choice>(
        &self,
        set: &NameSet,
        targets: &'a [T],
        client: IpAddr,
        turn: usize,
    ) -> Vec<&'a T> {
        let here = self.locator.locate(client);
        let of = |geo: Option<&str>| -> Vec<&'a T> {
            geo.map_or_else(Vec::new, |g| {
                targets.iter().filter(|t| t.geo() == Some(g)).collect()
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
                let mut up: Vec<&str> = targets.iter().filter_map(Choice::geo).collect();
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
        if chosen.windows(2).any(|w| w[0].weight() != w[1].weight()) {
            // Weights inside the geo (Kuadrant): drawn like a weighted tenant.
            chosen = weighted_pick(chosen, self.answers);
        } else {
            rotate(&mut chosen, turn);
        }
        chosen
    }

    /// The NS records of `zone`, owned by `owner` (the apex as asked).
    pub(super) fn ns_records(&self, zone: &Zone, owner: &Name) -> Vec<Record> {
        zone.nameservers
            .iter()
            .map(|ns| {
                Record::from_rdata(owner.clone(), self.soa.refresh, RData::NS(NS(ns.clone())))
            })
            .collect()
    }

    pub(super) fn soa_record(&self, zone: &Zone, serial: u32) -> Record {
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
fn weighted_pick<T: Choice>(mut left: Vec<&T>, count: usize) -> Vec<&T> {
    let mut picked = Vec::with_capacity(count.min(left.len()));
    while picked.len() < count && !left.is_empty() {
        let total: u64 = left.iter().map(|t| u64::from(t.weight())).sum();
        let i = if total == 0 {
            fastrand::usize(..left.len())
        } else {
            let mut x = fastrand::u64(..total);
            left.iter()
                .position(|t| {
                    let w = u64::from(t.weight());
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

/// What one question's answer gathered beside its records.
struct Found {
    /// The types that exist at the name (the NSEC of a signed negative answer lists them).
    types: Vec<RecordType>,
    /// The answer depended on the client's location.
    located: bool,
    /// How the answer varies between queries.
    variation: Variation,
}

impl Found {
    fn new() -> Found {
        Found {
            types: Vec::new(),
            located: false,
            variation: Variation::Fixed,
        }
    }

    /// A pick from `set` that varies as `varies` says.
    fn chose(&mut self, set: &NameSet, varies: Variation) {
        self.located |= set.policy == RoutingPolicy::Geo;
        self.variation = self.variation.and(varies);
    }
}

/// The records kept beside the tenants' at the name: static records from the config (a
/// CNAME answers every type, RFC 1034 3.6.2; the others their own) and ACME challenges
/// taken by update.
fn answer_kept(
    response: &mut Message,
    types: &mut Vec<RecordType>,
    fixed: Option<&[Record]>,
    challenge: Option<&[String]>,
    question: &Question<'_>,
) {
    let qtype = question.qtype;
    for r in fixed.into_iter().flatten() {
        let rtype = r.record_type();
        if !types.contains(&rtype) {
            types.push(rtype);
        }
        if qtype == rtype || qtype == RecordType::ANY || rtype == RecordType::CNAME {
            let mut answer = r.clone();
            answer.name = question.name.clone();
            response.answers.push(answer);
        }
    }
    if let Some(texts) = challenge {
        types.push(RecordType::TXT);
        if matches!(qtype, RecordType::TXT | RecordType::ANY) {
            response
                .answers
                .extend(crate::server::acme::records(question.name, texts));
        }
    }
}

fn address_record(qname: &Name, ttl: u32, ip: IpAddr) -> Record {
    let data = match ip {
        IpAddr::V4(v4) => RData::A(A(v4)),
        IpAddr::V6(v6) => RData::AAAA(AAAA(v6)),
    };
    Record::from_rdata(qname.clone(), ttl, data)
}

/// SERVFAIL, not authoritative: a name awaiting its first snapshot, or one a tenant source
/// may still declare; resolvers ask again rather than keep "does not exist".
fn not_yet(response: &mut Message, variation: Variation) -> (bool, Variation) {
    response.metadata.authoritative = false;
    response.metadata.response_code = ResponseCode::ServFail;
    (false, variation)
}
