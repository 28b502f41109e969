//! `GET /events`: the engine's events as Server-Sent Events, the kept ones first when
//! asked (`?since=`), with keep-alive comments between quiet spells.

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::Either;
use hyper::body::Incoming;
use hyper::header::CONTENT_TYPE;
use hyper::{Method, Request, Response, StatusCode};
use tokio::sync::broadcast::error::RecvError;

use super::auth::{authorized, rate_limited, unauthorized};
use super::operator::percent_decoded;
use super::{answer, text, ApiState, Body, PLAIN};
use crate::clock::Timestamp;

/// A comment line sent this often on a quiet `/events` stream, so proxies keep it open
/// and a gone client is noticed.
const KEEPALIVE: std::time::Duration = std::time::Duration::from_secs(15);

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
pub(super) async fn route(
    req: Request<Incoming>,
    peer: std::net::SocketAddr,
    state: &ApiState,
) -> Response<Body> {
    if req.uri().path() != "/events" {
        return answer(req, peer, state).await;
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
    let mut response = Response::new(Either::Right(Either::Left(EventStream(rx))));
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
