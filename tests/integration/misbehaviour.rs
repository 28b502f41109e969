//! Probes against endpoints that misbehave in the ways real gateways do, each by a scripted
//! server on loopback: the right verdict and reason, within the timeout, and no leak of
//! file descriptors over many such probes.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ho_config::{CheckKind, CheckOverrides};
use ho_engine::probe::{Failure, ProbeResult};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::probes::probe_within;
use crate::support::loopback;

const TIMEOUT: Duration = Duration::from_millis(300);

/// Serves every connection with `answer`, after reading the request head; counts
/// connections.
pub(crate) async fn scripted<F, Fut>(addr: SocketAddr, answer: F) -> (SocketAddr, Arc<AtomicUsize>)
where
    F: Fn(TcpStream) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    let answer = Arc::new(answer);
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            seen.fetch_add(1, Ordering::SeqCst);
            let answer = answer.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf).await {
                        Ok(n) if n > 0 => head.extend_from_slice(&buf[..n]),
                        _ => return,
                    }
                }
                answer(s).await;
            });
        }
    });
    (addr, count)
}

async fn probe(addr: SocketAddr, check: CheckOverrides) -> ProbeResult {
    let http = CheckOverrides {
        kind: Some(CheckKind::Http),
        path: Some("/healthz".into()),
        ..check
    };
    probe_within(addr, TIMEOUT, http).await
}

fn wants_body() -> CheckOverrides {
    CheckOverrides {
        body_contains: Some("ready".into()),
        ..Default::default()
    }
}

/// Headers sent, then the body never comes: cut at the timeout.
#[tokio::test]
async fn a_stalled_body_times_out() {
    let (addr, _) = scripted(loopback(40, 0), |mut s| async move {
        let _ = s
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nok")
            .await;
        tokio::time::sleep(Duration::from_secs(5)).await;
    })
    .await;
    let r = probe(addr, wants_body()).await;
    assert_eq!(r.outcome, Err(Failure::Timeout));
    assert!(
        r.latency < TIMEOUT + Duration::from_millis(100),
        "{:?}",
        r.latency
    );
}

/// A 10 MB body, and one that never ends: reading stops at `body_limit` (64 KiB) with a
/// body mismatch, long before the timeout.
#[tokio::test]
async fn huge_and_endless_bodies_stop_at_the_limit() {
    let (big, _) = scripted(loopback(40, 1), |mut s| async move {
        let _ = s
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 10485760\r\n\r\n")
            .await;
        let chunk = vec![b'x'; 64 * 1024];
        for _ in 0..160 {
            if s.write_all(&chunk).await.is_err() {
                return;
            }
        }
    })
    .await;
    let (endless, _) = scripted(loopback(40, 2), |mut s| async move {
        let _ = s
            .write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            .await;
        loop {
            if s.write_all(b"400\r\n").await.is_err()
                || s.write_all(&[b'x'; 1024]).await.is_err()
                || s.write_all(b"\r\n").await.is_err()
            {
                return;
            }
        }
    })
    .await;
    for addr in [big, endless] {
        let r = probe(addr, wants_body()).await;
        assert_eq!(r.outcome, Err(Failure::BodyMismatch), "{addr}");
        assert!(r.latency < TIMEOUT, "{addr}: {:?}", r.latency);
    }
}

/// HTTP/1.0 with `Connection: close` is a normal answer.
#[tokio::test]
async fn http_1_0_and_connection_close_are_fine() {
    let (addr, _) = scripted(loopback(40, 3), |mut s| async move {
        let _ = s
            .write_all(b"HTTP/1.0 200 OK\r\nConnection: close\r\n\r\nok: ready\n")
            .await;
    })
    .await;
    assert_eq!(probe(addr, wants_body()).await.outcome, Ok(()));
}

/// A redirect is not followed: it is its status, healthy only if `expect_status` lists it.
#[tokio::test]
async fn redirects_are_not_followed() {
    let (addr, connections) = scripted(loopback(40, 4), |mut s| async move {
        let _ = s
            .write_all(
                b"HTTP/1.1 302 Found\r\nLocation: http://127.40.0.9/\r\nContent-Length: 0\r\n\r\n",
            )
            .await;
    })
    .await;
    assert_eq!(
        probe(addr, CheckOverrides::default()).await.outcome,
        Err(Failure::Status(302))
    );
    let listed = CheckOverrides {
        expect_status: Some(vec![200, 302]),
        ..Default::default()
    };
    assert_eq!(probe(addr, listed).await.outcome, Ok(()));
    assert_eq!(
        connections.load(Ordering::SeqCst),
        2,
        "one connection per probe, no follow-up"
    );
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// 2,000 probes against hanging, resetting, stalling and healthy endpoints: the process's
/// open file descriptors (probes' and the test servers' ends, which close when the prober
/// does) come back to where they were: no socket leaks.
#[tokio::test]
async fn many_probes_against_misbehaving_endpoints_leak_no_descriptors() {
    let (stall, _) = scripted(loopback(40, 5), |mut s| async move {
        let _ = s
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nok")
            .await;
        // Stall until the prober gives up and closes (this test counts both ends).
        let mut buf = [0u8; 64];
        while matches!(s.read(&mut buf).await, Ok(n) if n > 0) {}
    })
    .await;
    let (reset, _) = scripted(loopback(40, 6), |s| async move {
        let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
        drop(s);
    })
    .await;
    let (ok, _) = scripted(loopback(40, 7), |mut s| async move {
        let _ = s
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nok: ready")
            .await;
    })
    .await;
    let hang = ho_loadtest::Gateway::start(loopback(40, 8), ho_loadtest::Behaviour::Hang).unwrap();
    // Warm up (lazy statics, the runtime's own descriptors), then measure.
    for addr in [ok, reset] {
        let _ = probe(addr, wants_body()).await;
    }
    let before = open_fds();
    let targets = [stall, reset, ok, hang.addr()];
    // 20 waves of 100 concurrent probes, 25 per target, cut at 50 ms.
    for _ in 0..20 {
        let wave: Vec<_> = (0..100)
            .map(|i| {
                let addr = targets[i % targets.len()];
                tokio::spawn(async move {
                    let check = CheckOverrides {
                        timeout: Some(Duration::from_millis(50)),
                        ..wants_body()
                    };
                    probe(addr, check).await
                })
            })
            .collect();
        for p in wave {
            p.await.unwrap();
        }
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after = open_fds();
    assert!(after <= before + 4, "descriptors {before} -> {after}");
    println!("2,000 probes: open descriptors {before} -> {after}");
}
