//! What the core hands its shell: the effects to carry out and the timers it asked for.

use std::sync::Arc;

use tokio::time::Instant;

use crate::drain::OperatorState;
use crate::multi_cluster::LocalView;
use crate::observation::TargetId;
use crate::snapshot::TenantSnapshot;

/// A timer the core asked for; handed back to [`TrackerCore::wake`] when due. Tenants and
/// targets are named by stable keys, since a reload in between may move or remove them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wake {
    /// The start-up grace ended: targets without a verdict count as unhealthy.
    GraceOver,
    /// A paced decision of this tenant is due.
    Paced(String),
    /// A flap-damping hold of this target may end.
    DampingRelease(TargetId),
    /// The grace a reload gave this tenant's new endpoints ended.
    ReloadGraceOver(String),
    /// The brake's window may have room for this tenant's held withdrawals.
    Brake(String),
    /// An impaired prober may have seen few failures for long enough to resume.
    SelfCheck,
}

/// What the shell must do.
#[derive(Debug)]
pub enum Effect {
    /// Send `snapshot` to these sinks (by name; names the shell no longer runs are skipped).
    Publish {
        /// Sink names.
        sinks: Vec<String>,
        /// The tenant's full desired state.
        snapshot: Arc<TenantSnapshot>,
    },
    /// Tell these sinks to stop writing `tenant` (a reload removed it).
    Forget {
        /// Sink names.
        sinks: Vec<String>,
        /// Tenant name.
        tenant: String,
    },
    /// Hand this cluster's view of a voting tenant to the coordinator
    /// ([`crate::multi_cluster`]); its tally comes back through [`TrackerCore::voted`].
    Vote(LocalView),
    /// Save what operators set (an endpoint with `hold_failback` failed and is now held
    /// forced down), as the API's actions are saved.
    Remember(OperatorState),
    /// `[ring]`: tell the other members this replica's own verdict of a target changed
    /// (`Unknown`: it stopped probing it).
    Share {
        /// The target's key.
        key: String,
        /// Its verdict here.
        health: crate::hysteresis::Health,
    },
    /// Call [`TrackerCore::wake`] with `wake` at `at`.
    WakeAt {
        /// When.
        at: Instant,
        /// What for.
        wake: Wake,
    },
}
