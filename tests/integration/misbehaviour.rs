//! Probes against endpoints that misbehave in the ways real gateways do, each by a scripted
//! server on loopback: the right verdict and reason, within the timeout, and no leak of
//! file descriptors over many such probes.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ho_config::CheckOverrides;
use ho_engine::probe::{Failure, ProbeResult};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::fakes::gateways::scripted;
use crate::harness::{loopback, probe_within};

const TIMEOUT: Duration = Duration::from_millis(300);

/// A server that answers every request with `response`, as is.
async fn answering(addr: SocketAddr, response: &'static [u8]) -> SocketAddr {
    scripted(addr, move |mut s| async move {
        let _ = s.write_all(response).await;
    })
    .await
    .0
}

async fn probe(addr: SocketAddr, check: CheckOverrides) -> ProbeResult {
    let http = check.over(&CheckOverrides::of_kind("http").with("path", "/healthz"));
    probe_within(addr, TIMEOUT, http).await
}

fn wants_body() -> CheckOverrides {
    CheckOverrides::default().with("body_contains", "ready")
}

/// Headers sent, then the body never comes: cut at the timeout.
#[tokio::test]
async fn a_stalled_body_times_out() {
    let (addr, _) = scripted(loopback(), |mut s| async move {
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
    let (big, _) = scripted(loopback(), |mut s| async move {
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
    let (endless, _) = scripted(loopback(), |mut s| async move {
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
    let addr = answering(
        loopback(),
        b"HTTP/1.0 200 OK\r\nConnection: close\r\n\r\nok: ready\n",
    )
    .await;
    assert_eq!(probe(addr, wants_body()).await.outcome, Ok(()));
}

/// A status check reads only the response head: an interim `100 Continue` is skipped, a
/// head dribbled out byte by byte is assembled, a head beyond 16 KiB is refused.
#[tokio::test]
async fn response_heads_interim_dribbled_and_oversized() {
    let interim = answering(
        loopback(),
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
    )
    .await;
    let (dribbled, _) = scripted(loopback(), |mut s| async move {
        for b in b"HTTP/1.1 204 No Content\r\nX-A: b\r\n\r\n" {
            if s.write_all(&[*b]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await;
    let (huge, _) = scripted(loopback(), |mut s| async move {
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nX-Big: ").await;
        let _ = s.write_all(&[b'x'; 20 * 1024]).await;
        let _ = s.write_all(b"\r\n\r\n").await;
    })
    .await;
    let status_only = || CheckOverrides::default().with("expect_status", [200, 204]);
    assert_eq!(probe(interim, status_only()).await.outcome, Ok(()));
    assert_eq!(probe(dribbled, status_only()).await.outcome, Ok(()));
    let r = probe(huge, status_only()).await;
    assert_eq!(
        r.outcome,
        Err(Failure::Protocol("response head larger than 16 KiB".into()))
    );
}

/// A redirect is not followed: it is its status, healthy only if `expect_status` lists it.
#[tokio::test]
async fn redirects_are_not_followed() {
    let (addr, connections) = scripted(loopback(), |mut s| async move {
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
    let listed = CheckOverrides::default().with("expect_status", [200, 302]);
    assert_eq!(probe(addr, listed).await.outcome, Ok(()));
    assert_eq!(
        connections.load(Ordering::SeqCst),
        2,
        "one connection per probe, no follow-up"
    );
}

/// TcpExt ListenOverflows of this network namespace: SYNs a listener dropped because its
/// accept queue was full.
fn listen_overflows() -> u64 {
    let netstat = std::fs::read_to_string("/proc/net/netstat").unwrap();
    let mut lines = netstat.lines().filter(|l| l.starts_with("TcpExt:"));
    let (names, values) = (lines.next().unwrap(), lines.next().unwrap());
    let at = names
        .split_whitespace()
        .position(|n| n == "ListenOverflows")
        .unwrap();
    values.split_whitespace().nth(at).unwrap().parse().unwrap()
}

/// SYNs that get no answer at all, as behind a firewall's DROP rule or towards a dead host:
/// made here without privileges by a listener whose accept queue is full, which makes the
/// kernel drop new SYNs silently (counted in ListenOverflows). The probe ends at its
/// timeout, and says it never got connected.
#[tokio::test]
async fn unanswered_syns_time_out_while_connecting() {
    let listener =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    listener.bind(&loopback().into()).unwrap();
    // Backlog 0: one connection fills the queue; nothing ever accepts it.
    listener.listen(0).unwrap();
    let addr = listener.local_addr().unwrap().as_socket().unwrap();
    let _filler = std::net::TcpStream::connect(addr).unwrap();
    let dropped_before = listen_overflows();
    for kind in ["http", "tcp"] {
        let check = CheckOverrides::of_kind(kind);
        let r = probe_within(addr, TIMEOUT, check).await;
        assert_eq!(r.outcome, Err(Failure::ConnectTimeout), "{kind:?}");
        assert_eq!(r.reason(), "timeout connecting (no answer to SYN)");
        assert!(
            r.latency >= TIMEOUT && r.latency < TIMEOUT + Duration::from_millis(100),
            "{:?}",
            r.latency
        );
    }
    assert!(
        listen_overflows() > dropped_before,
        "the kernel did not drop the probes' SYNs"
    );
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Resident memory of this process, in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// 100,000 probes against hanging, resetting, stalling and healthy endpoints: after a
/// warm-up of 10,000 the process's open file descriptors (probes' and the test servers'
/// ends, which close when the prober does) and its resident memory stay flat.
#[tokio::test]
async fn many_probes_against_misbehaving_endpoints_leak_no_descriptors_or_memory() {
    let (stall, _) = scripted(loopback(), |mut s| async move {
        let _ = s
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nok")
            .await;
        // Stall until the prober gives up and closes (this test counts both ends).
        let mut buf = [0u8; 64];
        while matches!(s.read(&mut buf).await, Ok(n) if n > 0) {}
    })
    .await;
    let (reset, _) = scripted(loopback(), |s| async move {
        let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
        drop(s);
    })
    .await;
    let ok = answering(
        loopback(),
        b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nok: ready",
    )
    .await;
    let hang = ho_testkit::Gateway::start(loopback(), ho_testkit::Behaviour::Hang).unwrap();
    let targets = [stall, reset, ok, hang.addr()];
    // 400 waves of 250 concurrent probes, a quarter per target, cut at 20 ms.
    let wave = || async {
        let probes: Vec<_> = (0..250)
            .map(|i| {
                let addr = targets[i % targets.len()];
                tokio::spawn(async move {
                    let check = CheckOverrides {
                        timeout: Some(Duration::from_millis(20)),
                        ..wants_body()
                    };
                    probe(addr, check).await
                })
            })
            .collect();
        for p in probes {
            p.await.unwrap();
        }
    };
    // Warm up: lazy statics, the runtime's own descriptors, the allocator's pools.
    for _ in 0..40 {
        wave().await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (before, rss_before) = (open_fds(), rss_kib());
    for _ in 40..400 {
        wave().await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (after, rss_after) = (open_fds(), rss_kib());
    assert!(after <= before + 4, "descriptors {before} -> {after}");
    assert!(
        rss_after <= rss_before + 4 * 1024,
        "resident memory {rss_before} KiB -> {rss_after} KiB"
    );
    println!(
        "100,000 probes: open descriptors {before} -> {after}, resident memory {rss_before} -> {rss_after} KiB"
    );
}
