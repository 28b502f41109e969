//! The actor that runs report rounds: per voting tenant, every `report_interval` and at
//! once when this cluster's view changes, it writes this cluster's report (when its content
//! changed, or a third of `report_ttl` after the last write, so it stays live), reads every
//! cluster's report, counts the vote and hands the tally to the tracker. One round per
//! tenant at a time; a change during a round starts another right after it.
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

/// What the coordinator keeps per voting tenant.
#[derive(Default)]
struct TenantRounds {
    view: Option<LocalView>,
    running: bool,
    again: bool,
    /// The content (owned, down) last written and when (Unix ms).
    written: Option<((Vec<Owned>, Vec<IpAddr>), u64)>,
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
    tenants: HashMap<String, TenantRounds>,
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
            let due: Vec<String> = act.tenants.keys().cloned().collect();
            for tenant in due {
                act.kick(&tenant, ctx);
            }
        });
        self.ticker = Some((every, handle));
    }

    /// Starts a round for `tenant`, or marks one to follow the running one.
    fn kick(&mut self, tenant: &str, ctx: &mut Context<Self>) {
        let Some(cluster) = self.cluster.clone() else {
            return;
        };
        let Some(t) = self
            .plan
            .tenants
            .iter()
            .find(|t| t.name == tenant && t.multi_cluster)
        else {
            self.tenants.remove(tenant);
            return;
        };
        let Some(store) = t.sinks.iter().find_map(|s| self.stores.get(s).cloned()) else {
            return;
        };
        let settings = &self.plan.multi_cluster;
        let ttl_ms = settings.report_ttl.as_millis() as u64;
        let rounds = self.tenants.entry(tenant.to_owned()).or_default();
        if rounds.running {
            rounds.again = true;
            return;
        }
        let Some(view) = &rounds.view else {
            return;
        };
        let now_ms = unix_ms(SystemTime::now());
        let own = own_report(&self.plan.owner_id, &cluster, now_ms, view);
        let content = (own.owned.clone(), own.down.clone());
        let stale = rounds
            .written
            .as_ref()
            .is_none_or(|(c, at)| *c != content || now_ms.saturating_sub(*at) >= ttl_ms / 3);
        let leads = self.leadership.may_write();
        let write = stale && leads;
        rounds.running = true;
        let name = report_name(&cluster, &t.domains[0]);
        let suffix = report_suffix(&t.domains[0]);
        let texts = own.encode();
        let tenant = tenant.to_owned();
        let exchange = async move {
            let written = if write {
                Some(store.write(name, texts).await)
            } else {
                None
            };
            (written, store.read(suffix).await)
        };
        ctx.spawn(
            exchange
                .into_actor(self)
                .map(move |(written, read), act, ctx| {
                    act.finish(&tenant, own, leads, written, read);
                    let rounds = act.tenants.entry(tenant.clone()).or_default();
                    rounds.running = false;
                    if std::mem::take(&mut rounds.again) {
                        act.kick(&tenant, ctx);
                    }
                }),
        );
    }

    /// Counts the vote of a finished exchange and passes it on.
    fn finish(
        &mut self,
        tenant: &str,
        own: Report,
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
        match &written {
            Some(Ok(())) => count("write", "ok"),
            Some(Err(e)) => {
                count("write", "error");
                if REPORT_WARNINGS.ready(WARN_EVERY) {
                    warn!(tenant, error = %e, "could not write this cluster's report");
                }
            }
            None => {}
        }
        let rrsets = match read {
            Ok(rrsets) => {
                count("read", "ok");
                rrsets
            }
            Err(e) => {
                count("read", "error");
                if REPORT_WARNINGS.ready(WARN_EVERY) {
                    warn!(tenant, error = %e, "could not read the clusters' reports; the published set stays");
                }
                return;
            }
        };
        let owner = self.plan.owner_id.clone();
        let own_cluster = own.cluster.clone();
        let settings = self.plan.multi_cluster.clone();
        let rounds = self.tenants.entry(tenant.to_owned()).or_default();
        if let Some(Ok(())) = written {
            rounds.written = Some(((own.owned.clone(), own.down.clone()), own.at_ms));
        }
        let mut known = BTreeMap::new();
        for (name, texts) in rrsets {
            match Report::decode(&texts) {
                Ok(report) => {
                    known.insert(name, report);
                }
                Err(e) => {
                    if REPORT_WARNINGS.ready(WARN_EVERY) {
                        warn!(tenant, rrset = %name, error = %e, "a cluster report does not parse; its last good content still counts");
                    }
                    if let Some(last) = rounds.known.remove(&name) {
                        known.insert(name, last);
                    }
                }
            }
        }
        rounds.known = known;
        // This cluster counts with what it just reported (the leader) or what its leader
        // wrote (a standby: it must count what the other clusters count).
        let mut reports: Vec<Report> = rounds
            .known
            .values()
            .filter(|r| r.owner == owner && !(leads && r.cluster == own.cluster))
            .cloned()
            .collect();
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
            .filter(|a| !rounds.withdrawn.contains(a))
            .count();
        if new > 0 {
            self.metrics
                .cluster_quorum_withdrawals
                .get_or_create(&label)
                .inc_by(new as u64);
        }
        rounds.withdrawn = withdrawn;
        // Every address other clusters contribute, probed or not: the engine adds only
        // those its tenant lacks, and a stable list keeps it from adding and removing them
        // in turn.
        let discovered: Vec<Discovered> = tally
            .candidates()
            .filter(|(cluster, _)| **cluster != own_cluster)
            .map(|(cluster, o)| Discovered {
                tenant: tenant.to_owned(),
                cluster: cluster.clone(),
                address: o.address,
                name: o.name.clone(),
            })
            .collect();
        if discovered != rounds.discovered {
            rounds.discovered = discovered;
            info!(
                tenant,
                addresses = rounds.discovered.len(),
                "addresses other clusters contribute changed"
            );
            let all: Vec<Discovered> = self
                .tenants
                .values()
                .flat_map(|r| r.discovered.iter().cloned())
                .collect();
            self.discovered.send_replace(all);
        }
        self.tracker.do_send(Voted {
            tenant: tenant.to_owned(),
            tally: Arc::new(tally),
        });
    }
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
        self.kick(&tenant, ctx);
    }
}

impl Handler<SetCluster> for Coordinator {
    type Result = ();

    fn handle(&mut self, SetCluster(id): SetCluster, ctx: &mut Context<Self>) {
        self.cluster = Some(id);
        let due: Vec<String> = self.tenants.keys().cloned().collect();
        for tenant in due {
            self.kick(&tenant, ctx);
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
        self.tick_every(ctx);
    }
}
