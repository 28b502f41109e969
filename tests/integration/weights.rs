//! Weights the gateways report (`reported_weight`), read from real HTTP answers (an
//! `X-Weight` header) and seen where DNS answers: `dig` against the embedded server (one
//! address per query, drawn by weight) and PowerDNS's LUA record (`pickwhashed`, read back
//! through its API). A change inside the damping band writes nothing; a gateway that stops
//! reporting falls back to its configured weight.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use tokio::time::Instant;

use crate::harness::*;
use crate::services::dig::dig;
use crate::services::pdns::PdnsServer;

/// A gateway answering its health check with `200` and `X-Weight: N` (no header while N
/// is 0), N switchable while it runs.
struct Agent {
    addr: SocketAddr,
    weight: Arc<AtomicU32>,
}

impl Agent {
    async fn start(weight: u32) -> Agent {
        let listener = tokio::net::TcpListener::bind((loopback_ip(), 0))
            .await
            .unwrap();
        let agent = Agent {
            addr: listener.local_addr().unwrap(),
            weight: Arc::new(AtomicU32::new(weight)),
        };
        let reported = agent.weight.clone();
        serve_http(listener, move |_req| {
            let w = reported.load(Ordering::Relaxed);
            async move {
                let mut answer = hyper::Response::builder().status(200);
                if w > 0 {
                    answer = answer.header("X-Weight", w.to_string());
                }
                answer.body(Full::new(Bytes::from_static(b"ok"))).unwrap()
            }
        });
        agent
    }

    fn ip(&self) -> IpAddr {
        self.addr.ip()
    }

    fn report(&self, weight: u32) {
        self.weight.store(weight, Ordering::Relaxed);
    }

    fn endpoint(&self, name: &str) -> String {
        format!(
            "[[endpoints]]\nname = \"{name}\"\naddress = \"{}\"\nweight = 7\n\
             check = {{ port = {}, reported_weight = {{ from = \"header\", name = \"X-Weight\" }} }}\n\n",
            self.ip(),
            self.addr.port()
        )
    }
}

/// The weights `/status` shows the two endpoints reporting.
async fn wait_for_weights(engine: &ho_engine::Engine, want: [Option<u32>; 2]) {
    wait_for_status(engine, &format!("reported weights {want:?}"), |s| {
        [
            s.endpoints[0].reported_weight,
            s.endpoints[1].reported_weight,
        ] == want
    })
    .await;
}

/// Of 200 queries answered one address each, how many got `ip`.
async fn drawn(server: SocketAddr, ip: IpAddr) -> usize {
    let queries: Vec<&str> = std::iter::repeat_n(["w.example.org", "A"], 200)
        .flatten()
        .collect();
    let answers = dig(server, &queries).await;
    assert_eq!(answers.len(), 200);
    answers
        .iter()
        .filter(|a| a.answers == [ip.to_string()])
        .count()
}

/// PowerDNS's LUA record of `w.tenant-a.io` holds `expression` (polled until it does).
async fn wait_for_lua(pdns: &PdnsServer, expression: &str) {
    let start = Instant::now();
    loop {
        let (_, zone) = pdns.api("GET", "/api/v1/servers/localhost/zones/tenant-a.io.", "");
        if zone.contains(expression) {
            return;
        }
        assert!(
            start.elapsed() < LIMIT,
            "the LUA record never held {expression}: {zone}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[actix_rt::test]
async fn reported_weights_steer_the_answers_within_their_band() {
    let pdns = PdnsServer::start("tenant-a.io.");
    let dir = tempfile::tempdir().unwrap();
    let agents = [Agent::start(99).await, Agent::start(1).await];
    let server = SocketAddr::new(loopback_ip().into(), 5353);
    let text = TestConfig::defaults(&Check::FAST)
        .with(&agents[0].endpoint("gw-1"))
        .with(&agents[1].endpoint("gw-2"))
        .with(&format!(
            "[[tenants]]\nname = \"w\"\ndomains = [\"w.example.org\"]\nsinks = [\"dns\"]\npolicy = \"weighted\"\n\n\
             [[tenants]]\nname = \"p\"\ndomains = [\"w.tenant-a.io\"]\nsinks = [\"pdns\"]\npolicy = \"weighted\"\n\n\
             [sinks.dns]\nkind = \"dns_server\"\nlisten = [\"{server}\"]\nzones = [\"example.org\"]\nanswers = 1\n\n\
             [sinks.pdns]\nkind = \"powerdns\"\nurl = \"{}\"\napi_key_file = {:?}\nzone = \"tenant-a.io.\"\nlua = true\ntimeout = \"1s\"\n",
            pdns.url(),
            pdns.key_file().display().to_string()
        ))
        .render();
    let engine = start_engine(dir.path(), &text).await;
    let (ip1, ip2) = (agents[0].ip(), agents[1].ip());
    wait_for_weights(&engine, [Some(99), Some(1)]).await;
    wait_for_lua(
        &pdns,
        &format!("pickwhashed({{{{99,'{ip1}'}},{{1,'{ip2}'}}}})"),
    )
    .await;
    // 99:1 expects 198 of 200; fewer than 180 is more than 10 standard deviations off.
    let heavy = drawn(server, ip1).await;
    assert!(heavy >= 180, "{heavy} of 200 for a reported 99 against 1");

    // 99 -> 95 is inside the 10 % band: nothing is written while gw-1 is probed again.
    let writes = (sink_writes(&engine, "dns"), sink_writes(&engine, "pdns"));
    agents[0].report(95);
    let probes = |s: &ho_engine::status::TrackerStatus| s.endpoints[0].probes;
    let from = probes(&engine.status().await.unwrap().tracker);
    let status = wait_for_status(&engine, "gw-1 probed 5 more times", |s| {
        probes(s) >= from + 5
    })
    .await;
    assert_eq!(
        status.endpoints[0].reported_weight,
        Some(99),
        "the weight in effect"
    );
    assert_eq!(
        (sink_writes(&engine, "dns"), sink_writes(&engine, "pdns")),
        writes,
        "a change inside the band writes nothing"
    );

    // The weights turn round: the answers follow.
    agents[0].report(1);
    agents[1].report(99);
    wait_for_weights(&engine, [Some(1), Some(99)]).await;
    wait_for_lua(
        &pdns,
        &format!("pickwhashed({{{{1,'{ip1}'}},{{99,'{ip2}'}}}})"),
    )
    .await;
    let heavy = drawn(server, ip2).await;
    assert!(heavy >= 180, "{heavy} of 200 for a reported 99 against 1");

    // gw-2 stops reporting: its configured weight (7) counts again.
    agents[1].report(0);
    wait_for_weights(&engine, [Some(1), None]).await;
    wait_for_lua(
        &pdns,
        &format!("pickwhashed({{{{1,'{ip1}'}},{{7,'{ip2}'}}}})"),
    )
    .await;
}
