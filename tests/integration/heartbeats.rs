//! Pushed health (`kind = "heartbeat"`): heartbeats sent over real HTTP to the API keep an
//! endpoint published, a missed one takes it out and the next brings it back; each token is
//! asked where it belongs (the API's, an endpoint's own); the board survives a restart.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ho_engine::api::ApiTokens;
use ho_engine::hysteresis::Health;
use ho_engine::Engine;
use tokio::time::Instant;

use crate::harness::*;

const PUSH: &str = "push-secret-1";
const OWN: &str = "own-secret-9";

/// Three pushing endpoints, `hb-3` with its own token, `ttl` each; one tenant.
fn text(dir: &Path, ips: &[String], ttl: &str) -> String {
    std::fs::write(dir.join("own.token"), format!("{OWN}\n")).unwrap();
    let mut endpoints = String::new();
    for (i, ip) in ips.iter().enumerate() {
        let own = if i == 2 {
            format!(
                ", token_file = {:?}",
                dir.join("own.token").display().to_string()
            )
        } else {
            String::new()
        };
        endpoints.push_str(&format!(
            "[[endpoints]]\nname = \"hb-{}\"\naddress = \"{ip}\"\ncheck = {{ kind = \"heartbeat\", ttl = \"{ttl}\"{own} }}\n\n",
            i + 1
        ));
    }
    TestConfig::defaults(&Check::FAST)
        .set("state_dir", dir.join("state").display().to_string())
        .with(&endpoints)
        .with(&format!(
            "[[tenants]]\nname = \"t\"\ndomains = [\"t.example\"]\nsinks = [\"local\"]\n\n{}",
            hosts_sink(dir)
        ))
        .render()
}

async fn serve(engine: &Engine) -> std::net::SocketAddr {
    serve_api_with(
        engine,
        ApiTokens {
            heartbeat: Some(PUSH.into()),
            ..ApiTokens::default()
        },
    )
    .await
}

/// Posts a heartbeat for each name in `names` every 50 ms, with its token, over HTTP.
fn push(api: std::net::SocketAddr, names: Arc<Mutex<Vec<&'static str>>>) {
    actix::spawn(async move {
        loop {
            let now: Vec<&str> = names.lock().unwrap().clone();
            for name in now {
                let token = if name == "hb-3" { OWN } else { PUSH };
                let path = format!("/v1/heartbeat/{name}");
                assert_eq!(api_request(api, "POST", &path, Some(token)).await.0, 200);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
}

async fn wait_for_states(engine: &Engine, what: &str, want: &[Health]) {
    let start = Instant::now();
    loop {
        let status = engine.status().await.unwrap().tracker;
        let states: Vec<Health> = status.endpoints.iter().map(|e| e.state).collect();
        if states == want {
            return;
        }
        assert!(start.elapsed() < LIMIT, "{what}: {states:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[actix_rt::test]
async fn heartbeats_keep_endpoints_published_and_a_missed_one_takes_it_out() {
    let dir = tempfile::tempdir().unwrap();
    let ips: Vec<String> = (0..3).map(|_| loopback_ip().to_string()).collect();
    let engine = start_engine(dir.path(), &text(dir.path(), &ips, "400ms")).await;
    let api = serve(&engine).await;

    let path = "/v1/heartbeat/hb-1";
    assert_eq!(api_request(api, "POST", path, None).await.0, 401);
    assert_eq!(api_request(api, "POST", path, Some("wrong")).await.0, 401);
    assert_eq!(api_request(api, "GET", path, Some(PUSH)).await.0, 405);
    let (code, body) = api_request(api, "POST", "/v1/heartbeat/nope", Some(PUSH)).await;
    assert_eq!(
        (code, body.as_str()),
        (404, "no endpoint \"nope\" of kind heartbeat\n")
    );
    // hb-3 has its own token: the API's does not let anyone speak for it.
    assert_eq!(
        api_request(api, "POST", "/v1/heartbeat/hb-3", Some(PUSH))
            .await
            .0,
        401
    );

    let pushing = Arc::new(Mutex::new(vec!["hb-1", "hb-2", "hb-3"]));
    push(api, pushing.clone());
    use Health::*;
    wait_for_states(&engine, "every pusher up", &[Up, Up, Up]).await;
    let file = dir.path().join("t.hosts");
    wait_for_file(&file, "all three", |c| addresses(c).len() == 3).await;

    pushing.lock().unwrap().retain(|n| *n != "hb-2");
    let stopped = Instant::now();
    let rest = vec![ips[0].clone(), ips[2].clone()];
    let mut want = rest.clone();
    want.sort();
    wait_for_file(&file, "hb-2 to leave", |c| {
        let mut got = addresses(c);
        got.sort();
        got == want
    })
    .await;
    let took = stopped.elapsed();
    // The ttl (400 ms) counts from the last heartbeat, at most 50 ms before the stop; then
    // fall 2 at the 50 ms fast re-check. Never sooner.
    assert!(took >= Duration::from_millis(350), "{took:?}");
    let status = engine.status().await.unwrap().tracker;
    let last = status.endpoints[1].last.as_ref().unwrap();
    assert!(
        last.reason.starts_with("last heartbeat ") && last.reason.ends_with("(ttl 400ms)"),
        "{}",
        last.reason
    );

    pushing.lock().unwrap().push("hb-2");
    wait_for_file(&file, "hb-2 back", |c| addresses(c).len() == 3).await;

    let metrics = engine.metrics().encode();
    let count = |result: &str| {
        metric(
            &metrics,
            &format!("health_orchestrator_heartbeats_total{{result=\"{result}\"}}"),
        )
    };
    assert_eq!(count("refused"), Some(3.0), "{metrics}");
    assert_eq!(count("unknown"), Some(1.0), "{metrics}");
    assert!(count("ok").unwrap() > 10.0, "{metrics}");
    let missed = "health_orchestrator_probes_total{result=\"heartbeat_missed\"}";
    assert!(metric(&metrics, missed).unwrap() >= 2.0, "{metrics}");
}

/// A restart keeps the heartbeats received before it (saved each second under
/// `state_dir`): endpoints that pushed are up from the first probe on, one that never
/// pushed is down with "no heartbeat received".
#[actix_rt::test]
async fn heartbeats_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let ips: Vec<String> = (0..3).map(|_| loopback_ip().to_string()).collect();
    let config = text(dir.path(), &ips, "30s");
    let engine = start_engine(dir.path(), &config).await;
    let api = serve(&engine).await;
    for name in ["hb-1", "hb-2"] {
        let path = format!("/v1/heartbeat/{name}");
        assert_eq!(api_request(api, "POST", &path, Some(PUSH)).await.0, 200);
    }
    use Health::*;
    wait_for_states(&engine, "the two that pushed up", &[Up, Up, Down]).await;
    let saved = dir.path().join("state/heartbeats.json");
    let start = Instant::now();
    while !std::fs::read_to_string(&saved).is_ok_and(|s| s.contains(&ips[1])) {
        assert!(start.elapsed() < LIMIT, "heartbeats never saved");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(engine);

    let engine = start_engine(dir.path(), &config).await;
    wait_for_states(&engine, "up again without a new heartbeat", &[Up, Up, Down]).await;
    let status = engine.status().await.unwrap().tracker;
    let never = status.endpoints[2].last.as_ref().unwrap();
    assert_eq!(never.reason, "no heartbeat received");
}
