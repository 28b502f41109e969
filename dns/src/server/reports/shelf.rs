//! What a cluster's own server answers its peers: this cluster's reports, the reports it
//! last read from its peers (relayed), and "not yet" until it has written once.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, RwLock};

use hickory_proto::rr::rdata::TXT;
use hickory_proto::rr::{Name, RData, Record};
use ho_engine::multi_cluster::report::{character_strings, RELAY_LABEL, REPORT_LABEL};
use ho_engine::sink::reports::Rrset;
use tracing::warn;

use crate::server::recall::Known;

/// TTL of a report record: readers never cache it.
const REPORT_TTL: u32 = 0;

/// Characters of relayed reports one answer carries at most: with the TXT strings'
/// length bytes, the records' headers and the TSIG record, the answer stays under the
/// 64 KiB a DNS message over TCP can be. Reports past it are left out whole (a reader
/// takes only complete reports).
pub(super) const RELAY_BUDGET: usize = 60_000;

/// This cluster's reports as its server answers them.
#[derive(Default)]
pub struct Shelf {
    /// Per report suffix (`._ho-report.<domain>`): the rrset name and its texts.
    pub(super) held: RwLock<HashMap<String, Rrset>>,
    /// Per report suffix: the texts of every report this cluster last read from its
    /// peers, relayed to the others.
    pub(super) relayed: RwLock<HashMap<String, Vec<String>>>,
    /// Some peer's reports did not fit [`RELAY_BUDGET`] last time (warned once).
    pub(super) over_budget: AtomicBool,
    /// Clients answered "no report" since the last removal (what `cluster leave` tells).
    pub(super) told_absent: Mutex<HashSet<IpAddr>>,
    /// This cluster has written its reports (or removed them) since it started: until
    /// then it does not know what it will report, so it answers SERVFAIL, which readers
    /// take as "cannot be read" (they keep its last reports), never "no report" (which
    /// would drop its gateways from their answers while it restarts).
    pub(super) primed: AtomicBool,
}

/// Where a question's name sits among the report names: `_ho-report.<domain>` or
/// `<cluster>._ho-report.<domain>`, as (the suffix `._ho-report.<domain>`, the cluster
/// label if named). `key` is lower case without the trailing dot.
pub fn report_question(key: &str) -> Option<(String, Option<&str>)> {
    let label = REPORT_LABEL;
    if key.starts_with(label) && key.as_bytes().get(label.len()) == Some(&b'.') {
        return Some((format!(".{key}"), None));
    }
    let (cluster, rest) = key.split_once('.')?;
    (rest.starts_with(label) && rest.as_bytes().get(label.len()) == Some(&b'.'))
        .then(|| (format!(".{rest}"), Some(cluster)))
}

impl Shelf {
    /// The TXT records answering `qname` (a report name, see [`report_question`]) asked
    /// by `client`: this cluster's report there, if it holds one, or the reports it relays
    /// (`_ho-relay`); `None` before this cluster first wrote its reports (answered
    /// SERVFAIL).
    pub fn answer(
        &self,
        qname: &Name,
        suffix: &str,
        cluster: Option<&str>,
        client: IpAddr,
    ) -> Option<Vec<Record>> {
        if !self.primed.load(Ordering::Acquire) {
            return None;
        }
        if cluster == Some(RELAY_LABEL) {
            let relayed = self.relayed.read().expect("not poisoned");
            let texts = relayed.get(suffix).map_or(&[][..], Vec::as_slice);
            return Some(txt_records(qname, texts));
        }
        let held = self.held.read().expect("not poisoned");
        let found = held.get(suffix).filter(|Rrset { name, .. }| {
            cluster.is_none_or(|c| name.len() == c.len() + suffix.len() && name.starts_with(c))
        });
        let Some(Rrset { texts, .. }) = found else {
            drop(held);
            self.told_absent
                .lock()
                .expect("not poisoned")
                .insert(client);
            return Some(Vec::new());
        };
        Some(txt_records(qname, texts))
    }

    /// From now on this cluster's server relays `relayed`: per suffix, the texts of each
    /// report it last read from a peer, whole reports within [`RELAY_BUDGET`].
    pub(super) fn relay(&self, relayed: HashMap<String, Vec<Vec<String>>>) {
        let mut dropped = 0;
        // Per suffix, the texts relayed there.
        let relayed: Vec<(String, Vec<String>)> = relayed
            .into_iter()
            .map(|(suffix, reports)| {
                let mut texts = Vec::new();
                let mut len = 0;
                for report in reports {
                    let size: usize = report.iter().map(String::len).sum();
                    if len + size > RELAY_BUDGET {
                        dropped += 1;
                        continue;
                    }
                    len += size;
                    texts.extend(report);
                }
                (suffix, texts)
            })
            .collect();
        let was_dropping = self.over_budget.swap(dropped > 0, Ordering::Relaxed);
        if dropped > 0 && !was_dropping {
            warn!(
                reports = dropped,
                "peers' reports too large to relay in one answer (64 KiB): a cluster restarting while their cluster is unreachable learns their gateways only from that cluster"
            );
        }
        self.relayed.write().expect("not poisoned").extend(relayed);
    }

    /// From now on this cluster's server answers what it holds.
    pub(super) fn prime(&self) {
        self.primed.store(true, Ordering::Release);
    }

    pub(super) fn hold(&self, reports: Vec<Rrset>) {
        let mut held = self.held.write().expect("not poisoned");
        for Rrset { name, texts } in reports {
            let Some(dot) = name.find('.') else { continue };
            held.insert(
                name[dot..].to_ascii_lowercase(),
                Rrset::new(name.to_ascii_lowercase(), texts),
            );
        }
        drop(held);
        self.prime();
    }

    /// Every peer report this server relays.
    pub(super) fn known(&self) -> Known {
        self.relayed.read().expect("not poisoned").clone()
    }

    pub(super) fn mine(&self, suffixes: &[String]) -> Vec<Rrset> {
        let held = self.held.read().expect("not poisoned");
        suffixes
            .iter()
            .filter_map(|s| held.get(s).cloned())
            .collect()
    }
}

/// `texts` as TXT records of `qname`, each split in 255-character strings.
fn txt_records(qname: &Name, texts: &[String]) -> Vec<Record> {
    texts
        .iter()
        .map(|text| {
            let strings = character_strings(text);
            Record::from_rdata(qname.clone(), REPORT_TTL, RData::TXT(TXT::new(strings)))
        })
        .collect()
}
