//! A tenant's write state in the delivery core: its desired snapshot, what was written,
//! the write in flight and the retry awaited.

use std::sync::Arc;
use std::time::SystemTime;

use tokio::time::Instant;

use crate::clock::Timestamp;
use crate::sink::SinkError;
use crate::snapshot::{TenantSnapshot, VerdictChange, MAX_CHANGES};
use crate::status::{SinkErrorStatus, SinkTenantStatus};

use super::core::{Effect, Wake};

/// Per-tenant write state.
pub(super) struct Slot {
    /// Latest snapshot received: the only one that will ever be written.
    pub(super) desired: Arc<TenantSnapshot>,
    pub(super) written_seq: Option<u64>,
    /// The id of its write in flight.
    pub(super) in_flight: Option<u64>,
    /// When a retry is due (backoff or `Retry-After`); `None` when none waits.
    pub(super) retry_at: Option<Instant>,
    pub(super) attempts: u32,
    pub(super) last_success: Option<SystemTime>,
    /// When `written_seq` was first written (a reconcile of it does not move this).
    pub(super) written_at: Option<SystemTime>,
    pub(super) last_error: Option<(SystemTime, SinkError)>,
    /// Changes of snapshots that were replaced before they were written, with the seq they
    /// came with: coalescing keeps only the latest state, but no change goes unreported.
    pub(super) carried: Vec<(u64, VerdictChange)>,
    /// The tenant is no longer run here: forgotten once `desired` is written.
    pub(super) last: bool,
}

/// Plans `tenant`'s retry for `at`: the slot remembers it, so a wake-up for a retry replaced
/// since finds another `at` and does nothing.
pub(super) fn plan_retry(slot: &mut Slot, tenant: &str, at: Instant, fx: &mut Vec<Effect>) {
    slot.retry_at = Some(at);
    fx.push(Effect::WakeAt {
        at,
        wake: Wake::Retry {
            tenant: tenant.to_owned(),
            at,
        },
    });
}

impl Slot {
    pub(super) fn new(desired: Arc<TenantSnapshot>) -> Slot {
        Slot {
            desired,
            written_seq: None,
            in_flight: None,
            retry_at: None,
            attempts: 0,
            last_success: None,
            written_at: None,
            last_error: None,
            last: false,
            carried: Vec::new(),
        }
    }

    /// What to write: the desired snapshot, carrying the changes of the snapshots it replaced
    /// (the latest [`MAX_CHANGES`] of them), without spare room: a sink may keep what it
    /// wrote until the tenant's next snapshot.
    pub(super) fn to_write(&self) -> Arc<TenantSnapshot> {
        if self.carried.is_empty() {
            return self.desired.clone();
        }
        let own = &self.desired.changes;
        let all = self.carried.len() + own.len();
        let excess = all.saturating_sub(MAX_CHANGES);
        let mut changes: Vec<VerdictChange> = Vec::with_capacity(all - excess);
        changes.extend(
            (self.carried.iter().map(|(_, c)| c))
                .chain(own)
                .skip(excess)
                .cloned(),
        );
        Arc::new(TenantSnapshot {
            changes,
            ..TenantSnapshot::clone(&self.desired)
        })
    }

    pub(super) fn pending(&self) -> bool {
        self.written_seq != Some(self.desired.seq)
    }

    /// Its line of the sink's `/status`.
    pub(super) fn status(&self, tenant: &str) -> SinkTenantStatus {
        SinkTenantStatus {
            tenant: tenant.to_owned(),
            desired_seq: self.desired.seq,
            written_seq: self.written_seq,
            pending: self.pending(),
            attempts: self.attempts,
            last_success: self.last_success.map(Timestamp),
            written_at: self.written_at.map(Timestamp),
            last_error: self.last_error.as_ref().map(|(at, e)| SinkErrorStatus {
                at: Timestamp(*at),
                message: e.message.clone(),
                retrying: e.retriable,
            }),
        }
    }
}
