//! OpenTelemetry spans for what an operator follows in a trace: an endpoint's transition,
//! the tenant publish it causes, and each sink's write of that publish, linked so one trace
//! shows fault -> transition -> every back end's write. Probes are traced only as a sample.
//!
//! Spans go through the global tracer provider, which the binary installs when
//! `[telemetry] otlp_endpoint` is set; without one every call here is a no-op returning an
//! invalid [`SpanContext`]. Spans are created only for events (transitions, publishes,
//! writes) and sampled probes, never per probe otherwise.

use std::time::SystemTime;

use opentelemetry::trace::{Link, SpanKind, Status, TraceContextExt, Tracer, TracerProvider};
use opentelemetry::{Context, KeyValue};

/// The link between spans, carried by changes and snapshots; `SpanContext::NONE` with
/// tracing off.
pub use opentelemetry::trace::SpanContext;

/// Instrumentation scope of every span.
const SCOPE: &str = "health-orchestrator";

fn tracer() -> opentelemetry::global::BoxedTracer {
    opentelemetry::global::tracer_provider().tracer(SCOPE)
}

/// A parent context for `parent`, or none when it is invalid (telemetry off).
fn context_of(parent: Option<&SpanContext>) -> Context {
    match parent {
        Some(sc) if sc.is_valid() => Context::new().with_remote_span_context(sc.clone()),
        _ => Context::new(),
    }
}

/// An endpoint's verdict changed: the root of a failover trace.
pub fn transition(attributes: Vec<KeyValue>) -> SpanContext {
    let tracer = tracer();
    let span = tracer
        .span_builder("endpoint.transition")
        .with_kind(SpanKind::Internal)
        .with_attributes(attributes)
        .start_with_context(&tracer, &Context::new());
    let cx = Context::new().with_span(span);
    let sc = cx.span().span_context().clone();
    cx.span().end();
    sc
}

/// This replica became or stopped being the writer of shared back ends (leader election):
/// a span of its own, so a trace search for `leadership.change` lines up takeovers with
/// the failovers around them.
pub fn leadership(attributes: Vec<KeyValue>) {
    let tracer = tracer();
    let span = tracer
        .span_builder("leadership.change")
        .with_kind(SpanKind::Internal)
        .with_attributes(attributes)
        .start_with_context(&tracer, &Context::new());
    Context::new().with_span(span).span().end();
}

/// A tenant's record set changed. The first transition behind it is the parent; the
/// others (a burst folded into one publish) are links.
pub fn publish(causes: &[SpanContext], attributes: Vec<KeyValue>) -> SpanContext {
    let mut valid = causes.iter().filter(|c| c.is_valid());
    let parent = valid.next();
    // A mass event folds thousands of transitions into one publish; a handful of links
    // is enough to follow it.
    let links: Vec<Link> = valid
        .take(32)
        .map(|c| Link::with_context(c.clone()))
        .collect();
    let tracer = tracer();
    let span = tracer
        .span_builder("tenant.publish")
        .with_kind(SpanKind::Internal)
        .with_attributes(attributes)
        .with_links(links)
        .start_with_context(&tracer, &context_of(parent));
    let cx = Context::new().with_span(span);
    let sc = cx.span().span_context().clone();
    cx.span().end();
    sc
}

/// One sink write of a publish, from `started` to now.
pub fn sink_write(
    publish: &SpanContext,
    started: SystemTime,
    error: Option<&str>,
    attributes: Vec<KeyValue>,
) {
    if !publish.is_valid() {
        return;
    }
    let tracer = tracer();
    let span = tracer
        .span_builder("sink.write")
        .with_kind(SpanKind::Client)
        .with_start_time(started)
        .with_attributes(attributes)
        .start_with_context(&tracer, &context_of(Some(publish)));
    let cx = Context::new().with_span(span);
    if let Some(message) = error {
        cx.span().set_status(Status::error(message.to_string()));
    }
    cx.span().end();
}

/// One probe, from `started` to now; call only for the sampled ones.
pub fn probe(started: SystemTime, failed: bool, attributes: Vec<KeyValue>) {
    let tracer = tracer();
    let span = tracer
        .span_builder("probe")
        .with_kind(SpanKind::Client)
        .with_start_time(started)
        .with_attributes(attributes)
        .start_with_context(&tracer, &Context::new());
    let cx = Context::new().with_span(span);
    if failed {
        cx.span().set_status(Status::error("probe failed"));
    }
    cx.span().end();
}
