//! From what a window observed to the report: probe rate, lateness, CPU and memory per
//! replica and in all, detection as every live replica would serve it, false transitions,
//! empty answers, and what a killed replica cost the ring.

use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::engine_proc::{delta, histogram, metric_sum, quantile_of, share_above};
use crate::farm::address;
use crate::fleet::{Fleet, Scrape, LEASE_DURATION};
use crate::recorder::Seen;
use crate::rehearsal::Timing;
use crate::report::{quantile, KillReport, KindDetection, ReplicaReport, Report, PROBES};
use crate::scenario::FaultKind;
use crate::window::{FaultPlan, Killed, Observed};
use crate::{per_sink, sink_log};

/// What the report needs beside the window.
pub struct Summary<'a> {
    /// Endpoints in the farm.
    pub endpoints: usize,
    /// Whether the farm served every gateway from one listener.
    pub shared_listener: bool,
    /// The slowest check interval.
    pub slowest: Duration,
    /// Each endpoint's check timing.
    pub timings: &'a [Timing],
    /// The sinks each tenant writes to (rehearsals).
    pub tenant_sinks: BTreeMap<String, Vec<String>>,
    /// What a rehearsal changed in the user's config.
    pub notes: Vec<String>,
    /// Owners per target (1 for one process).
    pub replication: usize,
    /// The longest gap between probes of any gateway and how many exceeded an interval.
    pub gaps: Option<(Duration, usize)>,
    /// Each gateway's probes at the end, and when.
    pub visits_at_end: Option<(Instant, Vec<u32>)>,
}

impl Summary<'_> {
    /// The report of `observed`, with `tail` scraped after the last deliveries settled.
    pub fn report(
        self,
        fleet: &Fleet,
        plan: &FaultPlan,
        observed: Observed,
        tail: &[Option<Scrape>],
    ) -> anyhow::Result<Report> {
        let replicas = self.replicas(fleet, &observed);
        let probes_done: f64 = observed
            .last
            .pairs(&observed.first)
            .map(|(b, n)| metric_sum(&n.metrics, PROBES) - metric_sum(&b.metrics, PROBES))
            .sum();
        let cpu_ms: u64 = observed
            .last
            .pairs(&observed.first)
            .map(|(b, n)| n.cpu_ms.saturating_sub(b.cpu_ms))
            .sum();
        let delays = observed.last.start_delays(&observed.first);
        let detections = self.detections(fleet, &observed);
        let detect_ms = sorted(detections.iter().map(|d| d.1).collect());
        let ip_of = |i: usize| address(i).ok().map(IpAddr::V4);
        let faulted_ips: HashSet<IpAddr> = (0..self.endpoints)
            .filter(|&i| plan.faulted(i))
            .filter_map(ip_of)
            .collect();
        let false_transitions = fleet
            .replicas
            .iter()
            .flat_map(|r| r.recorder.seen())
            .filter(|s| s.at >= observed.start && !faulted_ips.contains(&s.address))
            .count();
        let faults: Vec<(IpAddr, SystemTime)> = observed
            .down_since
            .iter()
            .enumerate()
            .filter_map(|(i, since)| Some((ip_of(i)?, since.as_ref()?.1)))
            .collect();
        let first = &fleet.replicas[0];
        let activity = sink_log::read(&std::fs::read_to_string(&first.log)?, observed.wall);
        let tail_metrics = tail[0].as_ref().map_or("", |s| s.metrics.as_str());
        let sinks = per_sink::report(
            &activity,
            &self.tenant_sinks,
            &first.recorder.seen(),
            &faults,
            tail_metrics,
        );
        let probes_per_second: f64 = self
            .timings
            .iter()
            .map(|t| 1.0 / t.interval.as_secs_f64())
            .sum();
        let elapsed = observed.elapsed;
        Ok(Report {
            endpoints: self.endpoints,
            shared_listener: self.shared_listener,
            interval_ms: self.slowest.as_millis() as u64,
            duration_s: elapsed,
            probes_scheduled: (probes_per_second * self.replication as f64 * elapsed) as u64,
            probes_done: probes_done as u64,
            probes_per_sec: probes_done / elapsed,
            late_probe_p99_ms: quantile_of(&delays, 0.99).map(|s| s * 1000.0),
            late_over_5ms_pct: share_above(&delays, 0.005).map(|share| share * 100.0),
            cpu_ms_per_1k_probes: cpu_ms as f64 * 1000.0 / probes_done.max(1.0),
            rss_peak_mib: replicas.iter().map(|r| r.rss_peak_mib).fold(0.0, f64::max),
            kill: observed
                .kill
                .as_ref()
                .map(|k| self.kill(k, &observed, fleet)),
            replicas,
            replication: self.replication,
            empty_answers: fleet
                .replicas
                .iter()
                .map(|r| r.recorder.empty_since(observed.start))
                .sum(),
            longest_gap_ms: self.gaps.map(|(g, _)| g.as_secs_f64() * 1000.0),
            gaps_over_interval: self.gaps.map(|(_, n)| n),
            faulted: observed.down_since.iter().filter(|s| s.is_some()).count(),
            detected: detect_ms.len(),
            detect_p50_ms: quantile(&detect_ms, 0.5),
            detect_p99_ms: quantile(&detect_ms, 0.99),
            detect_bound_ms: self
                .timings
                .iter()
                .map(|t| t.detection_bound().as_secs_f64() * 1000.0)
                .fold(0.0, f64::max),
            detect_by_kind: by_kind(&detections),
            false_transitions,
            sinks,
            notes: self.notes,
            series: observed.series,
            detect_ms,
        })
    }

    /// Each replica's probes, share, CPU and memory over the time it ran in the window.
    fn replicas(&self, fleet: &Fleet, observed: &Observed) -> Vec<ReplicaReport> {
        let killed = observed.kill.as_ref().map(|k| k.replica);
        let pairs: Vec<Option<(&Scrape, &Scrape)>> = observed
            .first
            .scrapes
            .iter()
            .zip(&observed.last.scrapes)
            .map(|(b, n)| Some((b.as_ref()?, n.as_ref()?)))
            .collect();
        let probes = |(b, n): (&Scrape, &Scrape)| {
            metric_sum(&n.metrics, PROBES) - metric_sum(&b.metrics, PROBES)
        };
        let total: f64 = pairs.iter().flatten().map(|&p| probes(p)).sum();
        let stream = "health_orchestrator_ring_stream_bytes_total";
        let lag = "health_orchestrator_ring_stream_lag_seconds";
        fleet
            .replicas
            .iter()
            .zip(pairs)
            .enumerate()
            .filter_map(|(i, (replica, pair))| {
                let (b, n) = pair?;
                let ran = match (&observed.kill, killed == Some(i)) {
                    (Some(k), true) => k.at.duration_since(observed.start).as_secs_f64(),
                    _ => observed.elapsed,
                };
                let done = probes((b, n));
                Some(ReplicaReport {
                    identity: replica.identity.clone(),
                    probes_per_sec: done / ran.max(1e-3),
                    share_pct: done * 100.0 / total.max(1.0),
                    cpu_ms_per_1k_probes: n.cpu_ms.saturating_sub(b.cpu_ms) as f64 * 1000.0
                        / done.max(1.0),
                    rss_peak_mib: n.rss_peak_mib,
                    stream_kib: (metric_sum(&n.metrics, stream) - metric_sum(&b.metrics, stream))
                        / 1024.0,
                    stream_lag_p99_ms: quantile_of(
                        &delta(&histogram(&b.metrics, lag), &histogram(&n.metrics, lag)),
                        0.99,
                    )
                    .map(|s| s * 1000.0),
                    killed: killed == Some(i),
                })
            })
            .collect()
    }

    /// Per faulted gateway: fault -> the last surviving replica's delivery without it (the
    /// moment no replica serves it any more), in ms; a gateway some surviving replica never
    /// withdrew is not detected.
    fn detections(&self, fleet: &Fleet, observed: &Observed) -> Vec<(FaultKind, f64)> {
        let killed = observed.kill.as_ref().map(|k| k.replica);
        let seens: Vec<Vec<Seen>> = (0..fleet.replicas.len())
            .filter(|&i| Some(i) != killed)
            .map(|i| fleet.replicas[i].recorder.seen())
            .collect();
        let withdrawn = |seen: &[Seen], ip: IpAddr, since: Instant| {
            seen.iter()
                .find(|s| s.address == ip && !s.published && s.at >= since)
                .map(|s| s.at)
        };
        observed
            .down_since
            .iter()
            .enumerate()
            .filter_map(|(i, since)| {
                let (since, _) = (*since)?;
                let ip = IpAddr::V4(address(i).ok()?);
                let last = seens
                    .iter()
                    .map(|seen| withdrawn(seen, ip, since))
                    .collect::<Option<Vec<Instant>>>()?
                    .into_iter()
                    .max()?;
                Some((observed.kind_of[i]?, (last - since).as_secs_f64() * 1000.0))
            })
            .collect()
    }

    /// How long the ring took to settle after the kill, and whether every gateway got its
    /// owners' probes afterwards.
    fn kill(&self, k: &Killed, observed: &Observed, fleet: &Fleet) -> KillReport {
        let per_interval = match (&k.visits_from, &self.visits_at_end) {
            (Some((from, before)), Some((to, after))) if to > from => {
                let intervals = to.duration_since(*from).as_secs_f64() / self.slowest.as_secs_f64();
                let rates: Vec<f64> = before
                    .iter()
                    .zip(after)
                    .map(|(b, a)| f64::from(a.saturating_sub(*b)) / intervals)
                    .collect();
                Some(rates)
            }
            _ => None,
        };
        KillReport {
            identity: fleet.replicas[k.replica].identity.clone(),
            at_s: k.at.duration_since(observed.start).as_secs_f64(),
            settled_after_s: k.settled.map(|s| s.duration_since(k.at).as_secs_f64()),
            bound_s: (LEASE_DURATION + self.slowest).as_secs_f64(),
            min_probes_per_interval: per_interval
                .as_ref()
                .map(|r| r.iter().copied().fold(f64::INFINITY, f64::min)),
            under_two_owners: per_interval.map(|r| r.iter().filter(|&&x| x < 1.5).count()),
        }
    }
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

fn by_kind(detections: &[(FaultKind, f64)]) -> BTreeMap<String, KindDetection> {
    let mut by_kind = BTreeMap::new();
    for kind in [
        FaultKind::Refuse,
        FaultKind::Status,
        FaultKind::Reset,
        FaultKind::Hang,
    ] {
        let times = sorted(
            detections
                .iter()
                .filter(|d| d.0 == kind)
                .map(|d| d.1)
                .collect(),
        );
        if !times.is_empty() {
            by_kind.insert(
                format!("{kind:?}").to_lowercase(),
                KindDetection::of(&times),
            );
        }
    }
    by_kind
}
