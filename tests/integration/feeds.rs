//! External health feeds (`check = { kind = "feed", url }`): another monitor's JSON map of
//! address -> health, served by a real HTTP server, decides three gateways (that nothing
//! probes); a change in the feed is followed; a feed that stops answering leaves every
//! endpoint at its last verdict, never "everything down"; one fetch serves every endpoint.

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
