//! A span processor that never blocks the code ending a span: ended spans go into a
//! bounded crossbeam channel, and a full channel drops the span and counts it. One thread,
//! with its own current-thread tokio runtime (the OTLP exporters need one), drains the
//! channel in batches into the exporter.
//!
//! The SDK's batch processor was not used because it does not say how many spans it
//! dropped, and its gRPC exporter needs a runtime the engine's actix arbiters do not lend.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender, TrySendError};
use ho_engine::metrics::{ExportLabel, Metrics};
use opentelemetry::Context;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{Span, SpanData, SpanExporter, SpanProcessor};
use opentelemetry_sdk::Resource;

/// Spans per export request.
const BATCH: usize = 512;
/// Longest a span waits in the queue when traffic is light.
const LINGER: Duration = Duration::from_secs(1);

enum Message {
    Span(Box<SpanData>),
    /// Export everything queued before this, then acknowledge.
    Flush(std::sync::mpsc::Sender<OTelSdkResult>),
}

/// Hands ended spans to the exporter thread.
pub struct QueueProcessor {
    queue: Sender<Message>,
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for QueueProcessor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueProcessor")
            .field("queued", &self.queue.len())
            .finish()
    }
}

impl std::fmt::Debug for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Message::Span(_) => "Span",
            Message::Flush(_) => "Flush",
        })
    }
}

impl QueueProcessor {
    /// Starts the exporter thread; `build` makes the exporter inside its runtime. Fails if
    /// the exporter cannot be built (a malformed endpoint), never because the collector is
    /// unreachable: exports to it fail later and are counted.
    pub fn start<E, F>(
        capacity: usize,
        resource: Resource,
        metrics: Arc<Metrics>,
        build: F,
    ) -> anyhow::Result<QueueProcessor>
    where
        E: SpanExporter + 'static,
        F: FnOnce() -> anyhow::Result<E> + Send + 'static,
    {
        let (queue, rx) = bounded(capacity);
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread_metrics = metrics.clone();
        std::thread::Builder::new()
            .name("otlp-export".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(anyhow::anyhow!("runtime: {e}")));
                        return;
                    }
                };
                let exporter = runtime.block_on(async { build() });
                let mut exporter = match exporter {
                    Ok(mut exporter) => {
                        exporter.set_resource(&resource);
                        let _ = ready_tx.send(Ok(()));
                        exporter
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                runtime.block_on(drain(&rx, &exporter, &thread_metrics));
                let _ = exporter.shutdown();
            })?;
        ready_rx
            .recv()
            .map_err(|_| anyhow::anyhow!("the exporter thread ended during start-up"))??;
        Ok(QueueProcessor { queue, metrics })
    }

    fn flush(&self, timeout: Duration) -> OTelSdkResult {
        let (ack, done) = std::sync::mpsc::channel();
        self.queue
            .send_timeout(Message::Flush(ack), timeout)
            .map_err(|_| OTelSdkError::Timeout(timeout))?;
        done.recv_timeout(timeout)
            .map_err(|_| OTelSdkError::Timeout(timeout))?
    }
}

/// Exports batches until every sender is gone.
async fn drain<E: SpanExporter>(rx: &Receiver<Message>, exporter: &E, metrics: &Metrics) {
    let mut batch: Vec<SpanData> = Vec::with_capacity(BATCH);
    let mut oldest: Option<Instant> = None;
    loop {
        let wait = oldest.map_or(LINGER, |t| LINGER.saturating_sub(t.elapsed()));
        match rx.recv_timeout(wait) {
            Ok(Message::Span(span)) => {
                batch.push(*span);
                oldest.get_or_insert_with(Instant::now);
                if batch.len() >= BATCH {
                    // Failures are counted in the metrics; the next batch tries again.
                    let _ = export(exporter, &mut batch, metrics).await;
                    oldest = None;
                }
            }
            Ok(Message::Flush(ack)) => {
                let result = export(exporter, &mut batch, metrics).await;
                oldest = None;
                let _ = ack.send(result);
            }
            Err(RecvTimeoutError::Timeout) => {
                let _ = export(exporter, &mut batch, metrics).await;
                oldest = None;
            }
            Err(RecvTimeoutError::Disconnected) => {
                let _ = export(exporter, &mut batch, metrics).await;
                return;
            }
        }
    }
}

async fn export<E: SpanExporter>(
    exporter: &E,
    batch: &mut Vec<SpanData>,
    metrics: &Metrics,
) -> OTelSdkResult {
    if batch.is_empty() {
        return Ok(());
    }
    let spans = std::mem::take(batch);
    let count = spans.len() as u64;
    let result = exporter.export(spans).await;
    let label = if result.is_ok() { "ok" } else { "error" };
    metrics
        .spans_exported
        .get_or_create(&ExportLabel { result: label })
        .inc_by(count);
    if let Err(e) = &result {
        tracing::debug!("telemetry: exporting {count} spans failed: {e}");
    }
    result
}

impl SpanProcessor for QueueProcessor {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
            self.queue.try_send(Message::Span(Box::new(span)))
        {
            self.metrics.spans_dropped.inc();
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.flush(Duration::from_secs(5))
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.flush(timeout)
    }
}
