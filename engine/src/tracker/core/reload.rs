//! A config reload in the tracker core: the new plan is adopted by stable target id, so
//! unchanged targets keep their verdicts; removed tenants are retired as they asked.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

use ho_config::Plan;
use tracing::info;

use crate::hysteresis::Health;
use crate::metrics::{TargetLabel, TenantLabel};
use crate::observation::TargetId;
use crate::snapshot::{EndpointMeta, PublishMode, TenantSnapshot};

use super::super::index::{EndpointIx, TenantIx, Topology};
use super::super::report;
use super::publish::next_seq;
use super::{Clock, Effect, TenantState, TrackerCore, Wake};

impl TrackerCore {
    /// Replaces the plan (a config reload). Targets with an id the core already knows keep
    /// their verdict and counters; new ones start `unknown`; tenants keep what they
    /// published. Removed tenants are withdrawn (`cleanup_on_remove`) or forgotten. Every
    /// tenant is then re-decided and its current snapshot sent again, so sinks added or
    /// rebuilt by the reload converge at once.
    pub fn reload(
        &mut self,
        plan: Arc<Plan>,
        ids: Vec<TargetId>,
        now: Clock,
        fx: &mut Vec<Effect>,
    ) {
        self.retire_removed_tenants(&plan, now, fx);
        self.adopt(plan, ids, now);
        let grace = self.plan.startup_grace;
        for ti in (0..self.tenants.len()).map(TenantIx) {
            if self.tenants[ti.0].unknown > 0 {
                // New endpoints: wait for their verdicts (or the grace) before they count.
                self.tenants[ti.0].wait_until = Some(now.mono + grace);
                fx.push(Effect::WakeAt {
                    at: now.mono + grace,
                    wake: Wake::ReloadGraceOver(self.plan.tenants[ti.0].name.clone()),
                });
            }
            let before = self.tenants[ti.0].last_snapshot.as_ref().map(|p| p.seq);
            self.refresh(ti, now.mono, now, fx);
            let state = &self.tenants[ti.0];
            if let Some(same) = state
                .last_snapshot
                .as_ref()
                .filter(|p| Some(p.seq) == before)
            {
                fx.push(Effect::Publish {
                    sinks: self.plan.tenants[ti.0].sinks.clone(),
                    snapshot: same.clone(),
                });
            }
        }
    }

    /// Makes `plan` current, keeping the state of targets (by id) and tenants (by name)
    /// that stay.
    pub(super) fn adopt(&mut self, plan: Arc<Plan>, ids: Vec<TargetId>, now: Clock) {
        let old_tenants: HashMap<String, TenantState> = self
            .plan
            .tenants
            .iter()
            .map(|t| t.name.clone())
            .zip(self.tenants.drain(..))
            .collect();
        self.forget_metrics_of_removed(&plan, &old_tenants);
        self.brake.set_config(plan.brake);
        for gone in old_tenants
            .keys()
            .filter(|n| !plan.tenants.iter().any(|t| &t.name == *n))
        {
            self.brake.forget(gone);
        }
        self.verdicts.adopt(&plan, ids, now.mono);
        self.topology = Topology::of(&plan);
        self.plan = plan;
        for (e, ep) in self.plan.endpoints.iter().enumerate() {
            let up = self.verdict(EndpointIx(e)) == Health::Up;
            self.metrics
                .node_status
                .get_or_create(&report::node_labels(ep))
                .set(i64::from(up));
        }
        self.endpoint_meta = self
            .plan
            .endpoints
            .iter()
            .map(|e| Arc::new(EndpointMeta::of(e)))
            .collect();
        self.tenants = self.recount_tenants(old_tenants);
    }

    /// Every tenant of the adopted plan: its state kept by name (new ones start empty),
    /// its endpoint counts recounted from the verdicts kept.
    fn recount_tenants(&self, mut old: HashMap<String, TenantState>) -> Vec<TenantState> {
        self.plan
            .tenants
            .iter()
            .map(|t| {
                let mut state = old.remove(&t.name).unwrap_or_default();
                // Verdicts, not forced health: transitions keep these counts from verdicts.
                let health = |e: &usize| self.verdict(EndpointIx(*e));
                state.unknown = t
                    .endpoints
                    .iter()
                    .filter(|e| health(e) == Health::Unknown)
                    .count();
                state.healthy = t
                    .endpoints
                    .iter()
                    .filter(|e| health(e) == Health::Up)
                    .count();
                state
            })
            .collect()
    }

    /// Drops the per-endpoint and per-tenant gauges of what `plan` no longer has.
    fn forget_metrics_of_removed(&self, plan: &Plan, old_tenants: &HashMap<String, TenantState>) {
        // Sets, not scans: with 100,000 endpoints a scan per endpoint took minutes at start.
        let staying: HashSet<(&str, IpAddr)> = plan
            .endpoints
            .iter()
            .map(|e| (e.name.as_str(), e.address))
            .collect();
        for ep in &self.plan.endpoints {
            if !staying.contains(&(ep.name.as_str(), ep.address)) {
                self.metrics.node_status.remove(&report::node_labels(ep));
            }
        }
        // Only targets over TLS carry a certificate expiry.
        let over_tls = |t: &&ho_config::Target| t.check.settings.get().speaks_tls();
        let targets: HashSet<String> = plan
            .targets
            .iter()
            .filter(over_tls)
            .map(|t| t.key())
            .collect();
        for target in self.plan.targets.iter().filter(over_tls) {
            let key = target.key();
            if !targets.contains(&key) {
                self.metrics
                    .probe_cert_not_after
                    .remove(&TargetLabel { target: key });
            }
        }
        let tenants: HashSet<&str> = plan.tenants.iter().map(|t| t.name.as_str()).collect();
        for name in old_tenants.keys() {
            if !tenants.contains(name.as_str()) {
                self.metrics.healthy_nodes.remove(&TenantLabel {
                    tenant: name.clone(),
                });
            }
        }
    }

    /// Tenants the new plan removes: withdrawn from their sinks with an empty snapshot when
    /// they asked for `cleanup_on_remove`, else forgotten by the sinks (records stay). A
    /// voting tenant's shared zones are not this cluster's to empty: they are forgotten
    /// here, and get what the remaining clusters decide once this cluster's report is out
    /// ([`crate::multi_cluster::leave`]).
    fn retire_removed_tenants(&self, new: &Plan, now: Clock, fx: &mut Vec<Effect>) {
        let staying: HashSet<&str> = new.tenants.iter().map(|t| t.name.as_str()).collect();
        for (old, state) in self.plan.tenants.iter().zip(&self.tenants) {
            if staying.contains(old.name.as_str()) {
                continue;
            }
            let (shared, sinks): (Vec<String>, Vec<String>) = old
                .sinks
                .iter()
                .cloned()
                .partition(|s| old.multi_cluster && self.plan.sinks[s].spec.holds_reports());
            if !shared.is_empty() {
                fx.push(Effect::Forget {
                    sinks: shared,
                    tenant: old.name.clone(),
                });
            }
            if old.cleanup_on_remove {
                let empty = Arc::new(TenantSnapshot {
                    tenant: old.name.clone(),
                    hosts_key: old.hosts_key.clone(),
                    seq: next_seq(now.wall, state.last_seq),
                    domains: old.domains.clone(),
                    ttl: old.ttl,
                    addresses: Vec::new(),
                    mode: PublishMode::NoneHealthy,
                    changes: Vec::new(),
                    policy: old.policy,
                    answer: old.answer,
                    default_geo: old.default_geo.clone(),
                    geos: Vec::new(),
                    votes: None,
                    decided_at: now.wall,
                    cause_at: now.mono,
                    trace: opentelemetry::trace::SpanContext::NONE,
                });
                info!(tenant = %old.name, "tenant removed by reload: withdrawing its records (cleanup_on_remove)");
                fx.push(Effect::Publish {
                    sinks,
                    snapshot: empty,
                });
            } else {
                info!(tenant = %old.name, "tenant removed by reload: no longer published; its records stay");
                fx.push(Effect::Forget {
                    sinks,
                    tenant: old.name.clone(),
                });
            }
        }
    }
}
