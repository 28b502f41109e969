//! The actor that runs report rounds: per shared zone (a sink holding reports), every
//! `report_interval` and at once when this cluster's view of one of its tenants changes, it
//! writes this cluster's reports that changed or are a third of `report_ttl` old (so they
//! stay live) in one batch, reads every cluster's reports in one read of the zone, counts
//! each tenant's vote and hands the tallies to the tracker. One round per zone at a time; a
//! change during a round starts another right after it.
//!
//! It also tells the engine which addresses other clusters contribute that this cluster
//! does not probe yet ([`Discovered`]), so each cluster only lists its own gateways.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use actix::prelude::*;
use ho_config::{Discovered, Plan};
use tokio::sync::watch;
use tracing::{info, warn};

use super::report::{report_name, report_suffix, Owned, Report};
use super::vote::Tally;
use super::{LocalView, ReportStore};
use crate::hysteresis::Health;
use crate::leadership::Leadership;
use crate::metrics::{Metrics, ReportOpLabels, TenantLabel};
use crate::probe_limits::Throttle;
use crate::sink::SinkError;

/// The tally of one round, for the tracker to publish.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Voted {
    /// Tenant name.
    pub tenant: String,
    /// The vote over the live reports.
    pub tally: Arc<Tally>,
}

/// This instance's cluster id, known once the binary resolved it; no round runs before.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct SetCluster(pub String);

/// A reload: the new plan and the report stores of its sinks.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Retarget {
    /// The plan now running.
    pub plan: Arc<Plan>,
    /// Report stores by sink name.
    pub stores: BTreeMap<String, Arc<dyn ReportStore>>,
}

/// Paces warnings about reports that cannot be written, read or parsed.
static REPORT_WARNINGS: Throttle = Throttle::new();
const WARN_EVERY: Duration = Duration::from_secs(10);

/// Whether a round runs on a zone, and whether another must follow it.
#[derive(Default)]
struct Rounds {
    running: bool,
    again: bool,
}

/// What this cluster last wrote for a tenant: a report is written again when its content
/// changes or it ages.
struct Written {
    owned: Vec<Owned>,
    down: Vec<IpAddr>,
    at_ms: u64,
}

/// What the coordinator keeps per voting tenant.
#[derive(Default)]
struct TenantVotes {
    view: Option<LocalView>,
    /// The report last written.
    written: Option<Written>,
    /// The last report that parsed, per rrset name: a report that stops parsing keeps
    /// counting as it was, rather than taking its addresses out of DNS.
    known: BTreeMap<String, Report>,
    /// Addresses withdrawn by the last tally (to count new withdrawals).
    withdrawn: Vec<IpAddr>,
    discovered: Vec<Discovered>,
}

/// The coordinator actor (see the module doc).
pub(crate) struct Coordinator {
    cluster: Option<String>,
    plan: Arc<Plan>,
    stores: BTreeMap<String, Arc<dyn ReportStore>>,
    tracker: Recipient<Voted>,
    leadership: Leadership,
    metrics: Arc<Metrics>,
    tenants: HashMap<String, TenantVotes>,
    /// Rounds by sink name (one zone each).
    rounds: HashMap<String, Rounds>,
    discovered: watch::Sender<Vec<Discovered>>,
    ticker: Option<(Duration, SpawnHandle)>,
}

impl Coordinator {
    /// A coordinator for `plan`, sending tallies to `tracker` and discoveries to
    /// `discovered`.
    pub fn new(
        plan: Arc<Plan>,
        stores: BTreeMap<String, Arc<dyn ReportStore>>,
        tracker: Recipient<Voted>,
        leadership: Leadership,
        metrics: Arc<Metrics>,
        discovered: watch::Sender<Vec<Discovered>>,
    ) -> Coordinator {
        Coordinator {
            cluster: None,
            plan,
            stores,
            tracker,
            leadership,
            metrics,
            tenants: HashMap::new(),
            rounds: HashMap::new(),
            discovered,
            ticker: None,
        }
    }

    /// (Re)starts the round timer when the interval changed.
    fn tick_every(&mut self, ctx: &mut Context<Self>) {
        let every = self.plan.multi_cluster.report_interval;
        if self.ticker.as_ref().is_some_and(|(d, _)| *d == every) {
            return;
        }
        if let Some((_, handle)) = self.ticker.take() {
            ctx.cancel_future(handle);
        }
        let handle = ctx.run_interval(every, |act, ctx| {
            let due: Vec<String> = act.stores.keys().cloned().collect();
            for store in due {
                act.kick(&store, ctx);
            }
        });
        self.ticker = Some((every, handle));
    }

    /// The sink whose zone holds `tenant`'s reports: its first sink that can (every cluster
    /// must list the same one first).
    fn store_of(&self, tenant: &ho_config::Tenant) -> Option<String> {
        tenant
            .sinks
            .iter()
            .find(|s| self.stores.contains_key(*s))
            .cloned()
    }

    /// Starts a round on the zone of sink `sink` for every voting tenant reporting there,
    /// or marks one to follow the running one. One round is at most one batched write (the
    /// reports due) and one read of the zone, whatever the number of tenants: the zone API
    /// budget grows with the clusters, not the tenants.
    fn kick(&mut self, sink: &str, ctx: &mut Context<Self>) {
        let Some(cluster) = self.cluster.clone() else {
            return;
        };
        let Some(store) = self.stores.get(sink).cloned() else {
            return;
        };
        if self.rounds.get(sink).is_some_and(|r| r.running) {
            self.rounds.entry(sink.to_owned()).or_default().again = true;
            return;
        }
        let plan = self.plan.clone();
        let ttl_ms = plan.multi_cluster.report_ttl.as_millis() as u64;
        let now_ms = unix_ms(SystemTime::now());
        let mut exchanges = Vec::new();
        let mut any_due = false;
        for t in plan.tenants.iter().filter(|t| t.multi_cluster) {
            if self.store_of(t).as_deref() != Some(sink) {
                continue;
            }
            let Some(state) = self.tenants.get(&t.name) else {
                continue;
            };
            let Some(view) = &state.view else {
                continue;
            };
            let own = own_report(&plan.owner_id, &cluster, now_ms, view);
            // Due: its content changed, or a third of the TTL passed (it must stay live).
            // Reports past a sixth ride along with a due one, so the heartbeats of many
            // tenants share writes.
            let (due, rides) = match &state.written {
                None => (true, true),
                Some(w) => {
                    let age = now_ms.saturating_sub(w.at_ms);
                    let changed = w.owned != own.owned || w.down != own.down;
                    (changed || age >= ttl_ms / 3, age >= ttl_ms / 6)
                }
            };
            any_due |= due;
            exchanges.push(Exchange {
                tenant: t.name.clone(),
                domain: t.domains[0].clone(),
                own,
                write: due || rides,
            });
        }
        if exchanges.is_empty() {
            return;
        }
        // A standby replica reads but never writes: its leader writes this cluster's reports.
        let leads = self.leadership.may_write();
        for e in &mut exchanges {
            e.write &= any_due && leads;
        }
        let writes: Vec<(String, Vec<String>)> = exchanges
            .iter()
            .filter(|e| e.write)
            .map(|e| (report_name(&cluster, &e.domain), e.own.encode()))
            .collect();
        let suffixes: Vec<String> = exchanges.iter().map(|e| report_suffix(&e.domain)).collect();
        self.rounds.entry(sink.to_owned()).or_default().running = true;
        let sink = sink.to_owned();
        let round = async move {
            let written = if writes.is_empty() {
                None
            } else {
                Some(store.write(writes).await)
            };
            (written, store.read(suffixes).await)
        };
        ctx.spawn(
            round
                .into_actor(self)
                .map(move |(written, read), act, ctx| {
                    act.finish(exchanges, leads, written, read);
                    let rounds = act.rounds.entry(sink.clone()).or_default();
                    rounds.running = false;
                    if std::mem::take(&mut rounds.again) {
                        act.kick(&sink, ctx);
                    }
                }),
        );
    }

    /// Counts the metrics of a finished round and the vote of each of its tenants.
    fn finish(
        &mut self,
        exchanges: Vec<Exchange>,
        leads: bool,
        written: Option<Result<(), SinkError>>,
        read: Result<Vec<(String, Vec<String>)>, SinkError>,
    ) {
        let count = |op, result| {
            self.metrics
                .cluster_reports
                .get_or_create(&ReportOpLabels { op, result })
                .inc();
        };
        let wrote = match &written {
            Some(Ok(())) => {
                count("write", "ok");
                true
            }
            Some(Err(e)) => {
                count("write", "error");
                if REPORT_WARNINGS.ready(WARN_EVERY) {
                    warn!(error = %e, "could not write this cluster's reports");
                }
                false
            }
            None => false,
        };
        let rrsets = match read {
            Ok(rrsets) => {
                count("read", "ok");
                rrsets
            }
            Err(e) => {
                count("read", "error");
                if REPORT_WARNINGS.ready(WARN_EVERY) {
                    warn!(error = %e, "could not read the clusters' reports; the published sets stay");
                }
                return;
            }
        };
        for e in exchanges {
            let Some(state) = self.tenants.get_mut(&e.tenant) else {
                continue;
            };
            if wrote && e.write {
                state.written = Some(Written {
                    owned: e.own.owned.clone(),
                    down: e.own.down.clone(),
                    at_ms: e.own.at_ms,
                });
            }
            let suffix = report_suffix(&e.domain);
            let read: Vec<&(String, Vec<String>)> = rrsets
                .iter()
                .filter(|(name, _)| name.ends_with(&suffix))
                .collect();
            self.count_votes(&e.tenant, e.own, leads, &read);
        }
        self.publish_discovered();
    }

    /// Counts one tenant's vote from the report rrsets read (a report that stops parsing
    /// keeps counting as it last parsed) and hands the tally to the tracker.
    fn count_votes(
        &mut self,
        tenant: &str,
        own: Report,
        leads: bool,
        rrsets: &[&(String, Vec<String>)],
    ) {
        let owner = &self.plan.owner_id;
        let settings = &self.plan.multi_cluster;
        let state = self.tenants.entry(tenant.to_owned()).or_default();
        let mut known = BTreeMap::new();
        for (name, texts) in rrsets {
            match Report::decode(texts) {
                Ok(report) => {
                    known.insert(name.clone(), report);
                }
                Err(e) => {
                    if REPORT_WARNINGS.ready(WARN_EVERY) {
                        warn!(tenant, rrset = %name, error = %e, "a cluster's report does not parse; its last good content still counts");
                    }
                    if let Some(last) = state.known.remove(name) {
                        known.insert(name.clone(), last);
                    }
                }
            }
        }
        state.known = known;
        // The leader counts what it just reported; a standby counts what its leader wrote,
        // as the other clusters do.
        let mut reports: Vec<Report> = state
            .known
            .values()
            .filter(|r| &r.owner == owner && !(leads && r.cluster == own.cluster))
            .cloned()
            .collect();
        let own_cluster = own.cluster.clone();
        if leads {
            reports.push(own);
        }
        let tally = Tally::count(
            &reports,
            unix_ms(SystemTime::now()),
            settings.report_ttl,
            settings.failure_threshold,
        );
        let label = TenantLabel {
            tenant: tenant.to_owned(),
        };
        self.metrics
            .cluster_live_voters
            .get_or_create(&label)
            .set(tally.live.len() as i64);
        let withdrawn: Vec<IpAddr> = tally.withdrawn().collect();
        let new = withdrawn
            .iter()
            .filter(|a| !state.withdrawn.contains(a))
            .count();
        if new > 0 {
            self.metrics
                .cluster_quorum_withdrawals
                .get_or_create(&label)
                .inc_by(new as u64);
        }
        state.withdrawn = withdrawn;
        // Every address other clusters contribute, probed already or not: the engine adds
        // those its tenant lacks, and a stable list keeps it from adding and removing
        // them in turn.
        state.discovered = tally
            .candidates()
            .filter(|(cluster, _)| **cluster != own_cluster)
            .map(|(cluster, o)| Discovered {
                tenant: tenant.to_owned(),
                cluster: cluster.clone(),
                address: o.address,
                name: o.name.clone(),
            })
            .collect();
        self.tracker.do_send(Voted {
            tenant: tenant.to_owned(),
            tally: Arc::new(tally),
        });
    }

    /// Tells the engine the addresses other clusters contribute, when they changed.
    fn publish_discovered(&self) {
        let all: Vec<Discovered> = self
            .tenants
            .values()
            .flat_map(|s| s.discovered.iter().cloned())
            .collect();
        self.discovered.send_if_modified(|current| {
            let changed = *current != all;
            if changed {
                info!(
                    addresses = all.len(),
                    "addresses other clusters contribute changed"
                );
                *current = all;
            }
            changed
        });
    }
}

/// One tenant's part of a round.
struct Exchange {
    tenant: String,
    /// Its first domain, under which the reports live.
    domain: String,
    /// This cluster's report now.
    own: Report,
    /// Whether this round writes it.
    write: bool,
}

/// This cluster's report from its view: the addresses it owns (not drained) and every
/// address it judges down.
fn own_report(owner: &str, cluster: &str, now_ms: u64, view: &LocalView) -> Report {
    let mut owned: Vec<Owned> = view
        .endpoints
        .iter()
        .filter(|e| !e.drained && e.cluster.as_deref().is_none_or(|c| c == cluster))
        .map(|e| Owned {
            address: e.address,
            name: e.name.clone(),
            weight: e.weight,
            priority: e.priority,
            geo: e.geo.clone(),
        })
        .collect();
    owned.sort();
    owned.dedup_by(|a, b| a.address == b.address);
    let mut down: Vec<IpAddr> = view
        .endpoints
        .iter()
        .filter(|e| e.health == Health::Down)
        .map(|e| e.address)
        .collect();
    down.sort();
    down.dedup();
    Report {
        owner: owner.to_owned(),
        cluster: cluster.to_owned(),
        at_ms: now_ms,
        owned,
        down,
    }
}

/// Unix milliseconds.
pub fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_millis() as u64
}

impl Actor for Coordinator {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.tick_every(ctx);
    }
}

impl Handler<LocalView> for Coordinator {
    type Result = ();

    fn handle(&mut self, view: LocalView, ctx: &mut Context<Self>) {
        let tenant = view.tenant.clone();
        self.tenants.entry(tenant.clone()).or_default().view = Some(view);
        let plan = self.plan.clone();
        let store = plan
            .tenants
            .iter()
            .find(|t| t.name == tenant)
            .and_then(|t| self.store_of(t));
        if let Some(store) = store {
            self.kick(&store, ctx);
        }
    }
}

impl Handler<SetCluster> for Coordinator {
    type Result = ();

    fn handle(&mut self, SetCluster(id): SetCluster, ctx: &mut Context<Self>) {
        self.cluster = Some(id);
        let stores: Vec<String> = self.stores.keys().cloned().collect();
        for store in stores {
            self.kick(&store, ctx);
        }
    }
}

impl Handler<Retarget> for Coordinator {
    type Result = ();

    fn handle(&mut self, msg: Retarget, ctx: &mut Context<Self>) {
        self.plan = msg.plan;
        self.stores = msg.stores;
        let plan = self.plan.clone();
        self.tenants.retain(|name, _| {
            plan.tenants
                .iter()
                .any(|t| &t.name == name && t.multi_cluster)
        });
        self.publish_discovered();
        self.tick_every(ctx);
    }
}
