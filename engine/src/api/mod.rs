//! The operator HTTP API: `/healthz`, `/readyz`, `/status`, `/metrics`, `/events`
//! (Server-Sent Events), the operator actions `POST /v1/endpoints/{name}/drain`, `/undrain`,
//! `/force-up`, `/force-down` and `/release`, and the heartbeats pushing endpoints send (`POST /v1/heartbeat/{name}`).
//!
//! Served with hyper on the engine's main arbiter; every answer is computed from the
//! actors' own state by message, so the API never reaches into an actor. One file per
//! concern: who may ask ([`auth`]), the read-only answers ([`read_only`]), the event stream
//! ([`events`]), operator actions ([`operator`]) and pushed heartbeats ([`heartbeat`]).

mod auth;
mod availability;
mod events;
mod heartbeat;
mod operator;
mod read_only;

pub use events::EventStream;
pub(crate) use read_only::status;

use std::convert::Infallible;
use std::sync::{Arc, Mutex, RwLock};

use actix::prelude::*;
use bytes::Bytes;
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper::header::CONTENT_TYPE;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tracing::{debug, warn};

use crate::delivery::SinkActor;
use crate::events::Events;
use crate::leadership::Leadership;
use crate::metrics::{Metrics, MetricsBody};
use crate::probe::heartbeat::Heartbeats;
use crate::status::ClusterStatus;
use crate::token_bucket::TokenBucket;
use crate::tracker::{HealthTracker, OperatorAction};

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
    /// Bearer token of operator actions; `None`: the API is read-only.
    pub(crate) admin_token: Option<Arc<str>>,
    /// Bearer token of heartbeats (`api.heartbeat_token_file`), for endpoints without
    /// their own.
    pub(crate) heartbeat_token: Option<Arc<str>>,
    /// Where heartbeats are recorded.
    pub(crate) heartbeats: Heartbeats,
    /// What `/events` streams.
    pub(crate) events: Events,
    /// `/events` connections open at once, at most [`MAX_EVENT_LISTENERS`].
    pub(crate) event_listeners: Arc<tokio::sync::Semaphore>,
    /// This instance's cluster id, once known.
    pub(crate) cluster: Option<ClusterStatus>,
    /// The endpoints' host names.
    pub(crate) hosts: crate::hosts::Hosts,
    /// The answer canary's findings and the availability ledger.
    pub(crate) answers: crate::ledger::Answers,
    /// `[ring]`: the members sharing the probing.
    pub(crate) ring: Option<crate::ring::run::RingHandle>,
}

/// The bearer tokens the API asks; `None` each: that part is open (`read`), read-only
/// (`admin`) or takes heartbeats only from endpoints with their own token (`heartbeat`).
#[derive(Clone, Default)]
pub struct ApiTokens {
    /// `/status`, `/metrics`, `/events` (`api.token_file`).
    pub read: Option<Arc<str>>,
    /// Operator actions (`api.admin_token_file`).
    pub admin: Option<Arc<str>>,
    /// Heartbeats (`api.heartbeat_token_file`).
    pub heartbeat: Option<Arc<str>>,
}

/// `/events` connections served at once; more get 503, so open streams cannot pile up.
pub const MAX_EVENT_LISTENERS: usize = 16;

/// An answer: a whole body, an event stream or the streamed `/metrics`.
pub(super) type Body = Either<Full<Bytes>, Either<EventStream, MetricsBody>>;

/// Largest request head accepted (the API takes only GETs without bodies).
const MAX_REQUEST_BYTES: usize = 16 * 1024;

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
                async move { Ok::<_, Infallible>(events::route(req, peer, &state).await) }
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

pub(super) fn text(
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

pub(super) const PLAIN: &str = "text/plain; charset=utf-8";

/// The answer to an operator action (`POST /v1/endpoints/NAME/VERB`,
/// `POST /v1/brake/release`); `None` for any other path.
async fn operator_answer(
    req: &Request<Incoming>,
    peer: std::net::SocketAddr,
    state: &ApiState,
) -> Option<Response<Full<Bytes>>> {
    let path = req.uri().path();
    let action = path
        .strip_prefix("/v1/endpoints/")
        .and_then(|rest| rest.rsplit_once('/'))
        .filter(|(name, _)| !name.is_empty())
        .and_then(|(name, verb)| Some((name, OperatorAction::parse(verb)?)));
    if action.is_none() && path != "/v1/brake/release" {
        return None;
    }
    if req.method() != Method::POST {
        return Some(text(StatusCode::METHOD_NOT_ALLOWED, PLAIN, "only POST\n"));
    }
    if let Some(limited) = auth::rate_limited(state) {
        return Some(limited);
    }
    let Some((name, action)) = action else {
        return Some(operator::release_brake(req, peer, state).await);
    };
    Some(match operator::selection(name, req.uri().query()) {
        Ok(endpoints) => operator::operator_action(req, peer, state, endpoints, action).await,
        Err(message) => text(StatusCode::BAD_REQUEST, PLAIN, message),
    })
}

/// Every answer but `/events`.
pub(super) async fn answer(
    req: Request<Incoming>,
    peer: std::net::SocketAddr,
    state: &ApiState,
) -> Response<Body> {
    let path = req.uri().path();
    if let Some(name) = path.strip_prefix("/v1/heartbeat/") {
        return heartbeat::heartbeat(&req, peer, state, name).map(Either::Left);
    }
    if let Some(answer) = operator_answer(&req, peer, state).await {
        return answer.map(Either::Left);
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, PLAIN, "only GET\n").map(Either::Left);
    }
    // Only the costly answers are limited: liveness and readiness probes must never see a
    // 429 caused by someone else's flood (the kubelet would restart a healthy pod).
    let costly =
        matches!(path, "/status" | "/metrics" | "/v1/availability") || path.starts_with("/badge/");
    if costly {
        if let Some(limited) = auth::rate_limited(state) {
            return limited.map(Either::Left);
        }
        if !auth::authorized(&req, state.token.as_deref()) {
            return auth::unauthorized("bearer token required\n").map(Either::Left);
        }
    }
    if path == "/v1/availability" {
        return availability::availability(req.uri().query(), state).map(Either::Left);
    }
    if let Some(rest) = path.strip_prefix("/badge/") {
        return availability::badge(rest, state).map(Either::Left);
    }
    let openmetrics = req
        .headers()
        .get(hyper::header::ACCEPT)
        .and_then(|a| a.to_str().ok())
        .is_some_and(crate::metrics::wants_openmetrics);
    read_only::read_only(path, openmetrics, state).await
}
