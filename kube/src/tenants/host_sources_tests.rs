//! `hosts` sources and `answer: cname`, admitted with the kinds and the base config of
//! [`super::admit_tests`].

use super::admit::{Admitter, Verdict};
use super::admit_tests::{addresses, base, refusal, resource, verdict, World, CATALOG};
use super::discover::Target;
use super::resource::EndpointSource;

/// A `hosts` source: each host name is an endpoint probed at what it resolves to, published
/// as addresses through the namespace's sink; `answer: cname` is refused there with the
/// sink's reason (a ConfigMap's hosts file holds addresses only), and a malformed host name
/// with the config's own words at the resource's path.
#[test]
fn load_balancer_host_names_are_endpoints_and_cname_answers_need_a_sink_that_holds_them() {
    let hosts = |list: &[&str]| EndpointSource {
        hosts: list.iter().map(|h| h.to_string()).collect(),
        priority: Some(1),
        ..EndpointSource::default()
    };
    let lbs = resource(
        "team-a",
        "lbs",
        0,
        &["api.team-a.io"],
        vec![
            hosts(&["LB-East.elb.example.net."]),
            addresses(&["192.0.2.40"]),
        ],
    );
    let mut cname = resource(
        "team-a",
        "cname",
        1,
        &["c.team-a.io"],
        vec![hosts(&["lb.example.net"])],
    );
    cname.spec.answer = Some(ho_config::Answer::Cname);
    let bad = resource(
        "team-a",
        "bad",
        2,
        &["b.team-a.io"],
        vec![hosts(&["lb!.example.net"])],
    );
    let a = Admitter::default().admit(&base(), &[&lbs, &cname, &bad], &World::default(), &CATALOG);
    assert!(
        matches!(verdict(&a, "team-a", "lbs"), Verdict::Accepted { .. }),
        "{:?}",
        verdict(&a, "team-a", "lbs")
    );
    let host = a
        .config
        .endpoints
        .iter()
        .find(|e| e.address == "lb-east.elb.example.net")
        .expect("the host name, lower case, without its trailing dot");
    assert_eq!(host.priority, Some(1));
    let (_, message) = refusal(verdict(&a, "team-a", "cname"));
    assert!(
        message.contains("cname") && message.contains("addresses only"),
        "{message}"
    );
    let (_, message) = refusal(verdict(&a, "team-a", "bad"));
    assert!(
        message.starts_with("spec.endpoints[0]") && message.contains("lb!.example.net"),
        "{message}"
    );
}

/// A load balancer that reports only a host name in its status (AWS's do) is an endpoint
/// at that host name, as if it were listed under `hosts`; one reporting an IP stays an
/// address.
#[test]
fn a_service_whose_load_balancer_reports_a_host_name_is_an_endpoint_at_that_name() {
    let service: k8s_openapi::api::core::v1::Service = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "edge", "namespace": "team-a"},
        "status": {"loadBalancer": {"ingress": [
            {"hostname": "K8s-Edge-1234.ELB.us-east-1.amazonaws.com."},
            {"ip": "192.0.2.41", "hostname": "ignored.example.net"},
            {"hostname": ""}
        ]}}
    }))
    .unwrap();
    let found = super::discover::service_addresses(&service);
    assert_eq!(
        found,
        vec![
            Target::Host("k8s-edge-1234.elb.us-east-1.amazonaws.com".into()),
            Target::Address("192.0.2.41".parse().unwrap()),
        ]
    );
    let gateway: kube::api::DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "team-a"},
        "status": {"addresses": [
            {"type": "Hostname", "value": "gw.lb.example.net"},
            {"value": "192.0.2.42"},
            {"type": "example.com/NamedAddress", "value": "pool-7"}
        ]}
    }))
    .unwrap();
    assert_eq!(
        super::discover::FoundGateway::of(&gateway).addresses,
        vec![
            Target::Host("gw.lb.example.net".into()),
            Target::Address("192.0.2.42".parse().unwrap()),
        ]
    );

    let mut world = World::default();
    world.services.insert(
        ("team-a".into(), "edge".into()),
        vec![Target::Host(
            "k8s-edge-1234.elb.us-east-1.amazonaws.com".into(),
        )],
    );
    let source = EndpointSource {
        service: Some("edge".into()),
        ..EndpointSource::default()
    };
    let edge = resource("team-a", "edge", 0, &["edge.team-a.io"], vec![source]);
    let a = Admitter::default().admit(&base(), &[&edge], &world, &CATALOG);
    assert!(
        matches!(verdict(&a, "team-a", "edge"), Verdict::Accepted { .. }),
        "{:?}",
        verdict(&a, "team-a", "edge")
    );
    assert!(
        a.config
            .endpoints
            .iter()
            .any(|e| e.address == "k8s-edge-1234.elb.us-east-1.amazonaws.com"),
        "{:?}",
        a.config.endpoints
    );
}
