//! Responses as the API server words them: `Status` objects for errors, JSON bodies.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Response, StatusCode};
use serde_json::{json, Value};

use super::routes::{ResourceType, Route};
use super::Body;

/// 403, worded as RBAC denies a service account.
pub(super) fn forbidden(route: &Route, verb: &str) -> Response<Body> {
    let target = route.name.clone().unwrap_or_default();
    let ns = route.namespace.clone().unwrap_or_default();
    status(
        403,
        "Forbidden",
        &format!(
            "{} \"{target}\" is forbidden: User \"system:serviceaccount:dns-failover:health-orchestrator\" cannot {verb} resource \"{}\" in API group \"{}\" in the namespace \"{ns}\"",
            route.ty.qualified(),
            route.ty.plural,
            route.ty.group
        ),
        Some(&target),
    )
}

/// 409 for a stale `resourceVersion`.
pub(super) fn conflict(ty: &ResourceType, name: &str) -> Response<Body> {
    status(
        409,
        "Conflict",
        &format!("Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again", ty.qualified()),
        Some(name),
    )
}

/// 404 for a missing object.
pub(super) fn not_found(ty: &ResourceType, name: &str) -> Response<Body> {
    status(
        404,
        "NotFound",
        &format!("{} \"{name}\" not found", ty.qualified()),
        Some(name),
    )
}

/// A `Status` object, as the API server sends for errors.
pub(super) fn status(code: u16, reason: &str, message: &str, name: Option<&str>) -> Response<Body> {
    json_response(code, &status_object(code, reason, message, name))
}

/// The `Status` body of an error.
pub(super) fn status_object(code: u16, reason: &str, message: &str, name: Option<&str>) -> Value {
    let mut body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code,
    });
    if let Some(name) = name {
        body["details"] = json!({"name": name});
    }
    body
}

/// `body` as a JSON response with status `code`.
pub(super) fn json_response(code: u16, body: &Value) -> Response<Body> {
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap())
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())).boxed())
        .unwrap()
}
