//! Probe checks: a merged `[defaults.check]` + endpoint `check` into a complete
//! [`CheckSpec`], and flap damping.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use crate::model::{CheckKind, CheckOverrides, DampingConfig};
use crate::names::{check_header_name, check_header_value, normalize_domain};
use crate::plan::{CheckSpec, Damping, HttpCheck, Protocol, SecretValue, Timing, TlsCheck};

use super::check_fields::{kind_name, unused_by};
use super::Errors;

/// A probe's deadline unless set (or 0.8 x the interval when that is shorter).
const DEFAULT_TIMEOUT: Duration = Duration::from_millis(500);
/// The re-check delay while unsettled unless set (or the interval when that is shorter).
const DEFAULT_FAST_INTERVAL: Duration = Duration::from_millis(100);

/// The fields every check must have after merging.
struct Required {
    kind: CheckKind,
    port: u16,
    interval: Duration,
    timeout: Duration,
    fast_interval: Duration,
    rise: u32,
    fall: u32,
}

/// Resolves a merged check. `own` is what the endpoint set itself (`None` for the defaults
/// table): fields it sets that its kind does not use are errors there, while the defaults
/// may carry fields for other kinds.
pub(super) fn resolve_check(
    merged: &CheckOverrides,
    own: Option<&CheckOverrides>,
    path: &str,
    errs: &mut Errors,
) -> Option<CheckSpec> {
    let before = errs.0.len();
    let r = required(merged, path, errs)?;
    let damping = check_timing(&r, merged, path, errs);
    if let Some(own) = own {
        check_unused(own, r.kind, path, errs);
    }
    let protocol = match r.kind {
        CheckKind::Tcp => Some(Protocol::Tcp),
        CheckKind::Http => resolve_http(merged, path, errs).map(Protocol::Http),
        CheckKind::Https => {
            let tls = resolve_tls(merged, path, errs);
            resolve_http(merged, path, errs).map(|http| Protocol::Https { http, tls })
        }
    };
    if errs.0.len() > before {
        return None;
    }
    Some(CheckSpec {
        port: r.port,
        protocol: protocol?,
        timing: Timing {
            interval: r.interval,
            timeout: r.timeout,
            fast_interval: r.fast_interval,
            rise: r.rise,
            fall: r.fall,
            damping,
        },
        source_address: merged.source_address,
    })
}

/// The required fields, or `missing` for each one absent.
fn required(merged: &CheckOverrides, path: &str, errs: &mut Errors) -> Option<Required> {
    let fields = [
        ("kind", merged.kind.is_some()),
        ("port", merged.port.is_some()),
        ("interval", merged.interval.is_some()),
        ("rise", merged.rise.is_some()),
        ("fall", merged.fall.is_some()),
    ];
    for (name, set) in fields {
        if !set {
            errs.push(format!("{path}.{name}"), "missing");
        }
    }
    let interval = merged.interval?;
    // Defaults that follow the interval, so `interval = "300ms"` alone is a valid check.
    Some(Required {
        kind: merged.kind?,
        port: merged.port?,
        interval,
        timeout: merged
            .timeout
            .unwrap_or_else(|| DEFAULT_TIMEOUT.min(interval.mul_f64(0.8))),
        fast_interval: merged
            .fast_interval
            .unwrap_or_else(|| DEFAULT_FAST_INTERVAL.min(interval)),
        rise: merged.rise?,
        fall: merged.fall?,
    })
}

/// Port, timing and thresholds (in this order, as operators read the table), and damping.
fn check_timing(
    r: &Required,
    merged: &CheckOverrides,
    path: &str,
    errs: &mut Errors,
) -> Option<Damping> {
    let at = |field: &str| format!("{path}.{field}");
    let human = |d: Duration| humantime::format_duration(d).to_string();
    if r.port == 0 {
        errs.push(at("port"), "must be between 1 and 65535");
    }
    if r.interval.is_zero() {
        errs.push(at("interval"), "must be greater than 0");
    }
    if r.timeout.is_zero() {
        errs.push(at("timeout"), "must be greater than 0");
    } else if r.timeout >= r.interval {
        errs.push(
            at("timeout"),
            format!(
                "timeout ({}) must be shorter than interval ({}) so probes of one target never overlap",
                human(r.timeout),
                human(r.interval)
            ),
        );
    }
    if r.fast_interval.is_zero() {
        errs.push(at("fast_interval"), "must be greater than 0");
    } else if r.fast_interval > r.interval {
        errs.push(
            at("fast_interval"),
            format!(
                "fast_interval ({}) must not be longer than interval ({})",
                human(r.fast_interval),
                human(r.interval)
            ),
        );
    }
    if r.rise == 0 {
        errs.push(at("rise"), "must be at least 1");
    }
    let damping = merged
        .damping
        .as_ref()
        .filter(|d| d.enabled)
        .and_then(|d| resolve_damping(d, &at("damping"), errs));
    if r.fall == 0 {
        errs.push(at("fall"), "must be at least 1");
    }
    damping
}

/// Fields an endpoint set that its check kind does not read (each field's `x-kinds` tag).
fn check_unused(own: &CheckOverrides, kind: CheckKind, path: &str, errs: &mut Errors) {
    for field in unused_by(own, kind) {
        errs.push(
            format!("{path}.{field}"),
            format!("not used by kind \"{}\"", kind_name(kind)),
        );
    }
}

fn resolve_damping(d: &DampingConfig, path: &str, errs: &mut Errors) -> Option<Damping> {
    let before = errs.0.len();
    let at = |field: &str| format!("{path}.{field}");
    if d.half_life < Duration::from_secs(1) {
        errs.push(at("half_life"), "must be at least 1s");
    }
    if d.penalty == 0 {
        errs.push(at("penalty"), "must be greater than 0");
    }
    if d.reuse == 0 || d.reuse >= d.suppress {
        errs.push(
            at("reuse"),
            format!(
                "must be greater than 0 and below suppress ({}): an endpoint is released when its penalty decays below reuse",
                d.suppress
            ),
        );
    } else if d.max_suppress.as_secs_f64()
        <= d.half_life.as_secs_f64() * (f64::from(d.suppress) / f64::from(d.reuse)).log2()
    {
        errs.push(
            at("max_suppress"),
            format!(
                "{} is too short to ever hold an endpoint out: the penalty is capped where it decays to reuse in max_suppress, which must lie above suppress (needs more than {})",
                humantime::format_duration(d.max_suppress),
                humantime::format_duration(Duration::from_secs_f64(
                    (d.half_life.as_secs_f64()
                        * (f64::from(d.suppress) / f64::from(d.reuse)).log2())
                    .ceil()
                ))
            ),
        );
    }
    (errs.0.len() == before).then_some(Damping {
        half_life: d.half_life,
        penalty: d.penalty,
        suppress: d.suppress,
        reuse: d.reuse,
        max_suppress: d.max_suppress,
    })
}

fn resolve_http(merged: &CheckOverrides, path: &str, errs: &mut Errors) -> Option<HttpCheck> {
    let at = |field: &str| format!("{path}.{field}");
    let before = errs.0.len();
    let req_path = merged.path.clone().unwrap_or_else(|| "/".into());
    if !req_path.starts_with('/') || req_path.chars().any(|c| c.is_ascii_control() || c == ' ') {
        errs.push(
            at("path"),
            format!(
                "\"{req_path}\" must start with '/' and contain no spaces or control characters"
            ),
        );
    }
    let expect_status = merged.expect_status.clone().unwrap_or_else(|| vec![200]);
    if expect_status.is_empty() {
        errs.push(at("expect_status"), "must list at least one status code");
    }
    for (i, s) in expect_status.iter().enumerate() {
        if !(100..=599).contains(s) {
            errs.push(
                at(&format!("expect_status[{i}]")),
                format!("{s} is not an HTTP status code"),
            );
        }
    }
    if let Some(host) = &merged.host {
        if host.parse::<IpAddr>().is_err() {
            if let Err(e) = normalize_domain(host) {
                errs.push(at("host"), e);
            }
        }
    }
    let headers = merged.headers.clone().unwrap_or_default();
    for (name, value) in &headers {
        if let Err(e) = check_header_name(name) {
            errs.push(at(&format!("headers.{name}")), e);
        } else if name.eq_ignore_ascii_case("host") {
            errs.push(
                at(&format!("headers.{name}")),
                "set the Host header with `host`",
            );
        }
        if let Err(e) = check_header_value(value) {
            errs.push(at(&format!("headers.{name}")), e);
        }
    }
    let secret_headers = read_secret_headers(merged, &headers, path, errs);
    let body_limit = merged.body_limit.unwrap_or(64 * 1024);
    if body_limit == 0 || body_limit > 16 * 1024 * 1024 {
        errs.push(at("body_limit"), "must be between 1 and 16777216 bytes");
    }
    if merged.body_contains.as_deref() == Some("") {
        errs.push(
            at("body_contains"),
            "must not be empty (remove it to skip the body check)",
        );
    }
    let probes_per_connection = probes_per_connection(merged, path, errs);
    if errs.0.len() > before {
        return None;
    }
    Some(HttpCheck {
        path: req_path,
        host: merged.host.clone(),
        headers,
        secret_headers,
        expect_status,
        body_contains: merged.body_contains.clone(),
        body_limit,
        probes_per_connection,
    })
}

/// `headers_from_files`: each value read from its file (one trailing newline removed, as
/// `kubectl create secret --from-file` and editors leave one). Errors name the header and
/// the file, never the content.
fn read_secret_headers(
    merged: &CheckOverrides,
    inline: &BTreeMap<String, String>,
    path: &str,
    errs: &mut Errors,
) -> BTreeMap<String, SecretValue> {
    let mut out = BTreeMap::new();
    for (name, file) in merged.headers_from_files.iter().flatten() {
        let at = format!("{path}.headers_from_files.{name}");
        if let Err(e) = check_header_name(name) {
            errs.push(at, e);
            continue;
        }
        if name.eq_ignore_ascii_case("host") || inline.keys().any(|k| k.eq_ignore_ascii_case(name))
        {
            errs.push(at, "also set in headers or as host: set it in one place");
            continue;
        }
        match std::fs::read_to_string(file) {
            Ok(text) => {
                let value = text.strip_suffix('\n').unwrap_or(&text);
                let value = value.strip_suffix('\r').unwrap_or(value);
                if value.is_empty() || check_header_value(value).is_err() {
                    errs.push(
                        at,
                        format!(
                            "{}: the value must be one line of visible ASCII (content not shown)",
                            file.display()
                        ),
                    );
                } else {
                    out.insert(name.clone(), SecretValue::new(value.to_owned()));
                }
            }
            Err(e) => errs.push(at, format!("{}: {e}", file.display())),
        }
    }
    out
}

/// Most probes one connection carries before a fresh one: at most 1000, nginx's default
/// `keepalive_requests`, so a server closing first is the exception.
const MAX_PROBES_PER_CONNECTION: u32 = 1000;

/// `reuse_connection` and `fresh_connection_every` as one number (1 = no reuse).
fn probes_per_connection(merged: &CheckOverrides, path: &str, errs: &mut Errors) -> u32 {
    let every = merged.fresh_connection_every;
    if merged.reuse_connection != Some(true) {
        if every.is_some() {
            errs.push(
                format!("{path}.fresh_connection_every"),
                "has no effect without reuse_connection = true",
            );
        }
        return 1;
    }
    let every = every.unwrap_or(10);
    if !(2..=MAX_PROBES_PER_CONNECTION).contains(&every) {
        errs.push(
            format!("{path}.fresh_connection_every"),
            format!(
                "must be between 2 and {MAX_PROBES_PER_CONNECTION} (1 is reuse_connection = false)"
            ),
        );
    }
    every
}

fn resolve_tls(merged: &CheckOverrides, path: &str, errs: &mut Errors) -> TlsCheck {
    let insecure = merged.insecure.unwrap_or(false);
    if insecure && merged.ca_file.is_some() {
        errs.push(
            format!("{path}.insecure"),
            "insecure = true ignores ca_file; set one or the other",
        );
    }
    TlsCheck {
        insecure,
        ca_file: merged.ca_file.clone(),
    }
}
