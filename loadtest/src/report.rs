//! The load test's result: the numbers operators compare against targets, printed as a
//! table, written as JSON, and drawn as an SVG ([`crate::plots`]).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::engine_proc::{histogram, metric_sum, quantile_between};
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
    /// Engine peak resident memory.
    pub rss_peak_mib: f64,
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
    /// Verdict changes of endpoints that were never faulted.
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
    /// CPU, in percent of one core.
    pub cpu_pct: Vec<f64>,
    /// Resident memory at the sample, in MiB.
    pub rss_mib: Vec<f64>,
}

/// One scrape of the engine: its metrics text, its CPU time so far, and when.
pub struct Sample {
    /// `/metrics`.
    pub metrics: String,
    /// User + system CPU so far, in ms.
    pub cpu_ms: u64,
    /// When it was taken.
    pub at: tokio::time::Instant,
}

impl Series {
    /// Adds the second between two scrapes; `rss_mib` is the memory now.
    pub fn sample(&mut self, before: &Sample, now: &Sample, rss_mib: f64) {
        let secs = now.at.duration_since(before.at).as_secs_f64().max(1e-3);
        let probes = "health_orchestrator_probes_total";
        self.probes_per_sec
            .push((metric_sum(&now.metrics, probes) - metric_sum(&before.metrics, probes)) / secs);
        let delay = "health_orchestrator_probe_start_delay_seconds";
        self.late_p99_ms.push(
            quantile_between(
                &histogram(&before.metrics, delay),
                &histogram(&now.metrics, delay),
                0.99,
            )
            .map(|s| s * 1000.0),
        );
        self.cpu_pct
            .push(now.cpu_ms.saturating_sub(before.cpu_ms) as f64 / secs / 10.0);
        self.rss_mib.push(rss_mib);
    }
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
