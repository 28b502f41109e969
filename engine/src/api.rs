//! The operator HTTP API: `/healthz`, `/readyz`, `/status`, `/metrics`, `/events`
//! (Server-Sent Events), the operator actions `POST /v1/endpoints/{name}/drain`, `/undrain`,
//! `/force-up`, `/force-down` and `/release`, and the heartbeats pushing endpoints send (`POST /v1/heartbeat/{name}`).
//!
//! Served with hyper on the engine's main arbiter; every answer is computed from the
//! actors' own state by message, so the API never reaches into an actor.

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
use tokio::sync::broadcast::error::RecvError;
use tracing::{debug, info, warn};

use crate::clock::Timestamp;
use crate::delivery::{GetSinkStatus, SinkActor};
use crate::events::{Event, Events};
use crate::heartbeats::{Heartbeats, Refused};
use crate::leadership::Leadership;
use crate::metrics::{HeartbeatLabels, Metrics, OperatorActionLabels};
use crate::secret::same_secret;
use crate::status::{ClusterStatus, Status, Summary};
use crate::token_bucket::TokenBucket;
use crate::tracker::{
    Applied, DrainError, GetStatus, HealthTracker, IsReady, OperatorAction, ReleaseBrake,
    Selection, SetByOperator,
};

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

/// The status page (`GET /`): one file, no external assets, reads `/status` and `/events`
/// with the token the user gives it.
const PAGE: &str = include_str!("ui/index.html");

/// `/events` connections served at once; more get 503, so open streams cannot pile up.
pub const MAX_EVENT_LISTENERS: usize = 16;

/// A comment line sent this often on a quiet `/events` stream, so proxies keep it open
/// and a gone client is noticed.
const KEEPALIVE: std::time::Duration = std::time::Duration::from_secs(15);

/// An answer: a whole body, or an event stream.
type Body = Either<Full<Bytes>, EventStream>;

/// The body of `/events`: chunks made by the stream's task, ended when it ends.
pub struct EventStream(tokio::sync::mpsc::Receiver<Bytes>);

impl hyper::body::Body for EventStream {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
        self.0
            .poll_recv(cx)
            .map(|chunk| chunk.map(|b| Ok(hyper::body::Frame::data(b))))
    }
}

/// Largest request head accepted (the API takes only GETs without bodies).
const MAX_REQUEST_BYTES: usize = 16 * 1024;

fn authorized(req: &Request<Incoming>, token: Option<&str>) -> bool {
    let Some(token) = token else {
        return true;
    };
    bearer(req).is_some_and(|given| same_secret(given.as_bytes(), token.as_bytes()))
}

/// The bearer token a request carries.
fn bearer(req: &Request<Incoming>) -> Option<&str> {
    req.headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
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
                async move { Ok::<_, Infallible>(route(req, peer, &state).await) }
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

const PLAIN: &str = "text/plain; charset=utf-8";

/// Forwards the kept events asked for (each marked `"replay": true`), then every event,
/// as server-sent `data:` lines, with a keep-alive comment between quiet spells, until the
/// listener goes away; `permit` is held as long as it listens.
fn forward_events(
    kept: Vec<std::sync::Arc<crate::events::Event>>,
    mut events: tokio::sync::broadcast::Receiver<std::sync::Arc<crate::events::Event>>,
    permit: tokio::sync::OwnedSemaphorePermit,
) -> tokio::sync::mpsc::Receiver<Bytes> {
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(64);
    actix::spawn(async move {
        let _permit = permit;
        for event in kept {
            let mut value = serde_json::to_value(&*event).expect("events serialize");
            value["replay"] = serde_json::Value::Bool(true);
            if tx
                .send(Bytes::from(format!("data: {value}\n\n")))
                .await
                .is_err()
            {
                return;
            }
        }
        let mut keepalive = tokio::time::interval(KEEPALIVE);
        loop {
            let chunk = tokio::select! {
                event = events.recv() => match event {
                    Ok(event) => format!(
                        "data: {}\n\n",
                        serde_json::to_string(&*event).expect("events serialize")
                    ),
                    Err(RecvError::Lagged(missed)) => {
                        format!("data: {{\"type\":\"lagged\",\"missed\":{missed}}}\n\n")
                    }
                    Err(RecvError::Closed) => return,
                },
                _ = keepalive.tick() => ": keep-alive\n\n".to_owned(),
            };
            if tx.send(Bytes::from(chunk)).await.is_err() {
                return;
            }
        }
    });
    rx
}

/// `/events?since=RFC3339`: replay the kept events after that time first.
fn events_since(query: Option<&str>) -> Result<Option<Timestamp>, String> {
    let Some(value) = query
        .unwrap_or("")
        .split('&')
        .find_map(|kv| kv.strip_prefix("since="))
    else {
        return Ok(None);
    };
    let value = percent_decoded(value).map_err(|e| format!("since: {e}"))?;
    humantime::parse_rfc3339_weak(&value)
        .map(|t| Some(Timestamp(t)))
        .map_err(|e| {
            format!("since: \"{value}\" is not an RFC 3339 time ({e}), e.g. 2026-11-25T10:00:00Z\n")
        })
}

/// `/events` streams server-sent events; every other path gets one answer ([`answer`]).
async fn route(
    req: Request<Incoming>,
    peer: std::net::SocketAddr,
    state: &ApiState,
) -> Response<Body> {
    if req.uri().path() != "/events" {
        return answer(req, peer, state).await.map(Either::Left);
    }
    if req.method() != Method::GET {
        return text(StatusCode::METHOD_NOT_ALLOWED, PLAIN, "only GET\n").map(Either::Left);
    }
    if let Some(limited) = rate_limited(state) {
        return limited.map(Either::Left);
    }
    if !authorized(&req, state.token.as_deref()) {
        return unauthorized("bearer token required\n").map(Either::Left);
    }
    let Ok(permit) = state.event_listeners.clone().try_acquire_owned() else {
        return text(
            StatusCode::SERVICE_UNAVAILABLE,
            PLAIN,
            "too many /events listeners\n",
        )
        .map(Either::Left);
    };
    let since = match events_since(req.uri().query()) {
        Ok(since) => since,
        Err(message) => return text(StatusCode::BAD_REQUEST, PLAIN, message).map(Either::Left),
    };
    let (kept, live) = state.events.subscribe(since);
    let rx = forward_events(kept, live, permit);
    let mut response = Response::new(Either::Right(EventStream(rx)));
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(
        hyper::header::CACHE_CONTROL,
        hyper::header::HeaderValue::from_static("no-cache"),
    );
    response
}

/// Every answer but `/events`.
async fn answer(
    req: Request<Incoming>,
    peer: std::net::SocketAddr,
    state: &ApiState,
) -> Response<Full<Bytes>> {
    let path = req.uri().path();
    if let Some(name) = path.strip_prefix("/v1/heartbeat/") {
        return heartbeat(&req, peer, state, name);
    }
    let action = path
        .strip_prefix("/v1/endpoints/")
        .and_then(|rest| rest.rsplit_once('/'))
        .filter(|(name, _)| !name.is_empty())
        .and_then(|(name, verb)| Some((name, OperatorAction::parse(verb)?)));
    if let Some((name, action)) = action {
        if req.method() != Method::POST {
            return text(StatusCode::METHOD_NOT_ALLOWED, PLAIN, "only POST\n");
        }
        if let Some(limited) = rate_limited(state) {
            return limited;
        }
        let endpoints = match selection(name, req.uri().query()) {
            Ok(endpoints) => endpoints,
            Err(message) => return text(StatusCode::BAD_REQUEST, PLAIN, message),
        };
        return operator_action(&req, peer, state, endpoints, action).await;
    }
    if path == "/v1/brake/release" {
        if req.method() != Method::POST {
            return text(StatusCode::METHOD_NOT_ALLOWED, PLAIN, "only POST\n");
        }
        if let Some(limited) = rate_limited(state) {
            return limited;
        }
        return release_brake(&req, peer, state).await;
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, PLAIN, "only GET\n");
    }
    // Only the costly answers are limited: liveness and readiness probes must never see a
    // 429 caused by someone else's flood (the kubelet would restart a healthy pod).
    if matches!(path, "/status" | "/metrics") {
        if let Some(limited) = rate_limited(state) {
            return limited;
        }
    }
    if matches!(path, "/status" | "/metrics") && !authorized(&req, state.token.as_deref()) {
        return unauthorized("bearer token required\n");
    }
    let openmetrics = req
        .headers()
        .get(hyper::header::ACCEPT)
        .and_then(|a| a.to_str().ok())
        .is_some_and(crate::metrics::wants_openmetrics);
    read_only(path, openmetrics, state).await
}

/// The answer to a permitted `GET` of `path`; `/metrics` in OpenMetrics when the scraper
/// asked for it (`openmetrics`), else in the classic text format.
async fn read_only(path: &str, openmetrics: bool, state: &ApiState) -> Response<Full<Bytes>> {
    match path {
        "/" => page(),
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
        "/metrics" if openmetrics => text(
            StatusCode::OK,
            crate::metrics::OPENMETRICS_CONTENT_TYPE,
            state.metrics.encode(),
        ),
        "/metrics" => text(
            StatusCode::OK,
            crate::metrics::CLASSIC_CONTENT_TYPE,
            crate::metrics::to_classic(&state.metrics.encode()),
        ),
        _ => text(
            StatusCode::NOT_FOUND,
            PLAIN,
            "not found: try / /healthz /health /readyz /status /metrics /events\n",
        ),
    }
}

/// The status page: self-contained, so it allows no other origin and no framing.
fn page() -> Response<Full<Bytes>> {
    let mut r = text(StatusCode::OK, "text/html; charset=utf-8", PAGE);
    r.headers_mut().insert(
        hyper::header::CONTENT_SECURITY_POLICY,
        hyper::header::HeaderValue::from_static(
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'",
        ),
    );
    r
}

/// A 429 when the API's rate limit is spent.
fn rate_limited(state: &ApiState) -> Option<Response<Full<Bytes>>> {
    let taken = state
        .rate
        .lock()
        .expect("not poisoned")
        .try_take(tokio::time::Instant::now());
    let wait = taken.err()?;
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
    Some(r)
}

fn unauthorized(message: &'static str) -> Response<Full<Bytes>> {
    let mut r = text(StatusCode::UNAUTHORIZED, PLAIN, message);
    r.headers_mut().insert(
        hyper::header::WWW_AUTHENTICATE,
        hyper::header::HeaderValue::from_static("Bearer"),
    );
    r
}

/// Records a heartbeat of endpoint `name`. Not rate limited with `/status`: every pushing
/// endpoint sends one or more per `ttl`, and a heartbeat costs a map update. 404 for a
/// name that is no `heartbeat` endpoint, 401 without its token, 403 when no token is set
/// for it.
fn heartbeat(
    req: &Request<Incoming>,
    peer: std::net::SocketAddr,
    state: &ApiState,
    name: &str,
) -> Response<Full<Bytes>> {
    if req.method() != Method::POST && req.method() != Method::PUT {
        return text(StatusCode::METHOD_NOT_ALLOWED, PLAIN, "only POST or PUT\n");
    }
    let result = state
        .heartbeats
        .beat(name, bearer(req), state.heartbeat_token.as_deref());
    let label = match &result {
        Ok(()) => "ok",
        Err(Refused::Unknown) => "unknown",
        Err(Refused::Unauthorized | Refused::NoToken) => "refused",
    };
    state
        .metrics
        .heartbeats
        .get_or_create(&HeartbeatLabels { result: label })
        .inc();
    match result {
        Ok(()) => text(StatusCode::OK, PLAIN, "ok\n"),
        Err(Refused::Unknown) => text(
            StatusCode::NOT_FOUND,
            PLAIN,
            format!("no endpoint {name:?} of kind heartbeat\n"),
        ),
        Err(Refused::Unauthorized) => {
            debug!(%peer, endpoint = name, "heartbeat refused: no or wrong token");
            unauthorized("heartbeat bearer token required\n")
        }
        Err(Refused::NoToken) => text(
            StatusCode::FORBIDDEN,
            PLAIN,
            format!(
                "no token allows heartbeats of {name:?}: set api.heartbeat_token_file or the check's token_file\n"
            ),
        ),
    }
}

/// The endpoints of `/v1/endpoints/{name}/...`: the one named, or with `*` every endpoint
/// with the labels of the query (`?geo=IE&cloud=aws`, at least one).
fn selection(name: &str, query: Option<&str>) -> Result<Selection, String> {
    if name != "*" {
        return Ok(Selection::Name(name.to_owned()));
    }
    let mut labels = std::collections::BTreeMap::new();
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let (key, value) = (percent_decoded(key)?, percent_decoded(value)?);
        if key.is_empty() || value.is_empty() {
            return Err(format!("{pair:?} is not label=value\n"));
        }
        labels.insert(key, value);
    }
    if labels.is_empty() {
        return Err("* needs labels: /v1/endpoints/*/ACTION?label=value&...\n".into());
    }
    Ok(Selection::Labels(labels))
}

/// `text` with its `%XX` escapes decoded (a `+` stays a `+`: a time zone's sign).
fn percent_decoded(text: &str) -> Result<String, String> {
    let mut out = Vec::with_capacity(text.len());
    let mut bytes = text.bytes();
    while let Some(b) = bytes.next() {
        match b {
            b'%' => {
                let hex = [bytes.next(), bytes.next()];
                let byte = match hex {
                    [Some(h), Some(l)] => std::str::from_utf8(&[h, l])
                        .ok()
                        .and_then(|h| u8::from_str_radix(h, 16).ok()),
                    _ => None,
                };
                out.push(byte.ok_or_else(|| format!("{text:?} has a broken %-escape\n"))?);
            }
            b => out.push(b),
        }
    }
    String::from_utf8(out).map_err(|_| format!("{text:?} is not UTF-8\n"))
}

/// Does `action` on `endpoints`: refused (403) unless `api.admin_token_file` is set, then
/// only with that token (401); logged with the client's address and counted.
async fn operator_action(
    req: &Request<Incoming>,
    peer: std::net::SocketAddr,
    state: &ApiState,
    endpoints: Selection,
    action: OperatorAction,
) -> Response<Full<Bytes>> {
    let verb = action.name();
    let count = |result: &'static str| {
        state
            .metrics
            .operator_actions
            .get_or_create(&OperatorActionLabels {
                action: verb,
                result,
            })
            .inc();
    };
    if let Some(refused) = admin_refusal(req, peer, state, verb) {
        count("refused");
        return refused;
    }
    let asked = endpoints.clone();
    let msg = SetByOperator { endpoints, action };
    let result = state.tracker.send(msg).await;
    if let Ok(Ok(applied)) = &result {
        if !applied.changed.is_empty() {
            state.events.emit(|| Event::Operator {
                at: crate::events::now(),
                action: verb,
                endpoints: applied.changed.clone(),
                client: peer.to_string(),
            });
        }
    }
    action_answer(result, peer, &asked, action, count)
}

/// Why an operator action (`verb`) is refused: 403 unless `api.admin_token_file` is set,
/// 401 without that token; `None` when it may go ahead.
fn admin_refusal(
    req: &Request<Incoming>,
    peer: std::net::SocketAddr,
    state: &ApiState,
    verb: &str,
) -> Option<Response<Full<Bytes>>> {
    let Some(admin) = state.admin_token.as_deref() else {
        return Some(text(
            StatusCode::FORBIDDEN,
            PLAIN,
            "read-only API: operator actions need api.admin_token_file\n",
        ));
    };
    if !authorized(req, Some(admin)) {
        warn!(%peer, action = verb, "operator action refused: no or wrong admin token");
        return Some(unauthorized("admin bearer token required\n"));
    }
    None
}

/// Releases the blast-radius brake (admin token): every withdrawal it holds goes through
/// now; logged with the client's address and counted.
async fn release_brake(
    req: &Request<Incoming>,
    peer: std::net::SocketAddr,
    state: &ApiState,
) -> Response<Full<Bytes>> {
    let count = |result: &'static str| {
        state
            .metrics
            .operator_actions
            .get_or_create(&OperatorActionLabels {
                action: "brake-release",
                result,
            })
            .inc();
    };
    if let Some(refused) = admin_refusal(req, peer, state, "brake-release") {
        count("refused");
        return refused;
    }
    match state.tracker.send(ReleaseBrake).await {
        Ok(released) => {
            count("ok");
            state.events.emit(|| Event::Operator {
                at: crate::events::now(),
                action: "brake-release",
                endpoints: Vec::new(),
                client: peer.to_string(),
            });
            warn!(%peer, released, "operator released the brake: held withdrawals go through");
            text(
                StatusCode::OK,
                PLAIN,
                format!("released {released} held withdrawals\n"),
            )
        }
        Err(_) => text(StatusCode::SERVICE_UNAVAILABLE, PLAIN, "engine stopped\n"),
    }
}

/// The answer to an operator action, counted by `count` and logged.
fn action_answer(
    result: Result<Result<Applied, DrainError>, actix::MailboxError>,
    peer: std::net::SocketAddr,
    asked: &Selection,
    action: OperatorAction,
    count: impl Fn(&'static str),
) -> Response<Full<Bytes>> {
    let verb = action.name();
    let name = asked.to_string();
    match result {
        Ok(Ok(Applied { matched, changed })) => {
            count("ok");
            info!(%peer, endpoint = %name, action = verb, changed = ?changed, "operator action");
            let done = action.outcome();
            let body = match asked {
                Selection::Name(_) if changed.is_empty() => format!("{name} was already {done}\n"),
                Selection::Name(_) => format!("{done} {name}\n"),
                Selection::Labels(_) if changed.is_empty() => {
                    format!("the {} {name} were already {done}\n", matched.len())
                }
                Selection::Labels(_) => format!(
                    "{done} {} of the {} {name}: {}\n",
                    changed.len(),
                    matched.len(),
                    changed.join(" ")
                ),
            };
            text(StatusCode::OK, PLAIN, body)
        }
        Ok(Err(e @ DrainError::Unknown(_))) => {
            count("error");
            text(StatusCode::NOT_FOUND, PLAIN, format!("{e}\n"))
        }
        Ok(Err(e)) => {
            count("error");
            warn!(%peer, endpoint = %name, action = verb, error = %e, "operator action failed: nothing changed");
            text(
                StatusCode::INTERNAL_SERVER_ERROR,
                PLAIN,
                format!("not saved, nothing changed: {e}\n"),
            )
        }
        Err(_) => text(StatusCode::SERVICE_UNAVAILABLE, PLAIN, "engine stopped\n"),
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
        operator_actions: state.admin_token.is_some(),
        cluster: state.cluster.clone(),
        hosts: state.hosts.status(),
    })
}
