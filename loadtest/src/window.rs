//! The measured window: faults switched on and off on schedule, a replica SIGKILLed when
//! asked, every replica scraped once a second.

use std::time::{Duration, SystemTime};

use ho_testkit::Behaviour;
use tokio::time::Instant;

use crate::engine_proc::metric_sum;
use crate::farm::Farm;
use crate::fleet::{Fleet, Scrape};
use crate::report::{Sample, Series};
use crate::scenario::{Fault, FaultKind, Scenario};

/// Which gateways each fault takes: disjoint groups spread over the farm (and so over the
/// tenants). Contiguous groups would take whole tenants down, whose fail-open publish of
/// every endpoint is correct but hides the detection being measured.
pub struct FaultPlan {
    groups: Vec<(Fault, Vec<usize>)>,
    faulted: Vec<bool>,
}

impl FaultPlan {
    /// The scenario's faults over `endpoints` gateways, in file order.
    pub fn new(scenario: &Scenario, endpoints: usize) -> FaultPlan {
        let order = spread_order(endpoints);
        let mut groups = Vec::new();
        let mut next = endpoints;
        for fault in &scenario.faults {
            let count = ((fault.share * endpoints as f64).round() as usize).min(next);
            groups.push((fault.clone(), order[next - count..next].to_vec()));
            next -= count;
        }
        let mut faulted = vec![false; endpoints];
        for &i in &order[next..] {
            faulted[i] = true;
        }
        FaultPlan { groups, faulted }
    }

    /// Whether any fault takes gateway `i`.
    pub fn faulted(&self, i: usize) -> bool {
        self.faulted[i]
    }
}

/// Every endpoint index once, consecutive positions far apart: `i * stride mod n` with a
/// stride coprime to `n`.
fn spread_order(n: usize) -> Vec<usize> {
    let gcd = |mut a: usize, mut b: usize| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let mut stride = 7919;
    while n > 1 && gcd(stride, n) != 1 {
        stride += 2;
    }
    (0..n).map(|i| (i * stride) % n.max(1)).collect()
}

/// What the window asks for.
pub struct Schedule {
    /// How long it lasts.
    pub duration: Duration,
    /// The slowest check interval.
    pub interval: Duration,
    /// SIGKILL the last replica this far into the window.
    pub kill_at: Option<Duration>,
}

/// A SIGKILLed replica and how the ring took it.
pub struct Killed {
    /// Its index.
    pub replica: usize,
    /// When.
    pub at: Instant,
    /// When every survivor listed one member fewer.
    pub settled: Option<Instant>,
    /// Each gateway's probes at settling + one interval, and when that was.
    pub visits_from: Option<(Instant, Vec<u32>)>,
}

/// What the window saw.
pub struct Observed {
    /// When it began.
    pub start: Instant,
    /// The same moment on the wall clock.
    pub wall: SystemTime,
    /// How long it lasted, in seconds.
    pub elapsed: f64,
    /// Every replica at the start.
    pub first: Sample,
    /// Every replica at the end (a killed one: just before it was killed).
    pub last: Sample,
    /// One sample per second.
    pub series: Series,
    /// Per gateway: when a fault first took it down.
    pub down_since: Vec<Option<(Instant, SystemTime)>>,
    /// Per gateway: which fault.
    pub kind_of: Vec<Option<FaultKind>>,
    /// The replica killed, if one was.
    pub kill: Option<Killed>,
}

/// Runs the window.
pub async fn observe(
    schedule: &Schedule,
    fleet: &mut Fleet,
    farm: &mut Farm,
    plan: &FaultPlan,
) -> anyhow::Result<Observed> {
    let endpoints = plan.faulted.len();
    if let Some(f) = farm.shared() {
        f.reset_gaps();
    }
    let first = Sample {
        scrapes: fleet.scrape().await?,
        at: Instant::now(),
    };
    let mut seen = Observed {
        start: first.at,
        wall: SystemTime::now(),
        elapsed: 0.0,
        last: Sample {
            scrapes: first.scrapes.clone(),
            at: first.at,
        },
        first,
        series: Series::default(),
        down_since: vec![None; endpoints],
        kind_of: vec![None; endpoints],
        kill: None,
    };
    let mut state: Vec<Option<bool>> = vec![None; plan.groups.len()]; // Some(down?) while active
    let mut next_sample = seen.start + Duration::from_secs(1);
    while seen.start.elapsed() < schedule.duration {
        let t = seen.start.elapsed();
        switch_faults(t, plan, &mut state, farm, &mut seen)?;
        if schedule.kill_at.is_some_and(|at| t >= at) && seen.kill.is_none() {
            let victim = fleet.replicas.len() - 1;
            seen.last.scrapes[victim] = fleet.scrape().await?.swap_remove(victim);
            fleet.kill(victim);
            seen.kill = Some(Killed {
                replica: victim,
                at: Instant::now(),
                settled: None,
                visits_from: None,
            });
        }
        if Instant::now() >= next_sample {
            sample(fleet, farm, schedule.interval, &mut seen).await?;
            next_sample += Duration::from_secs(1);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    seen.elapsed = seen.start.elapsed().as_secs_f64();
    // The window's totals run to its end, not to its last whole second.
    let end = fleet.scrape().await?;
    for (kept, scrape) in seen.last.scrapes.iter_mut().zip(end) {
        if let Some(scrape) = scrape {
            *kept = Some(scrape);
        }
    }
    seen.last.at = Instant::now();
    Ok(seen)
}

/// Turns each fault group down or up as the schedule says at `t`.
fn switch_faults(
    t: Duration,
    plan: &FaultPlan,
    state: &mut [Option<bool>],
    farm: &mut Farm,
    seen: &mut Observed,
) -> anyhow::Result<()> {
    for (fi, (fault, group)) in plan.groups.iter().enumerate() {
        let active = t >= fault.at && t < fault.at + fault.duration;
        let down = active
            && match (fault.kind, fault.period) {
                (FaultKind::Flap, Some(period)) => {
                    ((t - fault.at).as_nanos() / (period.as_nanos() / 2).max(1)).is_multiple_of(2)
                }
                _ => true,
            };
        let want = active.then_some(down);
        if state[fi] == want {
            continue;
        }
        let behaviour = if down {
            fault.behaviour()
        } else {
            Behaviour::Healthy
        };
        for &i in group {
            farm.set(i, &behaviour)?;
            if down && fault.kind != FaultKind::Flap && seen.down_since[i].is_none() {
                seen.down_since[i] = Some((Instant::now(), SystemTime::now()));
                seen.kind_of[i] = Some(fault.kind);
            }
        }
        state[fi] = want;
    }
    Ok(())
}

/// Scrapes every live replica into the series and, after a kill, follows the ring settling.
async fn sample(
    fleet: &Fleet,
    farm: &Farm,
    interval: Duration,
    seen: &mut Observed,
) -> anyhow::Result<()> {
    let now = Sample {
        scrapes: fleet.scrape().await?,
        at: Instant::now(),
    };
    seen.series.sample(&seen.last, &now);
    if let Some(kill) = &mut seen.kill {
        follow_kill(kill, &now, fleet.replicas.len(), farm, interval);
    }
    for (kept, scrape) in seen.last.scrapes.iter_mut().zip(now.scrapes) {
        if let Some(scrape) = scrape {
            *kept = Some(scrape);
        }
    }
    seen.last.at = now.at;
    Ok(())
}

/// Notes when every survivor lists one member fewer, and one interval later each gateway's
/// probe count, from which the report tells whether every gateway is back to its owners.
fn follow_kill(kill: &mut Killed, now: &Sample, replicas: usize, farm: &Farm, interval: Duration) {
    let members = |s: &Scrape| metric_sum(&s.metrics, "health_orchestrator_ring_members");
    let live: Vec<&Scrape> = now.scrapes.iter().flatten().collect();
    if kill.settled.is_none()
        && !live.is_empty()
        && live.iter().all(|s| members(s) == (replicas - 1) as f64)
    {
        kill.settled = Some(now.at);
    }
    if let (Some(settled), None) = (kill.settled, &kill.visits_from) {
        if now.at >= settled + interval {
            kill.visits_from = farm.visits().map(|v| (now.at, v));
        }
    }
}
