//! A voting tenant's dead stretches. The clusters' vote withdraws an address a report
//! round (and the votes' hysteresis) after the probes judged it down, and another
//! cluster's write may take it out of the served answer before this cluster's own vote
//! does. A name is charged, as a tenant that does not vote is, from the first counted
//! failure of its own endpoint at that address until the served answer dropped it, also
//! when the drop came first; a cluster that did not see the address fail, or whose vote
//! kept it after it saw it fail (the others saw it later), charges from the vote. The
//! stretch ends when the answer drops the address, or when this cluster's own checks see
//! it recover, whichever comes first: the vote returns an address a report round after
//! the probes, and the others' writes may serve it again before this cluster's vote does,
//! which is a live address served, not a dead one. An address the vote kept is never charged, whatever one cluster saw.

use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;

use super::endpoints::Endpoint;
use super::{Book, Change, Condition, Served, TenantServed};

impl TenantServed {
    /// Notes, for a voting tenant, when `name`'s answer dropped an address it held.
    pub(super) fn note_drops(
        &mut self,
        name: &str,
        before: Option<&[IpAddr]>,
        now: &[IpAddr],
        at: u64,
    ) {
        for address in before.into_iter().flatten() {
            if !now.contains(address) {
                self.dropped.insert((name.to_owned(), *address), at);
            }
        }
        for address in now {
            self.dropped.remove(&(name.to_owned(), *address));
        }
    }
}

impl Book {
    /// `tenant` published what the vote at `at` gave, withdrawing `voted` (`None`: the
    /// tenant does not vote).
    pub(super) fn vote(
        &mut self,
        tenant: &str,
        voted: Option<BTreeSet<IpAddr>>,
        at: u64,
    ) -> Vec<Change> {
        let Some(t) = self.tenants.get_mut(tenant) else {
            return Vec::new();
        };
        let before = std::mem::replace(&mut t.voted_down, voted.clone());
        let Some(voted) = voted else {
            return match before {
                Some(_) => self.settle(|t| t == tenant, at),
                None => Vec::new(),
            };
        };
        let newly: Vec<IpAddr> = (voted.iter())
            .filter(|a| !before.as_ref().is_some_and(|b| b.contains(a)))
            .copied()
            .collect();
        if let Some(t) = self.tenants.get_mut(tenant) {
            t.recovered
                .retain(|a| voted.contains(a) && !newly.contains(a));
        }
        let (mut changes, from) = self.voted_out(tenant, &newly, at);
        self.note_disputes(tenant, &voted);
        if before.as_ref() != Some(&voted) {
            changes.extend(self.settle(|t| t == tenant, from));
        }
        changes
    }

    /// `tenant`'s vote newly withdrew `newly` at `at`. Names whose answer already dropped
    /// one of them after this cluster's own checks saw it fail get that dead stretch now
    /// (the changes returned); the others are settled from the returned time: the first
    /// counted failure this cluster saw of those addresses, else the vote's.
    fn voted_out(&mut self, tenant: &str, newly: &[IpAddr], at: u64) -> (Vec<Change>, u64) {
        let mut changes = Vec::new();
        let mut from = at;
        for &address in newly {
            let Some(since) = self.own_failure(tenant, address) else {
                continue;
            };
            let disputed = self
                .tenants
                .get(tenant)
                .and_then(|t| t.disputed.get(&address));
            if disputed == Some(&since) {
                // The vote kept it after this cluster saw it fail: the others saw it fail
                // later, at a time this cluster does not know. The vote's is the bound.
                continue;
            }
            from = from.min(since);
            let Some(t) = self.tenants.get(tenant) else {
                continue;
            };
            let Some(plan) = &t.plan else { continue };
            for name in &plan.names {
                let Some(&dropped) = t.dropped.get(&(name.clone(), address)) else {
                    continue;
                };
                let Some(&(condition, current)) = self.current.get(name) else {
                    continue;
                };
                let start = since.max(current);
                if start >= dropped || condition.served != Served::Answered {
                    continue;
                }
                let dead = Condition {
                    served: Served::DeadAddress,
                    ..condition
                };
                for (at, condition) in [(start, dead), (dropped, condition)] {
                    changes.push(Change {
                        name: name.clone(),
                        tenant: tenant.to_owned(),
                        at,
                        condition,
                    });
                }
                self.current.insert(name.clone(), (condition, dropped));
            }
        }
        (changes, from)
    }

    /// The endpoints `of` picks recovered by this cluster's own checks: those of voting
    /// `tenant` the vote still withdraws are no longer dead for its names.
    pub(super) fn note_recovered(&mut self, tenant: &str, of: impl Fn(&str) -> bool) {
        let Some(t) = self.tenants.get(tenant) else {
            return;
        };
        let Some(voted) = &t.voted_down else {
            return;
        };
        let up: Vec<IpAddr> = (t.endpoints.iter())
            .filter(|e| of(e.name) && voted.contains(&e.address))
            .filter(|e| !self.down.get(e.name).is_some_and(|c| e.is_down(c)))
            .map(|e| e.address)
            .collect();
        if let Some(t) = self.tenants.get_mut(tenant) {
            t.recovered.extend(up);
        }
    }

    /// Notes the addresses of `tenant` the vote keeps (`voted` is what it withdraws)
    /// while this cluster's own checks judge them down: one pass over its endpoints (a
    /// vote comes with every publish of the tenant).
    fn note_disputes(&mut self, tenant: &str, voted: &BTreeSet<IpAddr>) {
        let Some(t) = self.tenants.get(tenant) else {
            return;
        };
        let mut disputed: HashMap<IpAddr, u64> = HashMap::new();
        for e in t.endpoints.iter().filter(|e| !voted.contains(&e.address)) {
            if let Some(since) = self.failing_since(&e) {
                let first = disputed.entry(e.address).or_insert(since);
                *first = (*first).min(since);
            }
        }
        if let Some(t) = self.tenants.get_mut(tenant) {
            t.disputed = disputed;
        }
    }

    /// When this cluster's own checks first counted a failure of `tenant`'s endpoint at
    /// `address`, if they judge it down now.
    fn own_failure(&self, tenant: &str, address: IpAddr) -> Option<u64> {
        (self.tenants.get(tenant)?.endpoints.iter())
            .filter(|e| e.address == address)
            .filter_map(|e| self.failing_since(&e))
            .min()
    }

    /// When this cluster's own checks first counted a failure of endpoint `e`, if they
    /// judge it down now.
    fn failing_since(&self, e: &Endpoint<'_>) -> Option<u64> {
        let checks = self.down.get(e.name).filter(|checks| e.is_down(checks))?;
        checks.iter().map(|(_, since)| *since).min()
    }
}
