//! The http kinds' checks: path, status codes, host, headers (and the secrets read for
//! them), body limits, connection reuse; every problem located at its key.

use std::collections::BTreeMap;

use ho_config::names::{check_header_name, check_header_value};

use super::settings::{HttpCheck, HttpSettings};
use crate::probe::registry::Problems;
use crate::probe::reuse;
use crate::secret::Secret;

/// Checks the http keys and fills in their defaults.
pub(super) fn http(merged: HttpSettings, errs: &mut Problems<'_>) -> Option<HttpCheck> {
    let req_path = request_path(merged.path.clone(), errs);
    let expect_status = expected_status(merged.expect_status.clone(), errs);
    errs.host(merged.host.as_deref());
    let headers = check_headers(&merged, errs);
    let secret_headers = read_secret_headers(&merged, &headers, errs);
    let body_limit = merged.body_limit.unwrap_or(64 * 1024);
    if body_limit == 0 || body_limit > 16 * 1024 * 1024 {
        errs.push("body_limit", "must be between 1 and 16777216 bytes");
    }
    if merged.body_contains.as_deref() == Some("") {
        errs.push(
            "body_contains",
            "must not be empty (remove it to skip the body check)",
        );
    }
    let probes_per_connection =
        reuse::probes_per_connection(merged.reuse_connection, merged.fresh_connection_every, errs);
    let method = request_method(&merged, errs);
    check_conditions(&merged, &method, errs);
    let follow_redirects = follow_redirects(merged.follow_redirects, errs);
    let reported_weight = merged
        .reported_weight
        .clone()
        .and_then(|w| w.resolve(&["body", "header", "json"], errs));
    if method == "HEAD" && reported_weight.as_ref().is_some_and(|w| w.needs_body()) {
        errs.push(
            "reported_weight.from",
            "a HEAD answer has no body to read the weight from",
        );
    }
    if !errs.is_empty() {
        return None;
    }
    Some(HttpCheck {
        path: req_path,
        host: merged.host,
        headers,
        secret_headers,
        expect_status,
        body_contains: merged.body_contains,
        method,
        request_body: merged.request_body,
        body_matches: merged.body_matches,
        body_json: merged.body_json.unwrap_or_default(),
        max_latency: merged.max_latency,
        body_limit,
        probes_per_connection,
        follow_redirects,
        reported_weight,
    })
}

/// `path`, `/` unless set: it starts with '/' and holds no spaces or control characters.
fn request_path(set: Option<String>, errs: &mut Problems<'_>) -> String {
    let path = set.unwrap_or_else(|| "/".into());
    if !path.starts_with('/') || path.chars().any(|c| c.is_ascii_control() || c == ' ') {
        errs.push(
            "path",
            format!("\"{path}\" must start with '/' and contain no spaces or control characters"),
        );
    }
    path
}

/// `expect_status`, 200 unless set: at least one code, each an HTTP status code.
fn expected_status(set: Option<Vec<u16>>, errs: &mut Problems<'_>) -> Vec<u16> {
    let codes = set.unwrap_or_else(|| vec![200]);
    if codes.is_empty() {
        errs.push("expect_status", "must list at least one status code");
    }
    for (i, s) in codes.iter().enumerate() {
        if !(100..=599).contains(s) {
            errs.push(
                &format!("expect_status[{i}]"),
                format!("{s} is not an HTTP status code"),
            );
        }
    }
    codes
}

/// Most redirects a check may follow (Kubernetes' httpGet probe follows 10).
const MAX_REDIRECTS: u8 = 10;

/// `follow_redirects`, at most [`MAX_REDIRECTS`] (0: off).
fn follow_redirects(set: Option<u8>, errs: &mut Problems<'_>) -> u8 {
    let n = set.unwrap_or(0);
    if n > MAX_REDIRECTS {
        errs.push(
            "follow_redirects",
            format!("{n} is more than {MAX_REDIRECTS} redirects"),
        );
    }
    n
}

/// `headers`, each name and value valid HTTP, `Host` set only through `host`.
fn check_headers(merged: &HttpSettings, errs: &mut Problems<'_>) -> BTreeMap<String, String> {
    let headers = merged.headers.clone().unwrap_or_default();
    for (name, value) in &headers {
        if let Err(e) = check_header_name(name) {
            errs.push(&format!("headers.{name}"), e);
        } else if name.eq_ignore_ascii_case("host") {
            errs.push(
                &format!("headers.{name}"),
                "set the Host header with `host`",
            );
        }
        if let Err(e) = check_header_value(value) {
            errs.push(&format!("headers.{name}"), e);
        }
    }
    headers
}

/// `headers_from_files`: each value read from its file (one trailing newline removed, as
/// `kubectl create secret --from-file` and editors leave one). Errors name the header and
/// the file, never the content.
fn read_secret_headers(
    merged: &HttpSettings,
    inline: &BTreeMap<String, String>,
    errs: &mut Problems<'_>,
) -> BTreeMap<String, Secret> {
    let mut out = BTreeMap::new();
    for (name, file) in merged.headers_from_files.iter().flatten() {
        let at = format!("headers_from_files.{name}");
        if let Err(e) = check_header_name(name) {
            errs.push(&at, e);
            continue;
        }
        if name.eq_ignore_ascii_case("host") || inline.keys().any(|k| k.eq_ignore_ascii_case(name))
        {
            errs.push(&at, "also set in headers or as host: set it in one place");
            continue;
        }
        match std::fs::read_to_string(file) {
            Ok(text) => {
                let value = text.strip_suffix('\n').unwrap_or(&text);
                let value = value.strip_suffix('\r').unwrap_or(value);
                if value.is_empty() || check_header_value(value).is_err() {
                    errs.push(
                        &at,
                        format!(
                            "{}: the value must be one line of visible ASCII (content not shown)",
                            file.display()
                        ),
                    );
                } else {
                    out.insert(name.clone(), Secret::new(value.to_owned()));
                }
            }
            Err(e) => errs.push(&at, format!("{}: {e}", file.display())),
        }
    }
    out
}

/// `method` (upper case) and whether `request_body` goes with it.
fn request_method(merged: &HttpSettings, errs: &mut Problems<'_>) -> String {
    let method = merged
        .method
        .as_deref()
        .unwrap_or("GET")
        .to_ascii_uppercase();
    if !matches!(method.as_str(), "GET" | "HEAD" | "POST") {
        errs.push("method", format!("{method:?} is not GET, HEAD or POST"));
    }
    match &merged.request_body {
        Some(_) if method != "POST" => {
            errs.push("request_body", "is sent only with method = \"POST\"")
        }
        Some(body) if body.len() > 64 * 1024 => {
            errs.push("request_body", "must be at most 65536 bytes")
        }
        _ => {}
    }
    method
}

/// The body conditions compile, are not empty, and have a body to judge.
fn check_conditions(merged: &HttpSettings, method: &str, errs: &mut Problems<'_>) {
    if let Some(pattern) = &merged.body_matches {
        if let Err(e) = regex::bytes::Regex::new(pattern) {
            // regex explains over several lines, the reason on the last one.
            let text = e.to_string();
            let why = text.lines().last().unwrap_or_default();
            let why = why.trim_start_matches("error: ");
            errs.push(
                "body_matches",
                format!("{pattern:?} is not a regular expression: {why}"),
            );
        }
    }
    for pointer in merged.body_json.iter().flatten().map(|(k, _)| k) {
        if !pointer.is_empty() && !pointer.starts_with('/') {
            errs.push(
                &format!("body_json.{pointer}"),
                "a JSON Pointer starts with '/' (\"/status\", \"/checks/0/ok\")",
            );
        }
    }
    let body_conditions = merged.body_contains.is_some()
        || merged.body_matches.is_some()
        || merged.body_json.is_some();
    if method == "HEAD" && body_conditions {
        errs.push(
            "method",
            "a HEAD answer has no body for body_contains, body_matches or body_json",
        );
    }
    if merged.max_latency.is_some_and(|d| d.is_zero()) {
        errs.push("max_latency", "must be greater than 0");
    }
}
