//! The blast-radius brake (`[brake]`) through a running engine: three of four gateways
//! failing at once leave the hosts file one at a time per window; the held ones show in
//! `/status` and `/metrics`; an operator's `POST /v1/brake/release` (admin token only)
//! withdraws them at once.

use ho_testkit::Behaviour;

use crate::harness::*;

const ADMIN: &str = "admin-secret-brake";

#[actix_rt::test]
async fn the_brake_holds_a_wave_of_withdrawals_until_released() {
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(4);
    let ips: Vec<String> = gws.iter().map(ip).collect();
    let file = dir.path().join("t.hosts");
    let tail = format!(
        "[brake]\nper_tenant = 1\nwindow = \"10m\"\n\n[[tenants]]\nname = \"t\"\ndomains = [\"t.example\"]\nsinks = [\"local\"]\n\n{}",
        hosts_sink(dir.path())
    );
    let engine = start_engine(
        dir.path(),
        &config(&Check::FAST, &gws.iter().collect::<Vec<_>>(), &tail),
    )
    .await;
    let api = serve_api(&engine, None, Some(ADMIN)).await;
    wait_for_file(&file, "all four", |c| addresses(c) == ips).await;

    for g in &mut gws[1..] {
        g.set(Behaviour::Refuse).unwrap();
    }
    // The first failure detected leaves; the other two are held.
    wait_for_file(&file, "one of three withdrawn", |c| {
        let a = addresses(c);
        a.len() == 3 && a.contains(&ips[0])
    })
    .await;
    let start = tokio::time::Instant::now();
    loop {
        let status = engine.status().await.unwrap();
        if status.tracker.tenants[0].brake_held == 2 {
            break;
        }
        assert!(start.elapsed() < LIMIT, "the brake holds two");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let (_, metrics) = api_request(api, "GET", "/metrics", None).await;
    assert!(
        metrics.contains("health_orchestrator_brake_held_addresses{tenant=\"t\"} 2"),
        "{metrics}"
    );
    assert_eq!(
        api_request(api, "POST", "/v1/brake/release", None).await.0,
        401,
        "the admin token is needed"
    );
    assert_eq!(
        api_request(api, "POST", "/v1/brake/release", Some(ADMIN)).await,
        (200, "released 2 held withdrawals\n".into())
    );
    wait_for_file(&file, "the held two withdrawn", |c| {
        addresses(c) == vec![ips[0].clone()]
    })
    .await;
}
