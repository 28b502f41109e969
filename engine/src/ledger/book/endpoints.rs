//! A tenant's endpoints as the book keeps them between plans: columns, not one record an
//! endpoint. The plan hands one [`EndpointPlan`] an endpoint (a name `String`, a boxed
//! slice of checks, a composite), about 90 bytes and three allocations at 100,000
//! endpoints; most endpoints have one check, so here each has its name in one text of the
//! tenant's, its address, its first check's key and nothing else, and the few of several
//! checks keep the rest apart.

use std::net::IpAddr;

use ho_config::Composite;

use super::{CheckKey, EndpointPlan};
use crate::composite::combine_healths;
use crate::hysteresis::Health;

/// An endpoint of several checks: its index, its other checks' keys (in order) and how
/// all of them combine.
type Several = (u32, Box<[CheckKey]>, Option<Composite>);

/// One tenant's endpoints, in the plan's order.
#[derive(Default)]
pub(super) struct Endpoints {
    /// Every endpoint's name, one after another.
    names: Box<str>,
    /// Where each endpoint's name ends in `names`.
    ends: Box<[u32]>,
    addresses: Box<[IpAddr]>,
    /// Each endpoint's first check: `Endpoint::target`'s key.
    first: Box<[CheckKey]>,
    /// The endpoints with more than one check or a combination, by index (ascending).
    several: Box<[Several]>,
}

/// One endpoint, as [`Endpoints::iter`] lends it.
#[derive(Clone, Copy)]
pub(super) struct Endpoint<'a> {
    /// The endpoint's name (what operators hold).
    pub(super) name: &'a str,
    pub(super) address: IpAddr,
    first: CheckKey,
    also: &'a [CheckKey],
    composite: Option<&'a Composite>,
}

impl Endpoints {
    /// The compact form of `plans`.
    pub(super) fn of(plans: Vec<EndpointPlan>) -> Endpoints {
        let mut names = String::new();
        let mut ends = Vec::with_capacity(plans.len());
        let mut addresses = Vec::with_capacity(plans.len());
        let mut first = Vec::with_capacity(plans.len());
        let mut several = Vec::new();
        for (i, plan) in plans.into_iter().enumerate() {
            names.push_str(&plan.name);
            ends.push(u32::try_from(names.len()).expect("endpoint names under 4 GiB a tenant"));
            addresses.push(plan.address);
            let mut checks = plan.checks.into_vec().into_iter();
            first.push(checks.next().expect("an endpoint has a check"));
            let also: Box<[CheckKey]> = checks.collect();
            if !also.is_empty() || plan.composite.is_some() {
                let i = u32::try_from(i).expect("fewer than 2^32 endpoints");
                several.push((i, also, plan.composite.map(|c| *c)));
            }
        }
        Endpoints {
            names: names.into_boxed_str(),
            ends: ends.into_boxed_slice(),
            addresses: addresses.into_boxed_slice(),
            first: first.into_boxed_slice(),
            several: several.into_boxed_slice(),
        }
    }

    /// Each endpoint, in the plan's order.
    pub(super) fn iter(&self) -> impl Iterator<Item = Endpoint<'_>> + '_ {
        let mut several = self.several.iter().peekable();
        (0..self.ends.len()).map(move |i| {
            let start = i.checked_sub(1).map_or(0, |p| self.ends[p] as usize);
            let rest = several.next_if(|(at, _, _)| *at as usize == i);
            Endpoint {
                name: &self.names[start..self.ends[i] as usize],
                address: self.addresses[i],
                first: self.first[i],
                also: rest.map_or(&[][..], |(_, also, _)| also),
                composite: rest.and_then(|(_, _, c)| c.as_ref()),
            }
        })
    }

    /// Every endpoint's checks' keys, a key once an endpoint.
    pub(super) fn keys(&self) -> impl Iterator<Item = CheckKey> + '_ {
        self.iter()
            .flat_map(|e| std::iter::once(e.first).chain(e.also.iter().copied()))
    }

    /// Bytes it holds on the heap.
    #[cfg(test)]
    pub(super) fn own_bytes(&self) -> usize {
        let several = (self.several.iter())
            .map(|(_, also, c)| {
                std::mem::size_of_val(&**also)
                    + c.as_ref().map_or(0, |c| std::mem::size_of_val(&*c.also))
            })
            .sum::<usize>();
        self.names.len()
            + std::mem::size_of_val(&*self.ends)
            + std::mem::size_of_val(&*self.addresses)
            + std::mem::size_of_val(&*self.first)
            + std::mem::size_of_val(&*self.several)
            + several
    }
}

impl Endpoint<'_> {
    /// Whether the endpoint is down by its own checks, given each of its checks judged down
    /// (by target key), its checks combined as the tracker combines them.
    pub(super) fn is_down(&self, down: &[(CheckKey, u64)]) -> bool {
        let health = |k: &CheckKey| match down.iter().any(|(d, _)| d == k) {
            true => Health::Down,
            false => Health::Up,
        };
        combine_healths(
            health(&self.first),
            self.also.iter().map(health),
            self.composite,
        ) == Health::Down
    }

    /// The plan it was made of.
    #[cfg(test)]
    pub(super) fn plan(&self) -> EndpointPlan {
        EndpointPlan {
            name: self.name.to_owned(),
            address: self.address,
            checks: std::iter::once(&self.first)
                .chain(self.also)
                .copied()
                .collect(),
            composite: self.composite.cloned().map(Box::new),
        }
    }
}

#[cfg(test)]
#[path = "endpoints_tests.rs"]
mod tests;
