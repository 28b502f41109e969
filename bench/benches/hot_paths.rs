//! Per-probe and per-publish costs: hysteresis, scheduling, selection, hosts rendering, and
//! one real HTTP probe against a loopback gateway.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use ho_config::{CheckOverrides, OnAllUnhealthy, RoutingPolicy, Target, Tenant, Timing};
use ho_engine::hysteresis::{Health, Hysteresis};
use ho_engine::probe::BUILT_IN as Checks;
use ho_engine::probe::{Probe, ProbeContext};
use ho_engine::schedule::Schedule;
use ho_engine::selection::{decide, published_addresses, Decision};
use ho_engine::snapshot::EndpointMeta;
use ho_testkit::{Behaviour, Gateway};
use std::sync::Arc;

fn hysteresis(c: &mut Criterion) {
    c.bench_function("hysteresis_record", |b| {
        let mut h = Hysteresis::new();
        let mut i = 0u32;
        b.iter(|| {
            i = i.wrapping_add(1);
            black_box(h.record(!i.is_multiple_of(7), 2, 3))
        })
    });
}

fn schedule(c: &mut Criterion) {
    let timing = Timing {
        interval: Duration::from_secs(1),
        timeout: Duration::from_millis(500),
        fast_interval: Duration::from_millis(100),
        rise: 1,
        fall: 2,
        damping: None,
    };
    let origin = tokio::time::Instant::now();
    let s = Schedule::new(
        "http://127.1.0.1:8080/healthz",
        &timing,
        origin,
        ho_engine::schedule::LONG_TICK,
    );
    let now = origin + Duration::from_millis(12_345);
    c.bench_function("schedule_next_slot", |b| {
        b.iter(|| black_box(s.start_of(s.next_slot(black_box(now)))))
    });
}

fn selection(c: &mut Criterion) {
    let tenant = Tenant {
        answer: ho_config::Answer::Addresses,
        name: "t".into(),
        hosts_key: "t.hosts".into(),
        domains: vec!["t.example".into()],
        endpoints: (0..100).collect(),
        sinks: vec!["s".into()],
        ttl: Duration::from_secs(30),
        degraded_ttl: None,
        on_all_unhealthy: OnAllUnhealthy::PublishAll,
        min_healthy: 0.3,
        cleanup_on_remove: false,
        policy: RoutingPolicy::All,
        weights: Vec::new(),
        default_weight: 1,
        weighs: false,
        default_geo: None,
        multi_cluster: false,
        slo: None,
        resource: None,
    };
    let endpoints: Vec<ho_config::Endpoint> = (0..100)
        .map(|i| {
            ho_config::Endpoint::new(
                format!("e{i}"),
                IpAddr::V4(Ipv4Addr::new(10, 0, 0, i as u8)),
                i,
            )
        })
        .collect();
    let health = |i: usize| {
        if i.is_multiple_of(5) {
            Health::Down
        } else {
            Health::Up
        }
    };
    c.bench_function("selection_decide_100_endpoints", |b| {
        b.iter(|| black_box(decide(&tenant, &tenant.endpoints, &endpoints, health)))
    });
}

/// One tracker decision for each of 100 tenants over 10,000 endpoints (100 each, 20% down):
/// fail-open rules, policy, and the sorted address list of the snapshot.
fn snapshots_10k_endpoints_100_tenants(c: &mut Criterion) {
    let endpoints: Vec<ho_config::Endpoint> = (0..10_000usize)
        .map(|i| {
            let address = IpAddr::V4(Ipv4Addr::new(
                10,
                (i / 65536) as u8,
                (i / 256 % 256) as u8,
                (i % 256) as u8,
            ));
            let mut e = ho_config::Endpoint::new(format!("e{i}"), address, i);
            e.priority = (i % 3) as u32;
            e
        })
        .collect();
    let meta: Vec<Arc<EndpointMeta>> = endpoints
        .iter()
        .map(|e| Arc::new(EndpointMeta::of(e)))
        .collect();
    let tenants: Vec<Tenant> = (0..100usize)
        .map(|t| Tenant {
            answer: ho_config::Answer::Addresses,
            name: format!("t{t}"),
            hosts_key: format!("t{t}.hosts"),
            domains: vec![format!("t{t}.example")],
            endpoints: (t * 100..t * 100 + 100).rev().collect(),
            sinks: vec!["s".into()],
            ttl: Duration::from_secs(30),
            degraded_ttl: None,
            on_all_unhealthy: OnAllUnhealthy::PublishAll,
            min_healthy: 0.0,
            cleanup_on_remove: false,
            policy: if t % 2 == 0 {
                RoutingPolicy::All
            } else {
                RoutingPolicy::Failover
            },
            weights: Vec::new(),
            default_weight: 1,
            weighs: false,
            default_geo: None,
            multi_cluster: false,
            slo: None,
            resource: None,
        })
        .collect();
    let health = |i: usize| {
        if i.is_multiple_of(5) {
            Health::Down
        } else {
            Health::Up
        }
    };
    c.bench_function("snapshots_100_tenants_10k_endpoints", |b| {
        b.iter(|| {
            for tenant in &tenants {
                if let Decision::Publish {
                    endpoints: chosen, ..
                } = decide(tenant, &tenant.endpoints, &endpoints, health)
                {
                    black_box(published_addresses(
                        tenant,
                        &endpoints,
                        &meta,
                        &chosen,
                        |_| None,
                    ));
                }
            }
        })
    });
}

fn hosts_render(c: &mut Criterion) {
    let snap = ho_bench::snapshot(100);
    c.bench_function("hosts_render_100_addresses", |b| {
        b.iter(|| black_box(ho_engine::sink::hosts_format::render(&snap)))
    });
}

fn http_probe(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let gateway = rt.block_on(async {
        Gateway::start(
            SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 30, 0, 1)), 0),
            Behaviour::Healthy,
        )
        .unwrap()
    });
    // A status check reads the response head only; a body check also reads the body; a
    // kept connection (`reuse_connection`, a fresh one every 10 probes) skips connect and
    // close. Same server, same exchange otherwise.
    let probe_of = |body_contains: Option<&str>, reuse: bool| {
        let mut check = CheckOverrides {
            port: Some(gateway.addr().port()),
            ..CheckOverrides::of_kind("http").with("path", "/healthz")
        };
        if let Some(text) = body_contains {
            check = check.with("body_contains", text);
        }
        if reuse {
            check = check.with("reuse_connection", true);
        }
        let check = ho_config::resolve_standalone_check(&check, &Checks).unwrap();
        Probe::new(
            &Target {
                address: gateway.addr().ip(),
                check: check.into(),
            },
            &mut ProbeContext::default(),
        )
        .unwrap()
    };
    let mut group = c.benchmark_group("probe");
    group.sample_size(50);
    for (name, probe) in [
        ("http_probe_loopback_roundtrip", probe_of(None, false)),
        (
            "http_body_probe_loopback_roundtrip",
            probe_of(Some("ready"), false),
        ),
        ("http_probe_kept_connection", probe_of(None, true)),
    ] {
        let mut kept = None;
        group.bench_function(name, |b| {
            b.iter(|| {
                let result = rt.block_on(probe.run(&mut kept));
                assert!(result.ok(), "{}", result.reason());
            })
        });
    }
    group.finish();
    drop(gateway);
}

// criterion_group! generates an undocumented public function.
#[allow(missing_docs)]
mod group {
    use super::*;
    criterion_group!(
        benches,
        hysteresis,
        schedule,
        selection,
        snapshots_10k_endpoints_100_tenants,
        hosts_render,
        http_probe
    );
}
criterion_main!(group::benches);
