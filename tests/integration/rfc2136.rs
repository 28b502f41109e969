//! The RFC 2136 sink against real BIND 9 and Knot DNS: names it does not own are never
//! touched, a wrong key is a clear error, and an `answer = "cname"` tenant's CNAME replaces
//! addresses and follows failover. (Convergence, outages, coalescing, lost
//! state and restarts are the conformance suite's.)

use crate::cname_answers::{balancers, lb_endpoints, LB_ZONE};
use crate::harness::*;
use crate::services::dig::{dig1, wait_for_answer};
use crate::services::dns_primary::{Flavor, Primary, KEY, ZONE};
use crate::services::pdns::PdnsServer;

fn tail(primary: &Primary, domains: &str, key_file: &str) -> String {
    format!(
        "[[tenants]]\nname = \"t\"\ndomains = [{domains}]\nsinks = [\"s\"]\n\n[sinks.s]\nkind = \"rfc2136\"\nserver = \"{}\"\nzone = \"tenant-a.io\"\ntsig = {{ name = \"{KEY}\", secret_file = {key_file:?} }}\ntimeout = \"1s\"\n",
        primary.addr
    )
}

/// A tenant listing a name someone else wrote: its own name is published, the foreign
/// one keeps its record, and the sink says which name it left alone and why.
async fn foreign_names_are_left_alone(flavor: Flavor) {
    let primary = Primary::start(flavor).await;
    let dir = tempfile::tempdir().unwrap();
    let gws = gateways(2);
    let key = primary.key_file().display().to_string();
    let text = config(
        &Check::FAST,
        &gws.iter().collect::<Vec<_>>(),
        &tail(
            &primary,
            "\"ours.tenant-a.io\", \"foreign.tenant-a.io\"",
            &key,
        ),
    );
    let engine = start_engine(dir.path(), &text).await;
    let error = wait_for_sink_error(&engine, "s", "the foreign name reported").await;
    println!("{flavor:?}: {error}");
    assert!(
        error.contains("foreign.tenant-a.io") && error.contains("ownership mark"),
        "{error}"
    );
    let mut all: Vec<String> = gws.iter().map(ip).collect();
    all.sort();
    let start = tokio::time::Instant::now();
    while dig1(primary.addr, &["ours.tenant-a.io", "A"])
        .await
        .sorted()
        != all
    {
        assert!(start.elapsed() < LIMIT, "ours.tenant-a.io never published");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let foreign = dig1(primary.addr, &["foreign.tenant-a.io", "A"]).await;
    assert_eq!(
        foreign.answers,
        vec!["192.0.2.99"],
        "the foreign record is untouched"
    );
    let mark = dig1(
        primary.addr,
        &["_health-orchestrator.ours.tenant-a.io", "TXT"],
    )
    .await;
    assert_eq!(
        mark.answers,
        vec!["\"heritage=health-orchestrator,owner=health-orchestrator\""]
    );
}

/// A wildcard name is written as the wildcard owner it is: the primary expands it for any
/// name below that does not exist, and it follows the probes as any name does.
async fn a_wildcard_is_written_and_expanded(flavor: Flavor) {
    let primary = Primary::start(flavor).await;
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(2);
    let key = primary.key_file().display().to_string();
    let text = config(
        &Check::FAST,
        &gws.iter().collect::<Vec<_>>(),
        &tail(&primary, "\"*.apps.tenant-a.io\"", &key),
    );
    let _engine = start_engine(dir.path(), &text).await;
    let all: Vec<String> = gws.iter().map(ip).collect();
    wait_for_answer(primary.addr, "shop.apps.tenant-a.io", &all).await;
    let mark = dig1(
        primary.addr,
        &["_health-orchestrator.*.apps.tenant-a.io", "TXT"],
    )
    .await;
    assert_eq!(
        mark.answers,
        vec!["\"heritage=health-orchestrator,owner=health-orchestrator\""],
        "{flavor:?}: the wildcard's mark"
    );
    gws[0].set(ho_testkit::Behaviour::Refuse).unwrap();
    wait_for_answer(primary.addr, "other.apps.tenant-a.io", &all[1..]).await;
    let outside = dig1(primary.addr, &["apps.tenant-a.io", "A"]).await;
    assert!(
        outside.answers.is_empty(),
        "{flavor:?}: the wildcard's parent is not answered by it: {outside:?}"
    );
}

#[actix_rt::test]
async fn bind_a_wildcard_is_written_and_expanded() {
    a_wildcard_is_written_and_expanded(Flavor::Bind).await;
}

#[actix_rt::test]
async fn knot_a_wildcard_is_written_and_expanded() {
    a_wildcard_is_written_and_expanded(Flavor::Knot).await;
}

#[actix_rt::test]
async fn bind_foreign_names_are_left_alone() {
    foreign_names_are_left_alone(Flavor::Bind).await;
}

#[actix_rt::test]
async fn knot_foreign_names_are_left_alone() {
    foreign_names_are_left_alone(Flavor::Knot).await;
}

/// `answer = "cname"` through updates: `api` held addresses this orchestrator wrote before
/// (its mark beside them); the update replaces them with a CNAME to the preferred load
/// balancer's host name (resolved by a real `pdns_server`, as a cloud's DNS answers for its
/// load balancers), moves it when that balancer fails, and the zone's apex, which cannot
/// hold a CNAME, holds the healthy balancer's address.
async fn a_cname_replaces_addresses_and_follows_failover(flavor: Flavor) {
    let pdns = PdnsServer::start(&format!("{LB_ZONE}."));
    let primary = Primary::start(flavor).await;
    primary.nsupdate(&format!(
        "update add api.{ZONE}. 60 A 192.0.2.50\n\
         update add _health-orchestrator.api.{ZONE}. 60 TXT \"heritage=health-orchestrator,owner=health-orchestrator\""
    ));
    let (mut east, west) = balancers(&pdns);
    let dir = tempfile::tempdir().unwrap();
    let text = TestConfig::defaults(&Check::FAST)
        .with(&lb_endpoints(&pdns))
        .with(&format!(
            "[[tenants]]\nname = \"t\"\ndomains = [\"api.{ZONE}\", \"{ZONE}\"]\npolicy = \"failover\"\n\
             answer = \"cname\"\nsinks = [\"s\"]\nttl = \"5s\"\n\n\
             [sinks.s]\nkind = \"rfc2136\"\nserver = \"{}\"\nzone = \"{ZONE}\"\n\
             tsig = {{ name = \"{KEY}\", secret_file = {:?} }}\ntimeout = \"1s\"\n",
            primary.addr,
            primary.key_file().display().to_string(),
        ))
        .render();
    let _engine = start_engine(dir.path(), &text).await;
    let cname = |lb: &str| vec![format!("lb-{lb}.{LB_ZONE}.")];
    let api = format!("api.{ZONE}");
    wait_for_answer(primary.addr, &api, &cname("east")).await;
    let a = dig1(primary.addr, &[&api, "A"]).await;
    assert!(
        !a.answers.iter().any(|r| r == "192.0.2.50"),
        "{flavor:?}: the CNAME stands alone: {a:?}"
    );
    wait_for_answer(primary.addr, ZONE, &[ip(&east)]).await;

    east.set(ho_testkit::Behaviour::Refuse).unwrap();
    let moved = wait_for_answer(primary.addr, &api, &cname("west")).await;
    wait_for_answer(primary.addr, ZONE, &[ip(&west)]).await;
    println!(
        "{flavor:?}: east down -> CNAME moved in {} ms",
        moved.as_millis()
    );
    east.set(ho_testkit::Behaviour::Healthy).unwrap();
    wait_for_answer(primary.addr, &api, &cname("east")).await;
}

#[actix_rt::test]
async fn bind_a_cname_replaces_addresses_and_follows_failover() {
    a_cname_replaces_addresses_and_follows_failover(Flavor::Bind).await;
}

#[actix_rt::test]
async fn knot_a_cname_replaces_addresses_and_follows_failover() {
    a_cname_replaces_addresses_and_follows_failover(Flavor::Knot).await;
}

/// A secret the server does not know: the update is refused with an error that names the
/// key as the problem, and nothing is written.
async fn a_wrong_key_is_a_clear_error(flavor: Flavor) {
    let primary = Primary::start(flavor).await;
    let dir = tempfile::tempdir().unwrap();
    let wrong = dir.path().join("wrong.key");
    std::fs::write(&wrong, "c2VjcmV0IHRoYXQgdGhlIHNlcnZlciBkb2VzIG5vdCBrbm93\n").unwrap();
    let gws = gateways(1);
    let text = config(
        &Check::FAST,
        &gws.iter().collect::<Vec<_>>(),
        &tail(
            &primary,
            "\"ours.tenant-a.io\"",
            &wrong.display().to_string(),
        ),
    );
    let engine = start_engine(dir.path(), &text).await;
    let error = wait_for_sink_error(&engine, "s", "the key refused").await;
    println!("{flavor:?}: {error}");
    assert!(
        error.contains("NOTAUTH") && error.contains("TSIG"),
        "{error}"
    );
    assert!(
        !error.contains("c2VjcmV0"),
        "the secret is never shown: {error}"
    );
    let ours = dig1(primary.addr, &["ours.tenant-a.io", "A"]).await;
    assert_eq!(ours.status, "NXDOMAIN");
}

#[actix_rt::test]
async fn bind_a_wrong_key_is_a_clear_error() {
    a_wrong_key_is_a_clear_error(Flavor::Bind).await;
}

#[actix_rt::test]
async fn knot_a_wrong_key_is_a_clear_error() {
    a_wrong_key_is_a_clear_error(Flavor::Knot).await;
}

/// Queries pipelined on one connection (as the `dns_server` reports are asked of a peer)
/// each get their own answer from real BIND 9, signed with the key and in the order asked,
/// whatever order the server answers in.
#[actix_rt::test]
async fn pipelined_signed_queries_each_get_their_answer() {
    use hickory_proto::rr::{Name, RData, RecordType};
    let primary = Primary::start(Flavor::Bind).await;
    primary.nsupdate(
        "update add a.tenant-a.io. 60 A 192.0.2.1\nupdate add b.tenant-a.io. 60 A 192.0.2.2\nsend\n",
    );
    let tsig = ho_dns::wire::key::TsigConfig {
        name: KEY.into(),
        algorithm: "hmac-sha256".into(),
        secret_file: primary.key_file(),
    };
    let key = ho_dns::wire::key::load_signer(&tsig).unwrap();
    let mut conn =
        ho_dns::wire::client::Connection::open(primary.addr, std::time::Duration::from_secs(2))
            .await
            .unwrap();
    let names: Vec<Name> = ["b.tenant-a.io.", "none.tenant-a.io.", "a.tenant-a.io."]
        .iter()
        .map(|n| Name::from_ascii(n).unwrap())
        .collect();
    let answers = conn
        .query_all(&names, RecordType::A, Some(&key))
        .await
        .unwrap();
    let got: Vec<Vec<String>> = answers
        .iter()
        .map(|m| {
            m.answers
                .iter()
                .filter_map(|r| match &r.data {
                    RData::A(a) => Some(a.0.to_string()),
                    _ => None,
                })
                .collect()
        })
        .collect();
    assert_eq!(got, [vec!["192.0.2.2"], vec![], vec!["192.0.2.1"]]);
}
