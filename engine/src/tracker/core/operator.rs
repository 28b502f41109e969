//! What operators set, in the tracker core: drains and forced health (each change
//! re-decides the tenants it touches) and the release of the brake's held withdrawals.

use std::collections::{BTreeMap, BTreeSet};

use crate::drain::{Forced, OperatorState};
use crate::events::Event;

use super::super::index::TenantIx;
use super::{Clock, Effect, TrackerCore};

impl TrackerCore {
    /// The names of the endpoints `selection` picks, in configuration order.
    pub(in crate::tracker) fn selected(&self, selection: &super::super::Selection) -> Vec<String> {
        self.plan
            .endpoints
            .iter()
            .filter(|e| match selection {
                super::super::Selection::Name(name) => *e.name == **name,
                super::super::Selection::Labels(labels) => {
                    labels.iter().all(|(k, v)| e.labels().get(k) == Some(v))
                }
            })
            .map(|e| e.name.to_string())
            .collect()
    }

    /// The drained endpoint names.
    pub fn drained(&self) -> &BTreeSet<String> {
        &self.operator.drained
    }

    /// Replaces the drained set and re-decides every tenant with an endpoint whose drain
    /// changed.
    pub fn set_drained(&mut self, drained: BTreeSet<String>, now: Clock, fx: &mut Vec<Effect>) {
        let changed: BTreeSet<String> = drained
            .symmetric_difference(&self.operator.drained)
            .cloned()
            .collect();
        self.operator.drained = drained;
        self.refresh_tenants_of(&changed, now, fx);
    }

    /// The endpoints whose health an operator forced.
    pub fn forced(&self) -> &BTreeMap<String, Forced> {
        &self.operator.forced
    }

    /// Replaces the forced health and re-decides every tenant with an endpoint whose
    /// forced health changed.
    pub fn set_forced(
        &mut self,
        forced: BTreeMap<String, Forced>,
        now: Clock,
        fx: &mut Vec<Effect>,
    ) {
        let changed: BTreeSet<String> = forced
            .iter()
            .filter(|(name, f)| self.operator.forced.get(*name) != Some(f))
            .map(|(name, _)| name.clone())
            .chain(
                self.operator
                    .forced
                    .keys()
                    .filter(|n| !forced.contains_key(*n))
                    .cloned(),
            )
            .collect();
        self.operator.forced = forced;
        self.refresh_tenants_of(&changed, now, fx);
    }

    /// Replaces what operators set (drains and forced health), re-decides the tenants it
    /// touches and tells listeners which endpoints are held by hand now (the availability
    /// ledger counts their names' time as maintenance).
    pub fn set_operator(&mut self, state: OperatorState, now: Clock, fx: &mut Vec<Effect>) {
        self.set_drained(state.drained, now, fx);
        self.set_forced(state.forced, now, fx);
        let held = self.operator.held();
        self.events.emit(|| Event::Held {
            at: crate::events::now(),
            endpoints: held,
        });
    }

    /// Lets every withdrawal the brake holds go through now (an operator's release): the
    /// tenants holding some are decided again with the brake off; the addresses released.
    pub fn release_brake(&mut self, now: Clock, fx: &mut Vec<Effect>) -> usize {
        let holding: Vec<(String, usize)> = self
            .publisher
            .brake
            .held()
            .iter()
            .map(|(t, n)| (t.clone(), *n))
            .collect();
        let was_impaired = self.publisher.brake.impaired_since().is_some();
        self.publisher.brake.set_released(true);
        if was_impaired {
            self.resume(now, fx);
        } else {
            for (tenant, _) in &holding {
                if let Some(ti) = self.tenant_index(tenant) {
                    self.refresh(ti, now.mono, now, fx);
                }
            }
        }
        self.publisher.brake.set_released(false);
        holding.iter().map(|(_, n)| n).sum()
    }

    /// Re-decides every tenant with an endpoint named in `names`.
    fn refresh_tenants_of(&mut self, names: &BTreeSet<String>, now: Clock, fx: &mut Vec<Effect>) {
        let affected: Vec<TenantIx> = self
            .plan
            .tenants
            .iter()
            .enumerate()
            .filter(|(_, t)| {
                t.endpoints
                    .iter()
                    .any(|&e| names.contains(&*self.plan.endpoints[e].name))
            })
            .map(|(i, _)| TenantIx(i))
            .collect();
        for ti in affected {
            self.refresh(ti, now.mono, now, fx);
        }
    }
}
