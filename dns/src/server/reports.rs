//! Reports over DNS between clusters (`reports` on a `dns_server` sink): clusters that are
//! themselves the zone's name servers vote with no provider in between (Kuadrant's distributed-DNS RFC's
//! shape). Each cluster's server holds its own reports and answers them to its peers;
//! each round, a cluster asks every peer for its reports over TCP with TSIG-signed
//! queries (all of a round's on one connection at once, so a far peer costs one round
//! trip), and checks that every answer is signed with the same key.
//!
//! A peer answers `TXT _ho-report.<domain>` with its own cluster's report for that
//! tenant (and `TXT <cluster>._ho-report.<domain>` too, for an operator with `dig -y`);
//! the reader names what it got `<cluster>._ho-report.<domain>` from the report's own
//! `cluster=`, as a shared zone would hold it. A peer that cannot be asked keeps counting
//! with what it last answered: its stamp stops changing, so it ages out after
//! `report_ttl` as a cluster that stopped writing to a shared zone would. A peer that
//! answers "no report" (it left, or does not vote on that tenant) has none.
//!
//! A reader that has just started knows nothing of its peers: its first count waits until
//! every peer has answered once, for at most `report_ttl`, so a restarted cluster never
//! publishes without the gateways that only a slow or briefly unreachable peer reports.
//! A peer silent for longer counts as one whose report aged out.
//!
//! Every replica of a cluster holds and answers the cluster's reports itself (the store
//! is not shared), so a peer asking any replica behind one address gets an answer.
//!
//! Each server also relays what it last read from its peers, at
//! `TXT _ho-relay._ho-report.<domain>` (every peer's report, whole), and each reader asks
//! for it in the same pipelined exchange. A cluster that restarts while a peer is down or
//! cut off from it so learns that peer's gateways from any other peer, as a reader of a
//! shared zone finds a dead cluster's last report there. The rounds take from a relayed
//! report only the addresses its cluster owns, and only for a cluster they have read no
//! report of themselves; never its votes. A relay is not relayed further; a reader keeps
//! each peer's last relay of a cluster even once that peer stops relaying it (it may have
//! restarted and not read that cluster since), and drops the relays of a cluster that
//! itself answers "no report" (it left). A server of an earlier version answers the relay
//! name "no report" (it takes `_ho-relay` for a cluster), so mixed versions read each other
//! as before. What the server relayed before this reader started (a reload, or a restart
//! with `state_dir`) counts as relays do until every peer has answered once ([`Recall`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{Name, RData, RecordType, TSigner};
use ho_engine::multi_cluster::report::{cluster_of, relayed_name, Report, RELAY_LABEL};
use ho_engine::sink::reports::{ReportStore, Rrset, StoreFuture};
use tracing::{info, warn};

mod shelf;
#[cfg(test)]
mod tests;

pub use shelf::{report_question, Shelf};

use super::config::ReportsConfig;
use super::recall::Recall;
use crate::wire::client::Connection;

/// What this server relays for a cluster that answered "no report" after a report (it
/// left): that report without its addresses and votes, stamped one millisecond later, so
/// it is the newest relay of that cluster everywhere (readers keep each peer's last relay
/// of a cluster; the rounds take the newest, and a report without addresses lends none).
fn tombstone(last: Report) -> Vec<String> {
    Report {
        at_ms: last.at_ms + 1,
        owned: Vec::new(),
        down: Vec::new(),
        ..last
    }
    .encode()
}

/// `texts` of reports grouped by the cluster each names (texts without a header left out).
fn by_cluster(texts: &[String]) -> BTreeMap<&str, Vec<String>> {
    let mut by_cluster: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for text in texts {
        if let Some(cluster) = cluster_of(text) {
            by_cluster.entry(cluster).or_default().push(text.clone());
        }
    }
    by_cluster
}

/// The (cluster, suffix) pairs whose cluster last answered "no report" there itself.
fn left(last: &HashMap<SocketAddr, PeerState>) -> BTreeSet<(&str, &str)> {
    last.values()
        .filter_map(|state| Some((state.cluster.as_deref()?, &state.absent)))
        .flat_map(|(cluster, absent)| absent.iter().map(move |s| (cluster, s.as_str())))
        .collect()
}

/// What a peer answered a round for one suffix asked.
struct Answered {
    suffix: String,
    /// Its report's texts (`None`: it holds none).
    own: Option<Vec<String>>,
    /// The texts of the reports it relays.
    relayed: Vec<String>,
}

/// What one peer last answered, per suffix.
#[derive(Default)]
struct PeerState {
    /// Its own reports, named by their cluster.
    reports: BTreeMap<String, Rrset>,
    /// Per suffix and cluster, the last report it relayed of that cluster: one it no longer
    /// relays is kept (it may have restarted and not read that cluster since), as a
    /// cluster's own last report is kept while it cannot be read.
    relayed: BTreeMap<String, BTreeMap<String, Vec<String>>>,
    /// Its cluster, as its reports name it.
    cluster: Option<String>,
    /// The suffixes it last answered "no report" for.
    absent: BTreeSet<String>,
    /// Per suffix it answered "no report" for after a report: its last report emptied and
    /// stamped one later ([`tombstone`]), relayed in its stead.
    gone: BTreeMap<String, Vec<String>>,
    /// Its last round failed (logged once, and once again when it answers).
    failing: bool,
    /// It answered at least once.
    answered: bool,
}

/// The `ReportStore` of a `dns_server` sink with `reports`.
pub struct DnsReports(Arc<Peers>);

/// The peers and what each last answered.
struct Peers {
    shelf: Arc<Shelf>,
    peers: Vec<SocketAddr>,
    key: TSigner,
    timeout: Duration,
    /// How long `cluster leave` keeps answering "no report": every peer runs a round in
    /// that time.
    leave_for: Duration,
    /// Until then, a read fails while a peer has never answered (see the module's doc).
    patience: std::time::Instant,
    /// What this cluster knew of its peers before this reader started.
    recall: Recall,
    last: Mutex<HashMap<SocketAddr, PeerState>>,
}

impl DnsReports {
    /// The store of `config`, holding reports on `shelf`; `report_interval` and
    /// `report_ttl` are the deployment's (`[multi_cluster]`); `memory`, the file that keeps
    /// what it knew of its peers across restarts (see [`Recall`]).
    pub fn new(
        config: &ReportsConfig,
        key: TSigner,
        shelf: Arc<Shelf>,
        (report_interval, report_ttl): (Duration, Duration),
        memory: Option<std::path::PathBuf>,
    ) -> DnsReports {
        let recall = Recall::new(shelf.known(), memory);
        DnsReports(Arc::new(Peers {
            recall,
            shelf,
            peers: config.peers.clone(),
            key,
            timeout: config.timeout,
            leave_for: report_interval * 2 + config.timeout,
            patience: std::time::Instant::now() + report_ttl,
            last: Mutex::default(),
        }))
    }
}

impl Peers {
    /// Every report `peer` holds and relays under `suffixes`, asked at once on one
    /// connection.
    async fn ask(&self, peer: SocketAddr, suffixes: &[String]) -> Result<Vec<Answered>, String> {
        let name = |s: String| Name::from_ascii(&s).map_err(|e| format!("{s}: {e}"));
        let names = suffixes
            .iter()
            .flat_map(|s| {
                [
                    name(format!("{}.", &s[1..])),
                    name(format!("{RELAY_LABEL}{s}.")),
                ]
            })
            .collect::<Result<Vec<_>, _>>()?;
        let exchange = async {
            let mut conn = Connection::open(peer, self.timeout)
                .await
                .map_err(|e| e.message)?;
            let answers = conn
                .query_all(&names, RecordType::TXT, Some(&self.key))
                .await
                .map_err(|e| e.message)?;
            // "No report" is NOERROR (or NXDOMAIN) without one; anything else (SERVFAIL
            // from a peer that has just started, REFUSED or NOTAUTH from a peer with
            // another key) says nothing about its reports.
            if let Some((name, code)) = names
                .iter()
                .zip(&answers)
                .map(|(n, a)| (n, a.metadata.response_code))
                .find(|(_, c)| !matches!(c, ResponseCode::NoError | ResponseCode::NXDomain))
            {
                return Err(format!("{name} TXT answered {code}"));
            }
            Ok(suffixes
                .iter()
                .zip(answers.chunks(2))
                .map(|(suffix, pair)| Answered {
                    suffix: suffix.clone(),
                    own: texts(&pair[0]),
                    relayed: texts(&pair[1]).unwrap_or_default(),
                })
                .collect())
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| format!("no answers within {:?}", self.timeout))?
    }

    /// Takes in what `peer` answered (or why it could not) and returns its reports under
    /// `suffixes` as this reader now counts them.
    fn remember(
        &self,
        peer: SocketAddr,
        suffixes: &[String],
        asked: Result<Vec<Answered>, String>,
    ) -> Vec<Rrset> {
        let mut last = self.last.lock().expect("not poisoned");
        let state = last.entry(peer).or_default();
        match asked {
            Ok(found) => {
                state.answered = true;
                if std::mem::take(&mut state.failing) {
                    info!(%peer, "a peer's reports can be read again");
                }
                for Answered {
                    suffix,
                    own,
                    relayed,
                } in found
                {
                    let held = state.relayed.entry(suffix.clone()).or_default();
                    for (cluster, texts) in by_cluster(&relayed) {
                        held.insert(cluster.to_owned(), texts);
                    }
                    if own.is_none() {
                        state.absent.insert(suffix.clone());
                    } else {
                        state.absent.remove(&suffix);
                    }
                    match own {
                        None => {
                            let last = state.reports.remove(&suffix);
                            let report =
                                last.and_then(|Rrset { texts, .. }| Report::decode(&texts).ok());
                            if let Some(report) = report {
                                state.gone.insert(suffix, tombstone(report));
                            }
                        }
                        Some(texts) => match Report::decode(&texts) {
                            Ok(report) => {
                                state.gone.remove(&suffix);
                                let name = format!("{}{suffix}", report.cluster);
                                state.cluster = Some(report.cluster);
                                state.reports.insert(suffix, Rrset::new(name, texts));
                            }
                            // Kept under its last name, so the rounds keep its last good
                            // content and say it does not parse.
                            Err(_) => {
                                if let Some(held) = state.reports.get_mut(&suffix) {
                                    held.texts = texts;
                                }
                            }
                        },
                    }
                }
            }
            Err(e) => {
                if !std::mem::replace(&mut state.failing, true) {
                    warn!(%peer, error = %e, "a peer's reports cannot be read; its last ones count until they age out (report_ttl)");
                }
            }
        }
        suffixes
            .iter()
            .filter_map(|s| state.reports.get(s).cloned())
            .collect()
    }

    /// The reports the peers relay under `suffixes`, and those recalled while they count,
    /// each named [`relayed_name`] (one per cluster and source; the rounds take the
    /// newest), but none of a cluster that itself last answered "no report" there: it left,
    /// and a peer that could not read it meanwhile still relays its last report.
    fn relays(&self, suffixes: &[String]) -> Vec<Rrset> {
        let last = self.last.lock().expect("not poisoned");
        let left = left(&last);
        let mut relays = Vec::new();
        for suffix in suffixes {
            let recalled = self.recall.texts(suffix);
            let recalled = by_cluster(&recalled).into_iter();
            let relayed = self
                .peers
                .iter()
                .filter_map(|p| last.get(p)?.relayed.get(suffix))
                .flat_map(|held| held.iter().map(|(c, texts)| (c.as_str(), texts.clone())));
            relays.extend(
                relayed
                    .chain(recalled)
                    .filter(|(cluster, _)| !left.contains(&(cluster, suffix.as_str())))
                    .map(|(cluster, texts)| Rrset::new(relayed_name(cluster, suffix), texts)),
            );
        }
        relays
    }

    /// What this cluster's server relays under `suffixes`: each peer's own report, as last
    /// read, and while they count the recalled reports of the other clusters (but a cluster
    /// that left), so a cluster that restarts knows from this one what this one recalls.
    fn to_relay(&self, suffixes: &[String]) -> HashMap<String, Vec<Vec<String>>> {
        let last = self.last.lock().expect("not poisoned");
        let left = left(&last);
        suffixes
            .iter()
            .map(|s| {
                let mut reports: Vec<Vec<String>> = self
                    .peers
                    .iter()
                    .filter_map(|p| {
                        let state = last.get(p)?;
                        let own = state.reports.get(s).map(|Rrset { texts, .. }| texts);
                        own.or_else(|| state.gone.get(s)).cloned()
                    })
                    .collect();
                let direct: BTreeSet<String> = reports
                    .iter()
                    .filter_map(|texts| Some(cluster_of(texts.first()?)?.to_owned()))
                    .collect();
                let recalled = self.recall.texts(s);
                reports.extend(
                    by_cluster(&recalled)
                        .into_iter()
                        .filter(|(c, _)| !direct.contains(*c) && !left.contains(&(c, s.as_str())))
                        .map(|(_, texts)| texts),
                );
                (s.clone(), reports)
            })
            .collect()
    }

    /// The peers that have not answered since this reader started.
    fn unheard(&self) -> Vec<String> {
        let last = self.last.lock().expect("not poisoned");
        self.peers
            .iter()
            .filter(|p| !last.get(p).is_some_and(|s| s.answered))
            .map(ToString::to_string)
            .collect()
    }

    /// Fails while some peer has never answered and the patience has not run out: the
    /// rounds then count nothing (nothing is published yet, or what was stays).
    fn unheard_within_patience(&self) -> Result<(), ho_engine::sink::SinkError> {
        if std::time::Instant::now() >= self.patience {
            return Ok(());
        }
        let unheard = self.unheard();
        if unheard.is_empty() {
            return Ok(());
        }
        Err(ho_engine::sink::SinkError::retriable(format!(
            "no answer yet from peer(s) {}: the first count waits for every peer's reports (at most report_ttl)",
            unheard.join(", ")
        )))
    }
}

/// The text of each TXT record answering (its strings joined), `None` when there is none.
fn texts(answer: &Message) -> Option<Vec<String>> {
    if answer.metadata.response_code != ResponseCode::NoError {
        return None;
    }
    let texts: Vec<String> = answer
        .answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::TXT(txt) => Some(
                txt.txt_data
                    .iter()
                    .map(|s| String::from_utf8_lossy(s))
                    .collect::<String>(),
            ),
            _ => None,
        })
        .collect();
    (!texts.is_empty()).then_some(texts)
}

impl ReportStore for DnsReports {
    fn write(&self, reports: Vec<Rrset>) -> StoreFuture<()> {
        self.0.shelf.hold(reports);
        Box::pin(async { Ok(()) })
    }

    fn read(&self, suffixes: Vec<String>) -> StoreFuture<Vec<Rrset>> {
        let this = self.0.clone();
        Box::pin(async move {
            let mut all = this.shelf.mine(&suffixes);
            let asked =
                futures_util::future::join_all(this.peers.iter().map(|p| this.ask(*p, &suffixes)))
                    .await;
            for (peer, answer) in this.peers.iter().zip(asked) {
                all.extend(this.remember(*peer, &suffixes, answer));
            }
            all.extend(this.relays(&suffixes));
            let heard_every_peer = this.unheard().is_empty();
            if heard_every_peer {
                this.recall.forget();
            }
            this.shelf.relay(this.to_relay(&suffixes));
            if heard_every_peer {
                this.recall.keep(&this.shelf.known());
            }
            this.unheard_within_patience()?;
            Ok(all)
        })
    }

    /// Takes the report off this server, then keeps answering "no report" long enough
    /// for every peer to run a round and drop it (`cluster leave` runs while this
    /// cluster's orchestrator is stopped, on the same listen addresses).
    fn remove(&self, name: String) -> StoreFuture<()> {
        let this = self.0.clone();
        Box::pin(async move {
            let name = name.to_ascii_lowercase();
            this.shelf
                .held
                .write()
                .expect("not poisoned")
                .retain(|_, held| held.name != name);
            this.shelf.told_absent.lock().expect("not poisoned").clear();
            this.shelf.prime();
            tokio::time::sleep(this.leave_for).await;
            let told = this.shelf.told_absent.lock().expect("not poisoned").len();
            info!(
                report = %name,
                readers = told,
                "answered \"no report\" for {:?}", this.leave_for
            );
            Ok(())
        })
    }
}
