//! What the core keeps per tenant: what it published, what waits to be, its pacing and
//! vote. What it keeps per target is the [`super::super::verdicts::Verdicts`]'.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::time::Instant;

use crate::multi_cluster::vote::Tally;
use crate::multi_cluster::LocalView;
use crate::snapshot::{TenantSnapshot, VerdictChange};

use super::super::pacing::Pacing;

/// What the tracker knows about one tenant.
#[derive(Default)]
pub(in crate::tracker) struct TenantState {
    /// The latest snapshot sent to the tenant's sinks.
    pub(in crate::tracker) last_snapshot: Option<Arc<TenantSnapshot>>,
    pub(in crate::tracker) last_seq: u64,
    /// Endpoints still without a verdict, kept up to date on transitions so that a tenant
    /// waiting at start-up costs nothing per transition.
    pub(in crate::tracker) unknown: usize,
    /// Endpoints up.
    pub(in crate::tracker) healthy: usize,
    pub(in crate::tracker) pacing: Pacing,
    /// Verdict changes not yet carried by a snapshot.
    pub(in crate::tracker) changes: VecDeque<VerdictChange>,
    /// `[multi_cluster]`: the view last handed to the coordinator.
    pub(in crate::tracker) last_view: Option<LocalView>,
    /// `[multi_cluster]`: the latest tally, shown in `/status`.
    pub(in crate::tracker) votes: Option<Arc<Tally>>,
    /// Set by a reload that gave the tenant endpoints without a verdict: a tenant that has
    /// published nothing yet waits for them until then, as at start-up.
    pub(in crate::tracker) wait_until: Option<Instant>,
}
