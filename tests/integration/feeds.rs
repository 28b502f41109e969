//! External health feeds (`check = { kind = "feed", url }`): another monitor's JSON map of
//! address -> health, served by a real HTTP server, decides three gateways (that nothing
//! probes); a change in the feed is followed; a feed that stops answering leaves every
//! endpoint at its last verdict, never "everything down"; one fetch serves every endpoint;
//! an `https://` feed is verified against its CA.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;

use ho_engine::hysteresis::Health;

use crate::harness::*;

/// What the test feed answers: a status and a body, switchable while it runs; and how
/// many requests it got.
#[derive(Clone)]
struct Feed {
    answer: Arc<Mutex<(u16, String)>>,
    requests: Arc<AtomicUsize>,
    addr: SocketAddr,
}

impl Feed {
    async fn start(body: &str) -> Feed {
        let listener = tokio::net::TcpListener::bind((loopback_ip(), 0))
            .await
            .unwrap();
        let feed = Feed {
            answer: Arc::new(Mutex::new((200, body.to_owned()))),
            requests: Arc::new(AtomicUsize::new(0)),
            addr: listener.local_addr().unwrap(),
        };
        let served = feed.clone();
        serve_http(listener, move |_req| {
            let feed = served.clone();
            async move {
                feed.requests.fetch_add(1, Ordering::Relaxed);
                let (status, body) = feed.answer.lock().unwrap().clone();
                hyper::Response::builder()
                    .status(status)
                    .body(Full::new(Bytes::from(body)))
                    .unwrap()
            }
        });
        feed
    }

    fn set(&self, status: u16, body: &str) {
        *self.answer.lock().unwrap() = (status, body.to_owned());
    }
}

fn map(ups: &[(&str, &str)]) -> String {
    let items: Vec<String> = ups
        .iter()
        .map(|(a, s)| format!("\"{a}\": \"{s}\""))
        .collect();
    format!("{{{}}}", items.join(", "))
}

#[actix_rt::test]
async fn a_feed_decides_its_endpoints_and_its_silence_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ips: Vec<String> = (0..3).map(|_| loopback_ip().to_string()).collect();
    let feed = Feed::start(&map(&[(&ips[0], "up"), (&ips[1], "up"), (&ips[2], "up")])).await;
    let mut text = String::from(
        "[defaults.check]\nkind = \"feed\"\ninterval = \"100ms\"\ntimeout = \"80ms\"\nfast_interval = \"50ms\"\nrise = 1\nfall = 1\n",
    );
    text.push_str(&format!(
        "url = \"http://{}/health.json\"\nmax_age = \"300ms\"\n\n",
        feed.addr
    ));
    for (i, ip) in ips.iter().enumerate() {
        text.push_str(&format!(
            "[[endpoints]]\nname = \"gw-{i}\"\naddress = \"{ip}\"\n\n"
        ));
    }
    text.push_str(&format!(
        "[[tenants]]\nname = \"t\"\ndomains = [\"t.example\"]\nsinks = [\"local\"]\n\n{}",
        hosts_sink(dir.path())
    ));
    let file = dir.path().join("t.hosts");
    let engine = start_engine(dir.path(), &text).await;
    let mut all = ips.clone();
    all.sort();
    wait_for_file(&file, "all three up", |c| addresses(c) == all).await;

    feed.set(
        200,
        &map(&[(&ips[0], "up"), (&ips[1], "down"), (&ips[2], "up")]),
    );
    let mut two = vec![ips[0].clone(), ips[2].clone()];
    two.sort();
    wait_for_file(&file, "gw-1 down by the feed", |c| addresses(c) == two).await;

    // The feed fails: its last answer counts for max_age (300 ms), then the probes give
    // no verdict; every endpoint keeps its last one while it is probed on.
    feed.set(500, "oops");
    let silent = |s: &ho_engine::status::TrackerStatus| {
        s.endpoints
            .iter()
            .all(|e| format!("{:?}", e.last).contains("answered 500"))
    };
    let start = tokio::time::Instant::now();
    let mut seen_silent = 0;
    while seen_silent < 5 {
        assert_eq!(addresses(&std::fs::read_to_string(&file).unwrap()), two);
        let status = engine.status().await.unwrap().tracker;
        if silent(&status) {
            seen_silent += 1;
            assert_eq!(
                status.endpoints.iter().map(|e| e.state).collect::<Vec<_>>(),
                [Health::Up, Health::Down, Health::Up],
                "last verdicts kept"
            );
        }
        assert!(
            start.elapsed() < LIMIT,
            "the feed's silence is not seen: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    feed.set(
        200,
        &map(&[(&ips[0], "up"), (&ips[1], "up"), (&ips[2], "up")]),
    );
    wait_for_file(&file, "back by the feed", |c| addresses(c) == all).await;
    // One fetch per interval for the three endpoints, not one per probe: counted over
    // 30 probes of steady answers.
    let probed = |s: &ho_engine::status::TrackerStatus| -> u64 {
        s.endpoints.iter().map(|e| e.probes).sum()
    };
    let (probes0, fetches0) = (
        probed(&engine.status().await.unwrap().tracker),
        feed.requests.load(Ordering::Relaxed) as u64,
    );
    let start = tokio::time::Instant::now();
    let probes = loop {
        let probes = probed(&engine.status().await.unwrap().tracker) - probes0;
        if probes >= 30 {
            break probes;
        }
        assert!(start.elapsed() < LIMIT, "the endpoints are not probed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let fetches = feed.requests.load(Ordering::Relaxed) as u64 - fetches0;
    assert!(
        fetches * 2 <= probes,
        "{fetches} fetches for {probes} probes: the endpoints share them"
    );
}

/// Serves `body` as the feed over TLS (the server certificate of `pki`) on `ip`.
async fn tls_feed(ip: std::net::Ipv4Addr, pki: &TestPki, body: String) -> SocketAddr {
    let body = Bytes::from(body);
    let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = pki.acceptor.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, body) = (acceptor.clone(), body.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(move |_req| {
                    let body = body.clone();
                    async move {
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(body)))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    addr
}

/// An `https://` feed is verified: against its `ca_file` it decides its endpoint; the same
/// feed trusted by the system roots only is refused, and its endpoint gets no verdict
/// (the TLS error is its reason), never "down".
#[actix_rt::test]
async fn an_https_feed_is_verified_against_its_ca() {
    let dir = tempfile::tempdir().unwrap();
    let ip = loopback_ip();
    let pki = test_pki(dir.path(), &ip.to_string());
    let (trusted, stranger) = (loopback_ip().to_string(), loopback_ip().to_string());
    let addr = tls_feed(ip, &pki, map(&[(&trusted, "up"), (&stranger, "up")])).await;
    let text = TestConfig::defaults(&Check::FAST)
        .with(&format!(
            "[[endpoints]]\nname = \"trusted\"\naddress = \"{trusted}\"\n\
             check = {{ kind = \"feed\", url = \"https://{addr}/health.json\", ca_file = {:?} }}\n\n\
             [[endpoints]]\nname = \"stranger\"\naddress = \"{stranger}\"\n\
             check = {{ kind = \"feed\", url = \"https://{addr}/health.json\" }}\n\n\
             [[tenants]]\nname = \"t\"\ndomains = [\"t.example\"]\nsinks = [\"local\"]\n\n{}",
            pki.ca_file.display().to_string(),
            hosts_sink(dir.path())
        ))
        .render();
    let engine = start_engine(dir.path(), &text).await;
    let status = wait_for_status(
        &engine,
        "the trusted feed's verdict and the other's refusal",
        |s| {
            s.endpoints[0].state == Health::Up
                && s.endpoints[1]
                    .last
                    .as_ref()
                    .is_some_and(|l| l.reason.contains("TLS"))
        },
    )
    .await;
    let refused = status.endpoints[1].last.as_ref().unwrap();
    assert!(
        refused.reason.contains("UnknownIssuer"),
        "{}",
        refused.reason
    );
    assert_eq!(status.endpoints[1].state, Health::Unknown, "no verdict");
}
