//! Endpoints of several checks (`checks`, `require`, `must_pass`) against real gateways:
//! each address serves its HTTP health on one port and a second service on another, and
//! the test fails one service at a time. `require = "all"` leaves with either failure,
//! `"any"` stays while one check passes, and a `must_pass` check decides alone when it
//! fails; `/status` shows each check's verdict.

use std::net::SocketAddr;

use ho_engine::hysteresis::Health;
use ho_testkit::{Behaviour, Gateway};

use crate::harness::*;

/// One address with its HTTP health (`check`) and a second service (`checks[0]`, a TCP
/// connect) on their own ports.
struct TwoServices {
    health: Gateway,
    service: Gateway,
}

impl TwoServices {
    fn start() -> TwoServices {
        let health = Gateway::start(loopback(), Behaviour::Healthy).unwrap();
        let service =
            Gateway::start(SocketAddr::new(health.addr().ip(), 0), Behaviour::Healthy).unwrap();
        TwoServices { health, service }
    }

    fn endpoint(&self, name: &str, rule: &str) -> String {
        format!(
            "[[endpoints]]\nname = \"{name}\"\naddress = \"{}\"\ncheck = {{ port = {} }}\n\
             checks = [{{ kind = \"tcp\", port = {} }}]\n{rule}\n\n",
            self.health.addr().ip(),
            self.health.addr().port(),
            self.service.addr().port()
        )
    }
}

#[actix_rt::test]
async fn each_rule_counts_the_checks_it_names() {
    let dir = tempfile::tempdir().unwrap();
    let mut gws: Vec<TwoServices> = (0..3).map(|_| TwoServices::start()).collect();
    let ips: Vec<String> = gws.iter().map(|g| ip(&g.health)).collect();
    let text = TestConfig::defaults(&Check::FAST)
        .with(&gws[0].endpoint("all", "require = \"all\""))
        .with(&gws[1].endpoint("any", "require = \"any\""))
        .with(&gws[2].endpoint("must", "require = { quorum = 1 }\nmust_pass = true"))
        .with(&format!(
            "[[tenants]]\nname = \"t\"\ndomains = [\"t.example\"]\nsinks = [\"local\"]\n\
             on_all_unhealthy = \"publish_none\"\n\n{}",
            hosts_sink(dir.path())
        ))
        .render();
    let file = dir.path().join("t.hosts");
    let engine = start_engine(dir.path(), &text).await;
    wait_for_file(&file, "all three", |c| addresses(c) == ips).await;

    // The second service fails everywhere: only "all" needs it.
    for g in &mut gws {
        g.service.set(Behaviour::Refuse).unwrap();
    }
    let any_and_must = vec![ips[1].clone(), ips[2].clone()];
    wait_for_file(&file, "\"all\" to leave", |c| addresses(c) == any_and_must).await;
    let status = engine.status().await.unwrap().tracker;
    let all = status.endpoints.iter().find(|e| e.name == "all").unwrap();
    let composite = all
        .composite
        .as_ref()
        .expect("a composite endpoint shows its checks");
    assert_eq!(composite.needed, 2);
    let states: Vec<Health> = composite.checks.iter().map(|c| c.state).collect();
    assert_eq!(states, [Health::Up, Health::Down], "{composite:#?}");
    assert!(
        composite.checks[1].target.starts_with("tcp://"),
        "{composite:#?}"
    );
    assert_eq!(all.state, Health::Down);

    // Back, and the HTTP health fails instead: "any" still has its service; "must" does not.
    for g in &mut gws {
        g.service.set(Behaviour::Healthy).unwrap();
        g.health.set(Behaviour::Status(503)).unwrap();
    }
    wait_for_file(&file, "only \"any\"", |c| addresses(c) == [ips[1].clone()]).await;
    let status = engine.status().await.unwrap().tracker;
    assert_eq!(
        state_of(&status, "must"),
        Health::Down,
        "its must-pass check failed"
    );
    assert_eq!(state_of(&status, "any"), Health::Up);

    for g in &mut gws {
        g.health.set(Behaviour::Healthy).unwrap();
    }
    wait_for_file(&file, "all three back", |c| addresses(c) == ips).await;
}
