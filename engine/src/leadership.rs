//! Which replica writes to shared back ends.
//!
//! With `[leader_election]` every replica probes and keeps its verdicts and snapshots warm,
//! but only the holder of the Kubernetes Lease writes to back ends that replicas share
//! (every sink kind whose spec says [`shared`](ho_config::SinkSpec::shared)); local outputs
//! such as `hosts_file` are written by every replica. This is the engine's side of it: a
//! fence the sink actors ask before each write, and a signal when this replica becomes the
//! writer, so shared sinks write every tenant at once from the warm state. The Lease
//! protocol runs in the binary, which moves the fence.
//!
//! The fence is a deadline on this process's monotonic clock: `renew_deadline` after the
//! *start* of the last successful renewal. Another replica takes the Lease only after it
//! has seen the Lease's resourceVersion unchanged for `lease_duration` (longer than
//! `renew_deadline`) on its own clock, counted from after that renewal reached the API
//! server; so the old writer's fence closes first, whatever the two wall clocks say. A
//! write already in flight when the fence closes still finishes (it cannot be recalled):
//! that is the one write a fenced replica can make.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use opentelemetry::KeyValue;
use serde::Serialize;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{info, warn};

use crate::clock::Timestamp;
use crate::metrics::Metrics;

/// The writer fence shared by the elector and every sink actor; clones share it.
#[derive(Clone)]
pub struct Leadership(Arc<Inner>);

struct Inner {
    /// `None`: no election, this process always writes.
    identity: Option<String>,
    state: Mutex<State>,
    /// Counts the times this replica became the writer; sink actors watch it.
    became_writer: watch::Sender<u64>,
    metrics: Arc<Metrics>,
}

#[derive(Default)]
struct State {
    /// Writes are allowed until then.
    fence: Option<Instant>,
    /// Who holds the Lease, as last read.
    holder: Option<String>,
    last_renewal: Option<SystemTime>,
    /// Why this replica last stopped writing, for the log line of the lapse.
    lapse_logged: bool,
}

/// This replica's part in the election, for `/status`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LeadershipStatus {
    /// `leader` (writes shared back ends), `standby` (keeps warm, writes local outputs
    /// only) or `single` (no election: always writes).
    pub role: &'static str,
    /// This replica's identity in the Lease.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    /// The Lease's holder as last read (`None`: nobody, or not read yet).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
    /// When this replica last renewed the Lease (Unix seconds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_renewal: Option<Timestamp>,
}

impl Leadership {
    /// No election: the fence is always open.
    pub fn single(metrics: Arc<Metrics>) -> Leadership {
        Leadership::with(None, metrics)
    }

    /// An election as `identity`: closed until [`Leadership::renewed`].
    pub fn elected(identity: String, metrics: Arc<Metrics>) -> Leadership {
        Leadership::with(Some(identity), metrics)
    }

    fn with(identity: Option<String>, metrics: Arc<Metrics>) -> Leadership {
        metrics.leader.set(i64::from(identity.is_none()));
        Leadership(Arc::new(Inner {
            identity,
            state: Mutex::new(State::default()),
            became_writer: watch::channel(0).0,
            metrics,
        }))
    }

    /// Whether there is an election at all.
    pub fn is_elected(&self) -> bool {
        self.0.identity.is_some()
    }

    /// This replica's identity in the Lease (`None` without election).
    pub fn identity(&self) -> Option<&str> {
        self.0.identity.as_deref()
    }

    /// Whether a shared back end may be written now.
    pub fn may_write(&self) -> bool {
        self.0.identity.is_none() || self.lock().fence.is_some_and(|f| Instant::now() < f)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0
            .state
            .lock()
            .expect("never poisoned: no panics under the lock")
    }

    /// The Lease is ours, by a request sent at `sent`: writes are allowed until
    /// `sent + renew_deadline`. Becoming the writer is logged and signalled.
    pub fn renewed(&self, sent: Instant, renew_deadline: Duration) {
        let was = self.may_write();
        let mut state = self.lock();
        state.fence = Some(sent + renew_deadline);
        state.holder = self.0.identity.clone();
        state.last_renewal = Some(SystemTime::now());
        state.lapse_logged = false;
        drop(state);
        if !was && Instant::now() < sent + renew_deadline {
            info!(identity = ?self.0.identity, "became the leader: writing shared back ends");
            self.changed("leader", "acquired");
            self.0.became_writer.send_modify(|n| *n += 1);
        }
    }

    /// The Lease is someone else's (`holder`) or nobody's: stop writing now.
    pub fn standby(&self, holder: Option<String>) {
        let was = self.may_write();
        let mut state = self.lock();
        state.fence = None;
        state.holder = holder.clone();
        drop(state);
        if was {
            warn!(identity = ?self.0.identity, ?holder, "no longer the leader: standby, shared back ends are not written");
            self.changed("standby", "another holder");
        }
    }

    /// Called after a renewal failed: once the fence has closed, logs the lapse and
    /// updates the role metric (the fence itself closed on time, without this call).
    pub fn check_lapse(&self) {
        let mut state = self.lock();
        let lapsed = state.fence.is_some_and(|f| Instant::now() >= f);
        if lapsed && !state.lapse_logged {
            state.lapse_logged = true;
            drop(state);
            warn!(identity = ?self.0.identity, "could not renew the lease within renew_deadline: stopped writing shared back ends");
            self.changed("standby", "renew_deadline passed");
        }
    }

    /// Metrics and a span for a change of role.
    fn changed(&self, role: &'static str, why: &'static str) {
        self.0.metrics.leader.set(i64::from(role == "leader"));
        self.0.metrics.leader_transitions.inc();
        crate::trace::leadership(vec![
            KeyValue::new("role", role),
            KeyValue::new("why", why),
            KeyValue::new("identity", self.0.identity.clone().unwrap_or_default()),
        ]);
    }

    /// Changes each time this replica becomes the writer.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.0.became_writer.subscribe()
    }

    /// The role, holder and last renewal.
    pub fn status(&self) -> LeadershipStatus {
        let writing = self.may_write();
        let state = self.lock();
        LeadershipStatus {
            role: match (&self.0.identity, writing) {
                (None, _) => "single",
                (Some(_), true) => "leader",
                (Some(_), false) => "standby",
            },
            identity: self.0.identity.clone(),
            holder: state.holder.clone(),
            last_renewal: state.last_renewal.map(Timestamp),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_fence_closes_renew_deadline_after_the_renewal_was_sent() {
        let l = Leadership::elected("a".into(), Arc::new(Metrics::new()));
        let mut writer = l.subscribe();
        assert!(!l.may_write());
        assert_eq!(l.status().role, "standby");
        let sent = Instant::now();
        tokio::time::advance(Duration::from_secs(1)).await;
        l.renewed(sent, Duration::from_secs(10));
        assert!(l.may_write());
        assert!(writer.has_changed().unwrap());
        writer.mark_unchanged();
        assert_eq!(l.status().role, "leader");
        // 9 s after the renewal came back, 10 s after it was sent: closed.
        tokio::time::advance(Duration::from_secs(9)).await;
        assert!(!l.may_write());
        l.check_lapse();
        assert_eq!(l.status().role, "standby");
        // Re-acquiring signals again; a renewal that arrives after its own deadline does not.
        l.renewed(Instant::now(), Duration::from_secs(10));
        assert!(writer.has_changed().unwrap());
        writer.mark_unchanged();
        l.standby(Some("b".into()));
        assert!(!l.may_write());
        assert_eq!(l.status().holder.as_deref(), Some("b"));
        let late = Instant::now();
        tokio::time::advance(Duration::from_secs(11)).await;
        l.renewed(late, Duration::from_secs(10));
        assert!(!l.may_write());
        assert!(!writer.has_changed().unwrap());
    }

    #[test]
    fn without_election_the_fence_is_always_open() {
        let l = Leadership::single(Arc::new(Metrics::new()));
        assert!(l.may_write());
        assert_eq!(l.status().role, "single");
    }
}
