//! Traces to an OTLP collector (`[telemetry]`), over http/protobuf or gRPC.
//!
//! The engine creates spans through the global tracer provider (see `ho_engine::trace`);
//! this module installs that provider when `otlp_endpoint` is set. Ended spans go into a
//! bounded queue ([`queue`]): a full queue drops the span and counts it
//! (`health_orchestrator_telemetry_spans_dropped_total`) instead of waiting, so a slow or
//! unreachable collector never slows probing or publishing. One thread with its own small
//! runtime drains the queue into the OTLP exporter in batches.

mod http_client;
mod queue;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use ho_config::{OtlpProtocol, TelemetryConfig};
use ho_engine::metrics::Metrics;
use opentelemetry::KeyValue;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;

use queue::QueueProcessor;

/// The installed tracer provider; [`Telemetry::shutdown`] flushes it.
pub struct Telemetry {
    provider: SdkTracerProvider,
}

/// Installs the global tracer provider when `config.otlp_endpoint` is set.
pub fn init(config: &TelemetryConfig, metrics: &Arc<Metrics>) -> anyhow::Result<Option<Telemetry>> {
    let Some(endpoint) = config.otlp_endpoint.clone() else {
        return Ok(None);
    };
    let resource = Resource::builder()
        .with_service_name(config.service_name.clone())
        .with_attributes(
            config
                .resource_attributes
                .iter()
                .map(|(k, v)| KeyValue::new(k.clone(), v.clone())),
        )
        .build();
    let settings = ExportSettings {
        endpoint,
        protocol: config.otlp_protocol,
        headers: config.headers.clone().into_iter().collect(),
        timeout: config.timeout,
    };
    let processor = QueueProcessor::start(
        config.queue_size,
        resource.clone(),
        metrics.clone(),
        move || settings.exporter(),
    )
    .context("starting the OTLP exporter")?;
    let provider = SdkTracerProvider::builder()
        .with_resource(resource)
        .with_span_processor(processor)
        .build();
    opentelemetry::global::set_tracer_provider(provider.clone());
    Ok(Some(Telemetry { provider }))
}

impl Telemetry {
    /// Exports what is queued, waiting at most `deadline`.
    pub fn shutdown(self, deadline: Duration) {
        if let Err(e) = self.provider.shutdown_with_timeout(deadline) {
            tracing::warn!("telemetry: not every span was exported before the deadline: {e}");
        }
    }
}

/// What the exporter thread needs to build its exporter.
struct ExportSettings {
    endpoint: String,
    protocol: OtlpProtocol,
    headers: HashMap<String, String>,
    timeout: Duration,
}

impl ExportSettings {
    /// Builds the exporter; runs on the exporter thread, inside its runtime.
    fn exporter(&self) -> anyhow::Result<opentelemetry_otlp::SpanExporter> {
        let exporter = match self.protocol {
            OtlpProtocol::HttpProtobuf => opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_http_client(http_client::RustlsClient::new(self.timeout)?)
                .with_endpoint(format!("{}/v1/traces", self.endpoint.trim_end_matches('/')))
                .with_headers(self.headers.clone())
                .with_timeout(self.timeout)
                .build(),
            OtlpProtocol::Grpc => {
                let mut headers = hyper::HeaderMap::new();
                for (k, v) in &self.headers {
                    headers.insert(
                        hyper::header::HeaderName::try_from(k.as_str())
                            .with_context(|| format!("telemetry.headers.{k}"))?,
                        hyper::header::HeaderValue::try_from(v.as_str())
                            .with_context(|| format!("telemetry.headers.{k}"))?,
                    );
                }
                let metadata =
                    opentelemetry_otlp::tonic_types::metadata::MetadataMap::from_headers(headers);
                let mut builder = opentelemetry_otlp::SpanExporter::builder()
                    .with_tonic()
                    .with_endpoint(self.endpoint.clone())
                    .with_metadata(metadata)
                    .with_timeout(self.timeout);
                if self.endpoint.starts_with("https://") {
                    builder = builder.with_tls_config(
                        opentelemetry_otlp::tonic_types::transport::ClientTlsConfig::new()
                            .with_native_roots(),
                    );
                }
                builder.build()
            }
        };
        exporter.with_context(|| format!("OTLP exporter for {}", self.endpoint))
    }
}
