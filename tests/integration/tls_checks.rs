//! What the TLS kinds add to a check, against real TLS listeners on loopback: a
//! certificate closer to its expiry than `min_cert_validity` fails as `cert_expiring`, its
//! expiry is exported per target, and a client certificate is presented to a server that
//! requires one (mutual TLS).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use ho_config::CheckOverrides;
use ho_engine::probe::Failure;
use ho_testkit::{Behaviour, Gateway};

use crate::harness::{
    hosts_sink, loopback, metric, probe_within, start_engine, test_pki_with, wait_for_file, Check,
    TestConfig,
};

fn https(ca: &std::path::Path) -> CheckOverrides {
    CheckOverrides::of_kind("https")
        .with("path", "/healthz")
        .with("host", "gw.test")
        .with("ca_file", ca)
}

/// A certificate valid for `days` more days, from a fresh CA.
fn expiring_in(dir: &std::path::Path, days: u64) -> crate::harness::TestPki {
    test_pki_with(dir, "gw.test", |leaf| {
        let until = SystemTime::now() + Duration::from_secs(days * 86_400);
        leaf.not_after = until.into();
    })
}

#[tokio::test]
async fn a_certificate_closer_to_expiry_than_min_cert_validity_fails() {
    let dir = tempfile::tempdir().unwrap();
    let pki = expiring_in(dir.path(), 3);
    let gw = Gateway::start_tls(loopback(), Behaviour::Healthy, pki.acceptor.clone()).unwrap();
    let timeout = Duration::from_millis(500);
    let relaxed = probe_within(
        gw.addr(),
        timeout,
        https(&pki.ca_file).with("min_cert_validity", "1d"),
    )
    .await;
    assert_eq!(relaxed.outcome, Ok(()), "{}", relaxed.reason());
    let left = relaxed
        .cert_not_after
        .expect("the expiry is read from the certificate")
        .duration_since(SystemTime::now())
        .unwrap();
    assert!(
        left > Duration::from_secs(2 * 86_400) && left <= Duration::from_secs(3 * 86_400),
        "{left:?}"
    );
    let strict = probe_within(
        gw.addr(),
        timeout,
        https(&pki.ca_file).with("min_cert_validity", "14d"),
    )
    .await;
    assert_eq!(strict.label(), "cert_expiring");
    assert!(
        strict.reason().starts_with("certificate expires in 2days")
            && strict.reason().ends_with("(min_cert_validity 14days)"),
        "{}",
        strict.reason()
    );
}

/// Through the engine: the endpoint leaves the hosts file for `cert_expiring`, and
/// `/metrics` carries the target's certificate expiry.
#[actix_rt::test]
async fn the_engine_exports_each_targets_certificate_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let pki = expiring_in(dir.path(), 3);
    let gw = Gateway::start_tls(loopback(), Behaviour::Healthy, pki.acceptor.clone()).unwrap();
    let ca = pki.ca_file.display().to_string();
    let (ip, port) = (gw.addr().ip(), gw.addr().port());
    let text = TestConfig::defaults(&Check::FAST)
        .with(&format!(
            "[[endpoints]]\nname = \"renewed\"\naddress = \"{ip}\"\n\
             check = {{ kind = \"https\", port = {port}, host = \"gw.test\", ca_file = {ca:?}, min_cert_validity = \"1d\" }}\n\n\
             [[endpoints]]\nname = \"forgotten\"\naddress = \"{ip}\"\n\
             check = {{ kind = \"https\", port = {port}, host = \"gw.test\", ca_file = {ca:?}, min_cert_validity = \"30d\", path = \"/other\" }}\n\n\
             [[tenants]]\nname = \"renewed\"\ndomains = [\"r.example\"]\nendpoints = [\"renewed\"]\nsinks = [\"local\"]\non_all_unhealthy = \"publish_none\"\n\n\
             [[tenants]]\nname = \"forgotten\"\ndomains = [\"f.example\"]\nendpoints = [\"forgotten\"]\nsinks = [\"local\"]\non_all_unhealthy = \"publish_none\"\n\n{}",
            hosts_sink(dir.path())
        ))
        .render();
    let engine = start_engine(dir.path(), &text).await;
    wait_for_file(&dir.path().join("renewed.hosts"), "the renewed one", |c| {
        c.contains(&ip.to_string())
    })
    .await;
    wait_for_file(
        &dir.path().join("forgotten.hosts"),
        "the forgotten one empty",
        |c| !c.contains(&ip.to_string()),
    )
    .await;
    let metrics = engine.metrics().encode();
    let series = format!(
        "health_orchestrator_probe_cert_not_after_seconds{{target=\"https://{}/healthz\"}}",
        gw.addr()
    );
    let at = metric(&metrics, &series).unwrap_or_else(|| panic!("{series} missing:\n{metrics}"));
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(
        at > now + 2.0 * 86_400.0 && at <= now + 3.0 * 86_400.0,
        "{at}"
    );
}

/// A server that requires a client certificate from the test CA: the probe presents its
/// `client_cert` and is served; without one the handshake fails.
#[tokio::test]
async fn a_client_certificate_is_presented_to_a_server_that_requires_one() {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let dir = tempfile::tempdir().unwrap();
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issue = |name: &str| {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec![name.to_owned()])
            .unwrap()
            .signed_by(&key, &ca, &ca_key)
            .unwrap();
        (cert, key)
    };
    let (server_cert, server_key) = issue("gw.test");
    let (client_cert, client_key) = issue("prober.test");
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca.pem()).unwrap();
    let (cert_file, key_file) = (dir.path().join("client.pem"), dir.path().join("client.key"));
    std::fs::write(&cert_file, client_cert.pem()).unwrap();
    std::fs::write(&key_file, client_key.serialize_pem()).unwrap();

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der().clone()).unwrap();
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .unwrap();
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![server_cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(server_key.serialize_der().into()),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let gw = Gateway::start_tls(loopback(), Behaviour::Healthy, acceptor).unwrap();

    let timeout = Duration::from_millis(500);
    let mutual = https(&ca_file)
        .with("client_cert", &cert_file)
        .with("client_key", &key_file);
    let served = probe_within(gw.addr(), timeout, mutual).await;
    assert_eq!(served.outcome, Ok(()), "{}", served.reason());
    let refused = probe_within(gw.addr(), timeout, https(&ca_file)).await;
    assert!(
        matches!(
            refused.outcome,
            Err(Failure::Tls(_) | Failure::Reset | Failure::Closed)
        ),
        "{:?}",
        refused.outcome
    );
    assert!(gw.requests() >= 1);
}

/// More targets than rustls remembers by default (32 servers): every probe after a
/// target's first resumes its TLS session, counted by the servers themselves.
#[tokio::test]
async fn every_target_resumes_its_tls_session() {
    use ho_engine::probe::{Probe, ProbeContext, TlsCache};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let dir = tempfile::tempdir().unwrap();
    let pki = crate::harness::test_pki(dir.path(), "gw.test");
    let resumed = Arc::new(AtomicUsize::new(0));
    let mut targets = Vec::new();
    for _ in 0..40 {
        let listener = tokio::net::TcpListener::bind(loopback()).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (acceptor, resumed) = (pki.acceptor.clone(), resumed.clone());
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, resumed) = (acceptor.clone(), resumed.clone());
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    if tls.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed) {
                        resumed.fetch_add(1, Ordering::SeqCst);
                    }
                    let mut buf = [0u8; 1024];
                    let _ = tls.read(&mut buf).await;
                    let _ = tls
                        .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                        .await;
                });
            }
        });
        // No `host`: each target's sessions are kept under its own address.
        let check = CheckOverrides {
            port: Some(addr.port()),
            interval: Some(Duration::from_secs(1)),
            timeout: Some(Duration::from_millis(500)),
            ..CheckOverrides::of_kind("https")
                .with("path", "/healthz")
                .with("insecure", true)
        };
        let spec = ho_config::resolve_standalone_check(&check, &ho_kinds::CHECK_KINDS).unwrap();
        targets.push(ho_config::Target {
            address: addr.ip(),
            check: spec.into(),
        });
    }
    let mut ctx = ProbeContext {
        tls: TlsCache::for_targets(targets.len()),
        ..ProbeContext::default()
    };
    let probes: Vec<Probe> = targets
        .iter()
        .map(|t| Probe::new(t, &mut ctx).unwrap())
        .collect();
    for round in 0..2 {
        for probe in &probes {
            let r = probe.run(&mut None).await;
            assert_eq!(r.outcome, Ok(()), "round {round}: {}", r.reason());
        }
    }
    assert_eq!(
        resumed.load(Ordering::SeqCst),
        probes.len(),
        "the second round resumes"
    );
}
