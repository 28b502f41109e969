//! Probe checks: a merged `[defaults.check]` + endpoint `check` into a complete
//! [`CheckSpec`] (the common keys here, the kind's own keys by the kind through the
//! [`CheckCatalog`]), and flap damping.

use std::time::Duration;

use crate::explain::unknown;
use crate::model::{CheckOverrides, DampingConfig, KindSettings};
use crate::plan::{CheckSpec, Damping, Timing};

use super::check_kinds::CheckCatalog;
use super::Errors;

/// A probe's deadline unless set (or 0.8 x the interval when that is shorter).
const DEFAULT_TIMEOUT: Duration = Duration::from_millis(500);
/// The re-check delay while unsettled unless set (or the interval when that is shorter).
const DEFAULT_FAST_INTERVAL: Duration = Duration::from_millis(100);

/// The fields every check must have after merging.
struct Required {
    kind: String,
    /// `None`: neither set nor a default of the kind (reported once the kind is known).
    port: Option<u16>,
    interval: Duration,
    timeout: Duration,
    fast_interval: Duration,
    rise: u32,
    fall: u32,
}

/// Resolves a merged check. `own` is what the endpoint set itself (`None` for the defaults
/// table): keys it sets that its kind does not read are errors there, while the defaults
/// may carry keys for other kinds.
pub(super) fn resolve_check(
    merged: &CheckOverrides,
    own: Option<&CheckOverrides>,
    path: &str,
    checks: &dyn CheckCatalog,
    errs: &mut Errors,
) -> Option<CheckSpec> {
    let before = errs.0.len();
    let mut r = required(merged, path, errs)?;
    let kinds = checks.kinds();
    r.port = check_port(&r, own, path, checks, errs);
    let damping = check_timing(&r, merged, path, errs);
    let settings = if kinds.contains(&r.kind.as_str()) {
        if r.port.is_none() {
            errs.push(
                format!("{path}.port"),
                format!("missing: kind \"{}\" has no default port", r.kind),
            );
        }
        kind_settings(merged, own, &r.kind, checks, path, errs)
    } else {
        errs.push(format!("{path}.kind"), unknown("value", &r.kind, &kinds));
        return None;
    };
    let resolved = match checks.resolve(&r.kind, settings, path) {
        Ok(resolved) => Some(resolved),
        Err(found) => {
            errs.0.extend(found);
            None
        }
    };
    if errs.0.len() > before {
        return None;
    }
    Some(CheckSpec {
        port: r.port?,
        settings: resolved?,
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

/// The port a check of `r`'s kind probes: 0 for a kind that uses none (an endpoint that
/// sets one anyway is told so), else the one set or the kind's default; 0 set is refused
/// with the range a port has.
fn check_port(
    r: &Required,
    own: Option<&CheckOverrides>,
    path: &str,
    checks: &dyn CheckCatalog,
    errs: &mut Errors,
) -> Option<u16> {
    if checks.kinds().contains(&r.kind.as_str()) && !checks.uses_port(&r.kind) {
        if own.is_some_and(|own| own.port.is_some()) {
            errs.push(
                format!("{path}.port"),
                format!("not used by kind \"{}\"", r.kind),
            );
        }
        return Some(0);
    }
    if r.port == Some(0) {
        errs.push(
            format!("{path}.port"),
            format!("0 is not {}", crate::explain::PORT),
        );
    }
    r.port.or_else(|| checks.default_port(&r.kind))
}

/// The keys of `merged` that kind `kind` reads. A key the endpoint set itself (`own`) that
/// its kind does not read is an error: "not used" when another kind reads it, else unknown.
/// The defaults' keys for other kinds are left out; a key no kind reads is an error where
/// it is written (the defaults table when `own` is `None`).
fn kind_settings(
    merged: &CheckOverrides,
    own: Option<&CheckOverrides>,
    kind: &str,
    checks: &dyn CheckCatalog,
    path: &str,
    errs: &mut Errors,
) -> KindSettings {
    let reads = checks.reads(kind);
    let mut settings = KindSettings::new();
    for (key, value) in &merged.settings {
        if reads.contains(key) {
            settings.insert(key.clone(), value.clone());
            continue;
        }
        let written_here = own.is_none_or(|own| own.settings.contains_key(key));
        let read_by: Vec<&str> = checks
            .kinds()
            .into_iter()
            .filter(|k| checks.reads(k).contains(key))
            .collect();
        if !written_here || (own.is_none() && !read_by.is_empty()) {
            continue;
        }
        let reason = if read_by.is_empty() {
            unknown("key", key, &known_keys(checks))
        } else {
            format!("not used by kind \"{kind}\"")
        };
        errs.push(format!("{path}.{key}"), reason);
    }
    settings
}

/// Every key a check table may hold: the common ones (from the table's schema), then each
/// kind's.
fn known_keys(checks: &dyn CheckCatalog) -> Vec<&str> {
    static COMMON: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let common = COMMON.get_or_init(|| {
        let schema = schemars::schema_for!(CheckOverrides);
        schema
            .as_value()
            .get("properties")
            .and_then(serde_json::Value::as_object)
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default()
    });
    let mut keys: Vec<&str> = common.iter().map(String::as_str).collect();
    for kind in checks.kinds() {
        for key in checks.reads(kind) {
            if !keys.contains(&key.as_str()) {
                keys.push(key);
            }
        }
    }
    keys
}

/// The required fields, or `missing` for each one absent.
fn required(merged: &CheckOverrides, path: &str, errs: &mut Errors) -> Option<Required> {
    let fields = [
        ("kind", merged.kind.is_some()),
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
        kind: merged.kind.clone()?,
        port: merged.port,
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
    if r.interval.is_zero() {
        errs.push(at("interval"), "must be greater than 0");
    }
    // A timeout or fast interval left unset follows the interval, and none can be below a
    // zero one: a zero interval's error says it all.
    let follows_zero = |set: bool| !set && r.interval.is_zero();
    let zero = r.interval.is_zero();
    if r.timeout.is_zero() {
        if !follows_zero(merged.timeout.is_some()) {
            errs.push(at("timeout"), "must be greater than 0");
        }
    } else if r.timeout >= r.interval && !zero {
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
        if !follows_zero(merged.fast_interval.is_some()) {
            errs.push(at("fast_interval"), "must be greater than 0");
        }
    } else if r.fast_interval > r.interval && !zero {
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
