//! The load test's result: the numbers operators compare against targets, printed as a
//! table, written as JSON, and drawn as an SVG.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;

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
    /// Detection by fault kind: `{kind: {n, p50_ms, p99_ms}}` (a hang needs `fall`
    /// timeouts, a refusal none).
    pub detect_by_kind: BTreeMap<String, KindDetection>,
    /// Verdict changes of endpoints that were never faulted.
    pub false_transitions: usize,
    /// Probes per second, one sample per second of the window.
    pub probes_per_sec_series: Vec<f64>,
    /// Every detection time, sorted.
    pub detect_ms: Vec<f64>,
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
        text
    }

    /// Two panels: the detection-latency CDF and probes per second over the window.
    pub fn svg(&self) -> String {
        let (w, h, pad) = (900.0, 320.0, 50.0);
        let mut svg = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"12\">\n",
            2.0 * h
        );
        let panel = |svg: &mut String,
                     top: f64,
                     title: &str,
                     points: &[(f64, f64)],
                     x_label: &str,
                     y_max: f64| {
            let x_max = points.iter().map(|p| p.0).fold(0.0, f64::max).max(1e-9);
            let (pw, ph) = (w - 2.0 * pad, h - 2.0 * pad);
            let _ = writeln!(
                svg,
                "<text x=\"{pad}\" y=\"{}\" font-weight=\"bold\">{title}</text>",
                top + 20.0
            );
            let _ = writeln!(
                svg,
                "<rect x=\"{pad}\" y=\"{}\" width=\"{pw}\" height=\"{ph}\" fill=\"none\" stroke=\"#999\"/>",
                top + pad
            );
            let _ = writeln!(
                svg,
                "<text x=\"{}\" y=\"{}\">{x_label} (0 - {x_max:.0})</text>",
                w / 2.0 - 60.0,
                top + h - 10.0
            );
            let _ = writeln!(
                svg,
                "<text x=\"5\" y=\"{}\">{y_max:.0}</text>",
                top + pad + 4.0
            );
            let path: Vec<String> = points
                .iter()
                .map(|(x, y)| {
                    format!(
                        "{:.1},{:.1}",
                        pad + x / x_max * pw,
                        top + pad + ph - y / y_max.max(1e-9) * ph
                    )
                })
                .collect();
            let _ = writeln!(
                svg,
                "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\" points=\"{}\"/>",
                path.join(" ")
            );
        };
        let n = self.detect_ms.len() as f64;
        let cdf: Vec<(f64, f64)> = self
            .detect_ms
            .iter()
            .enumerate()
            .map(|(i, &ms)| (ms, 100.0 * (i + 1) as f64 / n))
            .collect();
        panel(
            &mut svg,
            0.0,
            "Detection latency CDF (% of faulted endpoints)",
            &cdf,
            "ms from fault to sink",
            100.0,
        );
        let rate: Vec<(f64, f64)> = self
            .probes_per_sec_series
            .iter()
            .enumerate()
            .map(|(i, &r)| (i as f64 + 1.0, r))
            .collect();
        let max_rate = rate.iter().map(|p| p.1).fold(0.0, f64::max);
        panel(
            &mut svg,
            h,
            "Probes per second",
            &rate,
            "s into the window",
            max_rate,
        );
        svg.push_str("</svg>\n");
        svg
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
