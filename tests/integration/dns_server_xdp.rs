//! The embedded server's XDP path (`xdp = { interface = ... }`) on a real kernel: a veth
//! pair joins this network namespace to one of the test's own; the sink listens on this
//! side's addresses (IPv4 and IPv6) with its filter program attached to this side's veth,
//! and `dig` asks from inside the namespace, so every query crosses an interface as it
//! would a network card (veth runs the program in its driver, as a NIC with XDP support
//! does). Needs root and iproute2 (`.ci/test` runs as root and installs iproute2); the
//! traffic stays between the two ends of the pair.

use std::net::SocketAddr;
use std::time::Duration;

use ho_testkit::Behaviour;
use tokio::time::Instant;

use crate::harness::*;
use crate::services::dig::{dig_in, Answer};

/// A namespace holding the client end of a veth pair; this side's end has `v4` and `v6`.
struct Client {
    ns: VethNamespace,
    v4: String,
    v6: String,
}

impl Client {
    fn start() -> Client {
        let ns = VethNamespace::start("xdp", "hox");
        let (v4, v6) = (
            format!("10.233.{}", ns.n % 250),
            format!("fd00:233:{}::", ns.n),
        );
        run_checked(&["ip", "addr", "add", &format!("{v4}.1/24"), "dev", &ns.link]);
        let here = format!("{v6}1/64");
        run_checked(&["ip", "-6", "addr", "add", &here, "dev", &ns.link, "nodad"]);
        ns.inside(&["ip", "addr", "add", &format!("{v4}.2/24"), "dev", &ns.peer]);
        let there = format!("{v6}2/64");
        ns.inside(&["ip", "-6", "addr", "add", &there, "dev", &ns.peer, "nodad"]);
        Client {
            ns,
            v4: format!("{v4}.1"),
            v6: format!("{v6}1"),
        }
    }

    async fn ask(&self, server: SocketAddr, query: &[&str]) -> Answer {
        let mut all = dig_in(Some(&self.ns.name), server, query).await;
        assert_eq!(all.len(), 1, "one answer for {query:?}: {all:?}");
        all.remove(0)
    }

    /// Whether an XDP program is attached to this side's end.
    fn attached(&self) -> bool {
        run_checked(&["ip", "link", "show", &self.ns.link]).contains("prog/xdp")
    }
}

fn xdp_answers(engine: &ho_engine::Engine) -> f64 {
    metric(
        &engine.metrics().encode(),
        "health_orchestrator_dns_xdp_answers_total",
    )
    .unwrap_or(0.0)
}

/// UDP queries over IPv4 and IPv6 are answered through XDP (counted there, one answer per
/// query), follow a gateway's failure and recovery like the socket path's, TCP is left to
/// the kernel and answered by the socket, and the program leaves the interface with the
/// sink.
#[actix_rt::test]
async fn queries_crossing_the_interface_are_answered_through_xdp_and_follow_health() {
    let client = Client::start();
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(2);
    let v4: SocketAddr = format!("{}:53", client.v4).parse().unwrap();
    let v6: SocketAddr = format!("[{}]:53", client.v6).parse().unwrap();
    let tail = format!(
        "[[tenants]]\nname = \"a\"\ndomains = [\"api.example.org\"]\nsinks = [\"dns\"]\n\n\
         [sinks.dns]\nkind = \"dns_server\"\nlisten = [\"{v4}\", \"{v6}\"]\nzones = [\"example.org\"]\n\
         xdp = {{ interface = \"{}\" }}\n",
        client.ns.link
    );
    let engine = start_engine(
        dir.path(),
        &config(&Check::FAST, &gws.iter().collect::<Vec<_>>(), &tail),
    )
    .await;
    assert!(
        client.attached(),
        "the filter program is on {}",
        client.ns.link
    );
    let mut all: Vec<String> = gws.iter().map(ip).collect();
    all.sort();

    let start = Instant::now();
    let mut asked = 0.0;
    loop {
        let got = client.ask(v4, &["api.example.org", "A"]).await;
        asked += 1.0;
        if got.status == "NOERROR" && got.sorted() == all {
            break;
        }
        assert!(start.elapsed() < LIMIT, "wanted {all:?}, got {got:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let six = client.ask(v6, &["api.example.org", "A"]).await;
    assert_eq!(six.sorted(), all, "over IPv6");
    let nx = client.ask(v4, &["nope.example.org", "A"]).await;
    assert_eq!(nx.status, "NXDOMAIN");
    asked += 2.0;
    assert_eq!(
        xdp_answers(&engine),
        asked,
        "every UDP answer went through XDP"
    );

    let tcp = client.ask(v4, &["api.example.org", "A", "+tcp"]).await;
    assert_eq!(tcp.sorted(), all, "TCP, answered by the socket");
    assert_eq!(
        xdp_answers(&engine),
        asked,
        "TCP does not take the XDP path"
    );

    gws[0].set(Behaviour::Refuse).unwrap();
    let start = Instant::now();
    loop {
        let got = client.ask(v6, &["api.example.org", "A"]).await;
        if got.answers == [ip(&gws[1])] {
            break;
        }
        assert!(start.elapsed() < LIMIT, "the failed gateway stays: {got:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    gws[0].set(Behaviour::Healthy).unwrap();
    let start = Instant::now();
    loop {
        let got = client.ask(v4, &["api.example.org", "A"]).await;
        if got.sorted() == all {
            break;
        }
        assert!(start.elapsed() < LIMIT, "the gateway is not back: {got:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // One XDP program per interface: a second sink asking for it fails to start, saying
    // why, and the first goes on answering through XDP.
    let other = tempfile::tempdir().unwrap();
    let file = other.path().join("config.toml");
    let second = tail
        .replace(
            &format!("\"{v4}\", \"{v6}\""),
            &format!("\"{}:5353\"", client.v4),
        )
        .replace("name = \"a\"", "name = \"b\"");
    let text = config(&Check::FAST, &gws.iter().collect::<Vec<_>>(), &second);
    std::fs::write(&file, &text).unwrap();
    let plan = ho_kinds::load_plan(&[&file]).unwrap();
    let aws = crate::fakes::route53::sdk_config();
    let refused =
        ho_engine::Engine::start(plan, ho_kinds::parts(ho_kinds::Sinks::with_aws(aws))).await;
    let error = refused
        .err()
        .expect("a second XDP program is refused")
        .to_string();
    assert!(error.contains("another XDP program"), "{error}");
    let before = xdp_answers(&engine);
    assert_eq!(
        client.ask(v4, &["api.example.org", "A"]).await.sorted(),
        all
    );
    assert_eq!(xdp_answers(&engine), before + 1.0);

    drop(engine);
    eventually("the program leaves the interface with the sink", || {
        !client.attached()
    })
    .await;
}
