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
    /// Starts `bin run --config config`, logging to `log`.
    pub fn spawn(
        bin: &Path,
        config: &Path,
        api: SocketAddr,
        log: &Path,
    ) -> anyhow::Result<EngineProcess> {
        let log = std::fs::File::create(log)?;
        let child = Command::new(bin)
            .args(["run", "--config"])
            .arg(config)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| {
                anyhow::anyhow!(
                    "starting {}: {e} (build it first: cargo build --release)",
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
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        let kib: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
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

/// The upper bound of the bucket holding quantile `q` of the observations made between two
/// scrapes (`before`, `after`).
pub fn quantile_between(before: &[(f64, f64)], after: &[(f64, f64)], q: f64) -> Option<f64> {
    let delta: Vec<(f64, f64)> = after
        .iter()
        .map(|(le, n)| {
            (
                *le,
                n - before
                    .iter()
                    .find(|(l, _)| l == le)
                    .map_or(0.0, |(_, m)| *m),
            )
        })
        .collect();
    let total = delta.last()?.1;
    if total <= 0.0 {
        return None;
    }
    delta
        .iter()
        .find(|(_, n)| *n >= q * total)
        .map(|(le, _)| *le)
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
        assert_eq!(quantile_between(&[], &h, 0.5), Some(0.001));
        assert_eq!(quantile_between(&[], &h, 0.99), Some(0.002));
        let before = vec![
            (0.001, 90.0),
            (0.002, 90.0),
            (0.004, 90.0),
            (f64::INFINITY, 90.0),
        ];
        assert_eq!(
            quantile_between(&before, &h, 0.5),
            Some(0.002),
            "only the 10 new observations count"
        );
    }
}
