//! The read-only answers: the status page, liveness and readiness, `/status` and
//! `/metrics`.

use bytes::Bytes;
use http_body_util::{Either, Full};
use hyper::{Response, StatusCode};

use super::{text, ApiState, Body, PLAIN};
use crate::delivery::GetSinkStatus;
use crate::metrics::{ChunkLimits, Exposition};
use crate::status::{Status, Summary};
use crate::tracker::{GetStatus, IsReady};

/// The status page (`GET /`): one file, no external assets, reads `/status` and `/events`
/// with the token the user gives it.
const PAGE: &str = include_str!("../ui/index.html");

/// The answer to a permitted `GET` of `path`; `/metrics` in OpenMetrics when the scraper
/// asked for it (`openmetrics`), else in the classic text format.
pub(super) async fn read_only(path: &str, openmetrics: bool, state: &ApiState) -> Response<Body> {
    if path == "/metrics" {
        let format = match openmetrics {
            true => Exposition::OpenMetrics,
            false => Exposition::Classic,
        };
        return metrics(format, state);
    }
    whole(path, state).await.map(Either::Left)
}

/// `/metrics` in `format`, streamed as it is encoded (chunked, without a length): the
/// answer holds a few chunks, not the text (see [`crate::metrics::Metrics::stream`]).
fn metrics(format: Exposition, state: &ApiState) -> Response<Body> {
    let body = state.metrics.stream(format, ChunkLimits::default());
    let mut response = Response::new(Either::Right(Either::Right(body)));
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(format.content_type()),
    );
    response
}

/// Every read-only answer but `/metrics`, whole.
async fn whole(path: &str, state: &ApiState) -> Response<Full<Bytes>> {
    match path {
        "/" => page(),
        // `/health` is the path the OpenOva spec's manifests probe: the same answer.
        "/healthz" | "/health" => text(StatusCode::OK, PLAIN, "ok\n"),
        "/readyz" => match state.tracker.send(IsReady).await {
            Ok(true) => text(StatusCode::OK, PLAIN, "ready\n"),
            Ok(false) => text(
                StatusCode::SERVICE_UNAVAILABLE,
                PLAIN,
                "waiting for first verdicts\n",
            ),
            Err(_) => text(StatusCode::SERVICE_UNAVAILABLE, PLAIN, "engine stopped\n"),
        },
        "/status" => match status(state).await {
            Some(s) => text(
                StatusCode::OK,
                "application/json",
                serde_json::to_vec_pretty(&s).expect("status serializes"),
            ),
            None => text(StatusCode::SERVICE_UNAVAILABLE, PLAIN, "engine stopped\n"),
        },
        _ => text(
            StatusCode::NOT_FOUND,
            PLAIN,
            "not found: try / /healthz /health /readyz /status /metrics /events /v1/availability /badge/NAME/30d.svg\n",
        ),
    }
}

/// The status page: self-contained, so it allows no other origin and no framing.
pub(super) fn page() -> Response<Full<Bytes>> {
    let mut r = text(StatusCode::OK, "text/html; charset=utf-8", PAGE);
    r.headers_mut().insert(
        hyper::header::CONTENT_SECURITY_POLICY,
        hyper::header::HeaderValue::from_static(
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'",
        ),
    );
    r
}

/// The whole `/status` document, asked of every actor.
pub(crate) async fn status(state: &ApiState) -> Option<Status> {
    let tracker = state.tracker.send(GetStatus).await.ok()?;
    let actors = state.sinks.read().expect("not poisoned").clone();
    let mut sinks = Vec::with_capacity(actors.len());
    for sink in &actors {
        sinks.push(sink.send(GetSinkStatus).await.ok()?);
    }
    Some(Status {
        summary: Summary::of(&tracker),
        tracker,
        sinks,
        leadership: state.leadership.status(),
        operator_actions: state.admin_token.is_some(),
        cluster: state.cluster.clone(),
        hosts: state.hosts.status(),
        canaries: state.answers.canaries.status(),
        canaries_off: state.answers.canaries.off(),
        ledger: state.answers.ledger.status(),
        ring: state
            .ring
            .as_ref()
            .map(|r| r.status.lock().expect("not poisoned").clone()),
    })
}
