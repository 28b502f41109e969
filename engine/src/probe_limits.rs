//! Bounds on probing: how many probes may hold a socket at once, and how many probe results
//! may wait in the tracker's mailbox.
//!
//! A probe that meets a bound waits: its lateness shows in `probe_start_delay_seconds`, the
//! wait is counted in `probes_waited_total{bound}` and logged at most once a minute. It never
//! fails because of a bound: a failure caused by this machine says nothing about the
//! endpoint, and counting it would withdraw healthy addresses from DNS.
//!
//! Both bounds are semaphores, so waiting probers queue in order and cost nothing while
//! they wait (no polling).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::warn;

use crate::metrics::{BoundLabel, Metrics};

/// Results the tracker's mailbox may hold before probers wait: far above what a healthy
/// tracker ever holds (it takes one in about a microsecond), small enough to bound memory
/// (~100 bytes each) when it stalls.
pub const TRACKER_MAILBOX: usize = 65_536;

/// Descriptors kept for everything but probes (sinks, the API, logs, config files) when the
/// concurrency limit is derived from the open-file limit.
const RESERVED_DESCRIPTORS: u64 = 256;

/// Shared by every prober and the tracker.
pub struct ProbeLimits {
    sockets: Arc<Semaphore>,
    mailbox: Arc<Semaphore>,
    metrics: Arc<Metrics>,
    warned: [Throttle; 2],
}

impl ProbeLimits {
    /// Limits allowing `concurrent` probes in flight (at least 1).
    pub fn new(concurrent: usize, metrics: Arc<Metrics>) -> ProbeLimits {
        let concurrent = concurrent.max(1);
        metrics.probe_concurrency_limit.set(concurrent as i64);
        ProbeLimits {
            sockets: Arc::new(Semaphore::new(concurrent)),
            mailbox: Arc::new(Semaphore::new(TRACKER_MAILBOX)),
            metrics,
            warned: [Throttle::new(), Throttle::new()],
        }
    }

    /// The concurrent-probe limit to use: `configured`, or when 0, the open-file limit
    /// minus a reserve and the `kept` connections held between probes (at least 64).
    pub fn concurrency(configured: usize, kept: usize) -> usize {
        if configured > 0 {
            return configured;
        }
        let soft = rlimit::getrlimit(rlimit::Resource::NOFILE).map_or(1024, |(soft, _)| soft);
        soft.saturating_sub(RESERVED_DESCRIPTORS)
            .saturating_sub(kept as u64)
            .max(64) as usize
    }

    /// Waits for room for one more result in the tracker's mailbox, then for a socket.
    /// Both are given back if the probe is abandoned (its prober stopped by a reload);
    /// once the result is sent, [`Admission::sent`] hands its mailbox slot to the tracker,
    /// which frees it with [`ProbeLimits::results_taken`].
    pub async fn admit(&self) -> Admission {
        let mailbox = match self.mailbox.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                self.waited(1, "tracker_mailbox", "probe results wait for the tracker");
                self.mailbox
                    .clone()
                    .acquire_owned()
                    .await
                    .expect("never closed")
            }
        };
        let socket = match self.sockets.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                self.waited(
                    0,
                    "sockets",
                    "probes wait for the concurrent-probe limit (limits.max_concurrent_probes)",
                );
                self.sockets
                    .clone()
                    .acquire_owned()
                    .await
                    .expect("never closed")
            }
        };
        Admission {
            socket: Some(socket),
            mailbox,
        }
    }

    /// The tracker took `n` results from its mailbox (one call per batch: freeing permits
    /// takes the semaphore's lock).
    pub fn results_taken(&self, n: usize) {
        self.mailbox.add_permits(n);
    }

    fn waited(&self, which: usize, bound: &'static str, what: &str) {
        self.metrics
            .probes_waited
            .get_or_create(&BoundLabel { bound })
            .inc();
        if self.warned[which].ready(Duration::from_secs(60)) {
            warn!(bound, "{what}: probes start late (counted in probes_waited_total; logged at most once a minute)");
        }
    }
}

/// A probe's right to run: a socket until [`Admission::probe_done`], a slot in the
/// tracker's mailbox until [`Admission::sent`].
pub struct Admission {
    socket: Option<OwnedSemaphorePermit>,
    mailbox: OwnedSemaphorePermit,
}

impl Admission {
    /// The probe closed its socket.
    pub fn probe_done(&mut self) {
        self.socket = None;
    }

    /// The result went to the tracker: the slot is now the tracker's to free.
    pub fn sent(self) {
        self.mailbox.forget();
    }
}

/// Lets something happen at most once per period, across threads.
pub(crate) struct Throttle(AtomicU64);

impl Throttle {
    pub(crate) const fn new() -> Throttle {
        Throttle(AtomicU64::new(0))
    }

    /// True at most once per `period`.
    pub(crate) fn ready(&self, period: Duration) -> bool {
        let now = crate::clock::since_epoch(SystemTime::now()).as_millis() as u64;
        let last = self.0.load(Ordering::Relaxed);
        if last != 0 && now.saturating_sub(last) < period.as_millis() as u64 {
            return false;
        }
        self.0
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[actix::test]
    async fn a_full_mailbox_holds_probes_until_the_tracker_takes_results() {
        let limits = Arc::new(ProbeLimits::new(4, Arc::new(Metrics::new())));
        for _ in 0..TRACKER_MAILBOX {
            let mut admission = limits.admit().await;
            admission.probe_done();
            admission.sent();
        }
        let waiting = {
            let limits = limits.clone();
            tokio::spawn(async move {
                limits.admit().await.sent();
            })
        };
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "admitted past the mailbox bound");
        limits.results_taken(1);
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("admitted once a result was taken")
            .unwrap();
        let text = limits.metrics.encode();
        assert!(
            text.contains("probes_waited_total{bound=\"tracker_mailbox\"} 1"),
            "{text}"
        );
    }

    #[actix::test]
    async fn sockets_are_bounded_and_an_abandoned_probe_gives_everything_back() {
        let limits = ProbeLimits::new(2, Arc::new(Metrics::new()));
        let mut a = limits.admit().await;
        let _b = limits.admit().await;
        assert!(limits.sockets.try_acquire().is_err());
        a.probe_done();
        let c = limits.admit().await;
        assert_eq!(limits.metrics.probe_concurrency_limit.get(), 2);
        drop(c);
        assert_eq!(limits.mailbox.available_permits(), TRACKER_MAILBOX - 2);
    }

    #[test]
    fn derived_concurrency_is_the_open_file_limit_less_a_reserve() {
        assert_eq!(ProbeLimits::concurrency(10, 5), 10);
        let limits = std::fs::read_to_string("/proc/self/limits").unwrap();
        let soft: u64 = limits
            .lines()
            .find(|l| l.starts_with("Max open files"))
            .and_then(|l| l.split_whitespace().nth(3))
            .and_then(|v| v.parse().ok())
            .expect("soft open-file limit in /proc/self/limits");
        let expected = soft.saturating_sub(RESERVED_DESCRIPTORS).max(64) as usize;
        assert_eq!(ProbeLimits::concurrency(0, 0), expected);
        assert_eq!(ProbeLimits::concurrency(0, 10), (expected - 10).max(64));
    }

    #[test]
    fn throttle_allows_once_per_period() {
        let t = Throttle::new();
        assert!(t.ready(Duration::from_secs(60)));
        assert!(!t.ready(Duration::from_secs(60)));
        assert!(t.ready(Duration::ZERO));
    }
}
