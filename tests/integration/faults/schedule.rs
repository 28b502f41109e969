//! A seeded random fault schedule: what goes wrong, to whom, when, and when it heals. The
//! same seed gives the same schedule, so a violation is replayed by its seed.

use std::fmt;
use std::time::Duration;

/// One fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Gateway `gateway` fails for the probes of these clusters: all of them, it is down;
    /// some, a partition between them and it.
    Gateway {
        /// Which gateway.
        gateway: usize,
        /// Which clusters' probes it fails.
        vantages: Vec<usize>,
    },
    /// The cluster's process is stopped (SIGSTOP), as a paused VM; healed by SIGCONT.
    Pause(usize),
    /// The cluster's process is killed (SIGKILL); healed by starting it again.
    Kill(usize),
    /// The cluster restarts with its wall clock this far off (libfaketime); healed by a
    /// restart with the true clock.
    Skew(usize, &'static str),
    /// The zone's back end (pdns_server) is stopped; healed by starting it again.
    BackendDown,
    /// The cluster is cut from the zone's back end (its link blackholes, as a partition);
    /// healed by mending the link.
    BackendCut(usize),
}

/// A fault and its span, from the start of the run.
#[derive(Debug, Clone)]
pub struct Step {
    /// When it starts.
    pub at: Duration,
    /// When it heals.
    pub heal: Duration,
    /// What.
    pub fault: Fault,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:>6.1}s-{:>6.1}s {:?}",
            self.at.as_secs_f64(),
            self.heal.as_secs_f64(),
            self.fault
        )
    }
}

/// The schedule of seed `seed`: faults starting from 2 s until `faults_until`, each lasting
/// 1-4 s and healed by then, on `clusters` clusters and `gateways` gateways; one fault at a
/// time per cluster, gateway and back end.
pub fn schedule(seed: u64, faults_until: Duration, clusters: usize, gateways: usize) -> Vec<Step> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut steps = Vec::new();
    let mut cluster_free = vec![Duration::ZERO; clusters];
    let mut gateway_free = vec![Duration::ZERO; gateways];
    let mut backend_free = Duration::ZERO;
    let mut at = Duration::from_secs(2);
    while at < faults_until {
        let length = Duration::from_millis(rng.u64(1_000..=4_000));
        let heal = (at + length).min(faults_until);
        let fault = match rng.u32(0..10) {
            0..=3 => {
                let gateway = rng.usize(0..gateways);
                (gateway_free[gateway] <= at).then(|| {
                    gateway_free[gateway] = heal;
                    let vantages = if rng.bool() {
                        (0..clusters).collect()
                    } else {
                        let mut some: Vec<usize> = (0..clusters).filter(|_| rng.bool()).collect();
                        if some.is_empty() {
                            some.push(rng.usize(0..clusters));
                        }
                        some
                    };
                    Fault::Gateway { gateway, vantages }
                })
            }
            kind @ 4..=8 => {
                let c = rng.usize(0..clusters);
                (cluster_free[c] <= at).then(|| {
                    cluster_free[c] = heal + Duration::from_millis(500);
                    match kind {
                        4 => Fault::Pause(c),
                        5 => Fault::BackendCut(c),
                        6 | 7 => Fault::Kill(c),
                        _ => Fault::Skew(c, if rng.bool() { "+30s" } else { "-30s" }),
                    }
                })
            }
            _ => (backend_free <= at).then(|| {
                backend_free = heal + Duration::from_millis(500);
                Fault::BackendDown
            }),
        };
        if let Some(fault) = fault {
            steps.push(Step { at, heal, fault });
        }
        at += Duration::from_millis(rng.u64(300..=2_000));
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_one_schedule_healed_in_time_without_overlap_per_target() {
        let until = Duration::from_secs(30);
        let a = schedule(7, until, 3, 3);
        let b = schedule(7, until, 3, 3);
        assert_eq!(format!("{a:?}"), format!("{b:?}"), "reproducible");
        assert_ne!(format!("{a:?}"), format!("{:?}", schedule(8, until, 3, 3)));
        assert!(a.len() >= 8, "{a:#?}");
        for s in &a {
            assert!(s.at < s.heal && s.heal <= until, "{s}");
        }
        for (i, x) in a.iter().enumerate() {
            for y in &a[i + 1..] {
                let same = match (&x.fault, &y.fault) {
                    (Fault::Gateway { gateway: g, .. }, Fault::Gateway { gateway: h, .. }) => {
                        g == h
                    }
                    (Fault::BackendDown, Fault::BackendDown) => true,
                    (
                        Fault::Pause(c) | Fault::Kill(c) | Fault::Skew(c, _) | Fault::BackendCut(c),
                        Fault::Pause(d) | Fault::Kill(d) | Fault::Skew(d, _) | Fault::BackendCut(d),
                    ) => c == d,
                    _ => false,
                };
                assert!(!same || y.at >= x.heal, "{x} overlaps {y}");
            }
        }
    }
}
