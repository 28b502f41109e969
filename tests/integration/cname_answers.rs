//! `answer = "cname"`: a tenant whose endpoints are two load balancers given by host name,
//! each resolved by a real `pdns_server` (as a cloud's DNS answers its load balancers'
//! names), publishes a CNAME to the healthy one, through the embedded server (queried with
//! `dig`) and through PowerDNS (the same server's second zone, read back through DNS); the
//! zone's apex answers the addresses. The probes judge the addresses the names resolve to,
//! and failover moves the CNAME. The answer canary follows the CNAME: one edited by hand to
//! a host the tenant does not publish now is reported stale.

use std::net::{IpAddr, SocketAddr};

use ho_testkit::{Behaviour, Gateway};

use crate::harness::*;
use crate::services::dig::{dig1, wait_for_answer};
use crate::services::pdns::{PdnsServer, DNS_PORT};

/// The zone the load balancers' names live in (answered by `pdns_server`).
pub(crate) const LB_ZONE: &str = "lb.test";
/// The zone the tenant publishes in (the embedded server's, and PowerDNS's second zone).
const ZONE: &str = "example.org";
/// The port every load balancer answers its health check on.
pub(crate) const PORT: u16 = 18283;

/// Two load balancers, `east` and `west`, each a gateway on a loopback address of its own
/// that `pdns` answers `lb-east.`/`lb-west.` [`LB_ZONE`] with.
pub(crate) fn balancers(pdns: &PdnsServer) -> (Gateway, Gateway) {
    let (east, west) = (gateway(), gateway());
    pdns.point(LB_ZONE, &format!("lb-east.{LB_ZONE}"), &ip(&east));
    pdns.point(LB_ZONE, &format!("lb-west.{LB_ZONE}"), &ip(&west));
    (east, west)
}

/// A load balancer's gateway on a loopback address of its own.
fn gateway() -> Gateway {
    Gateway::start(
        SocketAddr::new(IpAddr::V4(loopback_ip()), PORT),
        Behaviour::Healthy,
    )
    .unwrap()
}

/// The resolver asking `pdns` and two endpoints given by their load balancers' host names,
/// `east` preferred (priority 0) over `west`.
pub(crate) fn lb_endpoints(pdns: &PdnsServer) -> String {
    format!(
        "[resolver]\nservers = [\"{ip}:{DNS_PORT}\"]\nmin_refresh = \"1s\"\ntimeout = \"500ms\"\n\n\
         [[endpoints]]\nname = \"east\"\naddress = \"lb-east.{LB_ZONE}\"\npriority = 0\ncheck = {{ port = {PORT} }}\n\n\
         [[endpoints]]\nname = \"west\"\naddress = \"lb-west.{LB_ZONE}\"\npriority = 1\ncheck = {{ port = {PORT} }}\n\n",
        ip = pdns.ip,
    )
}

fn config(pdns: &PdnsServer, listen: SocketAddr) -> String {
    config_with(pdns, listen, "1s", "")
}

/// [`config`] with PowerDNS reconciled every `reconcile`, and `canary` (a TOML table's
/// inner text, with `{pdns}` standing for PowerDNS's DNS port) on both sinks when given.
fn config_with(pdns: &PdnsServer, listen: SocketAddr, reconcile: &str, canary: &str) -> String {
    let canary_of = |address: Option<String>| match (canary.is_empty(), address) {
        (true, _) => String::new(),
        (false, None) => format!("canary = {{ {canary} }}\n"),
        (false, Some(a)) => format!("canary = {{ address = \"{a}\", {canary} }}\n"),
    };
    TestConfig::defaults(&Check::FAST)
        .with(&lb_endpoints(pdns))
        .with(&format!(
            "[[tenants]]\nname = \"api\"\ndomains = [\"api.{ZONE}\", \"{ZONE}\"]\npolicy = \"failover\"\nanswer = \"cname\"\n\
             sinks = [\"dns\", \"pdns\"]\nttl = \"5s\"\n\n\
             [sinks.dns]\nkind = \"dns_server\"\nlisten = [\"{listen}\"]\nzones = [\"{ZONE}\"]\n{dns_canary}\n\
             [sinks.pdns]\nkind = \"powerdns\"\nurl = \"{url}\"\napi_key_file = {key:?}\nzone = \"{ZONE}\"\ntimeout = \"1s\"\n\
             delivery = {{ backoff_min = \"50ms\", backoff_max = \"500ms\", reconcile_interval = \"{reconcile}\" }}\n{pdns_canary}",
            url = pdns.url(),
            key = pdns.key_file().display().to_string(),
            dns_canary = canary_of(None),
            pdns_canary = canary_of(Some(format!("{}:{DNS_PORT}", pdns.ip))),
        ))
        .render()
}

/// PowerDNS with the tenant's zone beside the load balancers' one.
fn pdns_with_zone() -> PdnsServer {
    let pdns = PdnsServer::start(&format!("{LB_ZONE}."));
    let (code, body) = pdns.api(
        "POST",
        "/api/v1/servers/localhost/zones",
        &format!(r#"{{"name":"{ZONE}.","kind":"Native","nameservers":["ns1.{ZONE}."]}}"#),
    );
    assert_eq!(code, 201, "creating zone {ZONE}: {body}");
    pdns
}

#[actix_rt::test]
async fn a_cname_tenant_fails_over_between_two_load_balancer_names() {
    let pdns = pdns_with_zone();
    let (mut east, west) = balancers(&pdns);
    let dir = tempfile::tempdir().unwrap();
    let server = SocketAddr::new(loopback_ip().into(), 5353);
    let _engine = start_engine(dir.path(), &config(&pdns, server)).await;

    let cname = |lb: &str| vec![format!("lb-{lb}.{LB_ZONE}.")];
    wait_for_answer(server, &format!("api.{ZONE}"), &cname("east")).await;
    pdns.wait_for_answer(&format!("api.{ZONE}"), "CNAME", &cname("east"))
        .await;
    // The apex cannot hold a CNAME: both answer the preferred load balancer's address.
    wait_for_answer(server, ZONE, &[ip(&east)]).await;
    pdns.wait_for_answer(ZONE, "A", &[ip(&east)]).await;
    let only = dig1(server, &[&format!("api.{ZONE}"), "TXT"]).await;
    assert_eq!(
        (only.status.as_str(), only.answers.clone()),
        ("NOERROR", cname("east")),
        "a CNAME answers every type, alone"
    );

    // East's address fails its probes: the CNAME moves to west, in both back ends.
    east.set(Behaviour::Refuse).unwrap();
    let moved = wait_for_answer(server, &format!("api.{ZONE}"), &cname("west")).await;
    let written = pdns
        .wait_for_answer(&format!("api.{ZONE}"), "CNAME", &cname("west"))
        .await;
    wait_for_answer(server, ZONE, &[ip(&west)]).await;
    println!(
        "east down -> CNAME moved: embedded server {} ms, PowerDNS {} ms later",
        moved.as_millis(),
        written.as_millis()
    );
    let a = pdns.dig(&format!("api.{ZONE}"), "A").await;
    assert!(
        a.contains(&ip(&west)) && !a.contains(&ip(&east)),
        "PowerDNS follows the CNAME to west's address: {a:?}"
    );

    // East heals: failover moves back to the preferred tier.
    east.set(Behaviour::Healthy).unwrap();
    wait_for_answer(server, &format!("api.{ZONE}"), &cname("east")).await;
    pdns.wait_for_answer(&format!("api.{ZONE}"), "CNAME", &cname("east"))
        .await;
}

/// The canary asks both back ends for the CNAME tenant's names: as decided, then PowerDNS's
/// CNAME edited by hand to the standby balancer (a host the tenant does not publish while
/// the preferred one is up) is reported stale with the host it serves, while the embedded
/// server stays as decided; failing the preferred balancer over makes the edit the decision,
/// and the report is withdrawn.
#[actix_rt::test]
async fn the_canary_follows_a_cname_and_reports_one_edited_by_hand() {
    let pdns = pdns_with_zone();
    let (mut east, _west) = balancers(&pdns);
    let dir = tempfile::tempdir().unwrap();
    let server = SocketAddr::new(loopback_ip().into(), 5353);
    let text = config_with(&pdns, server, "1h", "every = \"200ms\", grace = \"1s\"");
    let engine = start_engine(dir.path(), &text).await;
    let api = serve_api(&engine, None, None).await;
    let api_name = format!("api.{ZONE}");
    let cname = |lb: &str| vec![format!("lb-{lb}.{LB_ZONE}.")];
    pdns.wait_for_answer(&api_name, "CNAME", &cname("east"))
        .await;
    for sink in ["dns", "pdns"] {
        eventually_async(
            &format!("{sink}: the canary sees the decision served"),
            async || canary_questions(api, sink, "match").await >= 4.0,
        )
        .await;
        assert!(stale(api, sink).await.is_empty(), "{sink}: nothing stale");
    }

    pdns.patch_zone(
        &format!("{ZONE}."),
        &format!(
            "{{\"rrsets\": [{{\"name\": \"{api_name}.\", \"type\": \"CNAME\", \"ttl\": 5, \"changetype\": \"REPLACE\", \"records\": [{{\"content\": \"lb-west.{LB_ZONE}.\", \"disabled\": false}}]}}]}}"
        ),
    );
    eventually_async("the hand edit reported stale", async || {
        stale(api, "pdns").await == [(api_name.clone(), Some(format!("lb-west.{LB_ZONE}")))]
    })
    .await;
    assert!(
        stale(api, "dns").await.is_empty(),
        "the embedded server is as decided"
    );

    east.set(Behaviour::Refuse).unwrap();
    eventually_async("west is the decision: nothing stale", async || {
        stale(api, "pdns").await.is_empty()
    })
    .await;
}

/// `/status`'s stale names of sink `sink`'s canary, with the CNAME each serves.
async fn stale(api: SocketAddr, sink: &str) -> Vec<(String, Option<String>)> {
    canary_stale(api, sink)
        .await
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_owned(),
                s["served_host"].as_str().map(str::to_owned),
            )
        })
        .collect()
}
