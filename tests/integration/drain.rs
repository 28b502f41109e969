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

/// The state files across upgrades and downgrades, through the binary: a corrupt and a newer
/// `drains.json` stop `check-config` and `run` alike with the file, the reason and the way
/// out, never a panic (starting without it would publish what an operator took out; a
/// broken `heartbeats.json` only starts the board empty, with a warning); an older one (the first format, without
/// `version`) is read and honoured (the drained gateway stays out), and written in today's
/// format at the next save.
#[actix_rt::test]
async fn state_files_corrupt_newer_or_older_are_said_or_migrated_never_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let gws = gateways(2);
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, text(dir.path(), &gws)).unwrap();
    let judge = |command: &str| {
        let out = binary()
            .args([command, "--config"])
            .arg(&config)
            .env("RUST_LOG", "warn")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!stderr.contains("panicked"), "{command}: {stderr}");
        (out.status.code(), stderr)
    };
    for (file, body, said) in [
        ("drains.json", "{\"drained\": [", "is not a drain file"),
        (
            "drains.json",
            "{\"version\": 9, \"drained\": []}",
            "written by a newer version (its drain format is 9; this version reads up to 2)",
        ),
    ] {
        let path = state.join(file);
        std::fs::write(&path, body).unwrap();
        for command in ["check-config", "run"] {
            let (code, stderr) = judge(command);
            assert_eq!(code, Some(2), "{command} with {file} {body}: {stderr}");
            assert!(
                stderr.contains(said) && stderr.contains(&path.display().to_string()),
                "{command}: {stderr}"
            );
            assert!(
                stderr.contains("to start without it"),
                "the way out: {stderr}"
            );
        }
        std::fs::remove_file(&path).unwrap();
    }

    // The first format: no `version`.
    std::fs::write(state.join("drains.json"), "{\"drained\": [\"gw-2\"]}").unwrap();
    assert_eq!(judge("check-config").0, Some(0));
    let file = dir.path().join("t.hosts");
    let engine = start_engine(dir.path(), &text(dir.path(), &gws)).await;
    let api = serve_api(&engine, None, Some(ADMIN)).await;
    wait_for_file(&file, "gw-2 kept out", |c| addresses(c) == [ip(&gws[0])]).await;
    let (code, _) = api_request(api, "POST", "/v1/endpoints/gw-1/drain", Some(ADMIN)).await;
    assert_eq!(code, 200);
    let saved = std::fs::read_to_string(state.join("drains.json")).unwrap();
    assert!(
        saved.contains("\"version\": 2") && saved.contains("\"gw-2\""),
        "{saved}"
    );
}

/// Two replicas answering DNS share what operators set (`[kubernetes] operator_state`, a
/// ConfigMap on the Kubernetes API test server: no real API server can run here): a drain
/// sent to either replica's API changes both replicas' answers, and an undrain on the other
/// brings it back, 20 times; a restarted replica answers with the shared drains from its
/// start.
#[actix_rt::test]
async fn a_drain_sent_to_one_replica_changes_every_replicas_answer() {
    use crate::fakes::kube_api::KubeApi;
    use crate::services::dig::dig;
    let kube = KubeApi::default();
    let kube_addr = kube.start().await;
    let gws = gateways(3);
    let ips: Vec<String> = gws.iter().map(ip).collect();
    let without: Vec<String> = vec![ips[0].clone(), ips[2].clone()];
    let mut replicas = Vec::new();
    for _ in 0..2 {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = KubeApi::kubeconfig(kube_addr, dir.path());
        let admin = dir.path().join("admin");
        std::fs::write(&admin, ADMIN).unwrap();
        let api = std::net::SocketAddr::new(loopback_ip().into(), 8080);
        let dns = std::net::SocketAddr::new(loopback_ip().into(), 5353);
        let config = TestConfig::new(&Check::FAST, &gws.iter().collect::<Vec<_>>())
            .set("api.listen", api.to_string())
            .set("api.admin_token_file", admin.display().to_string())
            .set("state_dir", dir.path().join("state").display().to_string())
            .with(&format!(
                "[kubernetes]\noperator_state = \"ho-operator\"\nkubeconfig = {:?}\n\n\
                 [[tenants]]\nname = \"t\"\ndomains = [\"api.example.org\"]\nsinks = [\"dns\"]\n\n\
                 [sinks.dns]\nkind = \"dns_server\"\nlisten = [\"{dns}\"]\nzones = [\"example.org\"]\n",
                kubeconfig.display().to_string()
            ));
        replicas.push((dir, config, api, dns));
    }
    let mut running: Vec<Running> = replicas
        .iter()
        .map(|(dir, config, _, _)| {
            spawn_logged(&mut run_config(dir.path(), config), &dir.path().join("log"))
        })
        .collect();
    let answers = |dns: std::net::SocketAddr, want: Vec<String>| async move {
        let start = tokio::time::Instant::now();
        loop {
            // No answer at all is a replica not listening yet (the restart below).
            let answered = dig(dns, &["api.example.org", "A"]).await;
            if answered.first().map(|a| a.sorted()).as_ref() == Some(&want) {
                return start.elapsed();
            }
            assert!(start.elapsed() < LIMIT, "{dns}: wanted {want:?}");
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    };
    for (_, _, _, dns) in &replicas {
        answers(*dns, ips.clone()).await;
    }
    let mut times = Vec::new();
    for trial in 0..20 {
        let (by, other) = if trial % 2 == 0 { (0, 1) } else { (1, 0) };
        let (action, want) = if trial % 2 == 0 {
            ("drain", &without)
        } else {
            ("undrain", &ips)
        };
        let path = format!("/v1/endpoints/gw-2/{action}");
        let (code, body) = api_request(replicas[by].2, "POST", &path, Some(ADMIN)).await;
        assert_eq!(code, 200, "{body}");
        times.push(answers(replicas[other].3, want.clone()).await);
        answers(replicas[by].3, want.clone()).await;
    }
    times.sort();
    eprintln!(
        "a drain through one replica -> the other's answer: p50 {:?}, p99 {:?} over 20 trials",
        times[10], times[19]
    );

    // Drained through replica 0; replica 1 restarts and answers without gw-2 from its start.
    let (code, _) = api_request(
        replicas[0].2,
        "POST",
        "/v1/endpoints/gw-2/drain",
        Some(ADMIN),
    )
    .await;
    assert_eq!(code, 200);
    answers(replicas[1].3, without.clone()).await;
    drop(running.pop());
    let (dir, config, _, dns) = &replicas[1];
    std::fs::remove_dir_all(dir.path().join("state")).unwrap();
    running.push(spawn_logged(
        &mut run_config(dir.path(), config),
        &dir.path().join("log"),
    ));
    answers(*dns, without).await;
}
