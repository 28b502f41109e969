//! What the kinds' plan tests share: the snapshot they plan from.

use std::time::Duration;

use ho_engine::snapshot::{PublishedAddress, TenantSnapshot};

/// Tenant `t` publishing `api.example.com` at `addresses` (weight 1 each) with a TTL of a
/// minute.
pub(crate) fn snapshot(addresses: &[&str]) -> TenantSnapshot {
    let addresses = addresses
        .iter()
        .map(|a| PublishedAddress::of(a, a.parse().unwrap(), 1, Default::default()))
        .collect();
    let mut s = TenantSnapshot::healthy(
        "t",
        &["api.example.com"],
        ho_config::RoutingPolicy::All,
        addresses,
    );
    s.ttl = Duration::from_secs(60);
    s
}
