//! One sink's canary task: which name is due, the question, the comparison, and what is
//! reported when the served answer and the decision disagree.

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::read::{Question, ReadError, Reader, Served, Source};
use super::{Intended, Observation, Shared};
use crate::events::Event;
use crate::metrics::{SinkLabel, SinkResultLabels, StaleLabels};
use crate::status::{CanaryStatus, StaleName};

/// The first re-check after a decision; doubled each time until the answer matches.
const FAST: Duration = Duration::from_millis(20);

/// The first wait before a sink is asked again where its DNS server listens.
const FIND_FIRST: Duration = Duration::from_secs(1);

/// The longest wait between two such questions.
const FIND_MAX: Duration = Duration::from_secs(60);

/// A name the canary asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watched {
    pub tenant: String,
    pub name: String,
    /// Ask AAAA as well (the tenant has IPv6 endpoints).
    pub v6: bool,
    /// The whole set is answered (`all`, `failover`); else (`weighted`, `geo`) an answer is
    /// a non-empty part of it.
    pub exact: bool,
    /// `answer = "cname"`: a CNAME to a host the tenant publishes now is as decided.
    pub cname: bool,
    /// A `geo` name asked as a client in one location; `None`: asked as the canary itself.
    pub vantage: Option<Vantage>,
}

/// Where a `geo` name is asked from, and what that location should be answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vantage {
    /// The location (as in endpoints' `labels.geo`, upper case).
    pub geo: String,
    /// The client subnet the question carries.
    pub client: ipnet::IpNet,
    /// The tenant's addresses in that location: while any is published, the location's
    /// clients get only those; else another location's.
    pub local: Arc<[IpAddr]>,
}

/// One sink's canary: where, how often, and its names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkCanary {
    pub sink: String,
    pub source: Source,
    pub every: Duration,
    pub grace: Duration,
    pub rate: u32,
    pub watched: Vec<Watched>,
}

/// A watched name's progress.
struct Progress {
    due: Instant,
    /// The decision last seen served (0: none yet).
    matched: u64,
    /// The decision last asked about.
    asked: u64,
    /// The next fast re-check's wait, while a new decision is not yet served.
    fast: Duration,
    /// Since when the answer differs (unix ms), and whether that was reported.
    differs: Option<(u64, bool)>,
}

impl SinkCanary {
    /// Asks every name in turn until aborted.
    pub(super) async fn run(self, shared: Shared) {
        let mut decided = shared.decided.clone();
        let start = Instant::now();
        let mut progress: Vec<Progress> = (0..self.watched.len())
            .map(|i| Progress {
                // Spread over one period rather than a burst at start.
                due: start + self.period().mul_f64(i as f64 / self.watched.len() as f64),
                matched: 0,
                asked: 0,
                fast: FAST,
                differs: None,
            })
            .collect();
        let mut due: BTreeSet<(Instant, usize)> = progress
            .iter()
            .enumerate()
            .map(|(i, p)| (p.due, i))
            .collect();
        let gap = Duration::from_secs(1) / self.rate.max(1);
        // Questions go out at most one per `gap`, caught up after a slow one (timer ticks
        // are a millisecond), never in a burst of more than 100 ms's worth.
        let mut next_send = start;
        let (mut reader, asked) = match self.source {
            Source::Dns(address) => (Reader::dns(address, &*shared.dns), address.to_string()),
            Source::Found => {
                let address = self.find_port(&shared).await;
                (Reader::dns(address, &*shared.dns), address.to_string())
            }
            Source::Listing => (Reader::listing(&self.sink, self.every), "listing".into()),
        };
        self.status(&shared, |s| {
            s.sink = self.sink.clone();
            s.address = asked;
            s.names = self.watched.len();
        });
        loop {
            let Some(&(at, i)) = due.first() else { return };
            tokio::select! {
                _ = tokio::time::sleep_until(at.max(next_send)) => {}
                changed = decided.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    self.decisions_due(&shared, &mut progress, &mut due);
                    continue;
                }
            }
            due.remove(&(at, i));
            let intended = shared
                .intended
                .lock()
                .expect("never poisoned")
                .get(&self.watched[i].tenant)
                .cloned();
            let next = match intended {
                Some(intended) => {
                    self.check(&shared, &mut reader, i, &mut progress[i], &intended)
                        .await
                }
                // Nothing decided yet: asked again in one period.
                None => Instant::now() + self.period(),
            };
            progress[i].due = next;
            due.insert((next, i));
            next_send = (next_send + gap).max(Instant::now() - Duration::from_millis(100));
        }
    }

    /// Asks the sink where its DNS server listens until it says, the sink listed in
    /// `/status`'s `canaries_off` with why meanwhile; asked again after [`FIND_FIRST`],
    /// doubling to [`FIND_MAX`].
    async fn find_port(&self, shared: &Shared) -> SocketAddr {
        let mut wait = FIND_FIRST;
        loop {
            let found = match shared.listings.port(&self.sink) {
                Some(port) => port.find().await.map_err(|e| e.to_string()),
                None => Err("the sink is being built".to_owned()),
            };
            if let Some(address) = self.note_port(shared, found, wait) {
                return address;
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(FIND_MAX);
        }
    }

    /// What asking for the DNS port gave: the address, or why not (kept for `/status`,
    /// logged once) when it is asked again after `wait`.
    fn note_port(
        &self,
        shared: &Shared,
        found: Result<SocketAddr, String>,
        wait: Duration,
    ) -> Option<SocketAddr> {
        let mut unfound = shared.unfound.lock().expect("never poisoned");
        match found {
            Ok(address) => {
                unfound.remove(&self.sink);
                tracing::info!(sink = %self.sink, %address, "answer canary: the sink's API says its DNS server answers here");
                Some(address)
            }
            Err(why) => {
                if !unfound.contains_key(&self.sink) {
                    tracing::warn!(sink = %self.sink, %why, "answer canary: the sink's DNS port is not known yet; asked again, backing off to a minute (canary.address sets it)");
                }
                let reason = format!(
                    "its DNS port is not known yet: {why}; asked again within {} (or give canary.address)",
                    humantime::format_duration(wait)
                );
                unfound.insert(self.sink.clone(), reason);
                None
            }
        }
    }

    /// Each name is asked once in `every`, or less often when more names than the rate
    /// allows in that time.
    fn period(&self) -> Duration {
        let per_name = if self.watched.iter().any(|w| w.v6) {
            2
        } else {
            1
        };
        let needed = Duration::from_secs_f64(
            (self.watched.len() * per_name) as f64 / f64::from(self.rate.max(1)),
        );
        self.every.max(needed)
    }

    /// Names of tenants with a decision not yet asked about are due now.
    fn decisions_due(
        &self,
        shared: &Shared,
        progress: &mut [Progress],
        due: &mut BTreeSet<(Instant, usize)>,
    ) {
        let intended = shared.intended.lock().expect("never poisoned");
        let now = Instant::now();
        for (i, w) in self.watched.iter().enumerate() {
            let Some(seq) = intended.get(&w.tenant).map(|d| d.seq) else {
                continue;
            };
            let p = &mut progress[i];
            if seq != p.asked && p.due > now {
                due.remove(&(p.due, i));
                p.due = now;
                p.fast = FAST;
                due.insert((now, i));
            }
        }
    }

    /// Asks name `i`, compares, reports; when to ask it next.
    async fn check(
        &self,
        shared: &Shared,
        reader: &mut Reader,
        i: usize,
        p: &mut Progress,
        intended: &Intended,
    ) -> Instant {
        let w = &self.watched[i];
        p.asked = intended.seq;
        let question = Question {
            name: &w.name,
            v6: w.v6,
            client: w.vantage.as_ref().map(|v| v.client),
            decided_at: intended.at,
        };
        let served = match reader.served(&shared.listings, &question).await {
            Ok(served) => served,
            Err(e) => {
                self.failed(shared, w, &e);
                return Instant::now() + self.period();
            }
        };
        let now_ms = crate::clock::unix_millis(std::time::SystemTime::now());
        let (matches, handed) = judge(w, &served, intended, shared);
        // A CNAME to a host never published: what it resolves to is unknown here, so the
        // ledger keeps what it knew; the stale report names the host.
        if let Some(addresses) = handed {
            let _ = shared.observations.send(Observation {
                sink: self.sink.clone(),
                tenant: w.tenant.clone(),
                name: w.name.clone(),
                geo: w.vantage.as_ref().map(|v| v.geo.clone()),
                addresses,
                at: now_ms,
            });
        }
        self.count(shared, if matches { "match" } else { "differs" });
        self.status(shared, |s| s.queries += 1);
        if matches {
            self.matched(shared, w, p, intended, &served, now_ms);
            return Instant::now() + self.period();
        }
        let since = p.differs.map_or(now_ms, |(since, _)| since);
        let reported = p.differs.is_some_and(|(_, r)| r);
        // Stale once the decision is older than the grace: a change of ours is given the
        // back end's propagation; a drift nobody decided is reported when seen past it.
        let stale = now_ms.saturating_sub(intended.at) >= self.grace.as_millis() as u64;
        p.differs = Some((since, reported || stale));
        if stale && !reported {
            self.report(shared, w, true, &served, intended, since);
        }
        if stale {
            Instant::now() + self.period().min(self.grace.max(FAST))
        } else {
            let wait = p.fast;
            p.fast = (p.fast * 2).min(self.period());
            Instant::now() + wait
        }
    }

    /// Name `w`'s question got no usable answer: counted, and the last error kept.
    fn failed(&self, shared: &Shared, w: &Watched, e: &ReadError) {
        self.count(shared, "error");
        self.status(shared, |s| {
            s.queries += 1;
            s.errors += 1;
            s.last_error = Some(format!("{}{}: {e}", w.name, asked_from(w)));
        });
    }

    /// Name `w` is served as decided: the propagation of a new decision is measured and a
    /// stale report is withdrawn.
    fn matched(
        &self,
        shared: &Shared,
        w: &Watched,
        p: &mut Progress,
        intended: &Intended,
        served: &Served,
        now_ms: u64,
    ) {
        if p.matched != 0 && p.matched != intended.seq {
            let took = now_ms.saturating_sub(intended.at) as f64 / 1000.0;
            shared
                .metrics
                .answers
                .answer_propagation
                .get_or_create(&SinkLabel {
                    sink: self.sink.clone(),
                })
                .observe(took);
            self.status(shared, |s| s.last_propagation_seconds = Some(took));
        }
        p.matched = intended.seq;
        p.fast = FAST;
        if let Some((since, true)) = p.differs {
            self.report(shared, w, false, served, intended, since);
        }
        p.differs = None;
    }

    /// A name turned stale, or is served as decided again: an event, the gauges, `/status`.
    fn report(
        &self,
        shared: &Shared,
        w: &Watched,
        stale: bool,
        served: &Served,
        intended: &Intended,
        since: u64,
    ) {
        let answers = &shared.metrics.answers;
        let labels = self.stale_labels(w);
        if stale {
            answers.canary_stale_answer.get_or_create(&labels).set(1);
            tracing::warn!(sink = %self.sink, name = %w.name, geo = ?w.vantage.as_ref().map(|v| &v.geo), served = ?served.addresses, served_host = ?served.host, served_rcode = ?served.failed, served_referral = ?served.referral, intended = ?intended.addresses, intended_hosts = ?intended.hosts, "the served answer differs from the decision past the sink's canary grace");
        } else {
            answers.canary_stale_answer.remove(&labels);
        }
        shared.events.emit(|| Event::Canary {
            at: crate::events::now(),
            sink: self.sink.clone(),
            tenant: w.tenant.clone(),
            name: w.name.clone(),
            geo: w.vantage.as_ref().map(|v| v.geo.clone()),
            stale,
            served: served.addresses.to_vec(),
            served_host: served.host.clone(),
            served_rcode: served.failed.clone(),
            served_referral: served.referral.clone(),
            intended: intended.addresses.to_vec(),
        });
        let geo = w.vantage.as_ref().map(|v| v.geo.clone());
        self.status(shared, |s| {
            s.stale.retain(|n| n.name != w.name || n.geo != geo);
            if stale {
                s.stale.push(StaleName {
                    name: w.name.clone(),
                    geo,
                    tenant: w.tenant.clone(),
                    served: served.addresses.to_vec(),
                    served_host: served.host.clone(),
                    served_rcode: served.failed.clone(),
                    served_referral: served.referral.clone(),
                    intended: intended.addresses.to_vec(),
                    since: crate::clock::at_unix_millis(since),
                });
            }
            self.stale_names(shared).set(s.stale.len() as i64);
        });
    }

    /// Forgets what this canary reported stale, as it stops (a reload changed or removed
    /// it): a canary started in its place reports again what it finds.
    pub(super) fn forget(&self, shared: &Shared) {
        let series = &shared.metrics.answers.canary_stale_answer;
        for w in &self.watched {
            series.remove(&self.stale_labels(w));
        }
        self.stale_names(shared).set(0);
        if let Some(s) = shared
            .status
            .lock()
            .expect("never poisoned")
            .get_mut(&self.sink)
        {
            s.stale.clear();
        }
    }

    /// The labels of `w`'s stale series.
    fn stale_labels(&self, w: &Watched) -> StaleLabels {
        StaleLabels {
            sink: self.sink.clone(),
            tenant: w.tenant.clone(),
            name: w.name.clone(),
            geo: w.vantage.as_ref().map_or(String::new(), |v| v.geo.clone()),
        }
    }

    /// This sink's count of stale names.
    fn stale_names(&self, shared: &Shared) -> prometheus_client::metrics::gauge::Gauge {
        let sink = SinkLabel {
            sink: self.sink.clone(),
        };
        let gauges = &shared.metrics.answers.canary_stale_names;
        gauges.get_or_create(&sink).clone()
    }

    fn count(&self, shared: &Shared, result: &'static str) {
        shared
            .metrics
            .answers
            .canary_queries
            .get_or_create(&SinkResultLabels {
                sink: self.sink.clone(),
                result,
            })
            .inc();
    }

    fn status(&self, shared: &Shared, update: impl FnOnce(&mut CanaryStatus)) {
        let mut status = shared.status.lock().expect("never poisoned");
        update(status.entry(self.sink.clone()).or_default());
    }
}

/// " (as a client in IE)" for a name asked from a location; empty otherwise.
fn asked_from(w: &Watched) -> String {
    w.vantage
        .as_ref()
        .map_or(String::new(), |v| format!(" (as a client in {})", v.geo))
}

/// Whether `served` is as `intended`, and the addresses it hands a resolver (`None`: a
/// CNAME to a host never published, whose addresses are unknown here).
fn judge(
    w: &Watched,
    served: &Served,
    intended: &Intended,
    shared: &Shared,
) -> (bool, Option<Arc<[IpAddr]>>) {
    if let Some(host) = &served.host {
        let current = w.cname && intended.hosts.iter().any(|h| h == host);
        let known = shared
            .hosts
            .lock()
            .expect("never poisoned")
            .get(host)
            .cloned();
        return (current, known);
    }
    let addresses = &served.addresses;
    let local: Vec<IpAddr> = match &w.vantage {
        Some(v) => (intended.addresses.iter())
            .filter(|a| v.local.contains(a))
            .copied()
            .collect(),
        None => Vec::new(),
    };
    let matches = if w.exact && !w.cname {
        **addresses == *intended.addresses
    } else if !local.is_empty() {
        // The client's location has addresses up: those, and only those.
        !addresses.is_empty() && addresses.iter().all(|a| local.contains(a))
    } else {
        // A part of the set (a per-query pick), or a CNAME tenant's apex: the picked hosts'
        // addresses, or the target's as a flattening provider resolved them.
        addresses.iter().all(|a| intended.addresses.contains(a))
            && addresses.is_empty() == intended.addresses.is_empty()
    };
    (matches, Some(addresses.clone()))
}
