//! A config reload in the tracker core: the new plan is adopted by stable target id, so
//! unchanged targets keep their verdicts; removed tenants are retired as they asked.

use std::collections::HashSet;
use std::sync::Arc;

use ho_config::Plan;

use crate::hysteresis::Health;
use crate::metrics::{TargetLabel, TenantLabel};
use crate::observation::TargetId;
use crate::snapshot::EndpointMeta;

use super::super::carried::Carried;
use super::super::health::HealthView;
use super::super::index::{carry_by_name, EndpointIx, TenantIx, Topology};
use super::{Clock, Effect, TrackerCore, Wake};

impl TrackerCore {
    /// Replaces the plan (a config reload). Targets with an id the core already knows keep
    /// their verdict and counters; new ones start `unknown`, and an endpoint whose checks
    /// changed is decided by its old verdict until it has a new one ([`Carried`]); tenants
    /// keep what they published. Removed tenants are withdrawn (`cleanup_on_remove`) or forgotten. Every
    /// tenant is then re-decided and its current snapshot sent again, so sinks added or
    /// rebuilt by the reload converge at once.
    pub fn reload(
        &mut self,
        plan: Arc<Plan>,
        ids: Vec<TargetId>,
        now: Clock,
        fx: &mut Vec<Effect>,
    ) {
        self.publisher.retire_removed(&self.plan, &plan, now, fx);
        self.adopt_carrying(plan, ids, now);
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
            let before = self.publisher.last(ti).map(|p| p.seq);
            self.refresh(ti, now.mono, now, fx);
            if let Some(same) = self.publisher.last(ti).filter(|p| Some(p.seq) == before) {
                fx.push(Effect::Publish {
                    sinks: self.plan.tenants[ti.0].sinks.clone(),
                    snapshot: same.clone(),
                });
            }
        }
    }

    /// [`Self::adopt`], each endpoint `plan` gives other checks carrying the verdict that
    /// decided it (see [`Carried`]).
    fn adopt_carrying(&mut self, plan: Arc<Plan>, ids: Vec<TargetId>, now: Clock) {
        let old = Arc::clone(&self.plan);
        let health = self.health();
        let before: Vec<Health> = (0..old.endpoints.len())
            .map(|e| health.deciding_verdict(EndpointIx(e)))
            .collect();
        // Indexed by the old plan's endpoints: nothing may read it until replaced.
        self.carried = Carried::default();
        self.adopt(plan, ids, now);
        let health = self.health();
        let carried = Carried::across(&old, |e| before[e.0], &self.plan, |e| health.verdict(e));
        self.carried = carried;
    }

    /// Makes `plan` current, keeping the state of targets (by id) and tenants (by name)
    /// that stay.
    pub(super) fn adopt(&mut self, plan: Arc<Plan>, ids: Vec<TargetId>, now: Clock) {
        self.forget_metrics_of_removed(&plan);
        self.publisher.adopt(&self.plan, &plan);
        let tenants = std::mem::take(&mut self.tenants);
        self.tenants = carry_by_name(&self.plan, tenants, &plan);
        self.verdicts.adopt(&plan, ids, now.mono);
        self.topology = Topology::of(&plan);
        self.plan = plan;
        let health = self.health();
        let up =
            (0..self.plan.endpoints.len()).map(|e| health.verdict(EndpointIx(e)) == Health::Up);
        self.metrics.node_status.adopt(self.plan.clone(), up);
        self.endpoint_meta = EndpointMeta::of_each(&self.plan.endpoints);
        self.recount_tenants();
    }

    /// Recounts every tenant's endpoints up and without a verdict from the verdicts kept.
    fn recount_tenants(&mut self) {
        let health = HealthView {
            plan: &self.plan,
            verdicts: &self.verdicts,
            operator: &self.operator,
            carried: &self.carried,
        };
        for (t, state) in self.plan.tenants.iter().zip(&mut self.tenants) {
            // Verdicts, not forced health: transitions keep these counts from verdicts.
            let verdict = |e: &usize| health.verdict(EndpointIx(*e));
            state.unknown = t
                .endpoints
                .iter()
                .filter(|e| verdict(e) == Health::Unknown)
                .count();
            state.healthy = t
                .endpoints
                .iter()
                .filter(|e| verdict(e) == Health::Up)
                .count();
        }
    }

    /// Drops the per-target and per-tenant gauges of what `plan` no longer has (the
    /// per-endpoint `node_status` follows the plan adopted).
    fn forget_metrics_of_removed(&self, plan: &Plan) {
        // Sets, not scans: with 100,000 targets a scan per target took minutes at start.
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
        for old in &self.plan.tenants {
            if !tenants.contains(old.name.as_str()) {
                let label = TenantLabel {
                    tenant: old.name.clone(),
                };
                self.metrics.healthy_nodes.remove(&label);
                self.metrics.tenant_endpoints.remove(&label);
            }
        }
    }
}
