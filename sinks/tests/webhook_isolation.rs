//! Several webhook sinks, each writing its tenants in parallel to a loopback receiver (real
//! hyper HTTP/1.1 servers; several sinks may post to one), one receiver accepting
//! connections and never answering: the others' deliveries all arrive while the hanging one
//! is still waiting, and what stays open to a receiver afterwards is bounded by the shared
//! pool's idle cap, not by the tenants or the sinks posting to it.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use ho_config::RoutingPolicy;
use ho_engine::sink::Sink;
use ho_engine::snapshot::TenantSnapshot;
use ho_sinks::http::MAX_IDLE_PER_HOST;
use ho_sinks::{WebhookConfig, WebhookSink};
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

/// What a receiver saw: the `Idempotency-Key` of every delivery (`<tenant>-<seq>`) and
/// how many of its connections are open now.
#[derive(Default)]
struct Seen {
    keys: Mutex<BTreeSet<String>>,
    open: AtomicUsize,
}

/// A keep-alive HTTP/1.1 receiver answering 200 to everything.
async fn answering() -> (SocketAddr, Arc<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Seen::default());
    let shared = seen.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let seen = shared.clone();
            seen.open.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let record = seen.clone();
                let service =
                    hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                        let seen = record.clone();
                        async move {
                            let key = req.headers()["idempotency-key"]
                                .to_str()
                                .unwrap()
                                .to_owned();
                            req.into_body().collect().await?;
                            seen.keys.lock().unwrap().insert(key);
                            Ok::<_, hyper::Error>(Response::new(Full::new(Bytes::new())))
                        }
                    });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
                seen.open.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
    (addr, seen)
}

/// A receiver that accepts connections and never reads or answers (a hung provider).
async fn hanging() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    addr
}

fn sink(addr: SocketAddr, secret: &std::path::Path, timeout: Duration) -> Arc<WebhookSink> {
    let config = WebhookConfig {
        url: format!("http://{addr}/dns"),
        secret_file: Some(secret.to_owned()),
        secret_env: None,
        headers: Default::default(),
        insecure: false,
        ca_file: None,
        timeout,
    };
    Arc::new(WebhookSink::new(&config).unwrap())
}

fn snapshot(tenant: &str, seq: u64) -> Arc<TenantSnapshot> {
    let mut s = TenantSnapshot::healthy(tenant, &["a.example"], RoutingPolicy::All, vec![]);
    s.seq = seq;
    Arc::new(s)
}

/// Polls `done` every 10 ms until it holds or `within` passes.
async fn eventually(what: &str, within: Duration, done: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + within;
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_hanging_receiver_delays_no_other_sink_and_idle_connections_stay_capped() {
    for seed in [3_u64, 17, 40, 41, 99] {
        let mut rng = fastrand::Rng::with_seed(seed);
        let sinks = rng.usize(3..=8);
        let hung = rng.usize(0..sinks);
        let answering_receivers = rng.usize(1..=3);
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "s3cret\n").unwrap();

        // The script: each sink's tenants (more than the idle cap, so a burst opens more
        // connections than are kept) and the seq each publishes.
        let script: Vec<Vec<(String, u64)>> = (0..sinks)
            .map(|s| {
                (0..rng.usize(MAX_IDLE_PER_HOST + 2..=MAX_IDLE_PER_HOST + 12))
                    .map(|t| (format!("t{s}-{t}"), rng.u64(1..1_000_000)))
                    .collect()
            })
            .collect();
        // Which answering receiver each other sink posts to.
        let target: Vec<usize> = (0..sinks)
            .map(|_| rng.usize(0..answering_receivers))
            .collect();
        let mut receivers = Vec::new();
        for _ in 0..answering_receivers {
            receivers.push(answering().await);
        }
        let writers: Vec<Arc<WebhookSink>> = {
            let mut writers = Vec::new();
            for s in 0..sinks {
                writers.push(if s == hung {
                    // Longer than the whole test waits for the others.
                    sink(hanging().await, &secret, Duration::from_secs(60))
                } else {
                    sink(receivers[target[s]].0, &secret, Duration::from_secs(5))
                });
            }
            writers
        };

        // The hung sink's writes start first, so the others run while it waits.
        let mut hung_writes = JoinSet::new();
        for (tenant, seq) in &script[hung] {
            hung_writes.spawn(writers[hung].apply(snapshot(tenant, *seq)));
        }
        let mut writes = JoinSet::new();
        for (s, tenants) in script.iter().enumerate().filter(|(s, _)| *s != hung) {
            for (tenant, seq) in tenants {
                let write = writers[s].apply(snapshot(tenant, *seq));
                let what = format!("seed {seed}: sink {s} {tenant}");
                writes.spawn(async move { (what, write.await) });
            }
        }
        // Each write ends within its sink's 5 s timeout, so none of these can be late by
        // waiting behind the hung receiver.
        while let Some(done) = writes.join_next().await {
            let (what, result) = done.unwrap();
            assert!(result.is_ok(), "{what}: {:?}", result.err());
        }
        assert!(hung_writes.try_join_next().is_none(), "seed {seed}: hung");

        for (r, (_, seen)) in receivers.iter().enumerate() {
            let want: BTreeSet<String> = (0..sinks)
                .filter(|s| *s != hung && target[*s] == r)
                .flat_map(|s| &script[s])
                .map(|(tenant, seq)| format!("{tenant}-{seq}"))
                .collect();
            assert_eq!(
                *seen.keys.lock().unwrap(),
                want,
                "seed {seed}: receiver {r}"
            );
            eventually(
                &format!("seed {seed}: at most the idle cap kept open to receiver {r}"),
                Duration::from_secs(5),
                || seen.open.load(Ordering::SeqCst) <= MAX_IDLE_PER_HOST,
            )
            .await;
        }
        hung_writes.abort_all();
    }
}
