//! The operator actions (admin token): drain, undrain, force up or down, release a held
//! fail-back (`POST /v1/endpoints/{name}/...`), and releasing the blast-radius brake
//! (`POST /v1/brake/release`); each logged with the client's address, counted and sent as an
//! event.

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use tracing::{info, warn};

use super::auth::admin_refusal;
use super::{text, ApiState, PLAIN};
use crate::events::Event;
use crate::metrics::OperatorActionLabels;
use crate::tracker::{Applied, DrainError, OperatorAction, ReleaseBrake, Selection, SetByOperator};

/// The endpoints of `/v1/endpoints/{name}/...`: the one named, or with `*` every endpoint
/// with the labels of the query (`?geo=IE&cloud=aws`, at least one).
pub(super) fn selection(name: &str, query: Option<&str>) -> Result<Selection, String> {
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
pub(super) fn percent_decoded(text: &str) -> Result<String, String> {
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
pub(super) async fn operator_action(
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

/// Releases the blast-radius brake (admin token): every withdrawal it holds goes through
/// now; logged with the client's address and counted.
pub(super) async fn release_brake(
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
pub(super) fn action_answer(
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
