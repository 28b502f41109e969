//! Micro-benchmarks of the engine's hot paths live in `benches/`; this library only holds
//! fixtures they share.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use ho_engine::snapshot::{EndpointMeta, PublishMode, PublishedAddress, TenantSnapshot};

/// A snapshot of `n` addresses under two domains, as the tracker would build it.
pub fn snapshot(n: usize) -> Arc<TenantSnapshot> {
    Arc::new(TenantSnapshot {
        tenant: "bench".into(),
        seq: 1,
        domains: vec!["api.bench.test".into(), "www.bench.test".into()],
        ttl: Duration::from_secs(30),
        addresses: (0..n)
            .map(|i| PublishedAddress {
                address: IpAddr::V4(Ipv4Addr::new(10, 1, (i / 250) as u8, (i % 250 + 1) as u8)),
                weight: 1,
                endpoint: Arc::new(EndpointMeta {
                    name: format!("e{i}"),
                    priority: 0,
                    labels: BTreeMap::new(),
                }),
            })
            .collect(),
        mode: PublishMode::Healthy,
        changes: Vec::new(),
        policy: ho_config::RoutingPolicy::All,
        default_geo: None,
        decided_at: SystemTime::now(),
        cause_at: tokio::time::Instant::now(),
        trace: ho_engine::trace::SpanContext::NONE,
    })
}
