//! Verdicts carried across a change of an endpoint's checks. A reload that gives an
//! endpoint (same name, same address) another check makes a new target, which starts
//! `unknown`; the endpoint's answer must not change for that alone: what was accepted
//! keeps serving until something valid replaces it. So until the new check's first verdict,
//! the endpoint is decided by the verdict it had before the reload (carried over any
//! number of reloads that come before that verdict). `/status` and the counts still show
//! the new check's own `unknown`: the carry decides publication, it judges nothing.

use std::collections::HashMap;
use std::net::IpAddr;

use ho_config::Plan;

use crate::hysteresis::Health;

use super::index::EndpointIx;

/// The endpoints of the running plan decided by a carried verdict, and that verdict.
#[derive(Debug, Default)]
pub(super) struct Carried(HashMap<EndpointIx, Health>);

impl Carried {
    /// The carries for `new` after a reload from `old`: each endpoint of `new` with no
    /// verdict (`verdict`, over `new`) that `old` had under the same name and address with
    /// one (`before`, over `old`: its verdict, or what it carried).
    pub(super) fn across(
        old: &Plan,
        before: impl Fn(EndpointIx) -> Health,
        new: &Plan,
        verdict: impl Fn(EndpointIx) -> Health,
    ) -> Carried {
        let unknown: Vec<EndpointIx> = (0..new.endpoints.len())
            .map(EndpointIx)
            .filter(|&e| verdict(e) == Health::Unknown)
            .collect();
        if unknown.is_empty() {
            return Carried::default();
        }
        // Sets, not scans: a reload may hold 100,000 endpoints.
        let had: HashMap<(&str, IpAddr), EndpointIx> = old
            .endpoints
            .iter()
            .enumerate()
            .map(|(i, e)| ((&*e.name, e.address), EndpointIx(i)))
            .collect();
        let carried = unknown.into_iter().filter_map(|e| {
            let ep = &new.endpoints[e.0];
            let was = before(*had.get(&(&*ep.name, ep.address))?);
            (was != Health::Unknown).then_some((e, was))
        });
        Carried(carried.collect())
    }

    /// What decides endpoint `e` whose own verdict is `verdict`: that verdict once it has
    /// one, else the carried one.
    pub(super) fn deciding(&self, e: EndpointIx, verdict: Health) -> Health {
        match verdict {
            Health::Unknown => self.0.get(&e).copied().unwrap_or(Health::Unknown),
            judged => judged,
        }
    }

    /// Endpoint `e` has a verdict of its own now: a later `unknown` (a ring member that
    /// stops probing it) is no reason to bring the old one back.
    pub(super) fn settle(&mut self, e: EndpointIx) {
        self.0.remove(&e);
    }
}
