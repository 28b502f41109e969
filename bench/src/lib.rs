//! Micro-benchmarks of the engine's hot paths live in `benches/`; this library only holds
//! fixtures they share.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use ho_engine::snapshot::{PublishedAddress, TenantSnapshot};

/// A snapshot of `n` addresses under two domains, as the tracker would build it.
pub fn snapshot(n: usize) -> Arc<TenantSnapshot> {
    let addresses = (0..n)
        .map(|i| {
            let ip = IpAddr::V4(Ipv4Addr::new(10, 1, (i / 250) as u8, (i % 250 + 1) as u8));
            PublishedAddress::of(&format!("e{i}"), ip, 1, BTreeMap::new())
        })
        .collect();
    Arc::new(TenantSnapshot::healthy(
        "bench",
        &["api.bench.test", "www.bench.test"],
        ho_config::RoutingPolicy::All,
        addresses,
    ))
}
