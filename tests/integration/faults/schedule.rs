//! A seeded random fault schedule: what goes wrong, to whom, when, and when it heals. The
//! same seed gives the same schedule, so a violation is replayed by its seed.

use std::fmt;
use std::time::Duration;

/// One fault. Processes are numbered as the run's [`Shape`] lists them.
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
    /// The process is stopped (SIGSTOP), as a paused VM; healed by SIGCONT.
    Pause(usize),
    /// The process is killed (SIGKILL); healed by starting it again.
    Kill(usize),
    /// The process restarts with its wall clock this far off (libfaketime); healed by a
    /// restart with the true clock.
    Skew(usize, &'static str),
    /// The zone's back end (pdns_server) is stopped; healed by starting it again.
    BackendDown,
    /// The process is cut from the zone's back end (its link blackholes, as a partition);
    /// healed by mending the link.
    BackendCut(usize),
    /// The process's link to the zone's back end holds every chunk this many milliseconds
    /// each way (a slow path); healed by passing them at once.
    BackendSlow(usize, u64),
    /// The process loses this share (percent) of its packets each way, on its probes' path
    /// and its ways to the back end or its peers (dropped by the kernel, see `loss.rs`): an
    /// impaired vantage; healed by dropping none.
    Loss(usize, u32),
    /// The replica is cut from the Kubernetes API server (its requests get 503, as from a
    /// partitioned node); healed by answering them again. Replicas under a Lease only.
    ApiCut(usize),
    /// Cluster `reader` cannot reach cluster `peer`'s DNS server for its reports (and, with
    /// `both`, neither can `peer` reach `reader`'s): a partition between clusters that
    /// serve their zone themselves. Healed by mending the links.
    Partition {
        /// The cluster that cannot read.
        reader: usize,
        /// The cluster it cannot read.
        peer: usize,
        /// Both ways.
        both: bool,
    },
}

impl Fault {
    /// The process it acts on, if it acts on one.
    pub fn process(&self) -> Option<usize> {
        match self {
            Fault::Pause(p)
            | Fault::Kill(p)
            | Fault::Skew(p, _)
            | Fault::BackendCut(p)
            | Fault::BackendSlow(p, _)
            | Fault::Loss(p, _)
            | Fault::ApiCut(p) => Some(*p),
            Fault::Gateway { .. } | Fault::BackendDown | Fault::Partition { .. } => None,
        }
    }

    /// Its kind, as the figures count them.
    pub fn kind(&self, clusters: usize) -> &'static str {
        match self {
            Fault::Gateway { vantages, .. } if vantages.len() == clusters => "gateway down",
            Fault::Gateway { .. } => "partition from a gateway",
            Fault::Pause(_) => "pause",
            Fault::Kill(_) => "kill and restart",
            Fault::Skew(..) => "clock 30 s off",
            Fault::BackendDown => "back end down",
            Fault::BackendCut(_) => "cut from the back end",
            Fault::BackendSlow(..) => "slow link to the back end",
            Fault::Loss(..) => "packet loss",
            Fault::ApiCut(_) => "replica cut from the API server",
            Fault::Partition { both: true, .. } => "partition between clusters",
            Fault::Partition { .. } => "one-way partition between clusters",
        }
    }

    /// Whether cluster `reader` cannot read cluster `peer`'s reports because of it.
    pub fn cuts(&self, reader: usize, peer: usize) -> bool {
        match *self {
            Fault::Partition {
                reader: r,
                peer: p,
                both,
            } => (r == reader && p == peer) || (both && r == peer && p == reader),
            _ => false,
        }
    }
}

/// What a schedule acts on.
#[derive(Debug, Clone)]
pub struct Shape {
    /// How many clusters (vantages).
    pub clusters: usize,
    /// How many gateways.
    pub gateways: usize,
    /// Each process: its cluster, and whether it is a replica under a Lease.
    pub processes: Vec<(usize, bool)>,
    /// Whether the clusters share a zone's back end (faults on it and on the ways to it);
    /// else each serves the zone itself and they read each other's reports (partitions
    /// between them).
    pub back_end: bool,
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
/// 1-4 s (a replica's 3-6 s) and healed by then, on `shape`; one fault at a time per
/// process, gateway, and back end or partition between clusters.
pub fn schedule(seed: u64, faults_until: Duration, shape: &Shape) -> Vec<Step> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut steps = Vec::new();
    let (clusters, processes) = (shape.clusters, shape.processes.len());
    let replicas: Vec<usize> = (0..processes).filter(|&p| shape.processes[p].1).collect();
    let mut process_free = vec![Duration::ZERO; processes];
    let mut gateway_free = vec![Duration::ZERO; shape.gateways];
    let mut backend_free = Duration::ZERO;
    let mut at = Duration::from_secs(2);
    while at < faults_until {
        let length = Duration::from_millis(rng.u64(1_000..=4_000));
        let heal = (at + length).min(faults_until);
        let roll = rng.u32(0..12);
        // Clusters serving the zone themselves take partitions between them where a shared
        // back end would take its faults (three rolls in twelve).
        let partition = !shape.back_end && matches!(roll, 5 | 9 | 11);
        let fault: Option<(Fault, Duration)> = match roll {
            0..=3 => {
                let gateway = rng.usize(0..shape.gateways);
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
                    (Fault::Gateway { gateway, vantages }, heal)
                })
            }
            _ if partition => (backend_free <= at).then(|| {
                backend_free = heal + Duration::from_millis(500);
                let reader = rng.usize(0..clusters);
                let peer = (reader + rng.usize(1..clusters)) % clusters;
                let both = rng.bool();
                (Fault::Partition { reader, peer, both }, heal)
            }),
            kind @ 4..=10 => {
                // Replicas take two faults in three, and theirs last 2 s longer, so that
                // many of them outlast the Lease and hand it over.
                let p = if !replicas.is_empty() && rng.u32(0..3) < 2 {
                    replicas[rng.usize(0..replicas.len())]
                } else {
                    rng.usize(0..processes)
                };
                let heal = if shape.processes[p].1 {
                    (heal + Duration::from_secs(2)).min(faults_until)
                } else {
                    heal
                };
                (process_free[p] <= at).then(|| {
                    process_free[p] = heal + Duration::from_millis(500);
                    let replica = shape.processes[p].1;
                    let fault = match kind {
                        4 => Fault::Pause(p),
                        10 => Fault::Loss(p, rng.u32(30..=60)),
                        5 => Fault::BackendCut(p),
                        7 if replica => Fault::ApiCut(p),
                        6 | 7 => Fault::Kill(p),
                        8 => Fault::Skew(p, if rng.bool() { "+30s" } else { "-30s" }),
                        _ => Fault::BackendSlow(p, rng.u64(100..=600)),
                    };
                    (fault, heal)
                })
            }
            _ => (backend_free <= at).then(|| {
                backend_free = heal + Duration::from_millis(500);
                (Fault::BackendDown, heal)
            }),
        };
        if let Some((fault, heal)) = fault {
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
        let shape = Shape {
            clusters: 3,
            gateways: 3,
            processes: vec![(0, true), (0, true), (1, false), (2, false)],
            back_end: true,
        };
        let a = schedule(7, until, &shape);
        let b = schedule(7, until, &shape);
        assert_eq!(format!("{a:?}"), format!("{b:?}"), "reproducible");
        assert_ne!(
            format!("{a:?}"),
            format!("{:?}", schedule(8, until, &shape))
        );
        for s in (1..40).flat_map(|seed| schedule(seed, until, &shape)) {
            if let Fault::ApiCut(p) = s.fault {
                assert!(
                    shape.processes[p].1,
                    "{s}: only replicas under a Lease are cut from the API"
                );
            }
        }
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
                    (Fault::Partition { .. }, Fault::Partition { .. }) => true,
                    (f, g) => f.process().is_some() && f.process() == g.process(),
                };
                assert!(!same || y.at >= x.heal, "{x} overlaps {y}");
            }
        }
    }

    #[test]
    fn clusters_serving_their_zone_get_partitions_between_them_and_no_back_end_faults() {
        let shape = Shape {
            clusters: 3,
            gateways: 3,
            processes: vec![(0, false), (1, false), (2, false)],
            back_end: false,
        };
        let steps: Vec<Step> = (1..40)
            .flat_map(|seed| schedule(seed, Duration::from_secs(30), &shape))
            .collect();
        assert!(steps
            .iter()
            .any(|s| matches!(s.fault, Fault::Partition { both: true, .. })));
        assert!(steps
            .iter()
            .any(|s| matches!(s.fault, Fault::Partition { both: false, .. })));
        for s in &steps {
            match s.fault {
                Fault::Partition { reader, peer, .. } => assert_ne!(reader, peer, "{s}"),
                Fault::BackendDown
                | Fault::BackendCut(_)
                | Fault::BackendSlow(..)
                | Fault::ApiCut(_) => panic!("{s}: no shared back end nor Lease here"),
                _ => {}
            }
        }
    }
}
