//! `node_status` rendered from the plan against the `Family` it replaced, kept here as the
//! model: the same generated plans and verdict changes go to both, updated the way the
//! tracker updated the family (every endpoint's series set at a reload, those of endpoints
//! no longer planned removed, one set a change), and the exposition must list the same
//! series with the same values.

use std::net::IpAddr;
use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::metrics::Metrics;
use ho_config::Plan;

/// The labels the family kept per endpoint.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelLabels {
    node_name: String,
    node_ip: String,
}

fn labels(ep: &ho_config::Endpoint) -> ModelLabels {
    ModelLabels {
        node_name: ep.name.to_string(),
        node_ip: ep.address.to_string(),
    }
}

/// A plan of generated endpoints: distinct names (as validation requires) drawn from a
/// pool that reloads reuse, each at an address drawn from a pool of IPv4 and IPv6 ones (two
/// endpoints may share one, and a name may move to another address).
fn generated_plan(base: &Plan, rng: &mut fastrand::Rng) -> Arc<Plan> {
    let addresses: Vec<IpAddr> = ["10.0.0.1", "10.0.0.2", "192.0.2.7", "2001:db8::1", "::1"]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
    let mut names: Vec<String> = (0..12).map(|i| format!("gw-{i}")).collect();
    names.push("eu/gw-1@10.0.0.2".into());
    rng.shuffle(&mut names);
    let mut plan = base.clone();
    let template = base.endpoints[0].clone();
    plan.endpoints = (names.into_iter().take(rng.usize(0..=13)))
        .map(|name| {
            let mut endpoint = template.clone();
            endpoint.name = name.into();
            endpoint.address = addresses[rng.usize(..addresses.len())];
            endpoint
        })
        .collect();
    Arc::new(plan)
}

/// The `node_status` lines of an exposition, sorted (a family lists its series in its hash
/// table's order).
fn node_status_lines(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = (text.lines())
        .filter(|l| l.contains("health_orchestrator_node_status"))
        .map(str::to_owned)
        .collect();
    lines.sort();
    lines
}

#[test]
fn node_status_lists_what_the_family_listed_through_generated_reloads_and_changes() {
    let base = crate::tracker::tests::plan(1, "", "");
    for seed in 0..200 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let metrics = Metrics::new();
        let model: Family<ModelLabels, Gauge> = Family::default();
        let mut registry = Registry::with_prefix("health_orchestrator");
        registry.register(
            "node_status",
            "1 if the endpoint is up, else 0",
            model.clone(),
        );
        let mut plan: Option<Arc<Plan>> = None;
        for _ in 0..30 {
            let current = plan.as_ref().filter(|p| !p.endpoints.is_empty());
            match current {
                Some(p) if rng.u8(..4) > 0 => {
                    let e = rng.usize(..p.endpoints.len());
                    let up = rng.bool();
                    metrics.node_status.set(e, up);
                    model
                        .get_or_create(&labels(&p.endpoints[e]))
                        .set(i64::from(up));
                }
                _ => {
                    let next = generated_plan(&base, &mut rng);
                    let up: Vec<bool> = next.endpoints.iter().map(|_| rng.bool()).collect();
                    for old in plan.iter().flat_map(|p| &p.endpoints) {
                        let staying = (next.endpoints.iter())
                            .any(|e| e.name == old.name && e.address == old.address);
                        if !staying {
                            model.remove(&labels(old));
                        }
                    }
                    for (ep, &up) in next.endpoints.iter().zip(&up) {
                        model.get_or_create(&labels(ep)).set(i64::from(up));
                    }
                    metrics.node_status.adopt(next.clone(), up);
                    assert_eq!(metrics.node_status.own_bytes(), next.endpoints.len());
                    plan = Some(next);
                }
            }
            let mut expected = String::new();
            prometheus_client::encoding::text::encode(&mut expected, &registry).unwrap();
            assert_eq!(
                node_status_lines(&metrics.encode()),
                node_status_lines(&expected),
                "seed {seed}"
            );
        }
    }
}

#[test]
fn before_any_plan_node_status_has_no_series() {
    let text = Metrics::new().encode();
    assert_eq!(
        node_status_lines(&text),
        [
            "# HELP health_orchestrator_node_status 1 if the endpoint is up, else 0.",
            "# TYPE health_orchestrator_node_status gauge",
        ]
    );
}
