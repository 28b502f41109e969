//! The running plan's probers: one record per target this process probes, spread round robin
//! over prober threads sized at start for the probe rate (each thread's [`Wheel`] holds its
//! records), on schedules sharing one origin and tick fixed at start, so a prober a reload
//! adds keeps the stable phase it would have had.
//!
//! With `[ring]` a target this replica does not probe has neither a prober nor a prepared
//! probe: its slot keeps its id and gate (the target itself is the running plan's), its probe
//! is prepared again when its gate opens (preparing shares TLS settings, so it is cheap) and
//! the prober is stopped when the gate closes (after the make-before-break grace). On a ring
//! of four, three targets in four cost their slot (40 bytes) instead of a prober and a
//! prepared check.

use std::sync::{Mutex, Weak};

use super::*;
use crate::prober::{Reporting, Wheel};
use crate::ring::ownership::{Gate, Ownership};
use crate::ring::rendezvous::target_hash;
use crate::schedule::Grid;
use prometheus_client::metrics::gauge::Gauge;

/// One target of the running plan and its prober, when it runs.
struct Slot {
    id: TargetId,
    /// `[ring]`: whether this replica probes the target.
    gate: Option<Arc<Gate>>,
    /// The probe prepared with the plan, until it moves into the target's first prober;
    /// dropped if the target's gate is closed then (it is prepared again when it opens).
    probe: Option<Box<Probe>>,
    running: Option<ProberHandle>,
}

/// When a started prober probes first.
#[derive(Clone, Copy)]
enum Joining {
    /// At its first slot, at once when that is past: a start, a reload's new target.
    No,
    /// At its next slot: a target gained from another owner, so thousands gained at once
    /// are spread like every probe instead of opening as many connections together (at
    /// 200,000 targets such a burst exhausted the open-file limit and the gateways' accept
    /// queues). The old owner probes on until then (the grace, `ring::handover`).
    Gained,
}

/// Every target's slot, and where new probers go; shared with the ring's gates.
struct Pool {
    /// One per target of the running plan, in the same order.
    slots: Vec<Slot>,
    next_id: TargetId,
    /// Where new probers go, round robin.
    next_arbiter: usize,
    arbiters: Vec<Arbiter>,
    /// Each arbiter's wheel, in the same order.
    wheels: Vec<Wheel>,
    /// Schedules' common origin, and the tick probes start on ([`schedule::tick_for`] the
    /// load at start).
    grid: Grid,
    /// Whether probes are traced (their spans need the target's key): set at start, as
    /// every telemetry setting is.
    sampled: bool,
    /// The running plan: the slots' targets, in the same order.
    plan: Arc<Plan>,
    /// `[ring]`: prepares the probe of a target whose gate opens.
    preparing: Option<ProbeContext>,
}

/// Every running prober, and where new ones go.
pub(super) struct ProberPool {
    pool: Arc<Mutex<Pool>>,
    /// `[ring]`: which targets this replica probes (each slot's gate).
    ownership: Option<Arc<Ownership>>,
}

impl ProberPool {
    /// The threads for `plan`'s probe rate, with no prober yet, reporting to the
    /// `deciders`' tracker and counting live probers in `metrics`. With `ownership`, probers
    /// follow its gates from now on.
    pub(super) fn new(
        plan: &Arc<Plan>,
        deciders: &super::start::Deciders,
        ownership: Option<Arc<Ownership>>,
        metrics: &Metrics,
    ) -> ProberPool {
        let (limits, tracker) = (deciders.limits.clone(), deciders.tracker.clone());
        let live: Gauge = metrics.prober_tasks.clone();
        let (arbiters, tick) = prober_arbiters(&plan.targets);
        let grid = Grid {
            origin: Instant::now(),
            tick,
        };
        let telemetry = &plan.telemetry;
        let sample_share = if telemetry.otlp_endpoint.is_some() {
            telemetry.probe_sample_ratio
        } else {
            0.0
        };
        let wheels = arbiters
            .iter()
            .map(|arbiter| {
                let reporting = Reporting {
                    tracker: tracker.clone().recipient(),
                    limits: limits.clone(),
                    sample_share,
                    grid,
                };
                Wheel::spawn(&arbiter.handle(), reporting, live.clone())
            })
            .collect();
        let pool = Arc::new(Mutex::new(Pool {
            sampled: sample_share > 0.0,
            slots: Vec::new(),
            next_id: 0,
            next_arbiter: 0,
            arbiters,
            wheels,
            grid,
            plan: plan.clone(),
            preparing: None,
        }));
        if let Some(ownership) = &ownership {
            let weak: Weak<Mutex<Pool>> = Arc::downgrade(&pool);
            ownership.follow(Box::new(move || {
                if let Some(pool) = weak.upgrade() {
                    pool.lock()
                        .expect("not poisoned")
                        .follow_gates(Joining::Gained);
                }
            }));
        }
        ProberPool { pool, ownership }
    }

    /// Makes a slot for each of `plan`'s targets with its probe (the start's, whose ids are
    /// the targets' places in the plan) and starts the probers of those probed here. With
    /// `[ring]`, `preparing` prepares the probes of targets gained later.
    pub(super) fn start(&mut self, plan: &Arc<Plan>, probes: Vec<Probe>, preparing: ProbeContext) {
        let mut pool = self.pool.lock().expect("not poisoned");
        pool.plan = plan.clone();
        pool.preparing = self.ownership.is_some().then_some(preparing);
        // One slot a target, for as long as the plan runs: sized exactly, not doubled.
        pool.slots.reserve_exact(plan.targets.len());
        for (target, probe) in plan.targets.iter().zip(probes) {
            let slot = pool.slot(target, probe, self.ownership.as_deref());
            pool.slots.push(slot);
        }
        pool.follow_gates(Joining::No);
        drop(pool);
        self.fit_grace(&plan.targets);
    }

    /// The running plan's target ids, in the plan's order.
    pub(super) fn ids(&self) -> Vec<TargetId> {
        let pool = self.pool.lock().expect("not poisoned");
        pool.slots.iter().map(|s| s.id).collect()
    }

    /// Keeps the slots (and probers) of targets that stay, makes new ones (`probes`: one
    /// per target of `plan` not in `old`, in order), stops the rest.
    pub(super) fn replace(
        &mut self,
        plan: &Arc<Plan>,
        old: &HashMap<&Target, usize>,
        probes: Vec<Probe>,
        summary: &mut ReloadSummary,
    ) {
        let mut pool = self.pool.lock().expect("not poisoned");
        let mut kept: Vec<Option<Slot>> = std::mem::take(&mut pool.slots)
            .into_iter()
            .map(Some)
            .collect();
        let mut probes = probes.into_iter();
        let mut slots = Vec::with_capacity(plan.targets.len());
        for target in &plan.targets {
            let slot = match old.get(target).and_then(|&i| kept[i].take()) {
                Some(slot) => {
                    summary.targets_kept += 1;
                    slot
                }
                None => {
                    summary.targets_added += 1;
                    let probe = probes.next().expect("one probe per new target");
                    pool.slot(target, probe, self.ownership.as_deref())
                }
            };
            slots.push(slot);
        }
        for removed in kept.into_iter().flatten() {
            if let Some(handle) = removed.running {
                handle.stop();
            }
            summary.targets_removed += 1;
        }
        pool.slots = slots;
        pool.plan = plan.clone();
        if let Some(ownership) = &self.ownership {
            let hashes = plan.targets.iter().map(|t| target_hash(&t.key()));
            ownership.retain(&hashes.collect());
        }
        pool.follow_gates(Joining::No);
        drop(pool);
        self.fit_grace(&plan.targets);
    }

    /// Stops every prober thread.
    pub(super) fn stop(&self) {
        for arbiter in &self.pool.lock().expect("not poisoned").arbiters {
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
}

impl Pool {
    /// A new target's slot, with the next id; its prober is not started yet.
    fn slot(&mut self, target: &Target, probe: Probe, ownership: Option<&Ownership>) -> Slot {
        let id = self.next_id;
        self.next_id += 1;
        Slot {
            id,
            gate: ownership.map(|o| o.gate(&target.key())),
            probe: Some(Box::new(probe)),
            running: None,
        }
    }

    /// Starts the prober of every slot probed here without one and stops those whose gate
    /// closed. Reads the gates as they are now, so calls in any order end the same.
    fn follow_gates(&mut self, joining: Joining) {
        let now = Instant::now();
        for i in 0..self.slots.len() {
            let slot = &mut self.slots[i];
            let probes = slot.gate.as_ref().is_none_or(|g| g.is_open());
            match (&slot.running, probes) {
                (None, true) => {
                    let handle = self.start_prober(i, now, joining);
                    self.slots[i].running = handle;
                }
                (Some(_), false) => {
                    if let Some(handle) = slot.running.take() {
                        handle.stop();
                    }
                }
                (None, false) => slot.probe = None,
                (Some(_), true) => {}
            }
        }
    }

    /// Slot `i`'s probe: the one prepared with the plan, or one prepared now. A probe that
    /// cannot be prepared now (its TLS files went away since the plan was validated) is
    /// logged and left unprobed here until the gates move again.
    fn probe_of(&mut self, i: usize) -> Option<Probe> {
        if let Some(probe) = self.slots[i].probe.take() {
            return Some(*probe);
        }
        let target = &self.plan.targets[i];
        let context = self.preparing.as_mut()?;
        Probe::new(target, context)
            .inspect_err(|e| error!(target = %target.key(), error = %e, "ring: a gained target's probe cannot be prepared; it is not probed here"))
            .ok()
    }

    /// Starts slot `i`'s prober on the next thread.
    fn start_prober(&mut self, i: usize, now: Instant, joining: Joining) -> Option<ProberHandle> {
        let probe = self.probe_of(i)?;
        let target = &self.plan.targets[i];
        let id = self.slots[i].id;
        let key = target.key();
        let timing = &target.check.timing;
        let Grid { origin, tick } = self.grid;
        let schedule = Schedule::new(&key, timing, origin, tick);
        let first = match joining {
            Joining::No => schedule.first(),
            Joining::Gained => schedule.next_slot(now),
        };
        // The key labels sampled spans; not kept when nothing is sampled.
        let span_key = self.sampled.then(|| key.into_boxed_str());
        let wheel = &self.wheels[self.next_arbiter % self.wheels.len()];
        self.next_arbiter += 1;
        let prober = Prober::new(id, probe, (schedule, first), target.check.clone(), span_key);
        Some(wheel.start(prober))
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

#[cfg(test)]
mod tests {
    use super::Slot;

    /// Every target of the plan holds a slot for as long as the plan runs, probed here or
    /// not: its id, gate, prepared probe and the handle of its prober, 40 bytes.
    #[test]
    fn a_slot_is_five_words() {
        let slot = std::mem::size_of::<Slot>();
        assert!(slot <= 40, "a slot is {slot} bytes");
    }
}
