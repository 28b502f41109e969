//! The `grpc` and `grpcs` check kinds against a real gRPC server (grpcio's health
//! service): SERVING healthy, every other answer with its reason, a status change followed,
//! TLS with ALPN h2 and a private CA, a stopped server refused, calls over a kept HTTP/2
//! connection, and the `probe` command's `grpc://` form.

use std::time::Duration;

use ho_config::CheckOverrides;
use ho_engine::probe::{Failure, Probe, ProbeContext, ProbeResult};

use crate::harness::{binary, probe_within, test_pki};
use crate::services::grpc_health::GrpcHealth;
use ho_config::Target;
use ho_kinds::CHECK_KINDS as Checks;

async fn probe(server: &GrpcHealth, check: CheckOverrides) -> ProbeResult {
    // grpcio's first call on a connection takes a few ms more than later ones.
    probe_within(server.addr(), Duration::from_millis(900), check).await
}

fn grpc(service: &str) -> CheckOverrides {
    CheckOverrides::of_kind("grpc").with("service", service)
}

#[tokio::test]
async fn a_grpc_check_is_healthy_only_while_the_service_is_serving() {
    let mut server = GrpcHealth::start(None);
    for service in ["", "api"] {
        let r = probe(&server, grpc(service)).await;
        assert_eq!(r.outcome, Ok(()), "{service:?}: {}", r.reason());
    }
    let down = probe(&server, grpc("down")).await;
    assert_eq!(
        (down.label(), down.reason().as_str()),
        ("not_serving", "NOT_SERVING")
    );
    let unknown = probe(&server, grpc("nope")).await;
    assert_eq!(unknown.label(), "service_unknown");
    assert_eq!(unknown.reason(), "service \"nope\" unknown to the server");

    server.set("api", "NOT_SERVING");
    assert_eq!(probe(&server, grpc("api")).await.label(), "not_serving");
    server.set("api", "SERVING");
    assert_eq!(probe(&server, grpc("api")).await.outcome, Ok(()));

    let addr = server.addr();
    drop(server);
    let stopped = probe_within(addr, Duration::from_millis(500), grpc("")).await;
    assert_eq!(stopped.outcome, Err(Failure::Refused));
}

#[tokio::test]
async fn a_grpcs_check_verifies_the_server_and_speaks_h2() {
    let dir = tempfile::tempdir().unwrap();
    let pki = test_pki(dir.path(), "grpc.test");
    let server = GrpcHealth::start(Some((&pki.cert_file, &pki.key_file)));
    let trusted = CheckOverrides::of_kind("grpcs")
        .with("service", "api")
        .with("host", "grpc.test")
        .with("ca_file", &pki.ca_file);
    let r = probe(&server, trusted).await;
    assert_eq!(r.outcome, Ok(()), "{}", r.reason());
    // Without the private CA the system roots do not know the server.
    let untrusted = probe(
        &server,
        CheckOverrides::of_kind("grpcs").with("host", "grpc.test"),
    )
    .await;
    assert_eq!(untrusted.label(), "tls", "{}", untrusted.reason());
    // In clear text, a TLS server is not a gRPC server.
    assert!(!probe(&server, grpc("api")).await.ok());
}

#[tokio::test]
async fn probe_takes_a_grpc_url() {
    let server = GrpcHealth::start(None);
    let run = |url: String| async move {
        tokio::task::spawn_blocking(move || binary().args(["probe", &url]).output().unwrap())
            .await
            .unwrap()
    };
    let out = run(format!("grpc://{}/api", server.addr())).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.starts_with(&format!("healthy {} ok ", server.addr())),
        "{text}"
    );
    let out = run(format!("grpc://{}/down", server.addr())).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains(" NOT_SERVING "), "{text}");
}

/// `reuse_connection`: calls ride one HTTP/2 connection, `fresh_connection_every` at a
/// time, counted by the server itself; a failed call and a server that went away each end
/// the kept connection, and the next probe's verdict is what a fresh connection says.
#[tokio::test]
async fn grpc_calls_ride_a_kept_connection() {
    let mut server = GrpcHealth::start(None);
    let check = CheckOverrides {
        port: Some(server.addr().port()),
        timeout: Some(Duration::from_millis(900)),
        interval: Some(Duration::from_secs(1)),
        ..grpc("api")
            .with("reuse_connection", true)
            .with("fresh_connection_every", 5)
    };
    let target = Target {
        address: server.addr().ip(),
        check: ho_config::resolve_standalone_check(&check, &Checks)
            .unwrap()
            .into(),
    };
    let probe = Probe::new(&target, &mut ProbeContext::default()).unwrap();
    let mut kept = None;
    let mut reused = Vec::new();
    for _ in 0..13 {
        let r = probe.run(&mut kept).await;
        assert_eq!(r.outcome, Ok(()), "{}", r.reason());
        reused.push(r.reused);
    }
    let fresh: Vec<usize> = (0..13).filter(|&i| !reused[i]).collect();
    assert_eq!(fresh, [0, 5, 10]);
    assert_eq!(server.connections(), 3);

    server.set("api", "NOT_SERVING");
    let r = probe.run(&mut kept).await;
    assert_eq!((r.label(), r.reused), ("not_serving", true));
    assert!(kept.is_none(), "a failed call ends the kept connection");
    server.set("api", "SERVING");
    let r = probe.run(&mut kept).await;
    assert_eq!((r.outcome, r.reused), (Ok(()), false));
    assert_eq!(server.connections(), 4);

    assert!(kept.is_some());
    drop(server);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let r = probe.run(&mut kept).await;
    let why = r.reason();
    assert_eq!(
        (r.outcome, r.reused),
        (Err(Failure::Refused), false),
        "{why}"
    );
}
