//! Targets of one check share its prepared attempt, and each still sends its own request:
//! many targets on loopback addresses, a few distinct checks (http and https, with and
//! without `host`, with headers, a POST, tcp), every target's listener recording the
//! request it got. The request each target must get (request line, `Host`, headers, body)
//! is computed from the test's script, not from the engine.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use ho_config::{CheckOverrides, Target};
use ho_engine::probe::{Probe, ProbeContext, TlsCache};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::harness::{loopback_range, test_pki_with};

/// One check of the script: its keys, and what its targets must be sent.
struct Scripted {
    check: CheckOverrides,
    /// `None`: a tcp check, which sends nothing.
    request: Option<Expected>,
    tls: bool,
}

/// What a target's request must be, with `{address}` for where its own address goes.
struct Expected {
    line: String,
    host: Option<String>,
    headers: BTreeMap<String, String>,
    body: String,
}

/// What the listeners got: the address a request came to -> the request's bytes (empty
/// for a connection that sent none before it closed).
type Got = Arc<Mutex<BTreeMap<IpAddr, Vec<u8>>>>;

/// The script's checks, drawn from `rng`; https checks trust `ca`.
fn script(rng: &mut fastrand::Rng, ca: &std::path::Path) -> Vec<Scripted> {
    let token = format!("t{}", rng.u32(..));
    let path = format!("/health/{}", rng.u16(..));
    let mut headers = BTreeMap::new();
    headers.insert("X-Probe-Token".to_owned(), token.clone());
    let http = |path: &str| CheckOverrides::of_kind("http").with("path", path);
    let expected = |method: &str, path: &str, host: Option<&str>| Expected {
        line: format!("{method} {path} HTTP/1.1"),
        host: host.map(str::to_owned),
        headers: BTreeMap::new(),
        body: String::new(),
    };
    vec![
        Scripted {
            check: http(&path),
            request: Some(expected("GET", &path, None)),
            tls: false,
        },
        Scripted {
            check: http("/ready")
                .with("host", "svc.test")
                .with("headers", &headers),
            request: Some(Expected {
                headers: headers.clone(),
                ..expected("GET", "/ready", Some("svc.test"))
            }),
            tls: false,
        },
        Scripted {
            check: http("/post")
                .with("method", "POST")
                .with("request_body", token.as_str()),
            request: Some(Expected {
                body: token.clone(),
                ..expected("POST", "/post", None)
            }),
            tls: false,
        },
        Scripted {
            check: CheckOverrides::of_kind("https")
                .with("path", "/tls")
                .with("host", "gw.test")
                .with("ca_file", ca),
            request: Some(expected("GET", "/tls", Some("gw.test"))),
            tls: true,
        },
        Scripted {
            check: CheckOverrides::of_kind("https")
                .with("path", path.as_str())
                .with("ca_file", ca),
            request: Some(expected("GET", &path, None)),
            tls: true,
        },
        Scripted {
            check: CheckOverrides::of_kind("tcp"),
            request: None,
            tls: false,
        },
    ]
}

#[tokio::test]
async fn targets_of_one_check_share_its_attempt_and_each_sends_its_own_request() {
    let mut rng = fastrand::Rng::with_seed(2911);
    let targets_n = 60;
    let first = u32::from(loopback_range(targets_n));
    let addresses: Vec<IpAddr> = (0..targets_n)
        .map(|i| std::net::Ipv4Addr::from(first + i).into())
        .collect();
    let dir = tempfile::tempdir().unwrap();
    // The certificate names `gw.test` and every target's address: an https check without
    // `host` verifies each target by the address it dials.
    let pki = test_pki_with(dir.path(), "gw.test", |leaf| {
        for ip in &addresses {
            leaf.subject_alt_names.push(rcgen::SanType::IpAddress(*ip));
        }
    });
    let checks = script(&mut rng, &pki.ca_file);
    let of: Vec<usize> = addresses
        .iter()
        .map(|_| rng.usize(..checks.len()))
        .collect();
    let got = Got::default();
    let mut ports = vec![None; checks.len()];
    let mut targets = Vec::new();
    for (ip, &c) in addresses.iter().zip(&of) {
        let port = ports[c].unwrap_or(0);
        let listener = TcpListener::bind(SocketAddr::new(*ip, port)).await.unwrap();
        let port = *ports[c].get_or_insert(listener.local_addr().unwrap().port());
        let acceptor = checks[c].tls.then(|| pki.acceptor.clone());
        tokio::spawn(record(listener, acceptor, got.clone()));
        let check = CheckOverrides {
            port: Some(port),
            interval: Some(std::time::Duration::from_secs(10)),
            timeout: Some(std::time::Duration::from_secs(5)),
            ..checks[c].check.clone()
        };
        let spec = ho_config::resolve_standalone_check(&check, &ho_kinds::CHECK_KINDS).unwrap();
        targets.push(Target {
            address: *ip,
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
    let distinct = ports.iter().filter(|p| p.is_some()).count();
    assert_eq!(
        ctx.prepared.len(),
        distinct,
        "one attempt per distinct check"
    );
    assert!(
        std::mem::size_of::<Probe>() <= 32,
        "a target's own part of its probe is {} bytes",
        std::mem::size_of::<Probe>()
    );
    for (probe, target) in probes.iter().zip(&targets) {
        let result = probe.run(&mut None).await;
        assert_eq!(
            result.outcome,
            Ok(()),
            "{}: {}",
            target.key(),
            result.reason()
        );
    }
    let got = wait_for_all(&got, targets_n as usize).await;
    for ((ip, &c), target) in addresses.iter().zip(&of).zip(&targets) {
        let request = &got[ip];
        match &checks[c].request {
            None => assert!(
                request.is_empty(),
                "{}: a tcp check sends nothing",
                target.key()
            ),
            Some(expected) => {
                let port = ports[c].unwrap();
                let host = expected.host.clone().unwrap_or(format!("{ip}:{port}"));
                assert_request(request, expected, &host, &target.key());
            }
        }
    }
}

/// `request` is `expected` with `host` as its `Host`.
fn assert_request(request: &[u8], expected: &Expected, host: &str, key: &str) {
    let text = String::from_utf8_lossy(request);
    let (head, body) = text.split_once("\r\n\r\n").expect("a complete head");
    let mut lines = head.split("\r\n");
    assert_eq!(
        lines.next(),
        Some(expected.line.as_str()),
        "{key}: {text:?}"
    );
    let fields: BTreeMap<String, String> = lines
        .map(|l| l.split_once(": ").expect("a header line"))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.to_owned()))
        .collect();
    assert_eq!(
        fields.get("host").map(String::as_str),
        Some(host),
        "{key}: {text:?}"
    );
    for (name, value) in &expected.headers {
        assert_eq!(
            fields.get(&name.to_ascii_lowercase()),
            Some(value),
            "{key}: {text:?}"
        );
    }
    assert_eq!(body, expected.body, "{key}: {text:?}");
}

/// Accepts on `listener` (through `tls` when set), records each connection's request under
/// the address it came to, and answers `200 OK`.
async fn record(listener: TcpListener, tls: Option<tokio_rustls::TlsAcceptor>, got: Got) {
    while let Ok((tcp, _)) = listener.accept().await {
        let to = tcp.local_addr().unwrap().ip();
        let got = got.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let request = match tls {
                Some(tls) => match tls.accept(tcp).await {
                    Ok(mut stream) => answer(&mut stream).await,
                    Err(_) => return,
                },
                None => {
                    let mut tcp = tcp;
                    answer(&mut tcp).await
                }
            };
            got.lock().unwrap().insert(to, request);
        });
    }
}

/// Reads one request (its head and `Content-Length` body; nothing when the peer closes
/// first), answers `200 OK`, and returns what was read.
async fn answer<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S) -> Vec<u8> {
    let mut request = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        if let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&request[..end]).to_ascii_lowercase();
            let length: usize = head
                .split("\r\n")
                .find_map(|l| l.strip_prefix("content-length: "))
                .map_or(0, |n| n.trim().parse().unwrap());
            if request.len() >= end + 4 + length {
                let _ = stream
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                    .await;
                return request;
            }
        }
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return request,
            Ok(n) => request.extend_from_slice(&buf[..n]),
        }
    }
}

/// What the listeners got once `n` connections are recorded (polled, bounded).
async fn wait_for_all(got: &Got, n: usize) -> BTreeMap<IpAddr, Vec<u8>> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let now = got.lock().unwrap().clone();
        if now.len() >= n || std::time::Instant::now() > deadline {
            assert_eq!(now.len(), n, "every target's listener saw its probe");
            return now;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}
