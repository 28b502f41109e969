//! The operator HTTP API: `/healthz`, `/readyz`, `/status`, `/metrics`.
//!
//! Served with hyper on the engine's main arbiter; every answer is computed from the
//! actors' own state by message, so the API never reaches into an actor.

use std::convert::Infallible;
use std::sync::{Arc, Mutex, RwLock};

use actix::prelude::*;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::CONTENT_TYPE;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tracing::{debug, warn};

use crate::leadership::Leadership;
use crate::metrics::Metrics;
use crate::sink_actor::{GetSinkStatus, SinkActor};
use crate::status::{Status, Summary};
use crate::token_bucket::TokenBucket;
use crate::tracker::{GetStatus, HealthTracker, IsReady};

/// What the API reads from; made by [`crate::Engine::api_state`].
#[derive(Clone)]
pub struct ApiState {
    /// The tracker.
    pub(crate) tracker: Addr<HealthTracker>,
    /// Every sink actor; replaced when a config reload rebuilds sinks.
    pub(crate) sinks: Arc<RwLock<Vec<Addr<SinkActor>>>>,
    /// The metrics registry.
    pub(crate) metrics: Arc<Metrics>,
    /// Bearer token required for `/status` and `/metrics`, if set.
    pub(crate) token: Option<Arc<str>>,
    /// Rate limit of `/status` and `/metrics` (`api.max_requests_per_second`).
    pub(crate) rate: Arc<Mutex<TokenBucket>>,
    /// This replica's role in leader election.
    pub(crate) leadership: Leadership,
}

/// Largest request head accepted (the API takes only GETs without bodies).
const MAX_REQUEST_BYTES: usize = 16 * 1024;

/// Compares in time independent of where the inputs differ, so the token cannot be
/// guessed byte by byte from answer times.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn authorized(req: &Request<Incoming>, token: Option<&str>) -> bool {
    let Some(token) = token else {
        return true;
    };
    req.headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|given| same_secret(given.as_bytes(), token.as_bytes()))
}

/// Serves the API on `listener` until the future is dropped.
pub async fn serve(listener: TcpListener, state: ApiState) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(conn) => conn,
            Err(e) => {
                warn!("api accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let state = state.clone();
        actix::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(route(req, &state).await) }
            });
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .max_buf_size(MAX_REQUEST_BYTES)
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                debug!(%peer, "api connection ended: {e}");
            }
        });
    }
}

fn text(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    response
}

async fn route(req: Request<Incoming>, state: &ApiState) -> Response<Full<Bytes>> {
    const PLAIN: &str = "text/plain; charset=utf-8";
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, PLAIN, "only GET\n");
    }
    let path = req.uri().path();
    // Only the costly answers are limited: liveness and readiness probes must never see a
    // 429 caused by someone else's flood (the kubelet would restart a healthy pod).
    if matches!(path, "/status" | "/metrics") {
        let taken = state
            .rate
            .lock()
            .expect("not poisoned")
            .try_take(tokio::time::Instant::now());
        if let Err(wait) = taken {
            state.metrics.api_rate_limited.inc();
            let mut r = text(
                StatusCode::TOO_MANY_REQUESTS,
                PLAIN,
                "rate limited (api.max_requests_per_second)\n",
            );
            r.headers_mut().insert(
                hyper::header::RETRY_AFTER,
                hyper::header::HeaderValue::from(wait.as_secs().max(1)),
            );
            return r;
        }
    }
    if matches!(path, "/status" | "/metrics") && !authorized(&req, state.token.as_deref()) {
        let mut r = text(StatusCode::UNAUTHORIZED, PLAIN, "bearer token required\n");
        r.headers_mut().insert(
            hyper::header::WWW_AUTHENTICATE,
            hyper::header::HeaderValue::from_static("Bearer"),
        );
        return r;
    }
    match path {
        // `/health` is the path the seed spec's manifests probe (OpenOva): the same answer.
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
        "/metrics" => text(
            StatusCode::OK,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            state.metrics.encode(),
        ),
        _ => text(
            StatusCode::NOT_FOUND,
            PLAIN,
            "not found: try /healthz /health /readyz /status /metrics\n",
        ),
    }
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
    })
}
