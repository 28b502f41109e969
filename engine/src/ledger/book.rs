//! What each name is serving now, worked out from the engine's events and the answer
//! canary's observations: the ledger's pure core. Every input is timestamped by its
//! caller and every output is a change of one name's [`Condition`] at a time, so the
//! whole of it is tested without clocks, sockets or files.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Arc;

use crate::canary::Observation;
use crate::events::Event;

/// What resolvers were handed for a name, as far as the orchestrator can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Served {
    /// Not known: before the first write of the name, or while the orchestrator was not
    /// recording (stopped, or not the writer). Left out of every availability figure.
    Unknown = 0,
    /// Addresses, none of them of an endpoint judged down.
    Answered = 1,
    /// At least one address of an endpoint that was down (from the first failed probe
    /// that counted toward the verdict until the served answer dropped it).
    DeadAddress = 2,
    /// Nothing: a back end held no address for the name.
    Unanswered = 3,
}

impl Served {
    /// The name used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Served::Unknown => "unknown",
            Served::Answered => "answered",
            Served::DeadAddress => "dead_address",
            Served::Unanswered => "unanswered",
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

    /// One byte: the served kind in the low two bits, maintenance in the third.
    pub fn code(self) -> u8 {
        self.served as u8 | (u8::from(self.maintenance) << 2)
    }

    /// The condition of [`Condition::code`]; `None` for a byte no version wrote.
    pub fn of_code(code: u8) -> Option<Condition> {
        let served = match code & 3 {
            0 => Served::Unknown,
            1 => Served::Answered,
            2 => Served::DeadAddress,
            _ => Served::Unanswered,
        };
        (code < 8).then_some(Condition {
            served,
            maintenance: code & 4 != 0,
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
    /// Its endpoints' names.
    pub endpoints: Vec<String>,
    /// Its endpoints' addresses: a verdict change of one of them re-judges its names.
    pub addresses: BTreeSet<IpAddr>,
}

/// Published sets kept per tenant for writes that report an older sequence number.
const PUBLISHED_KEPT: usize = 32;

/// One tenant's published sets and what each of its sinks serves.
#[derive(Default)]
struct TenantServed {
    plan: Option<TenantPlan>,
    published: VecDeque<(u64, Arc<[IpAddr]>)>,
    /// What each sink reported writing.
    written: HashMap<String, Arc<[IpAddr]>>,
    /// What the canary saw, by (sink, name, location asked from).
    observed: HashMap<(String, String, Option<String>), Arc<[IpAddr]>>,
}

impl TenantServed {
    /// What `sink` serves for `name`, as far as known: what it reported writing (while
    /// this replica writes it), or what the canary saw it answer from each place it asks
    /// from.
    fn served<'a>(
        &'a self,
        sink: &'a str,
        name: &'a str,
        plan: &TenantPlan,
        writer: bool,
    ) -> Box<dyn Iterator<Item = &'a Arc<[IpAddr]>> + 'a> {
        if plan.observed.contains(sink) {
            Box::new(
                (self.observed.iter())
                    .filter(move |((s, n, _), _)| s == sink && n == name)
                    .map(|(_, served)| served),
            )
        } else if writer || !plan.shared.contains(sink) {
            Box::new(self.written.get(sink).into_iter())
        } else {
            Box::new(std::iter::empty())
        }
    }
}

/// The conditions of every name, kept current from events and observations.
pub struct Book {
    tenants: BTreeMap<String, TenantServed>,
    /// Addresses with a target judged down: the target's key and its first counted failure.
    dead: HashMap<IpAddr, BTreeMap<String, u64>>,
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
            dead: HashMap::new(),
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
        for plan in tenants {
            let entry = self.tenants.entry(plan.tenant.clone()).or_default();
            entry.written.retain(|sink, _| plan.sinks.contains(sink));
            entry.observed.retain(|(sink, name, geo), _| {
                plan.observed.contains(sink)
                    && plan.names.contains(name)
                    && geo.as_ref().is_none_or(|g| plan.vantages.contains(g))
            });
            entry.plan = Some(plan);
        }
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
        let at = crate::clock::unix_millis(event.at().0);
        match event {
            Event::Transition {
                target,
                address,
                to,
                failing_since,
                ..
            } => {
                let since = failing_since.map(|s| crate::clock::unix_millis(s.0));
                self.transition(target, *address, *to == "down", since.unwrap_or(at), at)
            }
            Event::Publish {
                tenant,
                seq,
                addresses,
                ..
            } => {
                if let Some(t) = self.tenants.get_mut(tenant) {
                    if t.published.len() == PUBLISHED_KEPT {
                        t.published.pop_front();
                    }
                    t.published.push_back((*seq, addresses.as_slice().into()));
                }
                Vec::new()
            }
            Event::SinkWrite {
                sink,
                tenant,
                seq,
                result,
                ..
            } if *result != "error" => {
                let Some(t) = self.tenants.get_mut(tenant) else {
                    return Vec::new();
                };
                let Some((_, set)) = t.published.iter().find(|(s, _)| s == seq) else {
                    return Vec::new();
                };
                t.written.insert(sink.clone(), set.clone());
                self.settle(|t| t == tenant.as_str(), at)
            }
            Event::Held { endpoints, .. } => {
                self.held = endpoints.iter().cloned().collect();
                self.settle(|_| true, at)
            }
            _ => Vec::new(),
        }
    }

    /// Target `target` of `address` went down (first counted failure at `since`) or up (at
    /// `at`): only the tenants holding the address are judged again, so a wave of a
    /// thousand transitions does not re-judge every name a thousand times.
    fn transition(
        &mut self,
        target: &str,
        address: IpAddr,
        down: bool,
        since: u64,
        at: u64,
    ) -> Vec<Change> {
        let targets = self.dead.entry(address).or_default();
        let at = if down {
            targets.insert(target.to_owned(), since);
            since
        } else {
            targets.remove(target);
            if targets.is_empty() {
                self.dead.remove(&address);
            }
            at
        };
        let holding: BTreeSet<String> = self
            .tenants
            .iter()
            .filter(|(_, t)| {
                t.plan
                    .as_ref()
                    .is_some_and(|p| p.addresses.contains(&address))
            })
            .map(|(name, _)| name.clone())
            .collect();
        self.settle(|t| holding.contains(t), at)
    }

    /// The canary saw what `o` says was served.
    pub fn observed(&mut self, o: &Observation) -> Vec<Change> {
        let Some(t) = self.tenants.get_mut(&o.tenant) else {
            return Vec::new();
        };
        let key = (o.sink.clone(), o.name.clone(), o.geo.clone());
        t.observed.insert(key, o.addresses.clone());
        self.settle(|t| t == o.tenant, o.at)
    }

    /// Works out the names of the tenants `which` picks again, each judged by the sinks
    /// whose answer is known (a sink not yet written or observed is left out); a name whose condition
    /// differs changes at `at`, or at its last change when that is later (an input dated
    /// back, a failure's first probe, never reorders a name's history).
    fn settle(&mut self, which: impl Fn(&str) -> bool, at: u64) -> Vec<Change> {
        let mut changes = Vec::new();
        for (tenant, served) in &self.tenants {
            if !which(tenant) {
                continue;
            }
            let Some(plan) = &served.plan else { continue };
            let maintenance = plan.endpoints.iter().any(|e| self.held.contains(e));
            for name in &plan.names {
                let sets: Vec<&Arc<[IpAddr]>> = plan
                    .sinks
                    .iter()
                    .flat_map(|sink| served.served(sink, name, plan, self.writer))
                    .collect();
                let kind = if sets.is_empty() {
                    Served::Unknown
                } else if sets.iter().any(|s| s.is_empty()) {
                    Served::Unanswered
                } else if sets
                    .iter()
                    .flat_map(|s| s.iter())
                    .any(|a| self.dead.contains_key(a))
                {
                    Served::DeadAddress
                } else {
                    Served::Answered
                };
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
}

#[cfg(test)]
#[path = "book_tests.rs"]
mod tests;
