//! Events taken in bulk: a run of consecutive transitions of one direction is judged once.
//! A mass failure of one tenant of 100,000 endpoints was 100,000 passes over the tenant
//! (about 5 ms each: minutes of one core, behind which the canary's observations waited
//! on the same thread); it is now one pass per run of whatever queued meanwhile.
//!
//! Within a run every verdict moves one way, so each name's condition moves one way too,
//! and changes at most once: a name a failure run makes serve a dead address changes at
//! the earliest first counted failure of an address it serves that the run put down; a
//! name a recovery run clears changes at the latest recovery of an address it serves,
//! the one that cleared it. Taken one at a time in the order they happened, the same.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

use super::{Book, Change};
use crate::events::Event;

/// Consecutive transitions of one direction, not yet judged.
struct Run {
    down: bool,
    /// The tenants with an endpoint they judge.
    tenants: HashSet<Arc<str>>,
    /// Each endpoint's date in the run: its failure's earliest first counted probe, or its
    /// latest recovery.
    dates: HashMap<String, u64>,
    /// The run's earliest failure or latest recovery: the date of a name no address of
    /// the run dates.
    bound: u64,
}

impl Run {
    fn new(down: bool, date: u64) -> Run {
        Run {
            down,
            tenants: HashSet::new(),
            dates: HashMap::new(),
            bound: date,
        }
    }

    /// Of two dates, the one the run keeps.
    fn pick(&self, a: u64, b: u64) -> u64 {
        if self.down {
            a.min(b)
        } else {
            a.max(b)
        }
    }
}

impl Book {
    /// Takes `events` in order, as [`Book::event`] takes one; consecutive transitions of
    /// one direction are judged once, when the run ends (see the module's comment).
    pub fn events(&mut self, events: &[Arc<Event>]) -> Vec<Change> {
        let mut changes = Vec::new();
        let mut run: Option<Run> = None;
        for event in events {
            let Some((target, endpoints, down, date)) = transition(event) else {
                if let Some(run) = run.take() {
                    changes.extend(self.close(run));
                }
                changes.extend(self.event(event));
                continue;
            };
            if let Some(open) = run.take_if(|r| r.down != down) {
                changes.extend(self.close(open));
            }
            let run = run.get_or_insert_with(|| Run::new(down, date));
            run.bound = run.pick(run.bound, date);
            let Some(tenants) = self.mark(target, endpoints, down, date) else {
                continue;
            };
            run.tenants.extend(tenants);
            for endpoint in endpoints {
                let kept = run.dates.get(endpoint).map_or(date, |&d| run.pick(d, date));
                run.dates.insert(endpoint.clone(), kept);
            }
        }
        if let Some(run) = run {
            changes.extend(self.close(run));
        }
        changes
    }

    /// Judges `run`'s tenants again.
    fn close(&mut self, run: Run) -> Vec<Change> {
        if !run.down {
            for tenant in &run.tenants {
                self.note_recovered(tenant, |name| run.dates.contains_key(name));
            }
        }
        // Each tenant's addresses the run dates: its endpoints the run left as it says
        // (a check of an endpoint that needs all of its checks down may fail alone).
        let mut dated: HashMap<&str, HashMap<IpAddr, u64>> = HashMap::new();
        for tenant in &run.tenants {
            let Some(served) = self.tenants.get(&**tenant) else {
                continue;
            };
            let addresses = (served.endpoints.iter())
                .filter_map(|e| {
                    let date = *run.dates.get(e.name)?;
                    let dead = (self.down.get(e.name)).is_some_and(|checks| e.is_down(checks));
                    (dead == run.down).then_some((e.address, date))
                })
                .collect();
            dated.insert(tenant, addresses);
        }
        let writer = self.writer;
        let date =
            |tenant: &str, served: &super::TenantServed, plan: &super::TenantPlan, name: &str| {
                let Some(dates) = dated.get(tenant) else {
                    return run.bound;
                };
                (plan.sinks.iter())
                    .flat_map(|sink| served.served(sink, name, plan, writer))
                    .flat_map(|(set, _)| set.iter())
                    .filter_map(|a| dates.get(a).copied())
                    .reduce(|a, b| run.pick(a, b))
                    .unwrap_or(run.bound)
            };
        let tenants = &run.tenants;
        self.settle_dated(|t| tenants.contains(t), date)
    }
}

/// A transition's check, endpoints, direction and date (a failure's first counted probe,
/// a recovery's time), in unix ms.
pub(super) fn transition(event: &Event) -> Option<(&str, &[String], bool, u64)> {
    let Event::Transition {
        at,
        target,
        endpoints,
        to,
        failing_since,
        ..
    } = event
    else {
        return None;
    };
    let down = *to == "down";
    let at = crate::clock::unix_millis(at.0);
    let date = match (down, failing_since) {
        (true, Some(since)) => crate::clock::unix_millis(since.0),
        _ => at,
    };
    Some((target, endpoints, down, date))
}

#[cfg(test)]
#[path = "runs_tests.rs"]
mod tests;
