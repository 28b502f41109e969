//! The metrics of a `[ring]` of replicas sharing the probing.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// Members, the targets this replica probes, moves, the verdict stream's bytes and lag.
pub struct RingMetrics {
    /// Live members as this replica sees them.
    pub members: Gauge,
    /// Targets this replica probes now (owned, or in its make-before-break grace).
    pub probing: Gauge,
    /// Targets this replica started or stopped probing as the ring changed.
    pub moves: Counter,
    /// Bytes of verdict frames this replica pushed to the other members.
    pub stream_bytes: Counter,
    /// Age of each batch the other members pushed, on arrival.
    pub stream_lag: Histogram,
}

impl Default for RingMetrics {
    fn default() -> Self {
        RingMetrics {
            members: Gauge::default(),
            probing: Gauge::default(),
            moves: Counter::default(),
            stream_bytes: Counter::default(),
            // 100 µs .. ~3.3 s: loopback and pod networks take well under a millisecond,
            // a congested or backlogged stream seconds.
            stream_lag: Histogram::new(exponential_buckets(0.0001, 2.0, 16)),
        }
    }
}

impl RingMetrics {
    /// Registers every one of them in `registry`.
    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "ring_members",
            "Live members of the ring ([ring]) as this replica sees them",
            self.members.clone(),
        );
        registry.register(
            "ring_probing_targets",
            "Targets this replica probes now: owned, or within the make-before-break grace after it lost them",
            self.probing.clone(),
        );
        registry.register(
            "ring_moves",
            "Targets this replica started or stopped probing as the ring's members changed",
            self.moves.clone(),
        );
        registry.register(
            "ring_stream_bytes",
            "Bytes of verdict frames pushed to the other ring members",
            self.stream_bytes.clone(),
        );
        registry.register(
            "ring_stream_lag_seconds",
            "Age of each verdict batch another member pushed, on arrival: from the sender making it (after its hysteresis) to this replica reading it, by the two hosts' clocks",
            self.stream_lag.clone(),
        );
    }
}
