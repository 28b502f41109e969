//! Reports over DNS between clusters (`reports` on a `dns_server` sink): clusters that are
//! themselves the zone's name servers vote with no provider in between (seed 001's
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
//! Every replica of a cluster holds and answers the cluster's reports itself (the store
//! is not shared), so a peer asking any replica behind one address gets an answer.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::rdata::TXT;
use hickory_proto::rr::{Name, RData, Record, RecordType, TSigner};
use ho_engine::multi_cluster::report::{Report, REPORT_LABEL};
use ho_engine::multi_cluster::{ReportStore, StoreFuture};
use tracing::{info, warn};

use super::config::ReportsConfig;
use crate::rfc2136::client::Connection;

/// TTL of a report record: readers never cache it.
const REPORT_TTL: u32 = 0;

/// This cluster's reports as its server answers them.
#[derive(Default)]
pub struct Shelf {
    /// Per report suffix (`._ho-report.<domain>`): the rrset name and its texts.
    held: RwLock<HashMap<String, (String, Vec<String>)>>,
    /// Clients answered "no report" since the last removal (what `cluster leave` tells).
    told_absent: Mutex<HashSet<IpAddr>>,
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
    /// by `client`: this cluster's report there, if it holds one.
    pub fn answer(
        &self,
        qname: &Name,
        suffix: &str,
        cluster: Option<&str>,
        client: IpAddr,
    ) -> Vec<Record> {
        let held = self.held.read().expect("not poisoned");
        let found = held.get(suffix).filter(|(name, _)| {
            cluster.is_none_or(|c| name.len() == c.len() + suffix.len() && name.starts_with(c))
        });
        let Some((_, texts)) = found else {
            drop(held);
            self.told_absent
                .lock()
                .expect("not poisoned")
                .insert(client);
            return Vec::new();
        };
        texts
            .iter()
            .map(|text| {
                let strings: Vec<String> = text
                    .as_bytes()
                    .chunks(255)
                    .map(|c| String::from_utf8_lossy(c).into_owned())
                    .collect();
                Record::from_rdata(qname.clone(), REPORT_TTL, RData::TXT(TXT::new(strings)))
            })
            .collect()
    }

    fn hold(&self, reports: Vec<(String, Vec<String>)>) {
        let mut held = self.held.write().expect("not poisoned");
        for (name, texts) in reports {
            let Some(dot) = name.find('.') else { continue };
            held.insert(
                name[dot..].to_ascii_lowercase(),
                (name.to_ascii_lowercase(), texts),
            );
        }
    }

    fn mine(&self, suffixes: &[String]) -> Vec<(String, Vec<String>)> {
        let held = self.held.read().expect("not poisoned");
        suffixes
            .iter()
            .filter_map(|s| held.get(s).cloned())
            .collect()
    }
}

/// What a peer answered a round: per suffix asked, its report's texts (`None`: it holds
/// none).
type Answered = Vec<(String, Option<Vec<String>>)>;

/// What one peer last answered, per suffix.
#[derive(Default)]
struct PeerState {
    reports: BTreeMap<String, (String, Vec<String>)>,
    /// Its last round failed (logged once, and once again when it answers).
    failing: bool,
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
    last: Mutex<HashMap<SocketAddr, PeerState>>,
}

impl DnsReports {
    /// The store of `config`, holding reports on `shelf`; `report_interval` is the
    /// deployment's (`[multi_cluster]`).
    pub fn new(
        config: &ReportsConfig,
        key: TSigner,
        shelf: Arc<Shelf>,
        report_interval: Duration,
    ) -> DnsReports {
        DnsReports(Arc::new(Peers {
            shelf,
            peers: config.peers.clone(),
            key,
            timeout: config.timeout,
            leave_for: report_interval * 2 + config.timeout,
            last: Mutex::default(),
        }))
    }
}

impl Peers {
    /// Every report `peer` holds under `suffixes`, asked at once on one connection:
    /// (suffix, what it answered, `None` for no report).
    async fn ask(&self, peer: SocketAddr, suffixes: &[String]) -> Result<Answered, String> {
        let names = suffixes
            .iter()
            .map(|s| Name::from_ascii(format!("{}.", &s[1..])).map_err(|e| format!("{s}: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        let exchange = async {
            let mut conn = Connection::open(peer, self.timeout)
                .await
                .map_err(|e| e.message)?;
            let answers = conn
                .query_all(&names, RecordType::TXT, Some(&self.key))
                .await
                .map_err(|e| e.message)?;
            Ok(suffixes
                .iter()
                .cloned()
                .zip(answers.iter().map(texts))
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
        asked: Result<Answered, String>,
    ) -> Vec<(String, Vec<String>)> {
        let mut last = self.last.lock().expect("not poisoned");
        let state = last.entry(peer).or_default();
        match asked {
            Ok(found) => {
                if std::mem::take(&mut state.failing) {
                    info!(%peer, "a peer's reports can be read again");
                }
                for (suffix, texts) in found {
                    match texts {
                        None => {
                            state.reports.remove(&suffix);
                        }
                        Some(texts) => match Report::decode(&texts) {
                            Ok(report) => {
                                let name = format!("{}{suffix}", report.cluster);
                                state.reports.insert(suffix, (name, texts));
                            }
                            // Kept under its last name, so the rounds keep its last good
                            // content and say it does not parse.
                            Err(_) => {
                                if let Some(held) = state.reports.get_mut(&suffix) {
                                    held.1 = texts;
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
    fn write(&self, reports: Vec<(String, Vec<String>)>) -> StoreFuture<()> {
        self.0.shelf.hold(reports);
        Box::pin(async { Ok(()) })
    }

    fn read(&self, suffixes: Vec<String>) -> StoreFuture<Vec<(String, Vec<String>)>> {
        let this = self.0.clone();
        Box::pin(async move {
            let mut all = this.shelf.mine(&suffixes);
            let asked =
                futures_util::future::join_all(this.peers.iter().map(|p| this.ask(*p, &suffixes)))
                    .await;
            for (peer, answer) in this.peers.iter().zip(asked) {
                all.extend(this.remember(*peer, &suffixes, answer));
            }
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
                .retain(|_, (held, _)| *held != name);
            this.shelf.told_absent.lock().expect("not poisoned").clear();
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

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::rdata::tsig::TsigAlgorithm;

    fn peers() -> Peers {
        let key = TSigner::new(
            vec![7; 32],
            TsigAlgorithm::HmacSha256,
            Name::from_ascii("reports.").unwrap(),
            300,
        )
        .unwrap();
        let config = ReportsConfig {
            peers: vec!["127.0.0.1:1".parse().unwrap()],
            tsig: crate::rfc2136::config::TsigConfig {
                name: "reports".into(),
                algorithm: "hmac-sha256".into(),
                secret_file: "/dev/null".into(),
            },
            timeout: Duration::from_secs(1),
        };
        let store = DnsReports::new(&config, key, Arc::default(), Duration::from_secs(2));
        Arc::try_unwrap(store.0).ok().unwrap()
    }

    fn report(cluster: &str, at_ms: u64) -> Vec<String> {
        Report {
            owner: "o".into(),
            cluster: cluster.into(),
            at_ms,
            owned: Vec::new(),
            down: vec!["192.0.2.1".parse().unwrap()],
        }
        .encode()
    }

    #[test]
    fn report_names_are_told_from_others() {
        assert_eq!(
            report_question("_ho-report.api.example.org"),
            Some(("._ho-report.api.example.org".into(), None))
        );
        assert_eq!(
            report_question("eu1._ho-report.api.example.org"),
            Some(("._ho-report.api.example.org".into(), Some("eu1")))
        );
        assert_eq!(report_question("api.example.org"), None);
        assert_eq!(report_question("_ho-reporter.api.example.org"), None);
        assert_eq!(report_question("a.b._ho-report.api.example.org"), None);
    }

    #[test]
    fn the_shelf_answers_its_own_report_by_suffix_or_full_name() {
        let shelf = Shelf::default();
        let texts = vec!["x".repeat(300)];
        shelf.hold(vec![(
            "EU1._ho-report.api.example.org".into(),
            texts.clone(),
        )]);
        let client: IpAddr = "192.0.2.9".parse().unwrap();
        let qname = Name::from_ascii("_ho-report.api.example.org.").unwrap();
        let suffix = "._ho-report.api.example.org";
        let records = shelf.answer(&qname, suffix, None, client);
        assert_eq!(records.len(), 1);
        let RData::TXT(txt) = &records[0].data else {
            panic!("TXT");
        };
        assert_eq!(txt.txt_data.len(), 2, "split in 255-character strings");
        assert_eq!(txt.txt_data.concat(), texts[0].as_bytes());
        assert_eq!(shelf.answer(&qname, suffix, Some("eu1"), client).len(), 1);
        assert!(shelf.answer(&qname, suffix, Some("eu2"), client).is_empty());
        assert!(shelf
            .answer(&qname, "._ho-report.other.org", None, client)
            .is_empty());
        assert!(shelf.told_absent.lock().unwrap().contains(&client));
    }

    #[test]
    fn a_peer_that_cannot_be_asked_keeps_its_last_report_and_one_without_loses_it() {
        let p = peers();
        let peer: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let suffixes = vec![
            "._ho-report.a.org".to_string(),
            "._ho-report.b.org".to_string(),
        ];
        let first = p.remember(
            peer,
            &suffixes,
            Ok(vec![
                (suffixes[0].clone(), Some(report("us1", 1))),
                (suffixes[1].clone(), Some(report("us1", 1))),
            ]),
        );
        assert_eq!(first.len(), 2);
        assert_eq!(
            first[0].0, "us1._ho-report.a.org",
            "named by the report's cluster"
        );
        let unreachable = p.remember(peer, &suffixes, Err("refused".into()));
        assert_eq!(unreachable, first, "the last answers, stamps unchanged");
        assert!(p.last.lock().unwrap()[&peer].failing);
        let garbled = p.remember(
            peer,
            &suffixes,
            Ok(vec![
                (suffixes[0].clone(), Some(vec!["garbage".into()])),
                (suffixes[1].clone(), None),
            ]),
        );
        assert_eq!(
            garbled,
            vec![(
                "us1._ho-report.a.org".to_string(),
                vec!["garbage".to_string()]
            )],
            "a report that does not parse stays under its name (the rounds keep its last good \
             content); one the peer no longer holds is gone"
        );
        assert!(!p.last.lock().unwrap()[&peer].failing);
    }
}
