//! `/metrics` streamed by the real API server over loopback: byte for byte the text
//! `Metrics::encode` and `Metrics::encode_classic` give for the same registry, to a reader
//! that takes it at once, to one that reads slowly through a small receive buffer, and to
//! several at once. The registry holds thousands of `node_status` series (a plan adopted
//! here) and a family of generated label values; the engine probes once a minute, and a
//! comparison counts only when the whole text was the same before and after the answer.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::harness::*;

/// Endpoints of the adopted plan: a text of about 1 MiB, many times what an answer holds.
const ENDPOINTS: usize = 12_000;

/// Series with label values of every kind the text format escapes.
#[derive(Clone, Default)]
struct Generated {
    seen: Family<Vec<(String, String)>, Counter>,
}

impl ho_engine::metrics::MetricSet for Generated {
    fn register(&self, registry: &mut Registry) {
        registry.register(
            "generated_seen",
            "Generated \"series\"\\",
            self.seen.clone(),
        );
    }
}

/// An engine probing one gateway once a minute, its API served; its `node_status` lists
/// [`ENDPOINTS`] endpoints and [`Generated`] 500 series.
async fn engine_with_many_series(
    dir: &std::path::Path,
    gw: &ho_testkit::Gateway,
) -> (ho_engine::Engine, SocketAddr) {
    let check = Check {
        interval: "60s",
        fast_interval: "60s",
        ..Check::FAST
    };
    let tenant = format!(
        "[[tenants]]\nname = \"t\"\ndomains = [\"t.example\"]\nsinks = [\"local\"]\n\n{}",
        hosts_sink(dir)
    );
    let engine = start_engine(dir, &config(&check, &[gw], &tenant)).await;
    let mut plan = (*engine.plan()).clone();
    let template = plan.endpoints[0].clone();
    plan.endpoints = (0..ENDPOINTS)
        .map(|i| {
            let mut endpoint = template.clone();
            endpoint.name = format!("ep-{i}").into();
            endpoint.address = match i % 4 {
                0 => std::net::Ipv6Addr::from(0x2001_0db8_u128 << 96 | i as u128).into(),
                _ => std::net::Ipv4Addr::from(0x0a00_0000 + i as u32).into(),
            };
            endpoint
        })
        .collect();
    let metrics = engine.metrics();
    metrics
        .node_status
        .adopt(Arc::new(plan), (0..ENDPOINTS).map(|i| i % 3 == 0));
    let generated = metrics.set::<Generated>();
    let mut rng = fastrand::Rng::with_seed(7);
    let alphabet = ['a', 'Z', '"', '\\', '\n', ' ', '=', '{', '}', ',', 'é', '#'];
    for i in 0..500 {
        let value: String = (0..rng.usize(0..12))
            .map(|_| alphabet[rng.usize(..alphabet.len())])
            .collect();
        let labels = vec![("k".to_owned(), value), ("i".to_owned(), i.to_string())];
        generated
            .seen
            .get_or_create(&labels)
            .inc_by(rng.u64(..1000));
    }
    let addr = serve_api(&engine, None, None).await;
    (engine, addr)
}

/// `GET /metrics` over HTTP/1.1 (with `accept` if given), read `step` bytes at a time with
/// `pause` between reads through a receive buffer of `rcvbuf` bytes: the head, and the body
/// de-chunked (a panic if the last chunk never came: a cut answer).
async fn scrape(
    addr: SocketAddr,
    accept: Option<&str>,
    rcvbuf: usize,
    step: usize,
    pause: Duration,
) -> (String, Vec<u8>) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(rcvbuf as u32).unwrap();
    let mut stream = socket.connect(addr).await.unwrap();
    let accept = accept.map_or(String::new(), |a| format!("Accept: {a}\r\n"));
    let request =
        format!("GET /metrics HTTP/1.1\r\nHost: test\r\nConnection: close\r\n{accept}\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    let mut buf = vec![0; step];
    loop {
        let n = stream.read(&mut buf).await.unwrap();
        if n == 0 {
            break;
        }
        raw.extend_from_slice(&buf[..n]);
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
    }
    let at = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head");
    let head = String::from_utf8(raw[..at].to_vec()).unwrap();
    (head, dechunked(&raw[at + 4..]))
}

/// A chunked body's data (RFC 9112 section 7.1), its last chunk required.
fn dechunked(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line_end = raw
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("a chunk size line");
        let size = std::str::from_utf8(&raw[..line_end]).unwrap();
        let size = usize::from_str_radix(size.split(';').next().unwrap(), 16).unwrap();
        raw = &raw[line_end + 2..];
        if size == 0 {
            assert_eq!(raw, b"\r\n", "the body ends after its last chunk");
            return out;
        }
        out.extend_from_slice(&raw[..size]);
        assert_eq!(&raw[size..size + 2], b"\r\n");
        raw = &raw[size + 2..];
    }
}

/// Runs `answers` (scrapes) until the text `whole` gives is the same before and after
/// them, then checks each against it: the head says chunked, no length, `content_type`.
async fn compare<F>(whole: impl Fn() -> String, content_type: &str, answers: impl Fn() -> F)
where
    F: std::future::Future<Output = Vec<(String, Vec<u8>)>>,
{
    for _ in 0..20 {
        let before = whole();
        let got = answers().await;
        if whole() != before {
            continue;
        }
        for (head, body) in got {
            let head = head.to_ascii_lowercase();
            assert!(head.starts_with("http/1.1 200"), "{head}");
            assert!(head.contains("transfer-encoding: chunked"), "{head}");
            assert!(!head.contains("content-length"), "{head}");
            assert!(
                head.contains(&format!("content-type: {content_type}")),
                "{head}"
            );
            assert!(
                body == before.as_bytes(),
                "{} bytes, not the {} of the text",
                body.len(),
                before.len()
            );
        }
        return;
    }
    panic!("the registry never stayed the same over an answer");
}

#[actix_rt::test]
async fn metrics_are_streamed_byte_for_byte_in_either_format() {
    let dir = tempfile::tempdir().unwrap();
    let gw = gateways(1).remove(0);
    let (engine, addr) = engine_with_many_series(dir.path(), &gw).await;
    let metrics = engine.metrics().clone();
    assert!(metrics.encode_classic().len() > 800_000);
    compare(
        || metrics.encode_classic(),
        "text/plain; version=0.0.4",
        || async { vec![scrape(addr, None, 1 << 20, 64 * 1024, Duration::ZERO).await] },
    )
    .await;
    let accept = Some("application/openmetrics-text;version=1.0.0,text/plain;q=0.5");
    compare(
        || metrics.encode(),
        "application/openmetrics-text; version=1.0.0",
        || async { vec![scrape(addr, accept, 1 << 20, 64 * 1024, Duration::ZERO).await] },
    )
    .await;
}

#[actix_rt::test]
async fn a_slow_reader_and_readers_beside_it_get_the_whole_text() {
    let dir = tempfile::tempdir().unwrap();
    let gw = gateways(1).remove(0);
    let (engine, addr) = engine_with_many_series(dir.path(), &gw).await;
    let metrics = engine.metrics().clone();
    compare(
        || metrics.encode_classic(),
        "text/plain; version=0.0.4",
        || async {
            // 4 KiB a read, a millisecond apart, through a 4 KiB receive buffer: the server
            // waits on this reader for most of the answer, while two others read at once.
            let slow = scrape(addr, None, 4096, 4096, Duration::from_millis(1));
            let fast = || scrape(addr, None, 1 << 20, 64 * 1024, Duration::ZERO);
            let (a, b, c) = tokio::join!(slow, fast(), fast());
            vec![a, b, c]
        },
    )
    .await;
}
