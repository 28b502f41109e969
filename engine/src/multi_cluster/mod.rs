//! Several clusters, one zone (`[multi_cluster]`): each cluster reports what it owns and
//! what it sees down ([`report`]), reads the others' reports from the shared zone, and
//! publishes the set the vote over the live reports gives ([`vote`]). The
//! [`rounds`] decide those rounds as plain code and the [`coordinator`] actor runs them; the tracker hands it this cluster's view of each
//! voting tenant and publishes the tally it gets back.
//!
//! Data flow for a voting tenant: prober -> tracker (hysteresis) --LocalView--> coordinator
//! --(write own report, read all)--> zone; coordinator --Voted(tally)--> tracker --snapshot-->
//! sinks.

pub mod coordinator;
pub mod leave;
pub mod report;
pub mod rounds;
#[cfg(test)]
mod rounds_tests;
pub mod vote;

use std::net::IpAddr;

use actix::Message;

use crate::hysteresis::Health;

/// One endpoint of a voting tenant as this cluster sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalEndpoint {
    /// Published address.
    pub address: IpAddr,
    /// Endpoint name.
    pub name: String,
    /// Owning cluster as configured (`None`: this one).
    pub cluster: Option<String>,
    /// Weight in the tenant.
    pub weight: u32,
    /// Failover tier.
    pub priority: u32,
    /// `geo` label.
    pub geo: Option<String>,
    /// This cluster's verdict (flap damping counts as down).
    pub health: Health,
    /// Drained by an operator: not contributed, still voted on.
    pub drained: bool,
}

/// This cluster's view of one voting tenant, sent by the tracker whenever it changes.
#[derive(Debug, Clone, PartialEq, Eq, Message)]
#[rtype(result = "()")]
pub struct LocalView {
    /// Tenant name.
    pub tenant: String,
    /// Its endpoints (configured and discovered), in tenant order.
    pub endpoints: Vec<LocalEndpoint>,
}
