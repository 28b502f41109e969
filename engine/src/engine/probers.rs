//! The running plan's probers: one per target, spread round robin over prober threads
//! sized at start for the probe rate, on schedules sharing one origin and tick fixed at
//! start, so a prober a reload adds keeps the stable phase it would have had.

use super::*;
use crate::prober::Sampling;
use crate::ring::ownership::Ownership;

/// A running prober.
struct RunningProber {
    id: TargetId,
    handle: ProberHandle,
}

/// Every running prober, and where new ones go.
pub(super) struct ProberPool {
    /// One per target of the running plan, in the same order.
    probers: Vec<RunningProber>,
    next_id: TargetId,
    /// Where new probers go, round robin.
    next_arbiter: usize,
    arbiters: Vec<Arbiter>,
    /// Schedules' common origin.
    origin: Instant,
    /// Probes start on this tick ([`schedule::tick_for`] the load at start).
    tick: Duration,
    /// Bounds every probe; set at start (a reload does not change it).
    limits: Arc<ProbeLimits>,
    /// Where results go.
    tracker: Addr<HealthTracker>,
    /// `[ring]`: which targets this replica probes (each prober's gate).
    ownership: Option<Arc<Ownership>>,
    /// The share of probes traced: set at start, as every telemetry setting is.
    sample_share: f64,
}

impl ProberPool {
    /// The threads for `plan`'s probe rate, with no prober yet.
    pub(super) fn new(
        plan: &Plan,
        limits: Arc<ProbeLimits>,
        tracker: Addr<HealthTracker>,
        ownership: Option<Arc<Ownership>>,
    ) -> ProberPool {
        let (arbiters, tick) = prober_arbiters(&plan.targets);
        let telemetry = &plan.telemetry;
        let sample_share = if telemetry.otlp_endpoint.is_some() {
            telemetry.probe_sample_ratio
        } else {
            0.0
        };
        ProberPool {
            sample_share,
            probers: Vec::new(),
            next_id: 0,
            next_arbiter: 0,
            arbiters,
            origin: Instant::now(),
            tick,
            limits,
            tracker,
            ownership,
        }
    }

    /// Starts a prober for each of `plan`'s targets with its probe: the start's, whose
    /// ids are the targets' places in the plan.
    pub(super) fn start(&mut self, plan: &Plan, probes: Vec<Probe>) {
        for (target, probe) in plan.targets.iter().zip(probes) {
            let prober = self.start_prober(target, probe);
            self.probers.push(prober);
        }
        self.fit_grace(&plan.targets);
    }

    /// The running probers' ids, in the plan's order.
    pub(super) fn ids(&self) -> Vec<TargetId> {
        self.probers.iter().map(|p| p.id).collect()
    }

    /// Keeps the probers of targets that stay, starts new ones (`probes`: one per target of
    /// `plan` not in `old`, in order), stops the rest.
    pub(super) fn replace(
        &mut self,
        plan: &Plan,
        old: &HashMap<&Target, usize>,
        probes: Vec<Probe>,
        summary: &mut ReloadSummary,
    ) {
        let mut running: Vec<Option<RunningProber>> = std::mem::take(&mut self.probers)
            .into_iter()
            .map(Some)
            .collect();
        let mut probes = probes.into_iter();
        let mut probers = Vec::with_capacity(plan.targets.len());
        for target in &plan.targets {
            let kept = old.get(target).and_then(|&i| running[i].take());
            let prober = match kept {
                Some(prober) => {
                    summary.targets_kept += 1;
                    prober
                }
                None => {
                    summary.targets_added += 1;
                    let probe = probes.next().expect("one probe per new target");
                    self.start_prober(target, probe)
                }
            };
            probers.push(prober);
        }
        for removed in running.into_iter().flatten() {
            removed.handle.stop();
            summary.targets_removed += 1;
        }
        if let Some(ownership) = &self.ownership {
            ownership.retain(&plan.targets.iter().map(Target::key).collect());
        }
        self.fit_grace(&plan.targets);
        self.probers = probers;
    }

    /// Stops every prober thread.
    pub(super) fn stop(&self) {
        for arbiter in &self.arbiters {
            arbiter.stop();
        }
    }

    /// `[ring]`: a lost target is probed on for at least its longest check interval, so its
    /// new owner's first probe comes before the old owner's last.
    fn fit_grace(&self, targets: &[Target]) {
        if let Some(ownership) = &self.ownership {
            let longest = targets.iter().map(|t| t.check.timing.interval).max();
            ownership.fit_grace(longest.unwrap_or_default());
        }
    }

    /// Starts `target`'s prober on the next thread, with the next id.
    fn start_prober(&mut self, target: &Target, probe: Probe) -> RunningProber {
        let id = self.next_id;
        self.next_id += 1;
        let schedule = Schedule::new(&target.key(), &target.check.timing, self.origin, self.tick);
        let recipient = self.tracker.clone().recipient();
        let share = self.sample_share;
        // The key labels sampled spans; not kept when nothing is sampled.
        let key = if share > 0.0 {
            target.key()
        } else {
            String::new()
        };
        let sample = Sampling { share, key };
        let arbiter = &self.arbiters[self.next_arbiter % self.arbiters.len()];
        self.next_arbiter += 1;
        let limits = self.limits.clone();
        let mut prober = Prober::new(
            id,
            probe,
            schedule,
            target.check.clone(),
            recipient,
            sample,
            limits,
        );
        if let Some(ownership) = &self.ownership {
            prober = prober.gated(ownership.gate(&target.key()));
        }
        let handle = prober.start(&arbiter.handle());
        RunningProber { id, handle }
    }
}

/// The prober threads for `targets`' probe rate and the start tick they share.
fn prober_arbiters(targets: &[Target]) -> (Vec<Arbiter>, std::time::Duration) {
    let rate = probe_rate(targets);
    let threads = prober_threads(rate);
    let tick = schedule::tick_for(rate / threads as f64);
    info!(
        threads,
        tick_ms = tick.as_secs_f64() * 1000.0,
        "prober threads and start tick for the configured probe rate"
    );
    ((0..threads).map(|_| Arbiter::new()).collect(), tick)
}

/// One thread carries this many with room to spare (about a tenth of a core here at 2,000
/// probes/s). Every extra thread wakes on its own, so a light load spread over more threads
/// costs more wake-ups and context switches for the same probes (bench/README.md).
const PROBES_PER_THREAD: f64 = 10_000.0;

/// Probes per second `targets` ask for at their intervals.
fn probe_rate(targets: &[Target]) -> f64 {
    targets
        .iter()
        .map(|t| 1.0 / t.check.timing.interval.as_secs_f64().max(1e-3))
        .sum()
}

/// Prober threads for `per_second` probes: one per [`PROBES_PER_THREAD`], at least one, at
/// most one per core. Fixed at start, as is the tick: a reload that adds load keeps both.
fn prober_threads(per_second: f64) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    ((per_second / PROBES_PER_THREAD).ceil() as usize).clamp(1, cores)
}
