//! Operator drains through the API (`POST /v1/endpoints/NAME/drain` and `/undrain`): the
//! address leaves the hosts file and comes back, the drain survives a restart, draining
//! every endpoint never empties the name, and the actions need the admin token.

use std::path::Path;

use ho_engine::status::Why;
use ho_testkit::Gateway;

use crate::harness::*;

const ADMIN: &str = "admin-secret-1";

fn text(dir: &Path, gws: &[Gateway]) -> String {
    let tail = format!(
        "state_dir = {:?}\n\n[[tenants]]\nname = \"t\"\ndomains = [\"t.example\"]\nsinks = [\"local\"]\n\n{}",
        dir.join("state").display().to_string(),
        hosts_sink(dir)
    );
    config(&Check::FAST, &gws.iter().collect::<Vec<_>>(), &tail)
}

#[actix_rt::test]
async fn drain_and_undrain_move_the_address_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let gws = gateways(3);
    let ips: Vec<String> = gws.iter().map(ip).collect();
    let file = dir.path().join("t.hosts");
    let engine = start_engine(dir.path(), &text(dir.path(), &gws)).await;
    let api = serve_api(&engine, None, Some(ADMIN)).await;
    wait_for_file(&file, "all three", |c| addresses(c) == ips).await;

    let drain = "/v1/endpoints/gw-2/drain";
    assert_eq!(
        api_request(api, "POST", drain, None).await.0,
        401,
        "no token"
    );
    assert_eq!(api_request(api, "POST", drain, Some("wrong")).await.0, 401);
    assert_eq!(api_request(api, "GET", drain, Some(ADMIN)).await.0, 405);
    let (code, body) = api_request(api, "POST", "/v1/endpoints/nope/drain", Some(ADMIN)).await;
    assert_eq!((code, body.as_str()), (404, "no endpoint named \"nope\"\n"));
    let (code, body) = api_request(api, "POST", drain, Some(ADMIN)).await;
    assert_eq!((code, body.as_str()), (200, "drained gw-2\n"));
    let without = vec![ips[0].clone(), ips[2].clone()];
    wait_for_file(&file, "gw-2 to leave", |c| addresses(c) == without).await;
    let status = engine.status().await.unwrap().tracker;
    let gw2 = &status.tenants[0].endpoints[1];
    assert!(
        gw2.drained && !gw2.published && gw2.why == Why::Drained,
        "{gw2:?}"
    );
    let saved = std::fs::read_to_string(dir.path().join("state/drains.json")).unwrap();
    assert!(saved.contains("\"gw-2\""), "{saved}");
    let metrics = engine.metrics().encode();
    let ok = "health_orchestrator_operator_actions_total{action=\"drain\",result=\"ok\"}";
    assert_eq!(metric(&metrics, ok), Some(1.0), "{metrics}");
    drop(engine);

    // A new process (same state_dir) keeps gw-2 out from its first publish on.
    let _ = std::fs::remove_file(&file);
    let engine = start_engine(dir.path(), &text(dir.path(), &gws)).await;
    let api = serve_api(&engine, None, Some(ADMIN)).await;
    wait_for_file(&file, "the restart's first publish", |c| {
        addresses(c) == without
    })
    .await;

    // Draining every endpoint never empties the name: the drains are ignored there.
    for name in ["gw-1", "gw-3"] {
        let path = format!("/v1/endpoints/{name}/drain");
        assert_eq!(api_request(api, "POST", &path, Some(ADMIN)).await.0, 200);
    }
    wait_for_file(&file, "every address back", |c| addresses(c) == ips).await;
    let status = engine.status().await.unwrap().tracker;
    assert!(status.tenants[0]
        .endpoints
        .iter()
        .all(|e| e.drained && e.published));

    for name in ["gw-1", "gw-3"] {
        let path = format!("/v1/endpoints/{name}/undrain");
        assert_eq!(api_request(api, "POST", &path, Some(ADMIN)).await.0, 200);
    }
    wait_for_file(&file, "gw-2 still out", |c| addresses(c) == without).await;
    let (code, body) = api_request(api, "POST", "/v1/endpoints/gw-2/undrain", Some(ADMIN)).await;
    assert_eq!((code, body.as_str()), (200, "undrained gw-2\n"));
    wait_for_file(&file, "gw-2 back", |c| addresses(c) == ips).await;
    let (code, body) = api_request(api, "POST", "/v1/endpoints/gw-2/undrain", Some(ADMIN)).await;
    assert_eq!((code, body.as_str()), (200, "gw-2 was already undrained\n"));
}

/// Without `api.admin_token_file` the API is read-only: actions are refused whatever the
/// token, and nothing changes.
#[actix_rt::test]
async fn a_read_only_api_refuses_operator_actions() {
    let dir = tempfile::tempdir().unwrap();
    let gws = gateways(2);
    let ips: Vec<String> = gws.iter().map(ip).collect();
    let file = dir.path().join("t.hosts");
    let engine = start_engine(dir.path(), &text(dir.path(), &gws)).await;
    let api = serve_api(&engine, None, None).await;
    wait_for_file(&file, "both", |c| addresses(c) == ips).await;
    let (code, body) = api_request(api, "POST", "/v1/endpoints/gw-1/drain", Some(ADMIN)).await;
    assert_eq!(code, 403);
    assert!(body.contains("api.admin_token_file"), "{body}");
    assert!(!engine.status().await.unwrap().tracker.tenants[0].endpoints[0].drained);
}
