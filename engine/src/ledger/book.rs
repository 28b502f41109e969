//! What each name is serving now, worked out from the engine's events and the answer
//! canary's observations: the ledger's pure core. Every input is timestamped by its
//! caller and every output is a change of one name's [`Condition`] at a time, so the
//! whole of it is tested without clocks, sockets or files.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

use ho_config::Composite;

use crate::canary::Observation;
use crate::events::Event;
pub use check_key::CheckKey;
use endpoints::Endpoints;
use judged::JudgedBy;
use published::Published;

/// What resolvers were handed for a name, as far as the orchestrator can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Served {
    /// Not known: before the first write of the name, or while the orchestrator was not
    /// recording (stopped, or not the writer). Left out of every availability figure.
    Unknown = 0,
    /// Addresses, each one the decision in force included and none of them of one of the
    /// name's own endpoints judged down.
    Answered = 1,
    /// At least one address whose endpoint of the name's tenant was judged down by its own
    /// checks (from the first failed probe that counted toward the verdict until the served
    /// answer dropped it). Another tenant's endpoint failing at the same address, or a check
    /// this tenant does not use, is not this name's concern.
    DeadAddress = 2,
    /// Nothing: a back end held no address for the name.
    Unanswered = 3,
    /// At least one address no decision in force included: an edit by hand, another
    /// writer, a back end serving a stale copy. Counted against availability like a dead
    /// address, since resolvers were handed an address nobody checked for this name.
    WrongAddress = 4,
}

impl Served {
    /// Every condition that is known, the figures' denominator.
    pub const KNOWN: [Served; 4] = [
        Served::Answered,
        Served::DeadAddress,
        Served::Unanswered,
        Served::WrongAddress,
    ];

    /// The name used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Served::Unknown => "unknown",
            Served::Answered => "answered",
            Served::DeadAddress => "dead_address",
            Served::Unanswered => "unanswered",
            Served::WrongAddress => "wrong_address",
        }
    }
}

/// A name's condition: what it served, and whether an operator held one of its
/// endpoints (drained or forced) meanwhile, which availability "without maintenance"
/// leaves out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Condition {
    /// What it served.
    pub served: Served,
    /// An operator held one of its endpoints.
    pub maintenance: bool,
}

impl Condition {
    /// Not recorded.
    pub const UNKNOWN: Condition = Condition {
        served: Served::Unknown,
        maintenance: false,
    };

    /// Four bits: the served kind in the low three, maintenance in the fourth.
    pub fn code(self) -> u8 {
        self.served as u8 | (u8::from(self.maintenance) << 3)
    }

    /// The condition of [`Condition::code`]; `None` for a code no version wrote.
    pub fn of_code(code: u8) -> Option<Condition> {
        let served = match code & 7 {
            0 => Served::Unknown,
            1 => Served::Answered,
            2 => Served::DeadAddress,
            3 => Served::Unanswered,
            4 => Served::WrongAddress,
            _ => return None,
        };
        (code < 16).then_some(Condition {
            served,
            maintenance: code & 8 != 0,
        })
    }

    /// The condition of a code of the first file format (`HOL1`: the served kind in two
    /// bits, maintenance in the third, no wrong address).
    pub fn of_code_v1(code: u8) -> Option<Condition> {
        (code < 8).then(|| Condition {
            maintenance: code & 4 != 0,
            ..Condition::of_code(code & 3).expect("0..4 are conditions")
        })
    }
}

/// A name's condition changed at `at` (unix milliseconds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The name (lower case, no trailing dot).
    pub name: String,
    /// Its tenant.
    pub tenant: String,
    /// When.
    pub at: u64,
    /// Its condition from then on.
    pub condition: Condition,
}

/// One tenant as the ledger needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantPlan {
    /// Tenant name.
    pub tenant: String,
    /// Its names.
    pub names: Vec<String>,
    /// Its sinks.
    pub sinks: Vec<String>,
    /// Its sinks whose served answer the canary observes: for these the canary's
    /// observation is what was served, not the write the sink reported.
    pub observed: BTreeSet<String>,
    /// Its sinks that only the writer writes (back ends the replicas share): while this
    /// replica is not the writer, what it last wrote to them is no longer known to be
    /// served.
    pub shared: BTreeSet<String>,
    /// The locations its `geo` names are also asked from (each a served answer of its
    /// own: one location handed a dead address is the name serving one).
    pub vantages: BTreeSet<String>,
    /// Its endpoints (at most one per address: the plan's invariant).
    pub endpoints: Vec<EndpointPlan>,
}

/// One endpoint of a tenant as the ledger judges it: by its own checks, combined as the
/// tracker combines them, so a name is never charged for a check it does not use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointPlan {
    /// The endpoint's name (what operators hold).
    pub name: String,
    /// Its address.
    pub address: IpAddr,
    /// Its checks' target keys: `Endpoint::target`'s first, then `Composite::also`'s.
    pub checks: Box<[CheckKey]>,
    /// How its checks combine (none: its one check decides). Boxed: most endpoints have
    /// one check, and inline it was a third of every endpoint's plan.
    pub composite: Option<Box<Composite>>,
}

/// Published sets kept per tenant for writes that report an older sequence number.
const PUBLISHED_KEPT: usize = 32;

/// One tenant's published sets and what each of its sinks serves.
#[derive(Default)]
struct TenantServed {
    /// Its plan, without its endpoints: those are kept in `endpoints`.
    plan: Option<TenantPlan>,
    endpoints: Endpoints,
    published: Published,
    /// What each sink reported writing (see [`Written`]).
    written: HashMap<String, Written>,
    /// What the canary saw and when it was answered, by (sink, name, location asked from).
    observed: HashMap<(String, String, Option<String>), Seen>,
    /// `[multi_cluster]`: the addresses the clusters' last vote judged down. A voting
    /// tenant's names are judged by the vote, so every cluster charges the same time
    /// (a cluster in the minority does not charge what the vote kept).
    voted_down: Option<BTreeSet<IpAddr>>,
    /// Voting tenants: when the canary last saw each name's answer drop each address (see
    /// [`voted`]).
    dropped: HashMap<(String, IpAddr), u64>,
    /// Voting tenants: addresses the vote kept while this cluster's own checks judged
    /// them down, with that failure's first counted probe (see [`voted`]).
    disputed: HashMap<IpAddr, u64>,
    /// Voting tenants: addresses the vote still withdraws that this cluster's own checks
    /// saw recover since (see [`voted`]).
    recovered: BTreeSet<IpAddr>,
}

/// An answer the canary saw: its addresses, and when it was answered (unix ms).
type Seen = (Arc<[IpAddr]>, u64);

/// What a sink serves for a name, each set with when the canary was answered it (`None`:
/// known from the sink's own write).
type ServedSets<'a> = Box<dyn Iterator<Item = (&'a Arc<[IpAddr]>, Option<u64>)> + 'a>;

/// A sink's last reported write of a tenant.
struct Written {
    /// The snapshot's sequence number and addresses.
    seq: u64,
    set: Arc<[IpAddr]>,
    /// When the write was reported (unix ms).
    at: u64,
    /// The sequence number of the write before: what was in force for an answer the
    /// canary got before this write landed, though its observation reaches the book after
    /// the write's report (they come by two paths).
    before: u64,
}

impl TenantServed {
    /// What `sink` serves for `name`, as far as known, each set with when the canary was
    /// answered it: what it reported writing (while this replica writes it), or what the
    /// canary saw it answer from each place it asks from.
    fn served<'a>(
        &'a self,
        sink: &'a str,
        name: &'a str,
        plan: &TenantPlan,
        writer: bool,
    ) -> ServedSets<'a> {
        if plan.observed.contains(sink) {
            Box::new(
                (self.observed.iter())
                    .filter(move |((s, n, _), _)| s == sink && n == name)
                    .map(|(_, (served, at))| (served, Some(*at))),
            )
        } else if writer || !plan.shared.contains(sink) {
            Box::new(self.written.get(sink).map(|w| (&w.set, None)).into_iter())
        } else {
            Box::new(std::iter::empty())
        }
    }

    /// The addresses a decision in force for what `sink` serves (answered to the canary at
    /// `seen`) included: the sink's last reported write or any decision since (a write on
    /// its way); for an answer from before that write landed, the write before. `None`
    /// before any decision is known (nothing to compare with, as after a restart).
    fn decided(&self, sink: &str, seen: Option<u64>) -> Option<HashSet<IpAddr>> {
        if self.published.is_empty() {
            return None;
        }
        let from = match self.written.get(sink) {
            None => 0,
            Some(w) if seen.is_some_and(|seen| seen <= w.at) => w.before,
            Some(w) => w.seq,
        };
        Some(self.published.held_since(from))
    }
}

/// The conditions of every name, kept current from events and observations.
pub struct Book {
    tenants: BTreeMap<String, TenantServed>,
    /// Checks judged down, by endpoint: each check's target key and its first counted
    /// failure. Kept per endpoint, since two endpoints' checks may share a key (one URL
    /// asked with two `Host` headers).
    /// A list, not a map: an endpoint has one check or a few, and a mass failure puts
    /// every endpoint here at once.
    down: HashMap<String, Vec<(CheckKey, u64)>>,
    /// The tenants each target key judges an endpoint of.
    judged_by: JudgedBy,
    /// Endpoints an operator holds.
    held: BTreeSet<String>,
    /// Each name's condition and since when.
    current: BTreeMap<String, (Condition, u64)>,
    /// Whether this replica writes the shared back ends (always, without an election).
    writer: bool,
}

impl Book {
    /// A book that knows the endpoints operators hold at start (kept across restarts).
    pub fn new(held: Vec<String>) -> Book {
        Book {
            tenants: BTreeMap::new(),
            down: HashMap::new(),
            judged_by: JudgedBy::default(),
            held: held.into_iter().collect(),
            current: BTreeMap::new(),
            writer: true,
        }
    }

    /// This replica became the writer, or stopped being it, at `at`.
    pub fn role(&mut self, writer: bool, at: u64) -> Vec<Change> {
        if self.writer == writer {
            return Vec::new();
        }
        self.writer = writer;
        self.settle(|_| true, at)
    }

    /// Each name's condition now, and since when.
    pub fn current(&self) -> impl Iterator<Item = (&str, Condition, u64)> {
        self.current
            .iter()
            .map(|(n, (c, at))| (n.as_str(), *c, *at))
    }

    /// The tenant of `name`.
    pub fn tenant_of(&self, name: &str) -> Option<&str> {
        self.tenants
            .iter()
            .find(|(_, t)| {
                t.plan
                    .as_ref()
                    .is_some_and(|p| p.names.iter().any(|n| n == name))
            })
            .map(|(t, _)| t.as_str())
    }

    /// Takes the tenants of a (new) plan at `at`: names no longer configured become
    /// unknown; what sinks serve is kept for the tenants that stay.
    pub fn plan(&mut self, tenants: Vec<TenantPlan>, at: u64) -> Vec<Change> {
        let keep: BTreeSet<String> = tenants.iter().map(|t| t.tenant.clone()).collect();
        self.tenants.retain(|t, _| keep.contains(t));
        for mut plan in tenants {
            let entry = self.tenants.entry(plan.tenant.clone()).or_default();
            entry.written.retain(|sink, _| plan.sinks.contains(sink));
            entry.observed.retain(|(sink, name, geo), _| {
                plan.observed.contains(sink)
                    && plan.names.contains(name)
                    && geo.as_ref().is_none_or(|g| plan.vantages.contains(g))
            });
            entry.endpoints = Endpoints::of(std::mem::take(&mut plan.endpoints));
            entry.plan = Some(plan);
        }
        self.judged_by = JudgedBy::of(
            (self.tenants.iter())
                .map(|(tenant, served)| (tenant.as_str(), served.endpoints.keys())),
        );
        let names: BTreeSet<String> = self
            .tenants
            .values()
            .filter_map(|t| t.plan.as_ref())
            .flat_map(|p| p.names.iter().cloned())
            .collect();
        let gone: Vec<String> = self
            .current
            .keys()
            .filter(|n| !names.contains(*n))
            .cloned()
            .collect();
        let mut changes = Vec::new();
        for name in gone {
            if let Some((condition, _)) = self.current.remove(&name) {
                if condition != Condition::UNKNOWN {
                    changes.push(Change {
                        name,
                        tenant: String::new(),
                        at,
                        condition: Condition::UNKNOWN,
                    });
                }
            }
        }
        changes.extend(self.settle(|_| true, at));
        changes
    }

    /// Takes one event; the names whose condition it changed.
    pub fn event(&mut self, event: &Event) -> Vec<Change> {
        if let Some((target, endpoints, down, date)) = runs::transition(event) {
            return self.transition(target, endpoints, down, date);
        }
        let at = crate::clock::unix_millis(event.at().0);
        match event {
            Event::Publish {
                tenant,
                seq,
                addresses,
                voted_down,
                ..
            } => {
                let Some(t) = self.tenants.get_mut(tenant) else {
                    return Vec::new();
                };
                t.published.push(*seq, addresses);
                let voted = voted_down.as_ref().map(|v| v.iter().copied().collect());
                self.vote(tenant, voted, at)
            }
            Event::SinkWrite {
                sink,
                tenant,
                seq,
                result,
                ..
            } if *result != "error" => self.wrote(sink, tenant, *seq, at),
            Event::Held { endpoints, .. } => {
                self.held = endpoints.iter().cloned().collect();
                self.settle(|_| true, at)
            }
            _ => Vec::new(),
        }
    }

    /// `sink` reported writing `tenant`'s snapshot `seq` at `at`: that write is in force
    /// from now, the one before for answers the canary got until now.
    fn wrote(&mut self, sink: &str, tenant: &str, seq: u64, at: u64) -> Vec<Change> {
        let Some(t) = self.tenants.get_mut(tenant) else {
            return Vec::new();
        };
        let Some(set) = t.published.set(seq) else {
            return Vec::new();
        };
        let before = t.written.get(sink).map_or(0, |w| w.seq);
        t.written.insert(
            sink.to_owned(),
            Written {
                seq,
                set,
                at,
                before,
            },
        );
        self.settle(|t| t == tenant, at)
    }

    /// Target `target` of `endpoints` went down (first counted failure at `date`) or up
    /// (at `date`): only the tenants with an endpoint it judges are judged again.
    fn transition(
        &mut self,
        target: &str,
        endpoints: &[String],
        down: bool,
        date: u64,
    ) -> Vec<Change> {
        let Some(tenants) = self.mark(target, endpoints, down, date) else {
            return Vec::new();
        };
        if !down {
            for tenant in &tenants {
                self.note_recovered(tenant, |name| endpoints.iter().any(|n| n == name));
            }
        }
        self.settle(|t| tenants.iter().any(|n| &**n == t), date)
    }

    /// Notes target `target`'s verdict on `endpoints`, without judging any name; the
    /// tenants with an endpoint it judges (none: no tenant's).
    fn mark(
        &mut self,
        target: &str,
        endpoints: &[String],
        down: bool,
        since: u64,
    ) -> Option<Vec<Arc<str>>> {
        let key = CheckKey::of(target);
        for endpoint in endpoints {
            if down {
                // Room for one: most endpoints have one check, and a mass failure puts
                // every endpoint here at once.
                let checks =
                    (self.down.entry(endpoint.clone())).or_insert_with(|| Vec::with_capacity(1));
                checks.retain(|(k, _)| *k != key);
                checks.push((key, since));
            } else if let Some(checks) = self.down.get_mut(endpoint.as_str()) {
                checks.retain(|(k, _)| *k != key);
                if checks.is_empty() {
                    self.down.remove(endpoint.as_str());
                }
            }
        }
        if !down && self.down.capacity() > 4 * self.down.len() + 64 {
            // What a mass failure grew, given back once most recovered.
            self.down.shrink_to_fit();
        }
        self.judged_by.tenants(key)
    }

    /// The canary saw what `o` says was served.
    pub fn observed(&mut self, o: &Observation) -> Vec<Change> {
        let Some(t) = self.tenants.get_mut(&o.tenant) else {
            return Vec::new();
        };
        let key = (o.sink.clone(), o.name.clone(), o.geo.clone());
        let before = t.observed.insert(key, (o.addresses.clone(), o.at));
        if t.voted_down.is_some() {
            let before = before.as_ref().map(|(set, _)| &**set);
            t.note_drops(&o.name, before, &o.addresses, o.at);
        }
        self.settle(|t| t == o.tenant, o.at)
    }

    /// Works out the names of the tenants `which` picks again, each judged by the sinks
    /// whose answer is known (a sink not yet written or observed is left out); a name whose condition
    /// differs changes at `at`, or at its last change when that is later (an input dated
    /// back, a failure's first probe, never reorders a name's history).
    fn settle(&mut self, which: impl Fn(&str) -> bool, at: u64) -> Vec<Change> {
        self.settle_dated(which, |_, _, _, _| at)
    }

    /// [`Book::settle`], a name that changes dated by `date` (its tenant, what it serves,
    /// its tenant's plan, the name), asked only of the names that change.
    fn settle_dated(
        &mut self,
        which: impl Fn(&str) -> bool,
        date: impl Fn(&str, &TenantServed, &TenantPlan, &str) -> u64,
    ) -> Vec<Change> {
        let mut changes = Vec::new();
        for (tenant, served) in &self.tenants {
            if !which(tenant) {
                continue;
            }
            let Some(plan) = &served.plan else { continue };
            let maintenance = served.endpoints.iter().any(|e| self.held.contains(e.name));
            let dead: BTreeSet<IpAddr> = match &served.voted_down {
                Some(voted) => voted.difference(&served.recovered).copied().collect(),
                None => (served.endpoints.iter())
                    .filter(|e| (self.down.get(e.name)).is_some_and(|checks| e.is_down(checks)))
                    .map(|e| e.address)
                    .collect(),
            };
            for name in &plan.names {
                let kind = self.judge(served, plan, name, &dead);
                let condition = Condition {
                    served: kind,
                    maintenance: maintenance && kind != Served::Unknown,
                };
                let now = self.current.get(name).copied();
                if now.map(|(c, _)| c) == Some(condition)
                    || (now.is_none() && condition == Condition::UNKNOWN)
                {
                    continue;
                }
                let at = date(tenant, served, plan, name);
                let at = now.map_or(at, |(_, since)| at.max(since));
                self.current.insert(name.clone(), (condition, at));
                changes.push(Change {
                    name: name.clone(),
                    tenant: tenant.clone(),
                    at,
                    condition,
                });
            }
        }
        changes
    }

    /// What `name` serves, from every sink whose answer is known: nothing anywhere beats a
    /// dead address, which beats an address no decision included.
    fn judge(
        &self,
        served: &TenantServed,
        plan: &TenantPlan,
        name: &str,
        dead: &BTreeSet<IpAddr>,
    ) -> Served {
        let sets: Vec<_> = (plan.sinks.iter())
            .flat_map(|sink| {
                (served.served(sink, name, plan, self.writer))
                    .map(move |(set, seen)| (sink.as_str(), set, seen))
            })
            .collect();
        let addresses = || {
            (sets.iter()).flat_map(|(sink, set, seen)| set.iter().map(move |a| (*sink, a, *seen)))
        };
        if sets.is_empty() {
            Served::Unknown
        } else if sets.iter().any(|(_, s, _)| s.is_empty()) {
            Served::Unanswered
        } else if addresses().any(|(_, a, _)| dead.contains(a)) {
            Served::DeadAddress
        } else if sets.iter().any(|(sink, set, seen)| {
            served.decided(sink, *seen).is_some_and(|decided| {
                // An address the vote withdrew is one the clusters decided on, not a stranger.
                set.iter().any(|a| {
                    !decided.contains(a)
                        && !served.voted_down.as_ref().is_some_and(|v| v.contains(a))
                })
            })
        }) {
            Served::WrongAddress
        } else {
            Served::Answered
        }
    }
}

mod check_key;
mod endpoints;
mod judged;
mod published;
mod runs;
mod voted;

#[cfg(test)]
#[path = "book_tests.rs"]
mod tests;
