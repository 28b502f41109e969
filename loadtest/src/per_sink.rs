//! Per sink: how many writes, retries and throttles, and how long from each injected fault
//! until that sink wrote the change.
//!
//! The recording sink says which snapshot of a tenant first left a faulted address out
//! (every sink of the tenant writes the same numbered snapshots); the engine's log says
//! when each sink wrote that snapshot or a later one. Fault -> write is the time between
//! the fault and that write. A change the sink had not written by the end of the run is
//! counted as `unwritten` rather than given a time.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::SystemTime;

use serde::Serialize;

use crate::engine_proc::metric_sum;
use crate::recorder::Seen;
use crate::rehearsal::RECORDER;
use crate::report::quantile;
use crate::sink_log::SinkActivity;

/// One sink's part of the report.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct SinkReport {
    /// Writes that landed during the window (changed or already up to date).
    pub writes: usize,
    /// Failed writes the engine retried.
    pub retried: usize,
    /// Failed writes not retried (they wait for the next change or reconcile).
    pub failed_permanently: usize,
    /// Failures that were the back end refusing for rate (HTTP 429, Route53 Throttling).
    pub throttled: usize,
    /// Writes that waited for the sink's own `max_writes_per_second`.
    pub rate_limited: usize,
    /// Faulted addresses this sink had to withdraw (one per tenant the address is in).
    pub changes: usize,
    /// Of those, not written by the end of the run.
    pub unwritten: usize,
    /// Fault injected -> this sink wrote the change: median.
    pub fault_to_write_p50_ms: Option<f64>,
    /// ... and 99th percentile.
    pub fault_to_write_p99_ms: Option<f64>,
    /// Tenants still waiting for a write when the run ended (`sink_pending`).
    pub pending_at_end: f64,
}

/// The report of every sink in `activity` (the log of the window) and every sink a tenant
/// names, from the recorder's `seen`, the injected `faults` (address, when) and the
/// metrics scraped at the end of the run.
pub fn report(
    activity: &BTreeMap<String, SinkActivity>,
    tenant_sinks: &BTreeMap<String, Vec<String>>,
    seen: &[Seen],
    faults: &[(IpAddr, SystemTime)],
    metrics_at_end: &str,
) -> BTreeMap<String, SinkReport> {
    let sinks_of = |tenant: &str| -> Vec<String> {
        let mut sinks = tenant_sinks.get(tenant).cloned().unwrap_or_default();
        sinks.push(RECORDER.to_owned());
        sinks
    };
    let mut latencies: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut out: BTreeMap<String, SinkReport> = BTreeMap::new();
    for (name, a) in activity {
        out.insert(
            name.clone(),
            SinkReport {
                writes: a.written.len(),
                retried: a.retried,
                failed_permanently: a.failed_permanently,
                throttled: a.throttled,
                rate_limited: a.rate_limited,
                ..SinkReport::default()
            },
        );
    }
    let none = SinkActivity::default();
    for &(address, at) in faults {
        // The first snapshot of each tenant, after the fault, without the address.
        let mut withdrawn: BTreeMap<&str, u64> = BTreeMap::new();
        for s in seen
            .iter()
            .filter(|s| s.address == address && !s.published && s.wall >= at)
        {
            withdrawn.entry(&s.tenant).or_insert(s.seq);
        }
        for (tenant, seq) in withdrawn {
            for sink in sinks_of(tenant) {
                let entry = out.entry(sink.clone()).or_default();
                entry.changes += 1;
                let written = activity.get(&sink).unwrap_or(&none);
                match written.first_write(tenant, seq, at) {
                    Some(w) => latencies
                        .entry(sink)
                        .or_default()
                        .push(w.duration_since(at).unwrap_or_default().as_secs_f64() * 1000.0),
                    None => entry.unwritten += 1,
                }
            }
        }
    }
    for (sink, report) in &mut out {
        let mut times = latencies.remove(sink).unwrap_or_default();
        times.sort_by(f64::total_cmp);
        report.fault_to_write_p50_ms = quantile(&times, 0.5);
        report.fault_to_write_p99_ms = quantile(&times, 0.99);
        let pending = format!("health_orchestrator_sink_pending{{sink=\"{sink}\"}}");
        report.pending_at_end = metric_sum(metrics_at_end, &pending);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink_log::Written;
    use std::time::Duration;

    #[test]
    fn each_fault_is_timed_to_the_write_that_carried_it() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let (a, b): (IpAddr, IpAddr) =
            ("127.16.0.1".parse().unwrap(), "127.16.0.2".parse().unwrap());
        let left = |address, tenant: &str, seq, at| Seen {
            at: tokio::time::Instant::now(),
            wall: at,
            tenant: tenant.into(),
            seq,
            address,
            published: false,
        };
        // a left t1 in snapshot 3, b left t1 in snapshot 4 (and b left t2 in snapshot 9).
        let seen = [
            left(a, "t1", 3, ms(600)),
            left(b, "t1", 4, ms(700)),
            left(b, "t2", 9, ms(700)),
        ];
        let write = |tenant: &str, seq, at| Written {
            at,
            tenant: tenant.into(),
            seq,
        };
        let mut activity = BTreeMap::new();
        // r53 wrote 3 late, then only 4's successor 5 (coalesced); never t2.
        activity.insert(
            "r53".to_owned(),
            SinkActivity {
                written: vec![write("t1", 3, ms(1500)), write("t1", 5, ms(2500))],
                throttled: 2,
                retried: 2,
                ..SinkActivity::default()
            },
        );
        let tenant_sinks = BTreeMap::from([
            ("t1".to_owned(), vec!["r53".to_owned()]),
            ("t2".to_owned(), vec!["r53".to_owned()]),
        ]);
        let faults = [(a, ms(0)), (b, ms(100))];
        let metrics = "health_orchestrator_sink_pending{sink=\"r53\"} 1\n";
        let out = report(&activity, &tenant_sinks, &seen, &faults, metrics);
        let r53 = &out["r53"];
        assert_eq!((r53.changes, r53.unwritten, r53.writes), (3, 1, 2));
        assert_eq!(r53.fault_to_write_p50_ms, Some(1500.0));
        assert_eq!(r53.fault_to_write_p99_ms, Some(2400.0));
        assert_eq!((r53.throttled, r53.pending_at_end), (2, 1.0));
        // The recorder is a sink of every tenant; its writes were not in the log here.
        assert_eq!((out[RECORDER].changes, out[RECORDER].unwritten), (3, 3));
    }
}
