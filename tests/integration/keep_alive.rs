//! `reuse_connection`: probes carried over a kept HTTP/1.1 or HTTPS connection, a fresh one
//! at least every `fresh_connection_every` probes and after any failure, and a gateway
//! that dies under a kept connection reported exactly as without reuse.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ho_config::{CheckOverrides, Target};
use ho_engine::probe::{Failure, KeptConnection, Probe, ProbeContext};
use ho_kinds::CHECK_KINDS as Checks;
use ho_testkit::{Behaviour, Gateway};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::fakes::gateways::{read_request_head, scripted};
use crate::harness::{
    loopback, metric, start_engine, test_pki, wait_for_status, Check, TestConfig,
};

fn kept_check(every: Option<u32>) -> CheckOverrides {
    let check = CheckOverrides::of_kind("http")
        .with("path", "/healthz")
        .with("reuse_connection", true);
    match every {
        Some(every) => check.with("fresh_connection_every", every),
        None => check,
    }
}

fn probe_for(addr: SocketAddr, check: CheckOverrides) -> Probe {
    let check = CheckOverrides {
        port: Some(addr.port()),
        timeout: Some(Duration::from_millis(300)),
        interval: Some(Duration::from_secs(1)),
        ..check
    };
    let target = Target {
        address: addr.ip(),
        check: ho_config::resolve_standalone_check(&check, &Checks)
            .unwrap()
            .into(),
    };
    Probe::new(&target, &mut ProbeContext::default()).unwrap()
}

/// A keep-alive server answering each connection's requests in turn with `answers`
/// (the first request's head is read by `scripted`), cycling; counts connections.
async fn keep_alive_server(
    answers: &'static [&'static [u8]],
) -> (SocketAddr, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    scripted(loopback(), move |mut s: TcpStream| async move {
        for answer in answers.iter().cycle() {
            if s.write_all(answer).await.is_err() || !read_request_head(&mut s).await {
                return;
            }
        }
    })
    .await
}

const LENGTH_OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nok: ready\n";
const CHUNKED_OK: &[u8] =
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nok: \r\n6\r\nready\n\r\n0\r\n\r\n";
const UNAVAILABLE: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n";

/// 25 probes with `fresh_connection_every = 10`: three connections (10 + 10 + 5 probes),
/// through length-delimited and chunked bodies alike, with and without a body check.
#[tokio::test]
async fn a_kept_connection_carries_probes_up_to_fresh_connection_every() {
    for body_contains in [None, Some("ready")] {
        let (addr, connections) = keep_alive_server(&[LENGTH_OK, CHUNKED_OK]).await;
        let probe = probe_for(
            addr,
            match body_contains {
                Some(text) => kept_check(None).with("body_contains", text),
                None => kept_check(None),
            },
        );
        let mut kept: Option<KeptConnection> = None;
        let mut reused = Vec::new();
        for _ in 0..25 {
            let r = probe.run(&mut kept).await;
            assert_eq!(r.outcome, Ok(()), "{body_contains:?}");
            reused.push(r.reused);
        }
        assert_eq!(connections.load(Ordering::SeqCst), 3, "{body_contains:?}");
        let fresh: Vec<usize> = (0..25).filter(|&i| !reused[i]).collect();
        assert_eq!(fresh, [0, 10, 20], "{body_contains:?}");
    }
}

/// A 503 over a kept connection is the verdict (the server answered), and the next probe
/// opens a fresh connection.
#[tokio::test]
async fn a_failure_ends_the_kept_connection() {
    let (addr, connections) = keep_alive_server(&[LENGTH_OK, LENGTH_OK, UNAVAILABLE]).await;
    let probe = probe_for(addr, kept_check(Some(100)));
    let mut kept = None;
    let outcomes: Vec<_> = run_n(&probe, &mut kept, 4).await;
    assert_eq!(
        outcomes,
        [
            (Ok(()), false),
            (Ok(()), true),
            (Err(Failure::Status(503)), true),
            (Ok(()), false)
        ]
    );
    assert_eq!(connections.load(Ordering::SeqCst), 2);
}

async fn run_n(
    probe: &Probe,
    kept: &mut Option<KeptConnection>,
    n: usize,
) -> Vec<(Result<(), Failure>, bool)> {
    let mut out = Vec::new();
    for _ in 0..n {
        let r = probe.run(kept).await;
        out.push((r.outcome, r.reused));
    }
    out
}

/// A server that closes an idle keep-alive connection (its keep-alive timeout) is not
/// reported down: the probe goes on over a fresh connection. A response that asks to
/// close, or has no length, is not kept at all.
#[tokio::test]
async fn connections_the_server_ends_are_not_failures() {
    let (addr, connections) = scripted(loopback(), |mut s: TcpStream| async move {
        let _ = s.write_all(LENGTH_OK).await;
        // Closes right after the answer, without saying so in the response.
    })
    .await;
    let probe = probe_for(addr, kept_check(None));
    let mut kept = None;
    let outcomes = run_n(&probe, &mut kept, 3).await;
    assert_eq!(outcomes, vec![(Ok(()), false); 3]);
    assert_eq!(connections.load(Ordering::SeqCst), 3);

    for answer in [
        &b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"[..],
        b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n\r\nbody until close",
    ] {
        let (addr, connections) = scripted(loopback(), move |mut s: TcpStream| async move {
            let _ = s.write_all(answer).await;
            // Keeps the connection open: only the response says it will not be reused.
            tokio::time::sleep(Duration::from_secs(5)).await;
        })
        .await;
        let probe = probe_for(addr, kept_check(None));
        let mut kept = None;
        assert!(probe.run(&mut kept).await.ok());
        assert!(kept.is_none(), "{}", String::from_utf8_lossy(answer));
        assert!(probe.run(&mut kept).await.ok());
        assert_eq!(connections.load(Ordering::SeqCst), 2);
    }
}

/// A gateway that dies or hangs under a kept connection gets the same verdict as without
/// reuse: refused (the kept connection is closed, the fresh one refused), timeout; a 503
/// comes over the kept connection itself.
#[tokio::test]
async fn a_gateway_failing_under_a_kept_connection_gets_the_usual_reason() {
    let mut gw = Gateway::start(loopback(), Behaviour::Healthy).unwrap();
    let probe = probe_for(gw.addr(), kept_check(None));
    let mut kept = None;
    assert!(probe.run(&mut kept).await.ok());
    assert!(probe.run(&mut kept).await.reused);

    gw.set(Behaviour::Status(503)).unwrap();
    let r = probe.run(&mut kept).await;
    assert_eq!((r.outcome, r.reused), (Err(Failure::Status(503)), true));

    gw.set(Behaviour::Healthy).unwrap();
    assert!(probe.run(&mut kept).await.ok());
    gw.set(Behaviour::Hang).unwrap();
    let r = probe.run(&mut kept).await;
    assert_eq!((r.outcome, r.reused), (Err(Failure::Timeout), true));

    gw.set(Behaviour::Healthy).unwrap();
    assert!(probe.run(&mut kept).await.ok());
    assert!(kept.is_some());
    gw.set(Behaviour::Refuse).unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await; // the listener closes on the next turn
    let r = probe.run(&mut kept).await;
    assert_eq!((r.outcome, r.reused), (Err(Failure::Refused), false));
}

/// HTTPS keeps the TLS session with the connection: one handshake for ten probes.
#[tokio::test]
async fn https_connections_are_kept_with_their_tls_session() {
    let dir = tempfile::tempdir().unwrap();
    let pki = test_pki(dir.path(), "gw.test");
    let gw = Gateway::start_tls(loopback(), Behaviour::Healthy, pki.acceptor.clone()).unwrap();
    let probe = probe_for(
        gw.addr(),
        CheckOverrides {
            kind: Some("https".into()),
            ..kept_check(None)
                .with("host", "gw.test")
                .with("ca_file", &pki.ca_file)
        },
    );
    let mut kept = None;
    let outcomes = run_n(&probe, &mut kept, 10).await;
    assert!(outcomes.iter().all(|(o, _)| o.is_ok()), "{outcomes:?}");
    assert_eq!(outcomes.iter().filter(|(_, reused)| *reused).count(), 9);
}

/// Through the engine: the reuse counter shows in the metrics, beside probes_total.
#[actix_rt::test]
async fn the_engine_counts_probes_over_kept_connections() {
    let dir = tempfile::tempdir().unwrap();
    let gw = Gateway::start(loopback(), Behaviour::Healthy).unwrap();
    let text = TestConfig::new(&Check::FAST, &[&gw])
        .set("defaults.check.reuse_connection", true)
        .with(&format!(
            "[[tenants]]\nname = \"t\"\ndomains = [\"t.example\"]\nendpoints = [\"gw-1\"]\nsinks = [\"local\"]\n{}",
            crate::harness::hosts_sink(dir.path())
        ))
        .render();
    let engine = start_engine(dir.path(), &text).await;
    wait_for_status(&engine, "a verdict", |s| {
        s.endpoints
            .iter()
            .all(|e| e.state != ho_engine::hysteresis::Health::Unknown)
    })
    .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let text = engine.metrics().encode();
        let reused =
            metric(&text, "health_orchestrator_probe_connections_reused_total").unwrap_or(0.0);
        let probes =
            metric(&text, "health_orchestrator_probes_total{result=\"ok\"}").unwrap_or(0.0);
        if probes >= 10.0 {
            // At most one fresh connection per 10 probes (a few in flight may be uncounted).
            assert!(reused >= probes * 0.9 - 2.0, "{reused} of {probes}");
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
