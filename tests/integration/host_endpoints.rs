//! Endpoints given by host name, resolved through a real `pdns_server` answering the name
//! (as a cloud's DNS answers a load balancer's name): every address is probed and
//! published, a new set replaces the old, the probes still decide, a name that stops
//! resolving keeps its last addresses, and a name that never resolved stops the start.

use std::net::{IpAddr, SocketAddr};

use ho_testkit::{Behaviour, Gateway};

use crate::harness::*;
use crate::services::pdns::{PdnsServer, DNS_PORT};

/// The zone and the load balancer's name in it.
const ZONE: &str = "lb.test";
const LB: &str = "gw.lb.test";
/// The port every address of the name answers its health check on.
const PORT: u16 = 18282;

/// Makes `LB` answer `addresses` (TTL 1 s); none deletes it (NXDOMAIN).
fn point(pdns: &PdnsServer, addresses: &[&Gateway]) {
    let records: Vec<String> = addresses
        .iter()
        .map(|g| {
            format!(
                "{{\"content\": \"{}\", \"disabled\": false}}",
                g.addr().ip()
            )
        })
        .collect();
    let rrset = if records.is_empty() {
        format!("{{\"name\": \"{LB}.\", \"type\": \"A\", \"changetype\": \"DELETE\"}}")
    } else {
        format!(
            "{{\"name\": \"{LB}.\", \"type\": \"A\", \"ttl\": 1, \"changetype\": \"REPLACE\", \"records\": [{}]}}",
            records.join(", ")
        )
    };
    pdns.patch_zone(&format!("{ZONE}."), &format!("{{\"rrsets\": [{rrset}]}}"));
}

fn gateway() -> Gateway {
    Gateway::start(
        SocketAddr::new(IpAddr::V4(loopback_ip()), PORT),
        Behaviour::Healthy,
    )
    .unwrap()
}

fn config(pdns: &PdnsServer, dir: &std::path::Path) -> String {
    TestConfig::defaults(&Check::FAST)
        .with(&format!(
            "[resolver]\nservers = [\"{}:{DNS_PORT}\"]\nmin_refresh = \"1s\"\ntimeout = \"500ms\"\n\n\
             [[endpoints]]\nname = \"lb\"\naddress = \"{LB}\"\ncheck = {{ port = {PORT} }}\n\n\
             [[tenants]]\nname = \"t\"\ndomains = [\"api.example.com\"]\nsinks = [\"local\"]\n\n{}",
            pdns.ip,
            hosts_sink(dir)
        ))
        .render()
}

#[actix_rt::test]
async fn a_host_name_publishes_every_address_it_resolves_to_and_follows_it() {
    let pdns = PdnsServer::start(&format!("{ZONE}."));
    let (mut g1, mut g2, g3) = (gateway(), gateway(), gateway());
    point(&pdns, &[&g1, &g2]);
    let dir = tempfile::tempdir().unwrap();
    let engine = start_engine(dir.path(), &config(&pdns, dir.path())).await;
    let file = dir.path().join("t.hosts");
    let has = |want: Vec<&Gateway>| {
        let mut want: Vec<String> = want.into_iter().map(ip).collect();
        want.sort();
        move |content: &str| {
            let mut got = addresses(content);
            got.sort();
            got == want
        }
    };
    wait_for_file(&file, "both addresses of the name", has(vec![&g1, &g2])).await;
    let status = engine.status().await.unwrap().tracker;
    let mut names: Vec<&str> = status.endpoints.iter().map(|e| e.name.as_str()).collect();
    names.sort();
    assert_eq!(
        names,
        [format!("lb@{}", ip(&g1)), format!("lb@{}", ip(&g2))]
    );

    // The name moves to g2 and g3: g1 leaves (no longer the load balancer's), g3 joins.
    point(&pdns, &[&g2, &g3]);
    wait_for_file(&file, "the name's new addresses", has(vec![&g2, &g3])).await;

    // The probes still decide: g2 failing leaves, healed returns.
    g2.set(Behaviour::Status(503)).unwrap();
    wait_for_file(&file, "g2 withdrawn by its probes", has(vec![&g3])).await;
    g2.set(Behaviour::Healthy).unwrap();
    wait_for_file(&file, "g2 back", has(vec![&g2, &g3])).await;

    // The name stops resolving: its last addresses stay, probed as before.
    point(&pdns, &[]);
    eventually("two failed lookups", || {
        metric(
            &engine.metrics().encode(),
            "health_orchestrator_host_lookups_total{result=\"failed\"}",
        )
        .is_some_and(|n| n >= 2.0)
    })
    .await;
    assert!(has(vec![&g2, &g3])(
        &std::fs::read_to_string(&file).unwrap()
    ));
    let hosts = engine.status().await.unwrap().hosts;
    assert_eq!(hosts.len(), 1);
    assert_eq!(hosts[0].host, LB);
    let mut kept = vec![ip(&g2), ip(&g3)];
    kept.sort();
    let mut shown = hosts[0].addresses.clone();
    shown.sort();
    assert_eq!(shown, kept, "/status shows the addresses still in use");
    assert!(
        hosts[0]
            .error
            .as_deref()
            .is_some_and(|e| e.contains("NXDOMAIN")),
        "and why lookups fail: {hosts:?}"
    );
    g2.set(Behaviour::Refuse).unwrap();
    wait_for_file(
        &file,
        "a kept address still judged by its probes",
        has(vec![&g3]),
    )
    .await;
    g1.set(Behaviour::Refuse).unwrap();
}

/// A name that does not resolve when the engine starts stops the start with the
/// resolver's answer (publishing without its addresses would take them out of DNS).
#[actix_rt::test]
async fn a_name_that_never_resolved_stops_the_start() {
    let pdns = PdnsServer::start(&format!("{ZONE}."));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    std::fs::write(&file, config(&pdns, dir.path())).unwrap();
    let plan = ho_kinds::load_plan(&[&file]).unwrap();
    let started = ho_engine::Engine::start(plan, ho_kinds::parts(ho_kinds::Sinks::default())).await;
    let Err(e) = started else {
        panic!("started without the name's addresses");
    };
    assert_eq!(
        e.to_string(),
        format!(
            "endpoint \"lb\": host name {LB} does not resolve: {}:{DNS_PORT}: {LB} does not exist (NXDOMAIN) \
             (a plan runs only once every endpoint's name resolves, so no gateway leaves DNS for want of a lookup)",
            pdns.ip
        )
    );
}

/// Seeded configurations mixing endpoints by address and by host name, each tenant taking
/// some of them in its own order: the plan lists each tenant's endpoints by address (in
/// the tenant's order) and tells each host endpoint its tenants, as the script that wrote
/// the configuration says.
#[test]
fn tenants_keep_their_endpoints_whichever_are_given_by_host_name() {
    for seed in 1..=30u64 {
        let mut rng = fastrand::Rng::with_seed(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let count = 3 + rng.u64(..40) as usize;
        let by_host: Vec<bool> = (0..count).map(|_| rng.u64(..3) == 0).collect();
        let mut fragment = String::new();
        for (i, host) in by_host.iter().enumerate() {
            let address = match host {
                true => format!("gw{i}.{ZONE}"),
                false => format!("127.0.{}.{}", 1 + i / 256, i % 256),
            };
            fragment += &format!("[[endpoints]]\nname = \"e{i}\"\naddress = \"{address}\"\n\n");
        }
        let tenants: Vec<Vec<usize>> = (0..1 + rng.u64(..6))
            .map(|_| {
                let mut picked: Vec<usize> = (0..count).filter(|_| rng.u64(..2) == 0).collect();
                let one = rng.u64(..count as u64) as usize;
                if !picked.contains(&one) {
                    picked.push(one);
                }
                rng.shuffle(&mut picked);
                picked
            })
            .collect();
        for (t, picked) in tenants.iter().enumerate() {
            let names: Vec<String> = picked.iter().map(|i| format!("\"e{i}\"")).collect();
            fragment += &format!(
                "[[tenants]]\nname = \"t{t}\"\ndomains = [\"t{t}.example.com\"]\nendpoints = [{}]\nsinks = [\"local\"]\n\n",
                names.join(", ")
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        let config = TestConfig::defaults(&Check::FAST).with(&(fragment + &hosts_sink(dir.path())));
        std::fs::write(&file, config.render()).unwrap();
        let plan = ho_kinds::load_plan(&[&file]).unwrap_or_else(|e| panic!("seed {seed}: {e}"));

        for (t, picked) in tenants.iter().enumerate() {
            let expected: Vec<String> = picked
                .iter()
                .filter(|&&i| !by_host[i])
                .map(|i| format!("e{i}"))
                .collect();
            let planned: Vec<String> = plan.tenants[t]
                .endpoints
                .iter()
                .map(|&e| plan.endpoints[e].name.to_string())
                .collect();
            assert_eq!(planned, expected, "seed {seed}: tenant t{t}");
        }
        let expected_hosts: Vec<(String, Vec<usize>)> = (0..count)
            .filter(|&i| by_host[i])
            .map(|i| {
                let of: Vec<usize> = (0..tenants.len())
                    .filter(|&t| tenants[t].contains(&i))
                    .collect();
                (format!("e{i}"), of)
            })
            .collect();
        let hosts: Vec<(String, Vec<usize>)> = plan
            .hosts
            .iter()
            .map(|h| (h.name.clone(), h.tenants.clone()))
            .collect();
        assert_eq!(hosts, expected_hosts, "seed {seed}");
    }
}
