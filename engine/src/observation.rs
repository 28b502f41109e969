//! What crosses from probers to the tracker: one probe result of one target, named by the
//! target's stable id.

use crate::probe::ProbeResult;

/// A target's identity for its whole life, across config reloads (its index in the plan
/// may change; its id does not).
pub type TargetId = u64;

/// One probe result, sent to the tracker in a batch ([`crate::outbox`]).
#[derive(Debug)]
pub struct Observation {
    /// The target's id.
    pub target: TargetId,
    /// What the probe found.
    pub result: ProbeResult,
    /// How late the probe started against its slot.
    pub start_delay: std::time::Duration,
}
