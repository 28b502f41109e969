//! `POST /v1/heartbeat/{endpoint}`: what endpoints of kind `heartbeat` push.

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use tracing::debug;

use super::auth::{bearer, unauthorized};
use super::{text, ApiState, PLAIN};
use crate::metrics::HeartbeatLabels;
use crate::probe::heartbeat::board::Refused;

/// Records a heartbeat of endpoint `name`. Not rate limited with `/status`: every pushing
/// endpoint sends one or more per `ttl`, and a heartbeat costs a map update. 404 for a
/// name that is no `heartbeat` endpoint, 401 without its token, 403 when no token is set
/// for it.
pub(super) fn heartbeat(
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
