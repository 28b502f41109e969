//! Forced health through the API (`POST /v1/endpoints/NAME/force-up`, `/force-down`,
//! `/release`), as gdnsd's `admin_state`: a forced-down healthy gateway leaves DNS, a
//! forced-up failing one stays, release hands the decision back to the probes; the
//! overrides survive a restart; forcing every endpoint of a name down never empties it;
//! `hold_failback` (an endpoint's, or its tenant's) holds a gateway that failed out until
//! released; actions by label (`/v1/endpoints/*/ACTION?geo=IE`) act on a location at once.

use std::path::Path;

use ho_engine::hysteresis::Health;
use ho_engine::status::Forced;
use ho_testkit::{Behaviour, Gateway};

use crate::harness::*;

const ADMIN: &str = "admin-secret-2";

fn text(dir: &Path, gws: &[Gateway]) -> String {
    let tail = format!(
        "state_dir = {:?}\n\n[[tenants]]\nname = \"t\"\ndomains = [\"t.example\"]\nsinks = [\"local\"]\n\
         on_all_unhealthy = \"publish_none\"\n\n{}",
        dir.join("state").display().to_string(),
        hosts_sink(dir)
    );
    config(&Check::FAST, &gws.iter().collect::<Vec<_>>(), &tail)
}

async fn act(api: std::net::SocketAddr, name: &str, action: &str) -> (u16, String) {
    let path = format!("/v1/endpoints/{name}/{action}");
    api_request(api, "POST", &path, Some(ADMIN)).await
}

/// The hosts file keeps `want` while endpoint `index` is probed three more times (each
/// result re-decides its tenant): the override holds against what the probes now say.
async fn stays_while_probed(
    engine: &ho_engine::Engine,
    index: usize,
    file: &Path,
    want: &[String],
) {
    let probes = |s: &ho_engine::status::TrackerStatus| s.endpoints[index].probes;
    let from = probes(&engine.status().await.unwrap().tracker);
    let start = tokio::time::Instant::now();
    loop {
        assert_eq!(addresses(&std::fs::read_to_string(file).unwrap()), want);
        if probes(&engine.status().await.unwrap().tracker) >= from + 3 {
            return;
        }
        assert!(start.elapsed() < LIMIT, "endpoint {index} is not probed");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[actix_rt::test]
async fn forced_health_decides_until_released_survives_a_restart_and_never_empties_a_name() {
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(3);
    let ips: Vec<String> = gws.iter().map(ip).collect();
    let file = dir.path().join("t.hosts");
    let engine = start_engine(dir.path(), &text(dir.path(), &gws)).await;
    let api = serve_api(&engine, None, Some(ADMIN)).await;
    wait_for_file(&file, "all three", |c| addresses(c) == ips).await;

    assert_eq!(
        api_request(api, "POST", "/v1/endpoints/gw-2/force-down", None)
            .await
            .0,
        401
    );
    assert_eq!(
        act(api, "gw-2", "force-down").await,
        (200, "forced down gw-2\n".into())
    );
    assert_eq!(
        act(api, "gw-2", "force-down").await,
        (200, "gw-2 was already forced down\n".into())
    );
    let one_three = vec![ips[0].clone(), ips[2].clone()];
    wait_for_file(&file, "the healthy gw-2 to leave", |c| {
        addresses(c) == one_three
    })
    .await;
    let status = engine.status().await.unwrap().tracker;
    assert_eq!(status.endpoints[1].forced, Some(Forced::Down));
    assert_eq!(
        status.endpoints[1].state,
        Health::Up,
        "its probes still say up"
    );

    // Forced up, gw-3 stays while its gateway fails; released, it leaves.
    assert_eq!(
        act(api, "gw-3", "force-up").await,
        (200, "forced up gw-3\n".into())
    );
    gws[2].set(Behaviour::Status(503)).unwrap();
    let start = tokio::time::Instant::now();
    while engine.status().await.unwrap().tracker.endpoints[2].state != Health::Down {
        assert!(start.elapsed() < LIMIT, "gw-3's probes never said down");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    stays_while_probed(&engine, 2, &file, &one_three).await;
    assert_eq!(
        act(api, "gw-3", "release").await,
        (200, "released gw-3\n".into())
    );
    let only_one = vec![ips[0].clone()];
    wait_for_file(&file, "the failing gw-3 to leave", |c| {
        addresses(c) == only_one
    })
    .await;
    let saved = std::fs::read_to_string(dir.path().join("state/drains.json")).unwrap();
    assert!(saved.contains("\"gw-2\": \"down\""), "{saved}");
    let metrics = engine.metrics().encode();
    let ok = "health_orchestrator_operator_actions_total{action=\"force-down\",result=\"ok\"}";
    assert_eq!(metric(&metrics, ok), Some(2.0), "{metrics}");
    drop(engine);

    // A new process (same state_dir) keeps gw-2 forced down from its first publish on.
    let _ = std::fs::remove_file(&file);
    let engine = start_engine(dir.path(), &text(dir.path(), &gws)).await;
    let api = serve_api(&engine, None, Some(ADMIN)).await;
    wait_for_file(&file, "the restart's first publish", |c| {
        addresses(c) == only_one
    })
    .await;

    // Every endpoint forced down: the force-downs are ignored for the name, which is then
    // decided by its probes (gw-3 healed). The tenant publishes nothing when all are
    // unhealthy (`publish_none`), so only this rule keeps the name from going empty.
    gws[2].set(Behaviour::Healthy).unwrap();
    for name in ["gw-1", "gw-3"] {
        assert_eq!(act(api, name, "force-down").await.0, 200);
    }
    wait_for_file(&file, "every address back", |c| addresses(c) == ips).await;
    assert_eq!(act(api, "nope", "release").await.0, 404);
}

/// `hold_failback`: gw-1 fails while published and is held out after it recovers, the hold
/// saved as an operator's would be, until released.
#[actix_rt::test]
async fn a_held_gateway_stays_out_after_recovering_until_released() {
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(2);
    let ips: Vec<String> = gws.iter().map(ip).collect();
    let file = dir.path().join("t.hosts");
    let config = TestConfig::new(&Check::FAST, &gws.iter().collect::<Vec<_>>())
        .set("endpoints.0.hold_failback", true)
        .set("state_dir", dir.path().join("state").display().to_string())
        .with(&format!(
            "[[tenants]]\nname = \"t\"\ndomains = [\"t.example\"]\nsinks = [\"local\"]\n\n{}",
            hosts_sink(dir.path())
        ))
        .render();
    let engine = start_engine(dir.path(), &config).await;
    let api = serve_api(&engine, None, Some(ADMIN)).await;
    wait_for_file(&file, "both", |c| addresses(c) == ips).await;
    gws[0].set(Behaviour::Status(503)).unwrap();
    let second = vec![ips[1].clone()];
    wait_for_file(&file, "gw-1 to leave", |c| addresses(c) == second).await;
    gws[0].set(Behaviour::Healthy).unwrap();
    let start = tokio::time::Instant::now();
    while engine.status().await.unwrap().tracker.endpoints[0].state != Health::Up {
        assert!(start.elapsed() < LIMIT, "gw-1's probes never said up again");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    stays_while_probed(&engine, 0, &file, &second).await;
    let status = engine.status().await.unwrap().tracker;
    assert_eq!(status.endpoints[0].forced, Some(Forced::Down));
    let saved = std::fs::read_to_string(dir.path().join("state/drains.json")).unwrap();
    assert!(saved.contains("\"gw-1\": \"down\""), "{saved}");
    assert_eq!(
        act(api, "gw-1", "release").await,
        (200, "released gw-1\n".into())
    );
    wait_for_file(&file, "gw-1 back", |c| addresses(c) == ips).await;
}

/// Overrides by label (`/v1/endpoints/*/ACTION?label=value`: a location at once) and a
/// tenant's `hold_failback`: the two Irish gateways are forced down and released together,
/// and the German one, held by its tenant's policy after it fails, stays out until released.
#[actix_rt::test]
async fn overrides_by_label_and_a_tenants_hold_failback() {
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(3);
    let ips: Vec<String> = gws.iter().map(ip).collect();
    let file = dir.path().join("t.hosts");
    let config = TestConfig::new(&Check::FAST, &gws.iter().collect::<Vec<_>>())
        .set("endpoints.0.labels.geo", "IE")
        .set("endpoints.1.labels.geo", "IE")
        .set("endpoints.2.labels.geo", "DE")
        .set("state_dir", dir.path().join("state").display().to_string())
        .with(&format!(
            "[[tenants]]\nname = \"t\"\ndomains = [\"t.example\"]\nsinks = [\"local\"]\nhold_failback = true\n\n{}",
            hosts_sink(dir.path())
        ))
        .render();
    let engine = start_engine(dir.path(), &config).await;
    let api = serve_api(&engine, None, Some(ADMIN)).await;
    wait_for_file(&file, "all three", |c| addresses(c) == ips).await;

    assert_eq!(
        act(api, "*", "force-down?geo=I%45").await,
        (
            200,
            "forced down 2 of the 2 endpoints with geo=IE: gw-1 gw-2\n".into()
        )
    );
    wait_for_file(&file, "Ireland out", |c| addresses(c) == ips[2..]).await;
    // Said on /events with who did it.
    let mut events = tokio::net::TcpStream::connect(api).await.unwrap();
    tokio::io::AsyncWriteExt::write_all(
        &mut events,
        b"GET /events?since=1970-01-01T00%3A00%3A00Z HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    .await
    .unwrap();
    let seen = read_events(&mut events, |e| e.iter().any(|e| e["type"] == "operator")).await;
    let acted = seen.iter().find(|e| e["type"] == "operator").unwrap();
    assert_eq!(
        (&acted["action"], &acted["endpoints"]),
        (
            &serde_json::json!("force-down"),
            &serde_json::json!(["gw-1", "gw-2"])
        )
    );
    assert!(
        acted["client"].as_str().unwrap().starts_with("127."),
        "{acted}"
    );
    assert_eq!(
        act(api, "*", "force-down?geo=IE").await,
        (
            200,
            "the 2 endpoints with geo=IE were already forced down\n".into()
        )
    );
    let (code, body) = act(api, "*", "force-down").await;
    assert_eq!(
        (code, body.as_str()),
        (
            400,
            "* needs labels: /v1/endpoints/*/ACTION?label=value&...\n"
        )
    );
    let (code, body) = act(api, "*", "drain?geo=FR").await;
    assert_eq!((code, body.as_str()), (404, "no endpoints with geo=FR\n"));
    assert_eq!(
        act(api, "*", "release?geo=IE").await,
        (
            200,
            "released 2 of the 2 endpoints with geo=IE: gw-1 gw-2\n".into()
        )
    );
    wait_for_file(&file, "Ireland back", |c| addresses(c) == ips).await;

    // The tenant holds every endpoint that fails while published.
    gws[2].set(Behaviour::Status(503)).unwrap();
    wait_for_file(&file, "gw-3 out", |c| addresses(c) == ips[..2]).await;
    gws[2].set(Behaviour::Healthy).unwrap();
    wait_for_status(&engine, "gw-3 up again", |s| {
        s.endpoints[2].state == Health::Up
    })
    .await;
    stays_while_probed(&engine, 2, &file, &ips[..2]).await;
    assert_eq!(
        engine.status().await.unwrap().tracker.endpoints[2].forced,
        Some(Forced::Down)
    );
    assert_eq!(act(api, "gw-3", "release").await.0, 200);
    wait_for_file(&file, "gw-3 back", |c| addresses(c) == ips).await;
}
