//! The load test's result: the numbers operators compare against targets, printed as a
//! table, written as JSON, and drawn as an SVG ([`crate::plots`]).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::engine_proc::{delta, histogram, merge, metric_sum, quantile_of};
use crate::fleet::Scrape;
use crate::per_sink::SinkReport;

/// Everything a run measured. Field names are the documented JSON keys.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Endpoints in the farm.
    pub endpoints: usize,
    /// Whether the farm served every gateway from one listener (refusals became resets).
    pub shared_listener: bool,
    /// Check interval.
    pub interval_ms: u64,
    /// Measured window.
    pub duration_s: f64,
    /// Probes the schedule asked for in the window (endpoints x window / interval).
    pub probes_scheduled: u64,
    /// Probes the engine completed in the window (its own counter).
    pub probes_done: u64,
    /// `probes_done` per second.
    pub probes_per_sec: f64,
    /// 99th percentile of how late probes started against their slot, from the engine's
    /// histogram (interpolated within its bucket).
    pub late_probe_p99_ms: Option<f64>,
    /// Share of probes that started more than 5 ms late (the on-schedule target), in percent
    /// (exact: 5 ms is a bucket bound).
    pub late_over_5ms_pct: Option<f64>,
    /// Engine CPU (user + system) per 1,000 probes.
    pub cpu_ms_per_1k_probes: f64,
    /// Engine peak resident memory (the largest replica's in a ring).
    pub rss_peak_mib: f64,
    /// Each engine process: one, or the replicas of a ring (`--replicas`).
    pub replicas: Vec<ReplicaReport>,
    /// Owners per target in a ring (1 for one process).
    pub replication: usize,
    /// A replica SIGKILLed during the window (`--kill-at`), and how the ring took it.
    pub kill: Option<KillReport>,
    /// Deliveries, over every replica, that published no address for a tenant.
    pub empty_answers: usize,
    /// The longest any gateway went without a probe in the window, from any replica
    /// (measured by the farm; shared-listener farms only).
    pub longest_gap_ms: Option<f64>,
    /// Gateways that went longer than one interval (+ 10 %) without a probe.
    pub gaps_over_interval: Option<usize>,
    /// Endpoints faulted down (refuse, status, reset, hang).
    pub faulted: usize,
    /// Of those, detected (the recording sink saw them go down).
    pub detected: usize,
    /// Fault injected -> recording sink saw the change: median.
    pub detect_p50_ms: Option<f64>,
    /// ... and 99th percentile.
    pub detect_p99_ms: Option<f64>,
    /// The longest detection the check timing allows (a hang: the next slot, `fall`
    /// timeouts, the re-checks between them), without the sink write; the slowest
    /// endpoint's when timings differ.
    pub detect_bound_ms: f64,
    /// Detection by fault kind: `{kind: {n, p50_ms, p99_ms}}` (a hang needs `fall`
    /// timeouts, a refusal none).
    pub detect_by_kind: BTreeMap<String, KindDetection>,
    /// Verdict changes of endpoints that were never faulted (summed over replicas).
    pub false_transitions: usize,
    /// Per sink: writes, retries, throttling, fault -> write (`--config` rehearsals; the
    /// recording sink alone in a synthetic run).
    pub sinks: BTreeMap<String, SinkReport>,
    /// What a rehearsal changed in the user's config to run it on the farm.
    pub notes: Vec<String>,
    /// One sample per second of the window.
    pub series: Series,
    /// Every detection time, sorted.
    pub detect_ms: Vec<f64>,
}

/// The engine over the window, one sample per second.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Series {
    /// Probes completed per second.
    pub probes_per_sec: Vec<f64>,
    /// 99th percentile of how late the second's probes started, in ms.
    pub late_p99_ms: Vec<Option<f64>>,
    /// CPU, in percent of one core (every replica's together).
    pub cpu_pct: Vec<f64>,
    /// Resident memory at the sample, in MiB (every live replica's together).
    pub rss_mib: Vec<f64>,
}

/// One scrape of every replica (`None`: killed), and when.
pub struct Sample {
    /// In replica order.
    pub scrapes: Vec<Option<Scrape>>,
    /// When it was taken.
    pub at: tokio::time::Instant,
}

/// The probe counter.
pub const PROBES: &str = "health_orchestrator_probes_total";
/// The histogram of how late probes started.
pub const START_DELAY: &str = "health_orchestrator_probe_start_delay_seconds";

impl Sample {
    /// The replicas scraped both at `before` and now, as (before, now) pairs.
    pub fn pairs<'a>(
        &'a self,
        before: &'a Sample,
    ) -> impl Iterator<Item = (&'a Scrape, &'a Scrape)> {
        before
            .scrapes
            .iter()
            .zip(&self.scrapes)
            .filter_map(|(b, n)| Some((b.as_ref()?, n.as_ref()?)))
    }

    /// Probe start delays since `before`, over the replicas scraped both times.
    pub fn start_delays(&self, before: &Sample) -> Vec<(f64, f64)> {
        merge(self.pairs(before).map(|(b, n)| {
            delta(
                &histogram(&b.metrics, START_DELAY),
                &histogram(&n.metrics, START_DELAY),
            )
        }))
    }
}

impl Series {
    /// Adds the second between two samples.
    pub fn sample(&mut self, before: &Sample, now: &Sample) {
        let secs = now.at.duration_since(before.at).as_secs_f64().max(1e-3);
        let probes: f64 = now
            .pairs(before)
            .map(|(b, n)| metric_sum(&n.metrics, PROBES) - metric_sum(&b.metrics, PROBES))
            .sum();
        self.probes_per_sec.push(probes / secs);
        self.late_p99_ms
            .push(quantile_of(&now.start_delays(before), 0.99).map(|s| s * 1000.0));
        let cpu_ms: u64 = now
            .pairs(before)
            .map(|(b, n)| n.cpu_ms.saturating_sub(b.cpu_ms))
            .sum();
        self.cpu_pct.push(cpu_ms as f64 / secs / 10.0);
        self.rss_mib
            .push(now.scrapes.iter().flatten().map(|s| s.rss_mib).sum());
    }
}

/// One engine process over the window.
#[derive(Debug, Clone, Serialize)]
pub struct ReplicaReport {
    /// Its ring identity.
    pub identity: String,
    /// Probes it completed per second while it ran.
    pub probes_per_sec: f64,
    /// Its share of every replica's probes, in percent (a fair share is 100 / replicas).
    pub share_pct: f64,
    /// Its CPU per 1,000 of its probes.
    pub cpu_ms_per_1k_probes: f64,
    /// Its peak resident memory.
    pub rss_peak_mib: f64,
    /// Verdict-stream bytes it pushed to the others (`ring_stream_bytes_total`), in KiB.
    pub stream_kib: f64,
    /// 99th percentile age of the verdict batches it took from the others
    /// (`ring_stream_lag_seconds`), in ms; `None`: it took none in the window.
    pub stream_lag_p99_ms: Option<f64>,
    /// Whether it was SIGKILLed during the window.
    pub killed: bool,
}

/// What a SIGKILLed replica cost the ring.
#[derive(Debug, Clone, Serialize)]
pub struct KillReport {
    /// The replica.
    pub identity: String,
    /// When, in seconds into the window.
    pub at_s: f64,
    /// Kill -> every survivor lists one member fewer (and so owns the dead one's targets
    /// anew: ownership is a function of the member list), in seconds, at the 1 s resolution
    /// of the samples; `None`: not within the window.
    pub settled_after_s: Option<f64>,
    /// What the issue allows: the Lease duration plus one interval, in seconds.
    pub bound_s: f64,
    /// Probes per gateway per interval, from settling + one interval to the end of the window:
    /// the fewest any gateway got (2 owners: about 2).
    pub min_probes_per_interval: Option<f64>,
    /// Gateways probed fewer than 1.5 times per interval over that stretch (one owner).
    pub under_two_owners: Option<usize>,
}

/// Detection statistics of one fault kind.
#[derive(Debug, Clone, Serialize)]
pub struct KindDetection {
    /// Endpoints detected.
    pub n: usize,
    /// Median.
    pub p50_ms: Option<f64>,
    /// 99th percentile.
    pub p99_ms: Option<f64>,
}

impl KindDetection {
    /// Statistics of sorted detection times.
    pub fn of(sorted: &[f64]) -> KindDetection {
        KindDetection {
            n: sorted.len(),
            p50_ms: quantile(sorted, 0.5),
            p99_ms: quantile(sorted, 0.99),
        }
    }
}

/// The `q` quantile of sorted values (nearest rank).
pub fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

fn opt(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}"))
}

impl Report {
    /// A two-column table for the terminal.
    pub fn table(&self) -> String {
        let rows = [
            ("endpoints", self.endpoints.to_string()),
            ("interval_ms", self.interval_ms.to_string()),
            ("duration_s", format!("{:.1}", self.duration_s)),
            ("probes_scheduled", self.probes_scheduled.to_string()),
            ("probes_done", self.probes_done.to_string()),
            ("probes_per_sec", format!("{:.1}", self.probes_per_sec)),
            ("late_probe_p99_ms", opt(self.late_probe_p99_ms)),
            ("late_over_5ms_pct", opt(self.late_over_5ms_pct)),
            (
                "cpu_ms_per_1k_probes",
                format!("{:.1}", self.cpu_ms_per_1k_probes),
            ),
            ("rss_peak_mib", format!("{:.1}", self.rss_peak_mib)),
            ("empty_answers", self.empty_answers.to_string()),
            ("longest_gap_ms", opt(self.longest_gap_ms)),
            (
                "gaps_over_interval",
                self.gaps_over_interval
                    .map_or("-".into(), |n| n.to_string()),
            ),
            (
                "faulted / detected",
                format!("{} / {}", self.faulted, self.detected),
            ),
            ("detect_p50_ms", opt(self.detect_p50_ms)),
            ("detect_p99_ms", opt(self.detect_p99_ms)),
            ("false_transitions", self.false_transitions.to_string()),
        ];
        let mut text: String = rows
            .iter()
            .map(|(k, v)| format!("{k:<24} {v:>12}\n"))
            .collect();
        for (kind, d) in &self.detect_by_kind {
            text.push_str(&format!(
                "  {kind:<22} n={:<5} p50 {:>7} p99 {:>7} ms\n",
                d.n,
                opt(d.p50_ms),
                opt(d.p99_ms)
            ));
        }
        text.push_str(&format!(
            "{:<24} {:>12}\n",
            "detect_bound_ms",
            format!("{:.0}", self.detect_bound_ms)
        ));
        if self.replicas.len() > 1 {
            text.push_str(&format!(
                "replica (replication {})  probes/s  share_%  cpu_ms/1k  rss_peak_mib  stream_kib  lag_p99_ms\n",
                self.replication
            ));
            for r in &self.replicas {
                text.push_str(&format!(
                    "{:<24} {:>9.1} {:>8.1} {:>10.1} {:>13.1} {:>11.0} {:>11}{}\n",
                    r.identity,
                    r.probes_per_sec,
                    r.share_pct,
                    r.cpu_ms_per_1k_probes,
                    r.rss_peak_mib,
                    r.stream_kib,
                    r.stream_lag_p99_ms
                        .map_or_else(|| "-".to_owned(), |ms| format!("{ms:.2}")),
                    if r.killed { "  (killed)" } else { "" }
                ));
            }
        }
        if let Some(k) = &self.kill {
            text.push_str(&format!(
                "kill {} at {:.1} s: settled after {} s (bound {:.0} s); probes/gateway/interval after: min {}, under 1.5: {}\n",
                k.identity,
                k.at_s,
                opt(k.settled_after_s),
                k.bound_s,
                opt(k.min_probes_per_interval),
                k.under_two_owners.map_or("-".into(), |n| n.to_string())
            ));
        }
        if !self.sinks.is_empty() {
            text.push_str(
                "sink                      writes retries  failed throttled rate_limited changes unwritten  p50_ms  p99_ms pending\n",
            );
        }
        for (name, s) in &self.sinks {
            text.push_str(&format!(
                "{name:<24} {:>7} {:>7} {:>7} {:>9} {:>12} {:>7} {:>9} {:>7} {:>7} {:>7}\n",
                s.writes,
                s.retried,
                s.failed_permanently,
                s.throttled,
                s.rate_limited,
                s.changes,
                s.unwritten,
                opt(s.fault_to_write_p50_ms),
                opt(s.fault_to_write_p99_ms),
                s.pending_at_end
            ));
        }
        for note in &self.notes {
            text.push_str(&format!("note: {note}\n"));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::quantile;

    #[test]
    fn nearest_rank_quantiles() {
        let v = [10.0, 20.0, 30.0, 40.0];
        assert_eq!(quantile(&v, 0.5), Some(20.0));
        assert_eq!(quantile(&v, 0.99), Some(40.0));
        assert_eq!(quantile(&[], 0.5), None);
    }
}
