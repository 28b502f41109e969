//! A cluster leaving a shared name: its report goes from the zone and the clusters that
//! remain decide the name without it. `cluster leave` does this for every voting tenant;
//! the engine does it for one tenant when a reload removes it with `cleanup_on_remove`
//! (a deleted `DNSFailover` of a voting cluster). When no other cluster reports, the name
//! keeps its records: a name several clusters publish is never emptied by one leaving.

use std::time::SystemTime;

use ho_config::plan::Tenant;

use super::rounds::unix_ms;
use super::vote::{self, Tally};
use crate::snapshot::TenantSnapshot;

/// What the zone should hold for `tenant` once this cluster left: the set the remaining
/// clusters' `tally` publishes, or `None` when no other cluster reports (the records stay).
pub fn remaining_snapshot(
    tenant: &Tenant,
    tally: &Tally,
    now: SystemTime,
) -> Option<TenantSnapshot> {
    let (addresses, mode) = vote::publishable(tenant, tally)?;
    let domains: Vec<&str> = tenant.domains.iter().map(String::as_str).collect();
    Some(TenantSnapshot {
        hosts_key: tenant.hosts_key.clone(),
        ttl: tenant.ttl,
        mode,
        default_geo: tenant.default_geo.clone(),
        geos: vote::locations(tenant, tally),
        seq: unix_ms(now) * 1000,
        ..TenantSnapshot::healthy(&tenant.name, &domains, tenant.policy, addresses)
    })
}

/// One tenant leaving the zone of sink `sink`: remove `report`, read the others' under
/// `suffix`, publish what they decide to `sinks` (the tenant's sinks holding reports).
#[derive(Debug)]
pub(crate) struct Leaving {
    pub sink: String,
    pub tenant: Tenant,
    pub sinks: Vec<String>,
    pub report: String,
    pub suffix: String,
}
