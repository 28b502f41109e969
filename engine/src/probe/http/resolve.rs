//! The http kinds' checks: path, status codes, host, headers (and the secrets read for
//! them), body limits, connection reuse; every problem located at its key.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ho_config::names::{check_header_name, check_header_value, normalize_domain};

use super::settings::{HttpCheck, HttpSettings, SecretValue};
use crate::probe::registry::Problems;

/// Checks the http keys and fills in their defaults.
pub(super) fn http(merged: HttpSettings, errs: &mut Problems<'_>) -> Option<HttpCheck> {
    let req_path = merged.path.clone().unwrap_or_else(|| "/".into());
    if !req_path.starts_with('/') || req_path.chars().any(|c| c.is_ascii_control() || c == ' ') {
        errs.push(
            "path",
            format!(
                "\"{req_path}\" must start with '/' and contain no spaces or control characters"
            ),
        );
    }
    let expect_status = merged.expect_status.clone().unwrap_or_else(|| vec![200]);
    if expect_status.is_empty() {
        errs.push("expect_status", "must list at least one status code");
    }
    for (i, s) in expect_status.iter().enumerate() {
        if !(100..=599).contains(s) {
            errs.push(
                &format!("expect_status[{i}]"),
                format!("{s} is not an HTTP status code"),
            );
        }
    }
    if let Some(host) = &merged.host {
        if host.parse::<IpAddr>().is_err() {
            if let Err(e) = normalize_domain(host) {
                errs.push("host", e);
            }
        }
    }
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
    let probes_per_connection = probes_per_connection(&merged, errs);
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
        body_limit,
        probes_per_connection,
    })
}

/// `headers_from_files`: each value read from its file (one trailing newline removed, as
/// `kubectl create secret --from-file` and editors leave one). Errors name the header and
/// the file, never the content.
fn read_secret_headers(
    merged: &HttpSettings,
    inline: &BTreeMap<String, String>,
    errs: &mut Problems<'_>,
) -> BTreeMap<String, SecretValue> {
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
                    out.insert(name.clone(), SecretValue::new(value.to_owned()));
                }
            }
            Err(e) => errs.push(&at, format!("{}: {e}", file.display())),
        }
    }
    out
}

/// Most probes one connection carries before a fresh one: at most 1000, nginx's default
/// `keepalive_requests`, so a server closing first is the exception.
const MAX_PROBES_PER_CONNECTION: u32 = 1000;

/// `reuse_connection` and `fresh_connection_every` as one number (1 = no reuse).
fn probes_per_connection(merged: &HttpSettings, errs: &mut Problems<'_>) -> u32 {
    let every = merged.fresh_connection_every;
    if merged.reuse_connection != Some(true) {
        if every.is_some() {
            errs.push(
                "fresh_connection_every",
                "has no effect without reuse_connection = true",
            );
        }
        return 1;
    }
    let every = every.unwrap_or(10);
    if !(2..=MAX_PROBES_PER_CONNECTION).contains(&every) {
        errs.push(
            "fresh_connection_every",
            format!(
                "must be between 2 and {MAX_PROBES_PER_CONNECTION} (1 is reuse_connection = false)"
            ),
        );
    }
    every
}
