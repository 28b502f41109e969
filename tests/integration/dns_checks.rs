//! The `dns` check kind against real servers: a resolver (Debian's dnsmasq answering from a
//! hosts file) and the authoritative servers users front (Knot DNS, BIND 9, PowerDNS):
//! rcode and answer data judged over UDP and TCP, a record changed on the server followed,
//! a stopped server refused, the `probe` command's `dns://` form, and an engine publishing
//! by DNS health.

use std::time::Duration;

use ho_config::CheckOverrides;
use ho_engine::probe::{Failure, ProbeResult};

use crate::harness::{
    addresses, binary, hosts_sink, probe_within, start_engine, wait_for_file, Check, TestConfig,
};
use crate::services::dns_primary::{Flavor, Primary, ZONE};
use crate::services::dnsmasq::Dnsmasq;
use crate::services::pdns::{PdnsServer, DNS_PORT};

const HOSTS: &str = "192.0.2.10 health.example.test\n";

fn asks(name: &str) -> CheckOverrides {
    CheckOverrides::of_kind("dns").with("query_name", name)
}

async fn probe(server: &Dnsmasq, check: CheckOverrides) -> ProbeResult {
    probe_within(server.addr(), Duration::from_millis(500), check).await
}

#[tokio::test]
async fn a_dns_check_judges_the_rcode_and_the_answer_over_udp_and_tcp() {
    let dir = tempfile::tempdir().unwrap();
    let server = Dnsmasq::start(dir.path(), HOSTS).await;
    let ok = probe(&server, asks("health.example.test")).await;
    assert_eq!(ok.outcome, Ok(()), "{}", ok.reason());
    let with_data = asks("health.example.test").with("answer_contains", "192.0.2.10");
    assert_eq!(probe(&server, with_data.clone()).await.outcome, Ok(()));
    let over_tcp = with_data.clone().with("tcp", true);
    assert_eq!(probe(&server, over_tcp).await.outcome, Ok(()));

    let other = probe(
        &server,
        asks("health.example.test").with("answer_contains", "192.0.2.99"),
    )
    .await;
    assert_eq!(other.label(), "answer");
    assert_eq!(other.reason(), "answer without 192.0.2.99");

    // dnsmasq without upstreams refuses what its hosts file does not hold.
    let missing = probe(&server, asks("missing.example.test")).await;
    assert_eq!(missing.label(), "rcode", "{}", missing.reason());
    let rcode = missing
        .reason()
        .strip_prefix("rcode ")
        .expect("the reason names the rcode")
        .to_owned();
    assert_ne!(rcode, "NOERROR");
    let expected = asks("missing.example.test").with("expect_rcode", rcode.as_str());
    assert_eq!(probe(&server, expected).await.outcome, Ok(()));

    let addr = server.addr();
    drop(server);
    // A stopped server's port is refused (ICMP port unreachable). A query can go unanswered
    // instead while another test's server holds the same port on every address; it is
    // asked again, a few times, until refused.
    let mut stopped = Err(Failure::Timeout);
    for _ in 0..6 {
        let check = asks("health.example.test");
        stopped = probe_within(addr, Duration::from_millis(500), check)
            .await
            .outcome;
        if stopped != Err(Failure::Timeout) {
            break;
        }
    }
    assert_eq!(stopped, Err(Failure::Refused));
}

/// What a check of an authoritative server sees at `addr`, which serves `tenant-a.io` with
/// `foreign A 192.0.2.99`: the record (UDP and TCP, with RD off as an authoritative server
/// is asked), NXDOMAIN for a name the zone lacks, and REFUSED for a zone it does not serve.
async fn judges_an_authoritative_server(addr: std::net::SocketAddr, server: &str) {
    let ask = |name: &str| asks(name).with("recursion_desired", false);
    let at = |check| probe_within(addr, Duration::from_millis(500), check);
    let record = ask(&format!("foreign.{ZONE}")).with("answer_contains", "192.0.2.99");
    let r = at(record.clone()).await;
    assert_eq!(r.outcome, Ok(()), "{server}: {}", r.reason());
    let r = at(record.with("tcp", true)).await;
    assert_eq!(r.outcome, Ok(()), "{server} over TCP: {}", r.reason());
    let r = at(ask(ZONE).with("query_type", "SOA").with("tcp", true)).await;
    assert_eq!(r.outcome, Ok(()), "{server} SOA: {}", r.reason());
    let missing = at(ask(&format!("missing.{ZONE}"))).await;
    assert_eq!(missing.reason(), "rcode NXDOMAIN", "{server}");
    let r = at(ask(&format!("missing.{ZONE}")).with("expect_rcode", "NXDOMAIN")).await;
    assert_eq!(r.outcome, Ok(()), "{server}: {}", r.reason());
    let elsewhere = at(ask("example.org")).await;
    assert_eq!(elsewhere.reason(), "rcode REFUSED", "{server}");
}

/// Knot DNS and BIND 9, each judged as above, then the record changed on the server (an
/// RFC 2136 update): the check that wanted the old data fails with why, the new data passes.
#[tokio::test]
async fn knot_and_bind_are_judged_by_their_records() {
    for flavor in [Flavor::Knot, Flavor::Bind] {
        let server = Primary::start(flavor).await;
        let name = format!("{flavor:?}");
        judges_an_authoritative_server(server.addr, &name).await;
        server.nsupdate(&format!(
            "update delete foreign.{ZONE} A\nupdate add foreign.{ZONE} 60 A 192.0.2.100"
        ));
        let check = |data: &str| {
            asks(&format!("foreign.{ZONE}"))
                .with("recursion_desired", false)
                .with("answer_contains", data)
        };
        let old = probe_within(server.addr, Duration::from_millis(500), check("192.0.2.99")).await;
        assert_eq!(old.reason(), "answer without 192.0.2.99", "{name}");
        let new = probe_within(
            server.addr,
            Duration::from_millis(500),
            check("192.0.2.100"),
        )
        .await;
        assert_eq!(new.outcome, Ok(()), "{name}: {}", new.reason());
    }
}

/// PowerDNS Authoritative (gsqlite3 back end), the record added through its API.
#[tokio::test]
async fn powerdns_is_judged_by_its_records() {
    let server = PdnsServer::start(&format!("{ZONE}."));
    server.patch_zone(
        &format!("{ZONE}."),
        &format!(
            r#"{{"rrsets":[{{"name":"foreign.{ZONE}.","type":"A","ttl":60,"changetype":"REPLACE","records":[{{"content":"192.0.2.99","disabled":false}}]}}]}}"#
        ),
    );
    let addr = std::net::SocketAddr::new(server.ip.into(), DNS_PORT);
    judges_an_authoritative_server(addr, "pdns_server").await;
}

#[tokio::test]
async fn dns_check_keys_are_checked_where_they_are_written() {
    let errors = ho_config::resolve_standalone_check(
        &CheckOverrides::of_kind("dns")
            .with("query_type", "BOGUS")
            .with("expect_rcode", "FINE")
            .with("path", "/healthz"),
        &ho_kinds::CHECK_KINDS,
    )
    .unwrap_err()
    .to_string();
    for expected in [
        "check.path: not used by kind \"dns\"",
        "check.query_name: missing: the name a dns check asks",
        "check.query_type: \"BOGUS\" is not a record type",
        "check.expect_rcode: \"FINE\" is not an rcode",
    ] {
        assert!(errors.contains(expected), "{expected}\n{errors}");
    }
}

#[tokio::test]
async fn probe_takes_a_dns_url() {
    let dir = tempfile::tempdir().unwrap();
    let server = Dnsmasq::start(dir.path(), HOSTS).await;
    let run = |url: String| async move {
        tokio::task::spawn_blocking(move || binary().args(["probe", &url]).output().unwrap())
            .await
            .unwrap()
    };
    let out = run(format!(
        "dns://{}/health.example.test?type=A&contains=192.0.2.10&tcp=1",
        server.addr()
    ))
    .await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.starts_with(&format!("healthy {} ok ", server.addr())),
        "{text}"
    );
    let out = run(format!(
        "dns://{}/health.example.test?contains=192.0.2.11",
        server.addr()
    ))
    .await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains(" answer without 192.0.2.11 "), "{text}");
}

/// Two resolvers as endpoints of one tenant, checked by the answer they give: the one
/// whose answer goes wrong leaves the hosts file, and returns when it is right again.
#[actix_rt::test]
async fn an_engine_publishes_the_resolvers_that_answer_right() {
    let dir = tempfile::tempdir().unwrap();
    for sub in ["a", "b"] {
        std::fs::create_dir(dir.path().join(sub)).unwrap();
    }
    let (a, b) = (
        Dnsmasq::start(&dir.path().join("a"), HOSTS).await,
        Dnsmasq::start(&dir.path().join("b"), HOSTS).await,
    );
    let mut endpoints = String::new();
    for (name, server) in [("dns-a", &a), ("dns-b", &b)] {
        endpoints.push_str(&format!(
            "[[endpoints]]\nname = \"{name}\"\naddress = \"{}\"\n\
             check = {{ kind = \"dns\", port = {}, query_name = \"health.example.test\", answer_contains = \"192.0.2.10\" }}\n\n",
            server.addr().ip(),
            server.addr().port()
        ));
    }
    let text = TestConfig::defaults(&Check::FAST)
        .with(&endpoints)
        .with(&format!(
            "[[tenants]]\nname = \"resolvers\"\ndomains = [\"ns.example\"]\nsinks = [\"local\"]\n\n{}",
            hosts_sink(dir.path())
        ))
        .render();
    let _engine = start_engine(dir.path(), &text).await;
    let file = dir.path().join("resolvers.hosts");
    wait_for_file(&file, "both resolvers", |c| addresses(c).len() == 2).await;
    b.reload("192.0.2.66 health.example.test\n");
    let first = a.addr().ip().to_string();
    wait_for_file(&file, "the wrong one to leave", |c| {
        addresses(c) == [first.clone()]
    })
    .await;
    b.reload(HOSTS);
    wait_for_file(&file, "it to return", |c| addresses(c).len() == 2).await;
}
