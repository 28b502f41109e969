//! One probe result through the tracker core: hysteresis, flap damping, the transition's
//! log, metrics and event, and the tenants whose published set may change.

use std::time::Duration;

use tracing::{info, warn};

use crate::brake::Recovery;
use crate::events::Event;
use crate::hysteresis::Transition;
use crate::metrics::{ResultLabel, TargetLabel};
use crate::observation::Observation;
use crate::snapshot::VerdictChange;

use super::super::health::HealthView;
use super::super::index::{TargetIx, TenantIx};
use super::super::report;
use super::super::verdicts::Judged;
use super::{Clock, Effect, TrackerCore, Wake, LOCAL_FAILURE_LOG};

/// How often an impaired prober counts its failing targets (each count is one pass over
/// every target).
const SELF_CHECK_EVERY: Duration = Duration::from_secs(1);

impl TrackerCore {
    /// `probe_cert_not_after_seconds` of `target`: when its certificate expires. Set when
    /// it changes (a first probe, a renewed certificate), not on every probe: the label is
    /// the target's key, formatted.
    fn record_cert_expiry(&self, target: TargetIx, obs: &Observation) {
        let before = self
            .verdicts
            .get(target)
            .last
            .as_ref()
            .and_then(|last| last.cert_not_after());
        let Some(at) = obs.result.cert_not_after.filter(|at| before != Some(*at)) else {
            return;
        };
        let secs = crate::clock::since_epoch(at);
        self.metrics
            .probe_cert_not_after
            .get_or_create(&TargetLabel {
                target: self.plan.targets[target.0].key(),
            })
            .set(i64::try_from(secs.as_secs()).unwrap_or(i64::MAX));
    }

    /// Counts one probe in the metrics, whatever becomes of its result.
    fn count_probe(&self, obs: &Observation) {
        let m = &self.metrics;
        m.probes
            .get_or_create(&ResultLabel {
                result: obs.result.label(),
            })
            .inc();
        m.check_duration.observe(obs.result.latency.as_secs_f64());
        if obs.result.reused {
            m.probe_connections_reused.inc();
        }
        m.probe_start_delay.observe(obs.start_delay.as_secs_f64());
    }

    /// Applies one probe result.
    pub(super) fn observe_one(&mut self, obs: Observation, now: Clock, fx: &mut Vec<Effect>) {
        self.count_probe(&obs);
        let Some(target) = self.verdicts.index(obs.target) else {
            return;
        };
        // `[ring]`: a probe finishing after this replica stopped probing the target.
        if self.verdicts.probed_elsewhere(target) {
            return;
        }
        self.record_cert_expiry(target, &obs);
        let timing = self.plan.targets[target.0].check.timing;
        let counted = match self
            .verdicts
            .judge(target, obs.result, &timing, (now.mono, now.wall))
        {
            Judged::NotJudged => {
                if LOCAL_FAILURE_LOG.ready(Duration::from_secs(60)) {
                    warn!(
                        target = %self.plan.targets[target.0].key(),
                        reason = %self.verdicts.latest_reason(target),
                        "a probe could not run for lack of local resources; not counted against the endpoint (probes_total{{result=\"local\"}}; logged at most once a minute)"
                    );
                }
                return;
            }
            Judged::Counted(counted) => counted,
        };
        if let Some(t) = counted.transition {
            self.judged(target, t, counted.hold, now, fx);
        }
        if counted.starts_failing
            && self
                .publisher
                .brake
                .went_down(now.mono, target.0, self.verdicts.len())
        {
            self.judge_self_impaired(now, fx);
        }
        let after = self.verdicts.effective(target);
        if counted.before != after {
            self.effective_changed(target, counted.before, now, fx);
        } else if counted.reweighed {
            self.reweighed(target, now, fx);
        }
    }

    /// A verdict change of `target`'s own hysteresis (`hold`: flap damping started holding
    /// it, with this penalty): shared with the ring (`[ring]`) or recorded for its tenants.
    fn judged(
        &mut self,
        target: TargetIx,
        t: Transition,
        hold: Option<f64>,
        now: Clock,
        fx: &mut Vec<Effect>,
    ) {
        if let Some(penalty) = hold {
            warn!(target = %self.plan.targets[target.0].key(), penalty = penalty.round(), "flapping: flap damping holds the endpoint out of DNS until its penalty decays below reuse");
            self.metrics.damping_holds.inc();
            self.schedule_release(target, now, fx);
        }
        let reason = self.verdicts.latest_reason(target);
        if self.verdicts.shared(target) {
            fx.push(Effect::Share {
                key: self.plan.targets[target.0].key(),
                health: t.to,
            });
            self.recombine(target, &reason, now);
        } else {
            self.on_transition(target, t, reason, now);
        }
    }

    /// A wave of first failures made the prober judge itself impaired: every withdrawal
    /// and vote is held, and the self-check asks every second whether it may resume.
    fn judge_self_impaired(&mut self, now: Clock, fx: &mut Vec<Effect>) {
        warn!(targets = self.verdicts.len(), "this prober judges itself impaired: a wave of its targets started failing at once, more likely its own network than that many gateways; every withdrawal and vote is held until fewer fail or an operator releases the brake (POST /v1/brake/release)");
        self.metrics.vantage_impaired.set(1);
        self.announce_impaired(true);
        fx.push(Effect::WakeAt {
            at: now.mono + SELF_CHECK_EVERY,
            wake: Wake::SelfCheck,
        });
    }

    /// Whether an impaired prober may resume (see [`crate::brake::Brake::recovery`]): asked
    /// every [`SELF_CHECK_EVERY`] from the moment it judged itself impaired (a wave may pass
    /// without any verdict changing), one chain of wake-ups at a time.
    pub(in crate::tracker) fn check_recovery(&mut self, now: Clock, fx: &mut Vec<Effect>) {
        if self.publisher.brake.impaired_since().is_none() {
            return;
        }
        let failing = self.verdicts.failing();
        let next = match self
            .publisher
            .brake
            .recovery(failing, self.verdicts.len(), now.mono)
        {
            Recovery::Now => return self.resume(now, fx),
            Recovery::No => now.mono + SELF_CHECK_EVERY,
            Recovery::At(at) => at.min(now.mono + SELF_CHECK_EVERY),
        };
        fx.push(Effect::WakeAt {
            at: next,
            wake: Wake::SelfCheck,
        });
    }

    /// The prober is no longer impaired: every tenant is decided (and votes) again.
    pub(in crate::tracker) fn resume(&mut self, now: Clock, fx: &mut Vec<Effect>) {
        info!("this prober no longer judges itself impaired: withdrawals and votes go on");
        self.metrics.vantage_impaired.set(0);
        self.announce_impaired(false);
        for ti in 0..self.tenants.len() {
            self.refresh(TenantIx(ti), now.mono, now, fx);
        }
    }

    /// Tells `/events` (and the page) that the prober judged itself impaired or resumed.
    fn announce_impaired(&self, impaired: bool) {
        self.events.emit(|| Event::Impaired {
            at: crate::events::now(),
            impaired,
            failing: self.verdicts.failing(),
            targets: self.verdicts.len(),
        });
    }

    /// Asks for the check that ends a flap-damping hold of `target`.
    pub(super) fn schedule_release(&mut self, target: TargetIx, now: Clock, fx: &mut Vec<Effect>) {
        if let Some(wait) = self.verdicts.release_due(target, now.mono) {
            fx.push(Effect::WakeAt {
                at: now.mono + wait,
                wake: Wake::DampingRelease(self.verdicts.id(target)),
            });
        }
    }

    /// Records a verdict change for the tenants of `target` (carried by their next snapshot).
    pub(super) fn on_transition(
        &mut self,
        target: TargetIx,
        t: Transition,
        reason: String,
        now: Clock,
    ) {
        let failing_since = self
            .verdicts
            .record(target, t, now.wall)
            .map(crate::clock::Timestamp);
        let names: Vec<&str> = self
            .topology
            .endpoints(target)
            .map(|e| &*self.plan.endpoints[e.0].name)
            .collect();
        let span = report::transition(&self.plan, &self.metrics, target, &names, t, &reason);
        self.events.emit(|| Event::Transition {
            at: crate::events::now(),
            target: self.plan.targets[target.0].key(),
            endpoints: names.iter().map(|n| (*n).to_owned()).collect(),
            address: self.plan.targets[target.0].address,
            from: t.from.as_str(),
            to: t.to.as_str(),
            failing_since,
            reason: reason.clone(),
        });
        let reason = if self.verdicts.get(target).damped() {
            format!("{reason} (held out of DNS by flap damping)")
        } else {
            reason
        };
        self.record_change(target, t, &reason, span);
    }

    /// Keeps `target`'s verdict change, with `reason` and the transition's trace `span`,
    /// for each of its tenants' next snapshot.
    fn record_change(
        &mut self,
        target: TargetIx,
        t: Transition,
        reason: &str,
        span: opentelemetry::trace::SpanContext,
    ) {
        // Borrowed by field: the publisher is written while the view is read.
        let health = HealthView {
            plan: &self.plan,
            verdicts: &self.verdicts,
            operator: &self.operator,
            carried: &self.carried,
        };
        for m in self.topology.tenants(target) {
            let ep = &self.plan.endpoints[m.endpoint.0];
            // A composite endpoint's change is its combined verdict's, when there is one,
            // with the check that made it named.
            let (from, to, reason) = if ep.composite().is_some() {
                let from = health.verdict_before(m.endpoint, target, t.from);
                let to = health.verdict(m.endpoint);
                if from == to {
                    continue;
                }
                let check = self.plan.targets[target.0].key();
                (
                    from,
                    to,
                    self.publisher.reason(&format!("{check}: {reason}")),
                )
            } else {
                (t.from, t.to, self.publisher.reason(reason))
            };
            self.publisher.note_change(
                m.tenant,
                VerdictChange {
                    endpoint: ep.name.clone(),
                    address: ep.address,
                    from,
                    to,
                    reason,
                },
                &span,
            );
        }
    }
}
