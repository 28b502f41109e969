//! The engine end to end: real gateways go down and come back, and the real hosts file
//! follows; fail-open rules; nothing published before verdicts.

use ho_engine::hysteresis::Health;
use ho_engine::snapshot::PublishMode;
use ho_testkit::{Behaviour, Gateway};

use crate::harness::*;

/// A refused gateway leaves the hosts file and re-enters it when it comes back.
#[actix_rt::test]
async fn killed_http_gateway_leaves_and_reenters_the_hosts_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(3);
    let tail = format!(
        "[[tenants]]\nname = \"shop\"\ndomains = [\"shop.example\", \"www.shop.example\"]\nsinks = [\"local\"]\n\n{}",
        hosts_sink(dir.path())
    );
    let _engine = start_engine(
        dir.path(),
        &config(&Check::FAST, &gws.iter().collect::<Vec<_>>(), &tail),
    )
    .await;
    let file = dir.path().join("shop.hosts");
    let all: Vec<String> = gws.iter().map(ip).collect();
    wait_for_file(&file, "all three", |c| addresses(c) == all).await;
    assert!(std::fs::read_to_string(&file)
        .unwrap()
        .contains(&format!("{} shop.example www.shop.example\n", all[0])));

    gws[1].set(Behaviour::Refuse).unwrap();
    let took = wait_for_file(&file, "gw-2 to leave", |c| {
        addresses(c) == [all[0].clone(), all[2].clone()]
    })
    .await;
    println!("refused gateway withdrawn after {took:?}");

    gws[1].set(Behaviour::Healthy).unwrap();
    wait_for_file(&file, "gw-2 to return", |c| addresses(c) == all).await;
}

/// An HTTPS gateway with a certificate from a test CA: trusted through `ca_file`, accepted
/// with `insecure`, refused against the system roots and for a wrong server name.
#[actix_rt::test]
async fn https_checks_verify_certificates() {
    let dir = tempfile::tempdir().unwrap();
    let pki = test_pki(dir.path(), "gw.test");
    let gw = Gateway::start_tls(loopback(), Behaviour::Healthy, pki.acceptor.clone()).unwrap();
    let port = gw.addr().port();
    let addr = gw.addr().ip();
    let ca = pki.ca_file.display().to_string();
    // Four endpoints on four loopback addresses would need four servers; instead the four
    // checks differ, so they are four targets on one server, and one tenant each.
    let endpoints = [
        (
            "with-ca",
            format!("{{ kind = \"https\", port = {port}, host = \"gw.test\", ca_file = {ca:?} }}"),
        ),
        (
            "insecure",
            format!(
                "{{ kind = \"https\", port = {port}, host = \"other.test\", insecure = true }}"
            ),
        ),
        (
            "system-roots",
            format!("{{ kind = \"https\", port = {port}, host = \"gw.test\" }}"),
        ),
        (
            "wrong-name",
            format!(
                "{{ kind = \"https\", port = {port}, host = \"wrong.test\", ca_file = {ca:?} }}"
            ),
        ),
    ];
    let mut text = String::new();
    for (name, check) in &endpoints {
        text.push_str(&format!(
            "\n[[endpoints]]\nname = \"{name}\"\naddress = \"{addr}\"\ncheck = {check}\n"
        ));
        text.push_str(&format!(
            "\n[[tenants]]\nname = \"t-{name}\"\ndomains = [\"{name}.example\"]\nendpoints = [\"{name}\"]\nsinks = [\"local\"]\n"
        ));
    }
    text.push_str(&hosts_sink(dir.path()));
    let text = TestConfig::defaults(&Check::FAST).with(&text).render();
    let engine = start_engine(dir.path(), &text).await;
    let status = wait_for_status(&engine, "all verdicts", |s| {
        s.endpoints.iter().all(|e| e.state != Health::Unknown)
    })
    .await;
    assert_eq!(state_of(&status, "with-ca"), Health::Up);
    assert_eq!(state_of(&status, "insecure"), Health::Up);
    for name in ["system-roots", "wrong-name"] {
        let e = status.endpoints.iter().find(|e| e.name == name).unwrap();
        assert_eq!(e.state, Health::Down, "{name}");
        let reason = &e.last.as_ref().unwrap().reason;
        assert!(
            reason.starts_with("tls: invalid peer certificate"),
            "{name}: {reason}"
        );
    }
    assert!(gw.requests() > 0);
}

/// A certificate that expired yesterday, from a trusted CA: down with the reason, unless
/// the check is explicitly `insecure`.
#[actix_rt::test]
async fn an_expired_certificate_fails_unless_insecure() {
    let dir = tempfile::tempdir().unwrap();
    let pki = test_pki_with(dir.path(), "gw.test", |leaf| {
        leaf.not_before = rcgen::date_time_ymd(2020, 1, 1);
        leaf.not_after = rcgen::date_time_ymd(2021, 1, 1);
    });
    let gw = Gateway::start_tls(loopback(), Behaviour::Healthy, pki.acceptor.clone()).unwrap();
    let (port, addr) = (gw.addr().port(), gw.addr().ip());
    let ca = pki.ca_file.display().to_string();
    let endpoints = format!(
        "[[endpoints]]\nname = \"verified\"\naddress = \"{addr}\"\n\
         check = {{ kind = \"https\", port = {port}, host = \"gw.test\", ca_file = {ca:?} }}\n\n\
         [[endpoints]]\nname = \"insecure\"\naddress = \"{addr}\"\n\
         check = {{ kind = \"https\", port = {port}, host = \"gw.test\", insecure = true }}\n\n\
         [[tenants]]\nname = \"t-verified\"\ndomains = [\"v.example\"]\nendpoints = [\"verified\"]\nsinks = [\"local\"]\n\n\
         [[tenants]]\nname = \"t-insecure\"\ndomains = [\"i.example\"]\nendpoints = [\"insecure\"]\nsinks = [\"local\"]\n\n{}",
        hosts_sink(dir.path())
    );
    let text = TestConfig::defaults(&Check::FAST).with(&endpoints).render();
    let engine = start_engine(dir.path(), &text).await;
    let status = wait_for_status(&engine, "both verdicts", |s| {
        s.endpoints.iter().all(|e| e.state != Health::Unknown)
    })
    .await;
    assert_eq!(state_of(&status, "insecure"), Health::Up);
    let verified = status
        .endpoints
        .iter()
        .find(|e| e.name == "verified")
        .unwrap();
    assert_eq!(verified.state, Health::Down);
    let reason = &verified.last.as_ref().unwrap().reason;
    assert!(reason.contains("expired"), "{reason}");
}

/// A TCP check: healthy while something listens, down when refused.
#[actix_rt::test]
async fn tcp_check_follows_the_listener() {
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(2);
    let check = Check::FAST.tcp();
    let tail = format!(
        "[[tenants]]\nname = \"db\"\ndomains = [\"db.example\"]\nsinks = [\"local\"]\n\n{}",
        hosts_sink(dir.path())
    );
    let _engine = start_engine(
        dir.path(),
        &config(&check, &gws.iter().collect::<Vec<_>>(), &tail),
    )
    .await;
    let file = dir.path().join("db.hosts");
    wait_for_file(&file, "both", |c| addresses(c).len() == 2).await;
    gws[0].set(Behaviour::Refuse).unwrap();
    let second = ip(&gws[1]);
    wait_for_file(&file, "gw-1 to leave", |c| addresses(c) == [second.clone()]).await;
    gws[0].set(Behaviour::Healthy).unwrap();
    wait_for_file(&file, "gw-1 to return", |c| addresses(c).len() == 2).await;
}

/// With every endpoint down, each tenant follows its `on_all_unhealthy` rule.
#[actix_rt::test]
async fn all_down_honours_the_fail_open_rule() {
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(2);
    let mut tail = String::new();
    for rule in ["publish_all", "keep_last", "publish_none"] {
        tail.push_str(&format!(
            "[[tenants]]\nname = \"{rule}\"\ndomains = [\"{}.example\"]\nsinks = [\"local\"]\non_all_unhealthy = \"{rule}\"\n\n",
            rule.replace('_', "-")
        ));
    }
    tail.push_str(&hosts_sink(dir.path()));
    let engine = start_engine(
        dir.path(),
        &config(&Check::FAST, &gws.iter().collect::<Vec<_>>(), &tail),
    )
    .await;
    let file = |t: &str| dir.path().join(format!("{t}.hosts"));
    let both = vec![ip(&gws[0]), ip(&gws[1])];
    for t in ["publish_all", "keep_last", "publish_none"] {
        wait_for_file(&file(t), "both", |c| addresses(c) == both).await;
    }
    // One down: every tenant publishes the survivor.
    gws[0].set(Behaviour::Status(503)).unwrap();
    let survivor = vec![ip(&gws[1])];
    for t in ["publish_all", "keep_last", "publish_none"] {
        wait_for_file(&file(t), "the survivor only", |c| addresses(c) == survivor).await;
    }
    // All down.
    gws[1].set(Behaviour::Status(503)).unwrap();
    wait_for_status(&engine, "both down", |s| {
        s.endpoints.iter().all(|e| e.state == Health::Down)
    })
    .await;
    wait_for_file(&file("publish_all"), "fail-open to both", |c| {
        addresses(c) == both
    })
    .await;
    wait_for_file(&file("publish_none"), "an empty file", str::is_empty).await;
    let status = wait_for_status(&engine, "publish_none decided", |s| {
        s.tenants.iter().all(|t| {
            t.name == "keep_last"
                || t.published
                    .as_ref()
                    .is_some_and(|p| p.mode != PublishMode::Healthy)
        })
    })
    .await;
    let mode = |name: &str| {
        status
            .tenants
            .iter()
            .find(|t| t.name == name)
            .unwrap()
            .published
            .as_ref()
            .unwrap()
            .mode
    };
    assert_eq!(mode("publish_all"), PublishMode::FailOpenAllUnhealthy);
    assert_eq!(mode("publish_none"), PublishMode::NoneHealthy);
    assert_eq!(
        mode("keep_last"),
        PublishMode::Healthy,
        "keep_last publishes nothing new"
    );
    assert_eq!(
        addresses(&std::fs::read_to_string(file("keep_last")).unwrap()),
        survivor,
        "keep_last keeps the last set"
    );
}

/// Below `min_healthy`, everything is published (panic threshold).
#[actix_rt::test]
async fn below_min_healthy_everything_is_published() {
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(4);
    let tail = format!(
        "[[tenants]]\nname = \"t\"\ndomains = [\"t.example\"]\nsinks = [\"local\"]\nmin_healthy = 0.5\n\n{}",
        hosts_sink(dir.path())
    );
    let _engine = start_engine(
        dir.path(),
        &config(&Check::FAST, &gws.iter().collect::<Vec<_>>(), &tail),
    )
    .await;
    let file = dir.path().join("t.hosts");
    wait_for_file(&file, "all four", |c| addresses(c).len() == 4).await;
    gws[0].set(Behaviour::Refuse).unwrap();
    gws[1].set(Behaviour::Refuse).unwrap();
    let rest = vec![ip(&gws[2]), ip(&gws[3])];
    wait_for_file(&file, "two of four (50% is not below 0.5)", |c| {
        addresses(c) == rest
    })
    .await;
    gws[2].set(Behaviour::Refuse).unwrap();
    wait_for_file(&file, "all four again (25% < 50%)", |c| {
        addresses(c).len() == 4
    })
    .await;
}

/// Gateways gw-1 (healthy) and gw-2 (hanging) in tenant `t` (hosts file in `dir`), with
/// `check` and the start-up grace given.
async fn healthy_and_hanging(
    dir: &std::path::Path,
    check: &Check,
    grace: &str,
) -> ([Gateway; 2], ho_engine::Engine) {
    let gws = [
        Gateway::start(loopback(), Behaviour::Healthy).unwrap(),
        Gateway::start(loopback(), Behaviour::Hang).unwrap(),
    ];
    let tail = format!(
        "[[tenants]]\nname = \"t\"\ndomains = [\"t.example\"]\nsinks = [\"local\"]\n\n{}",
        hosts_sink(dir)
    );
    let text = TestConfig::new(check, &gws.iter().collect::<Vec<_>>())
        .with(&tail)
        .set("defaults.startup_grace", grace)
        .render();
    let engine = start_engine(dir, &text).await;
    (gws, engine)
}

/// No file is written while an endpoint has no verdict yet: a restart must not publish a
/// partial set over a good one.
#[actix_rt::test]
async fn nothing_is_published_before_every_endpoint_has_a_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let check = Check {
        path: None,
        interval: "1s",
        timeout: "300ms",
        fast_interval: "100ms",
        fall: 3,
        ..Check::FAST
    };
    let (gws, engine) = healthy_and_hanging(dir.path(), &check, "30s").await;
    let file = dir.path().join("t.hosts");
    let status = wait_for_status(&engine, "the hanging endpoint's verdict", |s| {
        let hanging = state_of(s, "gw-2");
        if hanging == Health::Unknown {
            assert!(
                !file.exists(),
                "published before every endpoint had a verdict"
            );
        }
        hanging != Health::Unknown
    })
    .await;
    assert_eq!(
        state_of(&status, "gw-1"),
        Health::Up,
        "gw-1 was up long before gw-2 timed out 3 times"
    );
    let reason = &status.endpoints[1].last.as_ref().unwrap().reason;
    assert_eq!(reason, "timeout");
    let latency = status.endpoints[1].last.as_ref().unwrap().latency_ms;
    assert!(
        (300.0..400.0).contains(&latency),
        "a hanging server is cut at the 300 ms timeout, took {latency} ms"
    );
    wait_for_file(&file, "the healthy endpoint only", |c| {
        addresses(c) == [ip(&gws[0])]
    })
    .await;
}

/// When verdicts take longer than `startup_grace`, the tenant publishes what it knows.
#[actix_rt::test]
async fn the_grace_period_bounds_the_wait() {
    let dir = tempfile::tempdir().unwrap();
    // gw-2 needs 10 timeouts and 9 re-checks (29 s) for a verdict: longer than the test can
    // wait, so on a machine of any speed the file can only come from the grace.
    let check = Check {
        path: None,
        interval: "5s",
        timeout: "2s",
        fast_interval: "1s",
        fall: 10,
        ..Check::FAST
    };
    let (gws, engine) = healthy_and_hanging(dir.path(), &check, "300ms").await;
    let file = dir.path().join("t.hosts");
    // gw-1's first probe lands somewhere in its 5 s interval.
    wait_for_file(&file, "the healthy endpoint after the grace", |c| {
        addresses(c) == [ip(&gws[0])]
    })
    .await;
    let status = engine.status().await.unwrap().tracker;
    assert_eq!(
        state_of(&status, "gw-2"),
        Health::Unknown,
        "published on grace, not on a verdict"
    );
}
