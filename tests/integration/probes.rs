//! Single probes against misbehaving gateways: each failure has its reason, and no probe
//! outlives its timeout.

use std::net::SocketAddr;
use std::time::Duration;

use ho_config::CheckOverrides;
use ho_engine::probe::{Failure, ProbeResult};
use ho_kinds::CHECK_KINDS as Checks;
use ho_testkit::{Behaviour, Gateway};

use crate::harness::{loopback, loopback_ip, probe_within};

async fn probe(addr: SocketAddr, check: CheckOverrides) -> ProbeResult {
    probe_within(addr, Duration::from_millis(200), check).await
}

fn http() -> CheckOverrides {
    CheckOverrides::of_kind("http").with("path", "/healthz")
}

#[tokio::test]
async fn each_failure_has_its_reason() {
    let mut gw = Gateway::start(loopback(), Behaviour::Healthy).unwrap();
    let addr = gw.addr();

    let ok = probe(addr, http()).await;
    assert_eq!(ok.outcome, Ok(()));

    let body_ok = probe(addr, http().with("body_contains", "ready")).await;
    assert_eq!(body_ok.outcome, Ok(()));
    let body_bad = probe(addr, http().with("body_contains", "maintenance")).await;
    assert_eq!(body_bad.outcome, Err(Failure::BodyMismatch));
    assert_eq!(body_bad.reason(), "body mismatch");

    gw.set(Behaviour::Status(503)).unwrap();
    let status = probe(addr, http()).await;
    assert_eq!(status.outcome, Err(Failure::Status(503)));
    assert_eq!(status.reason(), "status 503");
    let accepted = probe(addr, http().with("expect_status", [200, 503])).await;
    assert_eq!(accepted.outcome, Ok(()), "503 listed in expect_status");

    gw.set(Behaviour::Reset).unwrap();
    let reset = probe(addr, http()).await;
    assert!(
        matches!(reset.outcome, Err(Failure::Reset) | Err(Failure::Closed)),
        "{:?}",
        reset.outcome
    );

    gw.set(Behaviour::Refuse).unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let refused = probe(addr, http()).await;
    assert_eq!(refused.outcome, Err(Failure::Refused));
    let tcp_refused = probe(addr, CheckOverrides::of_kind("tcp")).await;
    assert_eq!(tcp_refused.outcome, Err(Failure::Refused));
}

#[tokio::test]
async fn a_hanging_server_is_cut_at_the_timeout() {
    let gw = Gateway::start(loopback(), Behaviour::Hang).unwrap();
    let result = probe(gw.addr(), http()).await;
    // `Timeout` comes only from the probe's one deadline (connect, request and body under
    // a single `tokio::time::timeout`), so the outcome itself shows the cut; how late a
    // timer fires on a busy machine is the load test's to measure, not this test's.
    assert_eq!(result.outcome, Err(Failure::Timeout));
    assert!(
        result.latency >= Duration::from_millis(200),
        "cut before the 200 ms timeout: {:?}",
        result.latency
    );
    // A TCP check only needs the accept, so a hanging HTTP server is healthy for it.
    let tcp = probe(gw.addr(), CheckOverrides::of_kind("tcp")).await;
    assert_eq!(tcp.outcome, Ok(()));
}

#[tokio::test]
async fn malformed_http_is_a_protocol_failure() {
    let listener = tokio::net::TcpListener::bind(loopback()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut s, _)) = listener.accept().await {
            let mut buf = [0u8; 512];
            let _ = s.read(&mut buf).await;
            let _ = s.write_all(b"SSH-2.0-OpenSSH_9.2\r\n").await;
        }
    });
    let result = probe(addr, http()).await;
    assert!(
        matches!(result.outcome, Err(Failure::Protocol(_))),
        "{:?}",
        result.outcome
    );
}

#[tokio::test]
async fn an_unbound_loopback_port_is_refused_quickly() {
    // Nothing listens on a fresh loopback address: the kernel answers the SYN with RST.
    let addr = SocketAddr::new(loopback_ip().into(), 9);
    let result = probe(addr, http()).await;
    // `Refused` is the kernel's RST; a dropped SYN would have been `ConnectTimeout`.
    assert_eq!(result.outcome, Err(Failure::Refused));
}

/// `headers_from_files`: the value is read from the file (its trailing newline dropped) and
/// sent; the resolved check shows it redacted; a missing file is a config error naming the
/// header and the file.
#[tokio::test]
async fn header_values_come_from_files_and_stay_hidden() {
    let listener = tokio::net::TcpListener::bind(loopback()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut s, _)) = listener.accept().await {
            let mut buf = [0u8; 2048];
            let n = s.read(&mut buf).await.unwrap_or(0);
            let head = String::from_utf8_lossy(&buf[..n]).to_string();
            let answer: &[u8] = if head.contains("\r\nAuthorization: Bearer s3cret-token\r\n") {
                b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
            } else {
                b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n"
            };
            let _ = s.write_all(answer).await;
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("probe-token");
    std::fs::write(&token, "Bearer s3cret-token\n").unwrap();
    let check = http().with(
        "headers_from_files",
        std::collections::BTreeMap::from([("Authorization", &token)]),
    );
    assert_eq!(probe(addr, check.clone()).await.outcome, Ok(()));
    assert_eq!(
        probe(addr, http()).await.outcome,
        Err(Failure::Status(401)),
        "without the header"
    );
    let spec = ho_config::resolve_standalone_check(
        &CheckOverrides {
            port: Some(80),
            interval: Some(Duration::from_secs(1)),
            ..check
        },
        &Checks,
    )
    .unwrap();
    let shown = format!("{spec:?} {}", serde_json::to_string(&spec).unwrap());
    assert!(!shown.contains("s3cret"), "{shown}");
    assert!(shown.contains("<redacted>"), "{shown}");

    let missing = ho_config::resolve_standalone_check(
        &CheckOverrides {
            port: Some(80),
            interval: Some(Duration::from_secs(1)),
            ..http().with(
                "headers_from_files",
                std::collections::BTreeMap::from([("Authorization", dir.path().join("nope"))]),
            )
        },
        &Checks,
    )
    .unwrap_err()
    .to_string();
    assert!(
        missing.contains("headers_from_files.Authorization") && missing.contains("nope"),
        "{missing}"
    );
}

/// `source_address`: the connection leaves from the configured local address (the server
/// sees it as the peer), for HTTP and TCP checks; another family is a config error.
#[actix_rt::test]
async fn probes_leave_from_the_source_address() {
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind(loopback()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (seen_tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
    actix::spawn(async move {
        while let Ok((mut s, peer)) = listener.accept().await {
            let _ = seen_tx.send(peer.ip());
            let _ = s
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                .await;
        }
    });
    let source = std::net::IpAddr::V4(loopback_ip());
    for (kind, check) in [("http", http()), ("tcp", CheckOverrides::of_kind("tcp"))] {
        let check = CheckOverrides {
            source_address: Some(source),
            ..check
        };
        let result = probe(addr, check).await;
        assert!(result.ok(), "{kind:?}: {:?}", result.outcome);
        assert_eq!(seen.recv().await, Some(source), "{kind:?}");
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    let text = format!(
        "[[endpoints]]\nname = \"a\"\naddress = \"{}\"\ncheck = {{ kind = \"tcp\", port = {}, source_address = \"::1\" }}\n",
        addr.ip(),
        addr.port()
    );
    std::fs::write(&file, text).unwrap();
    let errors = ho_kinds::load_plan(&[&file]).unwrap_err().to_string();
    assert!(
        errors.contains("endpoints[0].check.source_address: ::1 and the endpoint's address"),
        "{errors}"
    );
}

/// A server answering every request with JSON saying what it received (method, path and
/// body), after `delay`: the request the probe sends and the conditions on the answer are
/// both seen on a real socket. `/to/CODE?LOCATION` answers status CODE with that `Location`
/// instead (redirect chains nest: `/to/302?/to/301?/ready`).
async fn echo_server(delay: Duration) -> SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind(loopback()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut got = Vec::new();
                let mut buf = [0u8; 4096];
                let (head_end, length) = loop {
                    match s.read(&mut buf).await {
                        Ok(n) if n > 0 => got.extend_from_slice(&buf[..n]),
                        _ => return,
                    }
                    if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
                        let length = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .map_or(0, |v| v.trim().parse::<usize>().unwrap());
                        break (end + 4, length);
                    }
                };
                while got.len() < head_end + length {
                    match s.read(&mut buf).await {
                        Ok(n) if n > 0 => got.extend_from_slice(&buf[..n]),
                        _ => return,
                    }
                }
                let head = String::from_utf8_lossy(&got[..head_end]).into_owned();
                let mut line = head.split(' ');
                let (method, path) = (line.next().unwrap(), line.next().unwrap());
                let body = String::from_utf8_lossy(&got[head_end..head_end + length]).into_owned();
                let json = serde_json::json!({
                    "status": "UP", "method": method, "path": path, "body": body,
                    "checks": [{ "ok": true }]
                })
                .to_string();
                tokio::time::sleep(delay).await;
                let answer = match path.strip_prefix("/to/").and_then(|r| r.split_once('?')) {
                    Some((code, location)) => format!(
                        "HTTP/1.1 {code} Moved\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n"
                    ),
                    None => format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{json}",
                        json.len()
                    ),
                };
                let _ = s.write_all(answer.as_bytes()).await;
            });
        }
    });
    addr
}

#[tokio::test]
async fn http_conditions_judge_method_body_json_regex_and_latency() {
    let addr = echo_server(Duration::ZERO).await;
    let post = http()
        .with("method", "POST")
        .with("request_body", "ping")
        .with(
            "body_json",
            std::collections::BTreeMap::from([
                ("/method", "POST"),
                ("/body", "ping"),
                ("/checks/0/ok", "true"),
            ]),
        );
    let sent = probe(addr, post).await;
    assert_eq!(sent.outcome, Ok(()), "{}", sent.reason());
    let get = probe(addr, http().with("body_matches", r#""method":"GET""#)).await;
    assert_eq!(get.outcome, Ok(()), "{}", get.reason());
    let down = probe(
        addr,
        http().with(
            "body_json",
            std::collections::BTreeMap::from([("/status", "DOWN")]),
        ),
    )
    .await;
    assert_eq!(down.label(), "body_mismatch");
    assert_eq!(down.reason(), r#"body /status is "UP", not "DOWN""#);
    let unmatched = probe(addr, http().with("body_matches", "(?i)maintenance")).await;
    assert_eq!(unmatched.reason(), "body does not match /(?i)maintenance/");
    let head = probe(addr, http().with("method", "HEAD")).await;
    assert_eq!(head.outcome, Ok(()), "a HEAD answer's body is not read");

    let slow = echo_server(Duration::from_millis(120)).await;
    let fast_enough = probe(slow, http().with("max_latency", "1s")).await;
    assert_eq!(fast_enough.outcome, Ok(()));
    let too_slow = probe(slow, http().with("max_latency", "50ms")).await;
    assert_eq!(too_slow.label(), "slow");
    assert!(
        too_slow.reason().starts_with("slow: "),
        "{}",
        too_slow.reason()
    );
}

/// Redirects: judged as their status unless `follow_redirects`; then followed on the
/// endpoint (paths and absolute URLs naming it), the method changed as clients change it,
/// the answer at the end judged; a redirect elsewhere and a chain too long fail with why.
#[tokio::test]
async fn redirects_are_followed_when_asked_and_only_on_the_endpoint() {
    let addr = echo_server(Duration::ZERO).await;
    let at = |path: &str| http().with("path", path);
    let json = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let not_asked = probe(addr, at("/to/301?/ready")).await;
    assert_eq!(not_asked.outcome, Err(Failure::Status(301)));

    let chain = format!("/to/302?http://{addr}/to/301?/ready");
    let followed = probe(
        addr,
        at(&chain).with("follow_redirects", 5).with(
            "body_json",
            json(&[("/path", "/ready"), ("/method", "GET")]),
        ),
    )
    .await;
    assert_eq!(followed.outcome, Ok(()), "{}", followed.reason());

    let post = |path: &str| at(path).with("method", "POST").with("request_body", "ping");
    let kept = probe(
        addr,
        post("/to/307?/echo")
            .with("follow_redirects", 1)
            .with("body_json", json(&[("/method", "POST"), ("/body", "ping")])),
    )
    .await;
    assert_eq!(kept.outcome, Ok(()), "{}", kept.reason());
    let see_other = probe(
        addr,
        post("/to/303?/echo")
            .with("follow_redirects", 1)
            .with("body_json", json(&[("/method", "GET"), ("/body", "")])),
    )
    .await;
    assert_eq!(see_other.outcome, Ok(()), "{}", see_other.reason());

    let too_long = probe(
        addr,
        at("/to/302?/to/302?/to/302?/ready").with("follow_redirects", 2),
    )
    .await;
    assert_eq!(too_long.label(), "redirect");
    assert_eq!(
        too_long.reason(),
        "more than 2 redirects (follow_redirects); the last to \"/ready\""
    );
    let away = probe(
        addr,
        at("/to/302?http://192.0.2.1/x").with("follow_redirects", 5),
    )
    .await;
    assert_eq!(away.label(), "redirect");
    assert_eq!(
        away.reason(),
        format!(
            "redirect to \"http://192.0.2.1/x\" leaves http://{addr} (only redirects on the \
             endpoint itself are followed)"
        )
    );
}

#[tokio::test]
async fn http_condition_keys_are_checked_where_they_are_written() {
    let check = CheckOverrides {
        port: Some(80),
        interval: Some(Duration::from_secs(1)),
        ..http()
            .with("method", "HEAD")
            .with("request_body", "x")
            .with("body_matches", "(unclosed")
            .with(
                "body_json",
                std::collections::BTreeMap::from([("status", "UP")]),
            )
    };
    let errors = ho_config::resolve_standalone_check(&check, &Checks)
        .unwrap_err()
        .to_string();
    for expected in [
        "check.request_body: is sent only with method = \"POST\"",
        "check.body_matches: \"(unclosed\" is not a regular expression",
        "check.body_json.status: a JSON Pointer starts with '/'",
        "check.method: a HEAD answer has no body",
    ] {
        assert!(errors.contains(expected), "{expected}\n{errors}");
    }
}

/// The `probe` command takes the HTTP conditions as options.
#[tokio::test]
async fn probe_takes_the_http_conditions_as_options() {
    let addr = echo_server(Duration::ZERO).await;
    let run_at = |path: &'static str, extra: &'static [&'static str]| async move {
        let url = format!("http://{addr}{path}");
        tokio::task::spawn_blocking(move || {
            crate::harness::binary()
                .args(["probe", &url])
                .args(extra)
                .output()
                .unwrap()
        })
        .await
        .unwrap()
    };
    let run = |extra| run_at("/healthz", extra);
    let out = run(&[
        "--method",
        "POST",
        "--request-body",
        "ping",
        "--json",
        "/method=POST",
        "--json",
        "/body=ping",
        "--body-regex",
        "\"status\":\"UP\"",
        "--max-latency",
        "1s",
    ])
    .await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let out = run_at("/to/302?/healthz", &[]).await;
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = run_at("/to/302?/healthz", &["--follow-redirects", "1"]).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = run(&["--json", "/status=DOWN"]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(r#" body /status is "UP", not "DOWN" "#),
        "{text}"
    );
    let out = run(&["--min-cert-validity", "14d"]).await;
    assert_eq!(
        out.status.code(),
        Some(1),
        "an http check has no certificate"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("not used by kind \"http\""));
}
