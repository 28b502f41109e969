//! The metrics of a `[ring]` of replicas sharing the probing.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Members, the targets this replica probes, moves and the verdict stream's bytes.
#[derive(Default)]
pub struct RingMetrics {
    /// Live members as this replica sees them.
    pub members: Gauge,
    /// Targets this replica probes now (owned, or in its make-before-break grace).
    pub probing: Gauge,
    /// Targets this replica started or stopped probing as the ring changed.
    pub moves: Counter,
    /// Bytes of verdict frames this replica pushed to the other members.
    pub stream_bytes: Counter,
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
    }
}
