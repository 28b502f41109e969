//! The streamed answer against the whole text of the same registry, read at once, by a
//! reader that stalls, and by one that trickles; the limits are short here so that
//! abandoning shows in milliseconds.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::BodyExt;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;
use tokio::time::Instant;

use super::{ChunkLimits, MetricsBody, CHUNK};
use crate::metrics::{Exposition, MetricSet, Metrics};

/// Metrics whose `node_status` lists `n` endpoints (`ep-0` at 10.0.0.0, ...), every third
/// one down.
fn metrics_of(n: usize) -> Arc<Metrics> {
    let mut plan = (*crate::tracker::tests::plan(1, "", "")).clone();
    let template = plan.endpoints[0].clone();
    plan.endpoints = (0..n)
        .map(|i| {
            let mut endpoint = template.clone();
            endpoint.name = format!("ep-{i}").into();
            endpoint.address = std::net::Ipv4Addr::from(0x0a00_0000 + i as u32).into();
            endpoint
        })
        .collect();
    let metrics = Arc::new(Metrics::new());
    metrics
        .node_status
        .adopt(Arc::new(plan), (0..n).map(|i| i % 3 != 0));
    metrics
}

/// A set registered after the answer started: it takes the registry's lock to write.
#[derive(Clone, Default)]
struct Late {
    seen: Counter,
}

impl MetricSet for Late {
    fn register(&self, registry: &mut Registry) {
        registry.register("late_seen", "Seen late", self.seen.clone());
    }
}

/// The body's frames until it ends: the text, and whether it ended with an error.
async fn read_all(mut body: MetricsBody, pause: Duration) -> (Vec<u8>, bool) {
    let mut text = Vec::new();
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => {
                let data = frame.into_data().expect("only data frames");
                assert!(data.len() <= CHUNK, "a chunk of {} bytes", data.len());
                text.extend_from_slice(&data);
            }
            Err(_) => return (text, true),
        }
        tokio::time::sleep(pause).await;
    }
    (text, false)
}

#[tokio::test]
async fn a_reader_gets_the_whole_text_in_chunks_in_either_format() {
    let metrics = metrics_of(3000);
    for (format, whole) in [
        (Exposition::Classic, metrics.encode_classic()),
        (Exposition::OpenMetrics, metrics.encode()),
    ] {
        assert!(whole.len() > 6 * CHUNK, "{} bytes", whole.len());
        let body = metrics.stream(format, ChunkLimits::default());
        let (text, cut) = read_all(body, Duration::ZERO).await;
        assert!(!cut, "{format:?}");
        assert!(text == whole.as_bytes(), "{format:?} differs");
    }
}

#[tokio::test]
async fn a_stalled_reader_is_cut_within_the_stall_and_lets_the_registry_go() {
    let metrics = metrics_of(6000);
    let whole = metrics.encode_classic();
    let limits = ChunkLimits {
        stall: Duration::from_millis(50),
        whole: Duration::from_secs(60),
    };
    let mut body = metrics.stream(Exposition::Classic, limits);
    let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
    // The encoder is writing now, the registry read-locked, its queue filling (the text is
    // more than twice what the queue holds) while nothing is read.
    let registering = {
        let metrics = Arc::clone(&metrics);
        tokio::task::spawn_blocking(move || metrics.set::<Late>().seen.inc())
    };
    tokio::time::timeout(Duration::from_secs(5), registering)
        .await
        .expect("the registry was let go")
        .unwrap();
    let (rest, cut) = read_all(body, Duration::ZERO).await;
    assert!(cut, "an abandoned answer ends with an error");
    let text = [&first[..], &rest].concat();
    assert!(text.len() < whole.len());
    assert!(whole.as_bytes().starts_with(&text), "a prefix of the text");
}

#[tokio::test]
async fn a_trickling_reader_is_cut_by_the_whole_limit() {
    let metrics = metrics_of(6000);
    let limits = ChunkLimits {
        stall: Duration::from_secs(60),
        whole: Duration::from_millis(100),
    };
    let body = metrics.stream(Exposition::OpenMetrics, limits);
    let start = Instant::now();
    let (text, cut) = read_all(body, Duration::from_millis(20)).await;
    assert!(cut, "read {} bytes in {:?}", text.len(), start.elapsed());
    assert!(metrics.encode().as_bytes().starts_with(&text));
}

#[tokio::test]
async fn an_adoption_does_not_wait_for_a_stalled_reader_of_node_status() {
    let metrics = metrics_of(6000);
    let limits = ChunkLimits {
        stall: Duration::from_secs(60),
        whole: Duration::from_secs(60),
    };
    let mut body = metrics.stream(Exposition::Classic, limits);
    // The first chunk is the families before `node_status` and its first series: the
    // encoder is inside `node_status` now, its queue filling while nothing is read.
    body.frame().await.unwrap().unwrap();
    let adopting = {
        let metrics = Arc::clone(&metrics);
        tokio::task::spawn_blocking(move || {
            let plan = (*crate::tracker::tests::plan(1, "", "")).clone();
            metrics.node_status.adopt(Arc::new(plan), [true]);
        })
    };
    tokio::time::timeout(Duration::from_secs(5), adopting)
        .await
        .expect("the adoption waited for the reader")
        .unwrap();
}
