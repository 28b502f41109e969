//! The report rounds' decisions as plain code: no actor, no clock, no zone I/O. The shell
//! ([`super::coordinator::Coordinator`]) feeds it this cluster's views, timer ticks and the
//! results of the exchanges it ran, with the current [`Now`], and carries out the
//! [`Effect`]s it returns. Tested in virtual time in `rounds_tests/`.
//!
//! Per shared zone (a sink holding reports): a round writes this cluster's reports that
//! changed or are a third of `report_ttl` old (so they stay live), reports past a sixth
//! riding along, in one batch; reads every cluster's reports in one read; counts each
//! tenant's vote. A round started by this cluster's view changing always reads; a timer
//! round on a shared zone reads in this cluster's turn ([`stagger`]), and otherwise only
//! writes a heartbeat if one is due. One round per zone at a time; a change during a round
//! starts another right after it. A standby replica reads and counts but never writes.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use ho_config::{Discovered, Plan};
use tracing::{info, warn};

use super::leave::Leaving;
use super::report::{report_name, report_suffix, Owned, Report};
use super::vote::Tally;
use super::LocalView;
use crate::clock::Now;
use crate::hysteresis::Health;
use crate::metrics::{Metrics, ReportOpLabels, TenantLabel};
use crate::probe_limits::Throttle;
use crate::sink::reports::Rrset;
use crate::sink::SinkError;

mod count;
mod stagger;

pub use count::tally_without;

/// Paces warnings about reports that cannot be written, read or parsed.
static REPORT_WARNINGS: Throttle = Throttle::new();
const WARN_EVERY: Duration = Duration::from_secs(10);

/// What the shell must do.
#[derive(Debug)]
pub(crate) enum Effect {
    /// Run this round's exchange with the zone, then hand the results to
    /// [`RoundsCore::finished`].
    Exchange(Round),
    /// Hand this tally to the tracker.
    Voted {
        /// Tenant name.
        tenant: String,
        /// The vote over the live reports.
        tally: Arc<Tally>,
    },
    /// The addresses other clusters contribute changed: the engine probes these.
    Discovered(Vec<Discovered>),
    /// A voting tenant was removed with `cleanup_on_remove`: take this cluster's report out
    /// of its zone and publish what the remaining clusters decide.
    Leave(Box<Leaving>),
}

/// One round on one zone: what to write (in one change) and what to read (in one read).
#[derive(Debug)]
pub(crate) struct Round {
    /// The sink whose zone it is.
    pub sink: String,
    /// This cluster's reports to write: (rrset name, texts); empty: write nothing.
    pub writes: Vec<Rrset>,
    /// The report suffixes to read.
    pub suffixes: Vec<String>,
    /// Whether this round reads the zone (a timer round out of its turn only writes).
    pub read: bool,
    /// Whether this replica wrote its cluster's reports in this round (the writer, or any
    /// replica of a store it holds itself).
    leads: bool,
    exchanges: Vec<Exchange>,
}

/// What the zone answered to a round's exchange.
#[derive(Debug)]
pub(crate) struct Answers {
    /// The batched write of this cluster's reports (`None`: nothing was due).
    pub written: Option<Result<(), SinkError>>,
    /// Every cluster's report rrsets under the round's suffixes (`None`: not read).
    pub read: Option<Result<Vec<Rrset>, SinkError>>,
}

/// One tenant's part of a round.
#[derive(Debug)]
struct Exchange {
    tenant: String,
    /// Its first domain, under which the reports live.
    domain: String,
    /// This cluster's report now.
    own: Report,
    /// Whether this round writes it.
    write: bool,
}

/// Whether a round runs on a zone, and whether another must follow it; when its reports
/// were last read, and whether reads have failed since.
#[derive(Default)]
struct Rounds {
    running: bool,
    /// A round must follow the running one: `Some(Kick::View)` when it must read.
    again: Option<Kick>,
    /// The last successful read (this process's monotonic clock).
    last_read: Option<tokio::time::Instant>,
    /// Reads failed since `last_read`: this reader has been blind to the zone.
    blind: bool,
}

/// What this cluster last wrote for a tenant: a report is written again when its content
/// changes or it ages.
struct Written {
    owned: Vec<Owned>,
    down: Vec<IpAddr>,
    at_ms: u64,
}

/// What the rounds keep per voting tenant.
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
    /// The live clusters of the last tally.
    live: Vec<String>,
    discovered: Vec<Discovered>,
    /// Per cluster: its report's stamp as last read, and when (this process's monotonic
    /// clock) that stamp was first read, moved later by the time this reader could not
    /// read the zone. See `RoundsCore::count_votes`.
    stamps: BTreeMap<String, (u64, tokio::time::Instant)>,
}

/// Why a round starts: a timer round reads in its turn, a view change reads at once (the
/// greater of two kicks wins when both wait for a running round).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kick {
    Timer,
    View,
}

/// The report rounds of every shared zone (see the module doc).
pub(crate) struct RoundsCore {
    cluster: Option<String>,
    plan: Arc<Plan>,
    /// Sinks that hold reports, by name.
    stores: BTreeSet<String>,
    metrics: Arc<Metrics>,
    tenants: HashMap<String, TenantVotes>,
    /// Rounds by sink name (one zone each).
    rounds: HashMap<String, Rounds>,
    /// What was last announced in [`Effect::Discovered`].
    discovered: Vec<Discovered>,
}

impl RoundsCore {
    /// Rounds for `plan` over the zones of `stores`; none runs before [`Self::set_cluster`].
    pub(crate) fn new(plan: Arc<Plan>, stores: BTreeSet<String>, metrics: Arc<Metrics>) -> Self {
        RoundsCore {
            cluster: None,
            plan,
            stores,
            metrics,
            tenants: HashMap::new(),
            rounds: HashMap::new(),
            discovered: Vec::new(),
        }
    }

    /// The plan running.
    pub(crate) fn plan(&self) -> Arc<Plan> {
        self.plan.clone()
    }

    /// This instance's cluster id, once known.
    pub(crate) fn cluster(&self) -> Option<&str> {
        self.cluster.as_deref()
    }

    /// The interval of the round timer.
    pub(crate) fn interval(&self) -> Duration {
        self.plan.multi_cluster.report_interval
    }

    /// This instance's cluster id is known: rounds start on every zone.
    pub(crate) fn set_cluster(&mut self, id: String, now: Now, fx: &mut Vec<Effect>) {
        self.cluster = Some(id);
        self.tick(now, fx);
    }

    /// The round timer: a round on every zone.
    pub(crate) fn tick(&mut self, now: Now, fx: &mut Vec<Effect>) {
        let stores: Vec<String> = self.stores.iter().cloned().collect();
        for store in stores {
            self.kick(&store, Kick::Timer, now, fx);
        }
    }

    /// This cluster's view of a voting tenant changed: a round on its zone now.
    pub(crate) fn view(&mut self, view: LocalView, now: Now, fx: &mut Vec<Effect>) {
        let tenant = view.tenant.clone();
        self.tenants.entry(tenant.clone()).or_default().view = Some(view);
        let plan = self.plan.clone();
        let store = plan
            .tenants
            .iter()
            .find(|t| t.name == tenant)
            .and_then(|t| self.store_of(t));
        if let Some(store) = store {
            self.kick(&store, Kick::View, now, fx);
        }
    }

    /// A reload: the new plan and the sinks holding reports; tenants no longer voting are
    /// forgotten, with what they discovered. A voting tenant the plan removes with
    /// `cleanup_on_remove` leaves its zone (on the replica that writes it).
    pub(crate) fn retarget(
        &mut self,
        plan: Arc<Plan>,
        stores: BTreeSet<String>,
        now: Now,
        fx: &mut Vec<Effect>,
    ) {
        if let Some(cluster) = self.cluster.clone() {
            for leaving in self.leaving(&plan, &cluster, now) {
                info!(tenant = %leaving.tenant.name, sink = %leaving.sink, "voting tenant removed: taking this cluster's report out of the shared zone");
                fx.push(Effect::Leave(Box::new(leaving)));
            }
        }
        self.plan = plan;
        self.stores = stores;
        let plan = self.plan.clone();
        self.tenants.retain(|name, _| {
            plan.tenants
                .iter()
                .any(|t| &t.name == name && t.multi_cluster)
        });
        self.announce_discovered(fx);
    }

    /// The voting tenants of the running plan that `new` removes and that asked for
    /// `cleanup_on_remove`, on zones this replica writes.
    fn leaving(&self, new: &Plan, cluster: &str, now: Now) -> Vec<Leaving> {
        let staying: BTreeSet<&str> = new.tenants.iter().map(|t| t.name.as_str()).collect();
        self.plan
            .tenants
            .iter()
            .filter(|t| {
                t.multi_cluster && t.cleanup_on_remove && !staying.contains(t.name.as_str())
            })
            .filter_map(|t| {
                let sink = self.store_of(t)?;
                let writes_here =
                    now.writer || self.plan.sinks.get(&sink).is_some_and(|s| !s.spec.shared());
                writes_here.then(|| Leaving {
                    sinks: t
                        .sinks
                        .iter()
                        .filter(|s| self.stores.contains(*s))
                        .cloned()
                        .collect(),
                    report: report_name(cluster, &t.domains[0]),
                    suffix: report_suffix(&t.domains[0]),
                    tenant: t.clone(),
                    sink,
                })
            })
            .collect()
    }

    /// The sink whose zone holds `tenant`'s reports: its first sink that can (every cluster
    /// must list the same one first).
    fn store_of(&self, tenant: &ho_config::Tenant) -> Option<String> {
        tenant
            .sinks
            .iter()
            .find(|s| self.stores.contains(*s))
            .cloned()
    }

    /// Starts a round on the zone of sink `sink` for every voting tenant reporting there,
    /// or marks one to follow the running one. One round is at most one batched write and
    /// one read of the zone, whatever the number of tenants: the zone API budget grows
    /// with the clusters, not the tenants.
    fn kick(&mut self, sink: &str, why: Kick, now: Now, fx: &mut Vec<Effect>) {
        let Some(cluster) = self.cluster.clone() else {
            return;
        };
        if !self.stores.contains(sink) {
            return;
        }
        let rounds = self.rounds.entry(sink.to_owned()).or_default();
        if rounds.running {
            rounds.again = rounds.again.max(Some(why));
            return;
        }
        let now_ms = unix_ms(now.clock.wall);
        let mut exchanges = self.exchanges(sink, &cluster, now_ms);
        if exchanges.is_empty() {
            return;
        }
        // Writes happen only when one report is due, and only on the writer: a standby's
        // leader writes this cluster's reports to a zone the replicas share. A store each
        // replica holds itself (the embedded server's) is written by every replica.
        let writes_here = now.writer || self.plan.sinks.get(sink).is_some_and(|s| !s.spec.shared());
        let any_due = exchanges.iter().any(|(_, due)| *due);
        let exchanges: Vec<Exchange> = exchanges
            .drain(..)
            .map(|(mut e, _)| {
                e.write &= any_due && writes_here;
                e
            })
            .collect();
        let writes: Vec<Rrset> = exchanges
            .iter()
            .filter(|e| e.write)
            .map(|e| Rrset::new(report_name(&cluster, &e.domain), e.own.encode()))
            .collect();
        let read = why == Kick::View || self.turn_to_read(sink, &cluster, now);
        if !read && writes.is_empty() {
            return;
        }
        let suffixes = exchanges.iter().map(|e| report_suffix(&e.domain)).collect();
        self.rounds.entry(sink.to_owned()).or_default().running = true;
        fx.push(Effect::Exchange(Round {
            sink: sink.to_owned(),
            writes,
            suffixes,
            read,
            leads: writes_here,
            exchanges,
        }));
    }

    /// Each voting tenant of zone `sink` with a view: its exchange (`write`: due or riding
    /// along) and whether it is due.
    fn exchanges(&self, sink: &str, cluster: &str, now_ms: u64) -> Vec<(Exchange, bool)> {
        let ttl_ms = self.plan.multi_cluster.report_ttl.as_millis() as u64;
        let mut out = Vec::new();
        for t in self.plan.tenants.iter().filter(|t| t.multi_cluster) {
            if self.store_of(t).as_deref() != Some(sink) {
                continue;
            }
            let Some(view) = self.tenants.get(&t.name).and_then(|s| s.view.as_ref()) else {
                continue;
            };
            let own = own_report(&self.plan.owner_id, cluster, now_ms, view);
            // Due: its content changed, or a third of the TTL passed (it must stay live).
            // Reports past a sixth ride along with a due one, so the heartbeats of many
            // tenants share writes.
            let (due, rides) = match &self.tenants[&t.name].written {
                None => (true, true),
                Some(w) => {
                    let age = now_ms.saturating_sub(w.at_ms);
                    let changed = w.owned != own.owned || w.down != own.down;
                    (changed || age >= ttl_ms / 3, age >= ttl_ms / 6)
                }
            };
            let exchange = Exchange {
                tenant: t.name.clone(),
                domain: t.domains[0].clone(),
                own,
                write: due || rides,
            };
            out.push((exchange, due));
        }
        out
    }

    /// A round's exchange ended with the zone's `answers`. Counts each tenant's vote, then starts the round that was asked for
    /// meanwhile, if any.
    pub(crate) fn finished(
        &mut self,
        round: Round,
        answers: Answers,
        now: Now,
        fx: &mut Vec<Effect>,
    ) {
        let sink = round.sink.clone();
        self.count_round(round, answers, now, fx);
        let rounds = self.rounds.entry(sink.clone()).or_default();
        rounds.running = false;
        if let Some(why) = rounds.again.take() {
            self.kick(&sink, why, now, fx);
        }
    }

    /// Whether a timer round on zone `sink` reads: always on a store each replica holds
    /// itself, before the first good read and after a failed one; on a shared zone, in
    /// this cluster's turn among the clusters the last reads found live ([`stagger`]).
    fn turn_to_read(&self, sink: &str, cluster: &str, now: Now) -> bool {
        let shared = self.plan.sinks.get(sink).is_some_and(|s| s.spec.shared());
        let Some(rounds) = self.rounds.get(sink).filter(|_| shared) else {
            return true;
        };
        let Some(last_read) = rounds.last_read.filter(|_| !rounds.blind) else {
            return true;
        };
        let mono = now.clock.mono;
        let mut members: BTreeSet<&str> = BTreeSet::from([cluster]);
        let mut oldest_peer = Duration::ZERO;
        let tenants = (self.plan.tenants.iter())
            .filter(|t| t.multi_cluster && self.store_of(t).as_deref() == Some(sink))
            .filter_map(|t| self.tenants.get(&t.name));
        for state in tenants {
            members.extend(state.live.iter().map(String::as_str));
            let peers = state.live.iter().filter(|c| c.as_str() != cluster);
            for (_, since) in peers.filter_map(|c| state.stamps.get(c)) {
                oldest_peer = oldest_peer.max(mono.saturating_duration_since(*since));
            }
        }
        let turns = stagger::Turns {
            interval: self.plan.multi_cluster.report_interval,
            ttl: self.plan.multi_cluster.report_ttl,
            members: members.len(),
            rank: members.iter().position(|c| *c == cluster).unwrap_or(0),
        };
        let since_read = mono.saturating_duration_since(last_read);
        turns.reads(unix_ms(now.clock.wall), since_read, oldest_peer)
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
    crate::clock::since_epoch(t).as_millis() as u64
}
