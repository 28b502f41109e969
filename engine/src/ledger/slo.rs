//! Each tenant's seconds per condition as counters, and its objective as a gauge, so
//! Prometheus works out error ratios over any window and the shipped rules alert on the
//! burn rate of an SLO (the multi-window rules Sloth and Pyrra generate). The counters
//! follow the same changes the ledger records; a change dated back before the last tick
//! (a failure's first probe) is counted from the tick on, so over a window the counters
//! may lag the ledger's figures by up to one tick per such change.

use std::collections::HashMap;
use std::sync::Arc;

use ho_config::Plan;

use super::book::{Change, Condition, Served};
use crate::metrics::{Metrics, SloLabels, TenantServedLabels};

/// What one name serves since when, counted up to then.
struct Account {
    tenant: String,
    condition: Condition,
    at: u64,
}

/// The counters' bookkeeping.
pub(super) struct Accounts {
    by_name: HashMap<String, Account>,
    /// Each tenant's resource (namespace, name), empty for a TOML tenant.
    resources: HashMap<String, (String, String)>,
    metrics: Arc<Metrics>,
}

impl Accounts {
    pub(super) fn new(metrics: Arc<Metrics>) -> Accounts {
        Accounts {
            by_name: HashMap::new(),
            resources: HashMap::new(),
            metrics,
        }
    }

    /// Takes a plan's tenants: their resources, and their objectives as gauges.
    pub(super) fn plan(&mut self, plan: &Plan) {
        self.resources = (plan.tenants.iter())
            .map(|t| (t.name.clone(), t.resource.clone().unwrap_or_default()))
            .collect();
        let (gauges, periods) = (
            &self.metrics.answers.slo_objective,
            &self.metrics.answers.slo_period,
        );
        gauges.clear();
        periods.clear();
        for t in &plan.tenants {
            let Some(slo) = &t.slo else { continue };
            let (namespace, name) = t.resource.clone().unwrap_or_default();
            let labels = SloLabels {
                tenant: t.name.clone(),
                namespace,
                name,
                window: slo.window.label(),
            };
            gauges.get_or_create(&labels).set(slo.objective);
            periods
                .get_or_create(&labels)
                .set(slo.window.period().as_secs_f64());
        }
    }

    /// Counts each changed name's time up to its change, then follows its new condition.
    pub(super) fn changed(&mut self, changes: &[Change]) {
        for c in changes {
            if let Some(mut account) = self.by_name.remove(&c.name) {
                self.credit(&mut account, c.at);
                if !c.tenant.is_empty() {
                    account.tenant.clone_from(&c.tenant);
                }
                account.condition = c.condition;
                if c.condition != Condition::UNKNOWN || !c.tenant.is_empty() {
                    self.by_name.insert(c.name.clone(), account);
                }
            } else if !c.tenant.is_empty() {
                let account = Account {
                    tenant: c.tenant.clone(),
                    condition: c.condition,
                    at: c.at,
                };
                self.by_name.insert(c.name.clone(), account);
            }
        }
    }

    /// Counts every name's time up to `now`.
    pub(super) fn tick(&mut self, now: u64) {
        let mut names = std::mem::take(&mut self.by_name);
        for account in names.values_mut() {
            self.credit(account, now);
        }
        self.by_name = names;
    }

    /// Adds `account`'s time from its last count to `until` to its condition's counter
    /// (not unknown time, not maintenance).
    fn credit(&self, account: &mut Account, until: u64) {
        let c = account.condition;
        let counted = c.served != Served::Unknown && !c.maintenance;
        if until > account.at && counted {
            let (namespace, name) = self
                .resources
                .get(&account.tenant)
                .cloned()
                .unwrap_or_default();
            let labels = TenantServedLabels {
                tenant: account.tenant.clone(),
                namespace,
                name,
                served: c.served.as_str(),
            };
            let seconds = (until - account.at) as f64 / 1000.0;
            self.metrics
                .answers
                .tenant_served_seconds
                .get_or_create(&labels)
                .inc_by(seconds);
        }
        account.at = account.at.max(until);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(name: &str, tenant: &str, at: u64, served: Served, maintenance: bool) -> Change {
        Change {
            name: name.into(),
            tenant: tenant.into(),
            at,
            condition: Condition {
                served,
                maintenance,
            },
        }
    }

    fn counted(metrics: &Metrics, tenant: &str, served: &'static str) -> f64 {
        let labels = TenantServedLabels {
            tenant: tenant.into(),
            namespace: String::new(),
            name: String::new(),
            served,
        };
        metrics
            .answers
            .tenant_served_seconds
            .get_or_create(&labels)
            .get()
    }

    /// Two names of one tenant: each second counted once under the condition it was in,
    /// maintenance and unknown time not at all, a removed name no more.
    #[test]
    fn seconds_are_counted_under_the_condition_they_were_spent_in() {
        let metrics = Arc::new(Metrics::new());
        let mut accounts = Accounts::new(metrics.clone());
        accounts.changed(&[
            change("a", "t", 0, Served::Answered, false),
            change("b", "t", 0, Served::Answered, false),
        ]);
        accounts.changed(&[change("a", "t", 4_000, Served::DeadAddress, false)]);
        accounts.tick(10_000);
        accounts.changed(&[change("a", "t", 11_000, Served::Answered, false)]);
        accounts.changed(&[change("b", "t", 12_000, Served::WrongAddress, true)]);
        accounts.changed(&[change("b", "", 15_000, Served::Unknown, false)]);
        accounts.tick(20_000);
        // a: answered 0-4 s and 11-20 s, dead 4-11 s; b: answered 0-12 s, then held, then gone.
        assert_eq!(counted(&metrics, "t", "answered"), 4.0 + 9.0 + 12.0);
        assert_eq!(counted(&metrics, "t", "dead_address"), 7.0);
        assert_eq!(counted(&metrics, "t", "wrong_address"), 0.0);
    }
}
