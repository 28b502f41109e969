//! What the core keeps per tenant to decide it: its endpoint counts, pacing, wait and
//! vote. What it published is the [`super::super::publisher::Publisher`]'s, what it keeps
//! per target the [`super::super::verdicts::Verdicts`]'.

use std::sync::Arc;

use tokio::time::Instant;

use crate::hysteresis::Health;
use crate::multi_cluster::vote::Tally;
use crate::multi_cluster::LocalView;

use super::super::pacing::Pacing;

/// What the tracker knows about one tenant.
#[derive(Default)]
pub(in crate::tracker) struct TenantState {
    /// Endpoints still without a verdict, kept up to date on transitions so that a tenant
    /// waiting at start-up costs nothing per transition.
    pub(in crate::tracker) unknown: usize,
    /// Endpoints up.
    pub(in crate::tracker) healthy: usize,
    pub(in crate::tracker) pacing: Pacing,
    /// `[multi_cluster]`: the view last handed to the coordinator.
    pub(in crate::tracker) last_view: Option<LocalView>,
    /// `[multi_cluster]`: the latest tally, shown in `/status`.
    pub(in crate::tracker) votes: Option<Arc<Tally>>,
    /// Set by a reload that gave the tenant endpoints without a verdict: a tenant that has
    /// published nothing yet waits for them until then, as at start-up.
    pub(in crate::tracker) wait_until: Option<Instant>,
}

impl TenantState {
    /// One of the tenant's endpoints went from verdict `was` to `is`.
    pub(in crate::tracker) fn recount(&mut self, was: Health, is: Health) {
        if was == Health::Unknown {
            self.unknown -= 1;
        }
        if was == Health::Up {
            self.healthy -= 1;
        }
        if is == Health::Unknown {
            self.unknown += 1;
        }
        if is == Health::Up {
            self.healthy += 1;
        }
    }
}
