//! What each sink did during a run, read from the engine's JSON log: every write that
//! landed (sink, tenant, snapshot number, time), failed writes, back-end throttling and
//! waits for the sink's own rate limit.
//!
//! The log rather than the metrics, because the question a rehearsal answers is per fault:
//! "how long from this gateway failing until *that* sink wrote the change", and only the
//! log says which snapshot each write carried and when.

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde::Deserialize;

/// One log line, the fields the rehearsal reads (the engine logs with `flatten_event`).
#[derive(Deserialize)]
struct Line {
    timestamp: String,
    message: String,
    sink: Option<String>,
    tenant: Option<String>,
    seq: Option<u64>,
    retriable: Option<bool>,
    throttled: Option<bool>,
}

/// A write that landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// When the engine logged it.
    pub at: SystemTime,
    /// The tenant written.
    pub tenant: String,
    /// The snapshot written (it covers every earlier one of the tenant).
    pub seq: u64,
}

/// One sink's activity.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SinkActivity {
    /// Writes that landed, in log order.
    pub written: Vec<Written>,
    /// Failed writes that the engine retries.
    pub retried: usize,
    /// Failed writes that wait for the next change or reconcile.
    pub failed_permanently: usize,
    /// Failures that were the back end refusing for rate.
    pub throttled: usize,
    /// Writes that waited for the sink's own `max_writes_per_second`.
    pub rate_limited: usize,
}

/// Activity per sink in `log`, from `since` on.
pub fn read(log: &str, since: SystemTime) -> BTreeMap<String, SinkActivity> {
    let mut sinks: BTreeMap<String, SinkActivity> = BTreeMap::new();
    for line in log.lines() {
        let Ok(line) = serde_json::from_str::<Line>(line) else {
            continue;
        };
        let (Some(sink), Ok(at)) = (line.sink, humantime::parse_rfc3339_weak(&line.timestamp))
        else {
            continue;
        };
        if at < since {
            continue;
        }
        let activity = sinks.entry(sink).or_default();
        match line.message.as_str() {
            "written" | "drift repaired: the back end had been changed by someone else" => {
                if let (Some(tenant), Some(seq)) = (line.tenant, line.seq) {
                    activity.written.push(Written { at, tenant, seq });
                }
            }
            "rate limited" => activity.rate_limited += 1,
            m if m.starts_with("write failed") => {
                if line.retriable == Some(true) {
                    activity.retried += 1;
                } else {
                    activity.failed_permanently += 1;
                }
                if line.throttled == Some(true) {
                    activity.throttled += 1;
                }
            }
            _ => {}
        }
    }
    sinks
}

impl SinkActivity {
    /// When this sink first wrote snapshot `seq` or a later one of `tenant`, at or after
    /// `after`.
    pub fn first_write(&self, tenant: &str, seq: u64, after: SystemTime) -> Option<SystemTime> {
        self.written
            .iter()
            .filter(|w| w.tenant == tenant && w.seq >= seq && w.at >= after)
            .map(|w| w.at)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const LOG: &str = r#"{"timestamp":"2026-11-23T18:00:00.100000Z","level":"INFO","message":"engine started"}
{"timestamp":"2026-11-23T18:00:01.250000Z","level":"DEBUG","message":"written","sink":"r53","tenant":"t1","seq":4,"applied":"changed","cause":"snapshot"}
{"timestamp":"2026-11-23T18:00:01.300000Z","level":"DEBUG","message":"rate limited","sink":"r53","tenant":"t2","wait":"200ms"}
{"timestamp":"2026-11-23T18:00:01.400000Z","level":"WARN","message":"write failed: Route53 is throttling: Rate exceeded","sink":"r53","tenant":"t2","seq":7,"attempt":1,"retriable":true,"throttled":true}
{"timestamp":"2026-11-23T18:00:01.500000Z","level":"WARN","message":"write failed: HTTP 403","sink":"pdns","tenant":"t2","seq":7,"attempt":1,"retriable":false,"throttled":false}
{"timestamp":"2026-11-23T18:00:02.000000Z","level":"DEBUG","message":"written","sink":"r53","tenant":"t2","seq":9,"applied":"changed","cause":"retry"}
not json at all
"#;

    #[test]
    fn sink_lines_are_counted_per_sink() {
        let start = humantime::parse_rfc3339_weak("2026-11-23T18:00:00Z").unwrap();
        let sinks = read(LOG, start);
        let r53 = &sinks["r53"];
        assert_eq!(r53.written.len(), 2);
        assert_eq!((r53.retried, r53.throttled, r53.rate_limited), (1, 1, 1));
        assert_eq!(sinks["pdns"].failed_permanently, 1);
        // Snapshot 7 of t2 was never written as such: the write of 9 covers it.
        assert_eq!(
            r53.first_write("t2", 7, start),
            Some(start + Duration::from_secs(2))
        );
        assert_eq!(r53.first_write("t1", 5, start), None);
        let later = read(LOG, start + Duration::from_millis(1500));
        assert_eq!(later["r53"].written.len(), 1);
    }
}
