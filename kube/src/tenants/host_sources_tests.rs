//! `hosts` sources and `answer: cname`, admitted with the kinds and the base config of
//! [`super::admit_tests`].

use super::admit::{Admitter, Verdict};
use super::admit_tests::{addresses, base, refusal, resource, verdict, World, CATALOG};
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
