//! Fault -> `dig` answer changed, through each DNS-native publishing path: the embedded
//! server (`dns_server`), PowerDNS through its API (`powerdns`, real `pdns_server`) and BIND
//! through RFC 2136 (`rfc2136`, real `named`). Each trial refuses one gateway's connections
//! at a random point of the probe schedule and polls the server with `dig` until the
//! answer drops it; the gateway then heals and the answer returns.
//!
//! `FAULT_TRIALS` (default 3) sets the trials per path; the p50/p99 printed are what
//! bench/README.md reports (run with FAULT_TRIALS=20). No wall-clock bound is asserted:
//! every trial must converge within the harness limit, that is all.

use std::net::SocketAddr;
use std::time::Duration;

use ho_testkit::{Behaviour, Gateway};
use tokio::time::Instant;

use crate::harness::*;
use crate::services::dig::dig1;
use crate::services::dns_primary::{Flavor, Primary, KEY};
use crate::services::pdns::PdnsServer;

const NAME: &str = "fo.tenant-a.io";

/// The back end a path publishes to, kept alive for the run, and where to ask.
enum Server {
    Embedded,
    Pdns(PdnsServer),
    Bind(Primary),
}

impl Server {
    fn sink_table(&self, embedded: SocketAddr) -> String {
        match self {
            Server::Embedded => format!(
                "kind = \"dns_server\"\nlisten = [\"{embedded}\"]\nzones = [\"tenant-a.io\"]\n"
            ),
            Server::Pdns(p) => format!(
                "kind = \"powerdns\"\nurl = \"{}\"\napi_key_file = {:?}\nzone = \"tenant-a.io.\"\n",
                p.url(),
                p.key_file().display().to_string()
            ),
            Server::Bind(b) => format!(
                "kind = \"rfc2136\"\nserver = \"{}\"\nzone = \"tenant-a.io\"\ntsig = {{ name = \"{KEY}\", secret_file = {:?} }}\n",
                b.addr,
                b.key_file().display().to_string()
            ),
        }
    }

    fn dns_addr(&self, embedded: SocketAddr) -> SocketAddr {
        match self {
            Server::Embedded => embedded,
            Server::Pdns(p) => SocketAddr::new(p.ip.into(), crate::services::pdns::DNS_PORT),
            Server::Bind(b) => b.addr,
        }
    }
}

async fn wait_for(server: SocketAddr, want: &[String]) -> Duration {
    let start = Instant::now();
    loop {
        let got = dig1(server, &[NAME, "A"]).await.sorted();
        if got == want {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < LIMIT,
            "wanted {want:?}, {server} answers {got:?}"
        );
    }
}

/// Fault -> answer changed, `trials` times; the times, sorted.
async fn trials(server: Server, trials: usize) -> Vec<Duration> {
    let dir = tempfile::tempdir().unwrap();
    let mut gws: Vec<Gateway> = gateways(3);
    let embedded = SocketAddr::new(loopback_ip().into(), 5353);
    let tail = format!(
        "[[tenants]]\nname = \"fo\"\ndomains = [\"{NAME}\"]\nsinks = [\"s\"]\nttl = \"5s\"\n\n[sinks.s]\n{}",
        server.sink_table(embedded)
    );
    let _engine = start_engine(
        dir.path(),
        &config(&Check::FAST, &gws.iter().collect::<Vec<_>>(), &tail),
    )
    .await;
    let dns = server.dns_addr(embedded);
    let mut all: Vec<String> = gws.iter().map(ip).collect();
    all.sort();
    let rest: Vec<String> = all.iter().filter(|a| **a != ip(&gws[0])).cloned().collect();
    wait_for(dns, &all).await;
    let mut times = Vec::with_capacity(trials);
    for _ in 0..trials {
        tokio::time::sleep(Duration::from_millis(fastrand::u64(100..400))).await;
        gws[0].set(Behaviour::Refuse).unwrap();
        times.push(wait_for(dns, &rest).await);
        gws[0].set(Behaviour::Healthy).unwrap();
        wait_for(dns, &all).await;
    }
    times.sort();
    times
}

fn report(path: &str, times: &[Duration]) {
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize].as_millis();
    println!(
        "FAULT {path}: {} trials, p50 {} ms, p99 {} ms, max {} ms (detection bound: refused at the next probe, 200 ms interval + 50 ms re-check)",
        times.len(),
        at(0.5),
        at(0.99),
        times.last().unwrap().as_millis()
    );
}

fn trial_count() -> usize {
    std::env::var("FAULT_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
}

#[actix_rt::test]
async fn fault_to_answer_through_the_embedded_server() {
    report("dns_server", &trials(Server::Embedded, trial_count()).await);
}

#[actix_rt::test]
async fn fault_to_answer_through_powerdns() {
    let pdns = PdnsServer::start("tenant-a.io.");
    report("powerdns", &trials(Server::Pdns(pdns), trial_count()).await);
}

#[actix_rt::test]
async fn fault_to_answer_through_bind_rfc2136() {
    let bind = Primary::start(Flavor::Bind).await;
    report(
        "rfc2136 (BIND)",
        &trials(Server::Bind(bind), trial_count()).await,
    );
}
