//! Admission decided with a real sink kind (this crate's `coredns_configmap`, registered as
//! `ho-kinds` registers it), the engine's check kinds and plain maps as the discovered world.

use std::collections::BTreeMap;
use std::net::IpAddr;

use figment::providers::Format;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::ObjectMeta;

use super::admit::{Admitter, Verdict};
use super::discover::{FoundGateway, Lookup, Target};
use super::resource::{DNSFailover, DNSFailoverSpec, EndpointSource, NodeAddressType};

/// The kinds admission validates with here: the sink kind the base config uses and every
/// check kind, so a resource's check table is judged as `check-config` judges it.
pub(super) const CATALOG: ho_config::Kinds<'static> = ho_config::Kinds {
    sinks: &ho_engine::sink::kind::KindList(&[&ho_engine::sink::kind::Registered::<
        crate::CorednsConfigMapConfig,
    >::KIND]),
    checks: &ho_engine::probe::BUILT_IN,
};

const BASE: &str = r#"
[sinks.hosts]
kind = "coredns_configmap"
namespace = "kube-system"
name = "ho-admit-tests"

[sinks.other]
kind = "coredns_configmap"
namespace = "kube-system"
name = "ho-admit-tests-other"

[[endpoints]]
name = "legacy"
address = "192.0.2.1"

[[tenants]]
name = "legacy"
domains = ["www.team-a.io"]
sinks = ["hosts"]

[kubernetes]
tenants = true

[[kubernetes.allow]]
namespace = "team-a"
domains = ["team-a.io"]
sinks = ["hosts"]

[[kubernetes.allow]]
namespace = "team-b"
domains = ["team-b.io"]
sinks = ["hosts", "other"]
nodes = true
"#;

pub(super) fn base() -> ho_config::Config {
    figment::Figment::from(figment::providers::Serialized::defaults(
        ho_config::load::builtin(),
    ))
    .merge(figment::providers::Toml::string(BASE))
    .extract()
    .unwrap()
}

#[derive(Default)]
pub(super) struct World {
    pub(super) gateways: BTreeMap<(String, String), Vec<IpAddr>>,
    /// Gateways (namespace, name) taking routes from every namespace.
    pub(super) shared_gateways: Vec<(String, String)>,
    pub(super) nodes: Vec<(String, BTreeMap<String, String>, IpAddr)>,
    /// Services (namespace, name) and what their load balancer status reports.
    pub(super) services: BTreeMap<(String, String), Vec<Target>>,
}

impl Lookup for World {
    fn gateway(&self, namespace: &str, name: &str) -> Option<FoundGateway> {
        let key = (namespace.to_string(), name.to_string());
        let addresses = self.gateways.get(&key)?.iter().copied();
        let addresses = addresses.map(Target::Address).collect();
        Some(FoundGateway {
            addresses,
            open_to_all_namespaces: self.shared_gateways.contains(&key),
        })
    }
    fn ingress(&self, _: &str, _: &str) -> Option<Vec<Target>> {
        None
    }
    fn service(&self, namespace: &str, name: &str) -> Option<Vec<Target>> {
        let key = (namespace.to_string(), name.to_string());
        self.services.get(&key).cloned()
    }
    fn nodes(
        &self,
        selector: &BTreeMap<String, String>,
        _: NodeAddressType,
    ) -> Vec<(String, IpAddr)> {
        self.nodes
            .iter()
            .filter(|(_, labels, _)| selector.iter().all(|(k, v)| labels.get(k) == Some(v)))
            .map(|(n, _, a)| (n.clone(), *a))
            .collect()
    }
}

pub(super) fn resource(
    ns: &str,
    name: &str,
    age: i64,
    domains: &[&str],
    sources: Vec<EndpointSource>,
) -> DNSFailover {
    let mut r = DNSFailover::new(
        name,
        DNSFailoverSpec {
            domains: domains.iter().map(|d| d.to_string()).collect(),
            sinks: vec!["hosts".into()],
            endpoints: sources,
            ttl: None,
            degraded_ttl: None,
            hold_failback: None,
            policy: None,
            on_all_unhealthy: None,
            min_healthy: None,
            weights: Vec::new(),
            default_weight: None,
            default_geo: None,
            slo: None,
            slo_window: None,
            check: None,
            answer: None,
        },
    );
    r.metadata = ObjectMeta {
        name: Some(name.into()),
        namespace: Some(ns.into()),
        creation_timestamp: Some(Time(
            k8s_openapi::chrono::DateTime::from_timestamp(1_700_000_000 + age, 0).unwrap(),
        )),
        generation: Some(1),
        ..ObjectMeta::default()
    };
    r
}

pub(super) fn addresses(list: &[&str]) -> EndpointSource {
    EndpointSource {
        addresses: list.iter().map(|a| a.to_string()).collect(),
        ..EndpointSource::default()
    }
}

pub(super) fn verdict<'a>(a: &'a super::admit::Admission, ns: &str, name: &str) -> &'a Verdict {
    &a.verdicts[&(ns.to_string(), name.to_string())]
}

pub(super) fn refusal(v: &Verdict) -> (&'static str, &str) {
    match v {
        Verdict::Refused { reason, message } => (reason, message.as_str()),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn namespaces_claim_only_what_they_are_allowed() {
    let mut ok = resource(
        "team-a",
        "api",
        0,
        &["api.team-a.io"],
        vec![addresses(&["192.0.2.10"])],
    );
    ok.spec.degraded_ttl = Some("10s".into());
    ok.spec.hold_failback = Some(true);
    let stranger = resource(
        "team-c",
        "api",
        1,
        &["api.team-c.io"],
        vec![addresses(&["192.0.2.11"])],
    );
    let poacher = resource(
        "team-b",
        "steal",
        2,
        &["pay.team-a.io"],
        vec![addresses(&["192.0.2.12"])],
    );
    let lookalike = resource(
        "team-b",
        "look",
        3,
        &["evilteam-b.io"],
        vec![addresses(&["192.0.2.13"])],
    );
    let mut sink = resource(
        "team-a",
        "sink",
        4,
        &["s.team-a.io"],
        vec![addresses(&["192.0.2.14"])],
    );
    sink.spec.sinks = vec!["other".into()];
    let nodes = resource(
        "team-a",
        "nodes",
        5,
        &["n.team-a.io"],
        vec![EndpointSource {
            nodes: Some(BTreeMap::from([("role".into(), "gw".into())])),
            ..EndpointSource::default()
        }],
    );
    let all = [&ok, &stranger, &poacher, &lookalike, &sink, &nodes];
    let a = Admitter::default().admit(&base(), &all, &World::default(), &CATALOG);

    assert_eq!(
        verdict(&a, "team-a", "api"),
        &Verdict::Accepted {
            tenant: "team-a_api".into(),
            kept_last: false
        }
    );
    assert_eq!(
        refusal(verdict(&a, "team-c", "api")).0,
        "NamespaceNotAllowed"
    );
    let (reason, message) = refusal(verdict(&a, "team-b", "steal"));
    assert_eq!(reason, "DomainNotAllowed");
    assert!(
        message.starts_with("spec.domains[0]: \"pay.team-a.io\""),
        "{message}"
    );
    assert_eq!(refusal(verdict(&a, "team-b", "look")).0, "DomainNotAllowed");
    assert_eq!(refusal(verdict(&a, "team-a", "sink")).0, "SinkNotAllowed");
    assert_eq!(refusal(verdict(&a, "team-a", "nodes")).0, "NodesNotAllowed");
    // Only the accepted resource reached the config, on top of the file's tenant.
    let tenants: Vec<&str> = a.config.tenants.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(tenants, ["legacy", "team-a_api"]);
    assert_eq!(a.config.endpoints.len(), 2);
    assert!(
        a.config.tenants[1].cleanup_on_remove,
        "deleting a resource withdraws its records"
    );
    assert_eq!(
        a.config.tenants[1].degraded_ttl,
        Some(std::time::Duration::from_secs(10))
    );
    assert!(a.config.tenants[1].hold_failback);
}

#[test]
fn the_first_claimant_keeps_a_name() {
    let newer = resource(
        "team-a",
        "newer",
        10,
        &["api.team-a.io"],
        vec![addresses(&["192.0.2.20"])],
    );
    let older = resource(
        "team-a",
        "older",
        5,
        &["API.team-a.io."],
        vec![addresses(&["192.0.2.21"])],
    );
    let file = resource(
        "team-a",
        "www",
        1,
        &["www.team-a.io"],
        vec![addresses(&["192.0.2.22"])],
    );
    // Listed newest first: creation time decides, not the order the watch delivered.
    let a = Admitter::default().admit(
        &base(),
        &[&newer, &older, &file],
        &World::default(),
        &CATALOG,
    );
    assert!(matches!(
        verdict(&a, "team-a", "older"),
        Verdict::Accepted { .. }
    ));
    let (reason, message) = refusal(verdict(&a, "team-a", "newer"));
    assert_eq!(reason, "DomainClaimed");
    assert!(message.contains("DNSFailover team-a/older"), "{message}");
    let (reason, message) = refusal(verdict(&a, "team-a", "www"));
    assert_eq!(reason, "DomainClaimed");
    assert!(message.contains("[[tenants]] \"legacy\""), "{message}");
}

#[test]
fn an_invalid_resource_is_refused_with_the_check_config_text_at_its_own_paths() {
    let bad_address = resource(
        "team-a",
        "addr",
        0,
        &["a.team-a.io"],
        vec![addresses(&["10.0.0.1", "gw.example"])],
    );
    let mut bad_check = resource(
        "team-a",
        "check",
        1,
        &["c.team-a.io"],
        vec![addresses(&["192.0.2.30"])],
    );
    bad_check.spec.check = Some(toml::from_str("rise = 0").unwrap());
    let mut bad_damping = resource(
        "team-a",
        "damping",
        5,
        &["dm.team-a.io"],
        vec![addresses(&["192.0.2.34"])],
    );
    bad_damping.spec.check = Some(toml::from_str("damping = { max_suppress = \"0s\" }").unwrap());
    let mut bad_ttl = resource(
        "team-a",
        "ttl",
        2,
        &["t.team-a.io"],
        vec![addresses(&["192.0.2.31"])],
    );
    bad_ttl.spec.ttl = Some("30".into());
    let mut bad_degraded = resource(
        "team-a",
        "degraded",
        4,
        &["d.team-a.io"],
        vec![addresses(&["192.0.2.33"])],
    );
    bad_degraded.spec.degraded_ttl = Some("soon".into());
    let two_kinds = resource(
        "team-a",
        "two",
        3,
        &["two.team-a.io"],
        vec![EndpointSource {
            addresses: vec!["192.0.2.32".into()],
            gateway: Some("gw".into()),
            ..EndpointSource::default()
        }],
    );
    let a = Admitter::default().admit(
        &base(),
        &[
            &bad_address,
            &bad_check,
            &bad_damping,
            &bad_ttl,
            &bad_degraded,
            &two_kinds,
        ],
        &World::default(),
        &CATALOG,
    );
    let (_, message) = refusal(verdict(&a, "team-a", "addr"));
    assert_eq!(
        message,
        "spec.endpoints[0].addresses[1]: \"gw.example\" is not an IP address (a load balancer's host name goes under hosts)"
    );
    let (reason, message) = refusal(verdict(&a, "team-a", "check"));
    assert_eq!(reason, "Invalid");
    assert!(message.starts_with("spec.check.rise: "), "{message}");
    let (_, message) = refusal(verdict(&a, "team-a", "damping"));
    assert!(
        message.starts_with("spec.check.damping.maxSuppress: "),
        "the resource's spelling: {message}"
    );
    let (_, message) = refusal(verdict(&a, "team-a", "ttl"));
    assert!(
        message.starts_with("spec.ttl: \"30\" is not a duration"),
        "{message}"
    );
    let (_, message) = refusal(verdict(&a, "team-a", "degraded"));
    assert!(
        message.starts_with("spec.degradedTTL: \"soon\" is not a duration"),
        "{message}"
    );
    let (_, message) = refusal(verdict(&a, "team-a", "two"));
    assert!(message.contains("exactly one of"), "{message}");
    assert_eq!(a.config.tenants.len(), 1, "nothing from a refused resource");
    assert_eq!(a.config.endpoints.len(), 1);
}

#[test]
fn discovered_gateways_come_and_go_without_emptying_a_name() {
    let gw = resource(
        "team-b",
        "gw",
        0,
        &["api.team-b.io"],
        vec![
            EndpointSource {
                gateway: Some("edge".into()),
                labels: BTreeMap::from([("geo".into(), "eu".into())]),
                ..EndpointSource::default()
            },
            EndpointSource {
                nodes: Some(BTreeMap::from([("role".into(), "gw".into())])),
                ..EndpointSource::default()
            },
        ],
    );
    let mut world = World::default();
    let mut admitter = Admitter::default();
    let a = admitter.admit(&base(), &[&gw], &world, &CATALOG);
    match verdict(&a, "team-b", "gw") {
        Verdict::Waiting { message } => assert_eq!(
            message,
            "Gateway \"edge\" not found; no Node matches spec.endpoints[1].nodes with an ExternalIP address"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        a.config.tenants.len(),
        1,
        "a resource with no gateway yet publishes nothing"
    );

    world.gateways.insert(
        ("team-b".into(), "edge".into()),
        vec!["192.0.2.40".parse().unwrap()],
    );
    world.nodes.push((
        "n1".into(),
        BTreeMap::from([("role".into(), "gw".into())]),
        "192.0.2.41".parse().unwrap(),
    ));
    // A node that is also the Gateway's address is probed once, with the first source's labels.
    world.nodes.push((
        "n2".into(),
        BTreeMap::from([("role".into(), "gw".into())]),
        "192.0.2.40".parse().unwrap(),
    ));
    let a = admitter.admit(&base(), &[&gw], &world, &CATALOG);
    assert!(matches!(
        verdict(&a, "team-b", "gw"),
        Verdict::Accepted {
            kept_last: false,
            ..
        }
    ));
    let eps: Vec<(&str, &str, Option<&String>)> = a.config.endpoints[1..]
        .iter()
        .map(|e| (e.name.as_str(), e.address.as_str(), e.labels.get("geo")))
        .collect();
    let eu = "eu".to_string();
    assert_eq!(
        eps,
        [
            ("team-b_gw_192.0.2.40", "192.0.2.40", Some(&eu)),
            ("team-b_gw_192.0.2.41", "192.0.2.41", None)
        ]
    );

    // One node leaves: it leaves the tenant.
    world.nodes.remove(0);
    let a = admitter.admit(&base(), &[&gw], &world, &CATALOG);
    assert_eq!(a.config.endpoints.len(), 2);

    // Every source empties at once: the last addresses stay published and probed.
    world.gateways.clear();
    world.nodes.clear();
    let a = admitter.admit(&base(), &[&gw], &world, &CATALOG);
    assert!(matches!(
        verdict(&a, "team-b", "gw"),
        Verdict::Accepted {
            kept_last: true,
            ..
        }
    ));
    assert_eq!(a.config.endpoints[1].address, "192.0.2.40");
}

#[test]
fn long_names_stay_within_the_config_alphabet_and_length() {
    let ns = "team-a";
    let name = "a-very-long-resource-name-that-goes-on-and-on-and-on-for-a-while";
    let r = resource(
        ns,
        name,
        0,
        &["long.team-a.io"],
        vec![addresses(&["2001:db8::1"])],
    );
    let a = Admitter::default().admit(&base(), &[&r], &World::default(), &CATALOG);
    let Verdict::Accepted { tenant, .. } = verdict(&a, ns, name) else {
        panic!()
    };
    assert_eq!(tenant.len(), 63);
    for e in &a.config.endpoints[1..] {
        ho_config::names::check_object_name(&e.name).unwrap();
    }
}

/// A config field's name in the resource: camelCase, acronyms in capitals.
#[test]
fn config_fields_are_named_as_kubernetes_writes_them() {
    for (config, resource) in [
        ("degraded_ttl", "degradedTTL"),
        ("hold_failback", "holdFailback"),
        ("on_all_unhealthy", "onAllUnhealthy"),
        ("ttl", "ttl"),
        ("default_geo", "defaultGeo"),
    ] {
        assert_eq!(super::field_names::resource_field(config), resource);
        assert_eq!(super::field_names::config_field(resource), config);
        assert_eq!(super::field_names::config_field(config), config);
    }
}

#[test]
fn a_shared_gateway_in_another_namespace_is_used_only_when_it_takes_routes_from_all() {
    let shared = |name: &str| {
        resource(
            "team-a",
            name,
            0,
            &[&format!("{name}.team-a.io")],
            vec![EndpointSource {
                gateway: Some(format!("infra/{name}")),
                ..EndpointSource::default()
            }],
        )
    };
    let (open, closed) = (shared("open"), shared("closed"));
    let mut world = World::default();
    for name in ["open", "closed"] {
        world.gateways.insert(
            ("infra".into(), name.into()),
            vec!["192.0.2.50".parse().unwrap()],
        );
    }
    world.shared_gateways.push(("infra".into(), "open".into()));
    let a = Admitter::default().admit(&base(), &[&open, &closed], &world, &CATALOG);
    assert!(matches!(
        verdict(&a, "team-a", "open"),
        Verdict::Accepted { .. }
    ));
    let (reason, message) = refusal(verdict(&a, "team-a", "closed"));
    assert_eq!(reason, "Invalid");
    assert!(
        message.contains("Gateway \"infra/closed\" takes routes only from its own namespace"),
        "{message}"
    );
}

/// A resource wrong in several ways is refused once with every problem, each on its line
/// once: the allowance's (a domain, a sink), discovery's (an address, beside a source that
/// is fine), the durations' and the validation's (a check value every endpoint shares),
/// with the first one's reason.
#[test]
fn every_problem_of_a_resource_is_said_at_once() {
    let sources = vec![addresses(&["192.0.2.20", "192.0.2.21"]), addresses(&["x"])];
    let mut r = resource("team-a", "many", 1, &["api.team-b.io"], sources);
    r.spec.sinks = vec!["other".into()];
    (r.spec.ttl, r.spec.degraded_ttl) = (Some("5x".into()), Some("1y2".into()));
    r.spec.check =
        Some(serde_json::from_value(serde_json::json!({"kind": "http", "rise": 0})).unwrap());
    let a = Admitter::default().admit(&base(), &[&r], &World::default(), &CATALOG);
    let (reason, message) = refusal(verdict(&a, "team-a", "many"));
    assert_eq!(reason, "DomainNotAllowed");
    let paths: Vec<&str> = message
        .lines()
        .filter_map(|l| l.split_once(": ").map(|(path, _)| path))
        .collect();
    assert_eq!(
        paths,
        [
            "spec.domains[0]",
            "spec.sinks[0]",
            "spec.endpoints[1].addresses[0]",
            "spec.ttl",
            "spec.degradedTTL",
            "spec.check.rise"
        ],
        "{message}"
    );
    assert!(a.config.tenants.iter().all(|t| t.name != "team-a_many"));
}
