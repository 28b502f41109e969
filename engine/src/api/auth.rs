//! Who may ask what: bearer tokens (read, admin), compared in constant time, and the rate
//! limit of the costly answers.

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use tracing::warn;

use super::{text, ApiState, PLAIN};
use crate::secret::same_secret;

pub(super) fn authorized(req: &Request<Incoming>, token: Option<&str>) -> bool {
    let Some(token) = token else {
        return true;
    };
    bearer(req).is_some_and(|given| same_secret(given.as_bytes(), token.as_bytes()))
}

/// The bearer token a request carries.
pub(super) fn bearer(req: &Request<Incoming>) -> Option<&str> {
    req.headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
}

/// A 429 when the API's rate limit is spent.
pub(super) fn rate_limited(state: &ApiState) -> Option<Response<Full<Bytes>>> {
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

pub(super) fn unauthorized(message: &'static str) -> Response<Full<Bytes>> {
    let mut r = text(StatusCode::UNAUTHORIZED, PLAIN, message);
    r.headers_mut().insert(
        hyper::header::WWW_AUTHENTICATE,
        hyper::header::HeaderValue::from_static("Bearer"),
    );
    r
}

/// Why an operator action (`verb`) is refused: 403 unless `api.admin_token_file` is set,
/// 401 without that token; `None` when it may go ahead.
pub(super) fn admin_refusal(
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
