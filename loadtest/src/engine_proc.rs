//! The engine under test as its own process, so its CPU and memory are its own and not the
//! farm's: started from the real binary, measured through `/proc` and its `/metrics`.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Linux's USER_HZ, the unit of utime/stime in `/proc/PID/stat` (100 on every mainstream
/// architecture).
const TICKS_PER_SECOND: u64 = 100;

/// A running `health-orchestrator run`; killed on drop.
pub struct EngineProcess {
    child: Child,
    api: SocketAddr,
}

impl EngineProcess {
    /// Starts `bin run --config config`, logging to `log` (the config asks for JSON). Each
    /// sink write is a debug line: the per-sink report reads them (`sink_log`).
    pub fn spawn(
        bin: &Path,
        config: &Path,
        api: SocketAddr,
        log: &Path,
    ) -> anyhow::Result<EngineProcess> {
        EngineProcess::spawn_with_log(bin, config, api, log, "warn,ho_engine::delivery=debug")
    }

    /// [`EngineProcess::spawn`] with the log filter `filter` (`RUST_LOG`).
    pub fn spawn_with_log(
        bin: &Path,
        config: &Path,
        api: SocketAddr,
        log: &Path,
        filter: &str,
    ) -> anyhow::Result<EngineProcess> {
        let log = std::fs::File::create(log)?;
        let child = Command::new(bin)
            .args(["run", "--config"])
            .arg(config)
            .env("RUST_LOG", filter)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| {
                anyhow::anyhow!(
                    "starting {}: {e} (build it first: cargo build --profile dist)",
                    bin.display()
                )
            })?;
        Ok(EngineProcess { child, api })
    }

    /// CPU time (user + system) used so far, in milliseconds.
    pub fn cpu_ms(&self) -> anyhow::Result<u64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))?;
        // Fields after the command name, which is in parentheses and may contain spaces.
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks: u64 = fields.get(11).and_then(|f| f.parse().ok()).unwrap_or(0)
            + fields.get(12).and_then(|f| f.parse().ok()).unwrap_or(0);
        Ok(ticks * 1000 / TICKS_PER_SECOND)
    }

    /// Peak resident memory (VmHWM), in MiB.
    pub fn rss_peak_mib(&self) -> anyhow::Result<f64> {
        self.memory_mib("VmHWM:")
    }

    /// Resident memory now (VmRSS), in MiB.
    pub fn rss_mib(&self) -> anyhow::Result<f64> {
        self.memory_mib("VmRSS:")
    }

    fn memory_mib(&self, field: &str) -> anyhow::Result<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        let kib: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0.0);
        Ok(kib / 1024.0)
    }

    /// Whether it is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The engine's Prometheus text.
    pub async fn metrics(&self) -> anyhow::Result<String> {
        let mut s = tokio::net::TcpStream::connect(self.api).await?;
        s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").await?;
        let mut raw = String::new();
        s.read_to_string(&mut raw).await?;
        Ok(raw
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_owned())
            .unwrap_or_default())
    }
}

impl Drop for EngineProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sum of every sample of metric `name` (all label sets).
pub fn metric_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Cumulative buckets `(le, count)` of histogram `name`, sorted by `le`.
pub fn histogram(text: &str, name: &str) -> Vec<(f64, f64)> {
    let prefix = format!("{name}_bucket{{le=\"");
    let mut buckets: Vec<(f64, f64)> = text
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(&prefix)?;
            let (le, rest) = rest.split_once('"')?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((le, rest.rsplit(' ').next()?.parse().ok()?))
        })
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    buckets
}

/// Observations between two scrapes (`before`, `after`) of a histogram, per bucket
/// (cumulative, as the histogram itself).
pub fn delta(before: &[(f64, f64)], after: &[(f64, f64)]) -> Vec<(f64, f64)> {
    after
        .iter()
        .map(|(le, n)| {
            let earlier = before
                .iter()
                .find(|(l, _)| l == le)
                .map_or(0.0, |(_, m)| *m);
            (*le, n - earlier)
        })
        .collect()
}

/// Several processes' deltas of the same histogram as one: the counts of each bucket bound
/// summed (the replicas of a ring share their bucket bounds).
pub fn merge(deltas: impl IntoIterator<Item = Vec<(f64, f64)>>) -> Vec<(f64, f64)> {
    let mut merged: Vec<(f64, f64)> = Vec::new();
    for delta in deltas {
        for (le, n) in delta {
            match merged.iter_mut().find(|(l, _)| *l == le) {
                Some((_, m)) => *m += n,
                None => merged.push((le, n)),
            }
        }
    }
    merged.sort_by(|a, b| a.0.total_cmp(&b.0));
    merged
}

/// Quantile `q` of the observations in `delta`, interpolated linearly within its bucket as
/// Prometheus's `histogram_quantile` does (a quantile in the `+Inf` bucket is reported as
/// the highest finite bound).
pub fn quantile_of(delta: &[(f64, f64)], q: f64) -> Option<f64> {
    let total = delta.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let (mut lower, mut below) = (0.0, 0.0);
    for &(le, n) in delta {
        if n >= rank {
            if le.is_infinite() {
                return Some(lower);
            }
            let inside = n - below;
            let share = if inside > 0.0 {
                (rank - below) / inside
            } else {
                1.0
            };
            return Some(lower + (le - lower) * share);
        }
        (lower, below) = (le, n);
    }
    None
}

/// Share (0-1) of the observations in `delta` above `bound`, which must be one of the
/// histogram's bucket bounds.
pub fn share_above(delta: &[(f64, f64)], bound: f64) -> Option<f64> {
    let total = delta.last()?.1;
    let within = delta.iter().find(|(le, _)| *le == bound)?.1;
    (total > 0.0).then(|| 1.0 - within / total)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# TYPE x histogram\nx_bucket{le=\"0.001\"} 90\nx_bucket{le=\"0.002\"} 99\nx_bucket{le=\"0.004\"} 100\nx_bucket{le=\"+Inf\"} 100\nx_count 100\nprobes_total{result=\"ok\"} 7\nprobes_total{result=\"refused\"} 3\nprobes_total_other 1\n";

    #[test]
    fn parses_counters_and_histogram_quantiles() {
        assert_eq!(metric_sum(TEXT, "probes_total"), 10.0);
        let h = histogram(TEXT, "x");
        assert_eq!(h.len(), 4);
        // 90 observations at or below 1 ms: the median is halfway up the first bucket.
        let close = |a: Option<f64>, b: f64| (a.unwrap() - b).abs() < 1e-12;
        assert!(close(quantile_of(&h, 0.5), 0.0005 * 50.0 / 45.0));
        // The 99th of 100 is the last of the 9 in (1 ms, 2 ms].
        assert!(close(quantile_of(&h, 0.99), 0.002));
        assert!(close(quantile_of(&h, 0.95), 0.001 + 0.001 * 5.0 / 9.0));
        assert!(close(share_above(&h, 0.002), 0.01));
        assert_eq!(share_above(&h, 0.003), None, "not a bucket bound");
        let before = vec![
            (0.001, 90.0),
            (0.002, 90.0),
            (0.004, 90.0),
            (f64::INFINITY, 90.0),
        ];
        // Of the 10 new observations, 9 are in (1 ms, 2 ms]: the median is 5/9 up it.
        assert!(
            close(
                quantile_of(&delta(&before, &h), 0.5),
                0.001 + 0.001 * 5.0 / 9.0
            ),
            "only the 10 new observations count"
        );
        // One replica's 10 new observations beside another's 100: the buckets add up.
        assert_eq!(
            merge([delta(&before, &h), h.clone()]),
            vec![
                (0.001, 90.0),
                (0.002, 108.0),
                (0.004, 110.0),
                (f64::INFINITY, 110.0)
            ]
        );
    }
}
