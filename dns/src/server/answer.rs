//! One query in, one answer out: the authoritative logic of the embedded server, kept
//! free of sockets so every case is a unit test. An answer is made in named stages, each in
//! its file, as Knot hooks its modules into stages and [`stages`] runs them in order:
//! [`begin`] (the message, its TSIG signature, EDNS, cookies, one question), then one of
//! [`update`] (RFC 2136: ACME challenges), [`peers`] (reports other clusters ask for) or
//! [`lookup`] (zones, records, routing policy, geo, DNSSEC), and [`finish`] (size,
//! signature). Kept answers ([`PacketCache`]) skip the stages; rate limiting applies after
//! them, in the transport-neutral `transport::respond`. Zone transfers are answered apart
//! ([`axfr`]). The authority is made of parts built above it ([`Parts`]): it knows their
//! work, not how their settings fail.

mod axfr;
mod begin;
mod finish;
mod lookup;
mod peers;
mod stages;
mod update;

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Instant;

use hickory_proto::rr::TSigner;
use ho_engine::snapshot::TenantSnapshot;

use super::acme::Acme;
use super::config::{DnsServerConfig, SoaConfig};
use super::cookies::Cookies;
use super::dnssec::Signer;
use super::geo::Locator;
use super::packet_cache::{Key, PacketCache, Stamp};
use super::rate_limit::{RateLimiter, Verdict};
use super::records::Records;
use super::reports::Shelf;
use super::statics::Statics;
use super::transfer::Transfers;
use super::zones::Zone;

/// What an authority is made of beside its settings' plain values: each part built from
/// its settings (and its failure named) by the server above.
pub struct Parts {
    /// Longest apex first.
    pub zones: Vec<Zone>,
    /// Where a client is (`geo`).
    pub locator: Locator,
    /// DNS cookies and their secret.
    pub cookies: Cookies,
    /// DNSSEC online signing (`dnssec`), if configured.
    pub signer: Option<Arc<Signer>>,
    /// Zone transfers to secondaries (`transfer`), if configured.
    pub transfers: Option<Transfers>,
    /// The key peers sign report queries with (`reports`), if configured.
    pub report_key: Option<TSigner>,
    /// ACME DNS-01 challenges taken by update (`acme`), if configured.
    pub acme: Option<Acme>,
    /// The records of `static_records`.
    pub statics: Statics,
}

/// Everything a query is answered from: the zones (from the config) and the records (from
/// snapshots).
pub struct Authority {
    /// Longest apex first, so nested zones answer from the innermost.
    zones: Vec<Zone>,
    soa: SoaConfig,
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
    pub acme: Option<Acme>,
    /// The records of `static_records`.
    statics: Statics,
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

impl Authority {
    /// The authority of `config` made of `parts`, starting from `records` (kept across a
    /// rebuild so a reload never answers from nothing).
    pub fn new(config: &DnsServerConfig, records: Records, parts: Parts) -> Authority {
        let Parts {
            zones,
            locator,
            cookies,
            signer,
            transfers,
            report_key,
            acme,
            statics,
        } = parts;
        let authority = Authority {
            zones,
            soa: config.soa.clone(),
            locator,
            answers: config.answers,
            max_udp_payload: config.max_udp_payload,
            records: RwLock::new(records),
            generation: AtomicU64::new(0),
            packets: PacketCache::default(),
            rotation: AtomicUsize::new(0),
            rate_limit: config.rate_limit.as_ref().map(RateLimiter::new),
            cookies,
            signer,
            transfers,
            report_key,
            shelf: Arc::default(),
            acme,
            statics,
        };
        if let Some(t) = &authority.transfers {
            let records = authority.records.read().expect("not poisoned");
            t.remember(&authority.zones, &records, authority.acme.as_ref());
        }
        authority
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
            if let Some(t) = &self.transfers {
                for zone in t.remember(&self.zones, &records, self.acme.as_ref()) {
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
}

/// The answer to a zone transfer request.
pub enum Transfer {
    /// These messages, in order.
    Answer(Vec<Vec<u8>>),
    /// The zone has a name awaiting its first snapshot: ask again shortly; these messages
    /// (SERVFAIL) if it stays so.
    NotReady(Vec<Vec<u8>>),
}

#[cfg(test)]
mod awaiting_tests;
#[cfg(test)]
mod cname_tests;
#[cfg(test)]
mod signed_tests;
#[cfg(test)]
mod tests;
