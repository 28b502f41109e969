//! Pure validation: [`Config`] in, [`Plan`] or every problem at once out. No I/O here, so it
//! runs the same in `check-config`, at start-up and on reload.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

use crate::model::{
    CheckKind, CheckOverrides, Config, DampingConfig, Delivery, EndpointSelection, RoutingPolicy,
    SinkConfig, TelemetryConfig, TenantConfig,
};
use crate::names::{
    check_header_name, check_header_value, check_object_name, check_url, normalize_domain,
};
use crate::plan::{
    CheckSpec, Damping, Endpoint, HttpCheck, Plan, Protocol, Target, Tenant, Timing, TlsCheck,
};

/// One problem, located by the path of the field that causes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Field path such as `tenants[1].sinks[0]` or `defaults.check.timeout`.
    pub path: String,
    /// Why the value is refused.
    pub reason: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.reason)
    }
}

/// Every problem found in a configuration, in the order of the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ValidationErrors(pub Vec<FieldError>);

impl fmt::Display for ValidationErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

/// Collects errors while validation walks the config.
#[derive(Default)]
struct Errors(Vec<FieldError>);

impl Errors {
    fn push(&mut self, path: impl Into<String>, reason: impl Into<String>) {
        self.0.push(FieldError {
            path: path.into(),
            reason: reason.into(),
        });
    }
}

/// Start-up grace used when `defaults.startup_grace` is not set: three of the longest check
/// intervals, enough for every target's first probe plus `fall` fast re-checks.
fn default_startup_grace(targets: &[Target]) -> Duration {
    let longest = targets
        .iter()
        .map(|t| t.check.timing.interval)
        .max()
        .unwrap_or(Duration::from_secs(1));
    longest * 3
}

/// Validates `config` and resolves it into a [`Plan`], or returns every problem found.
pub fn validate(config: &Config) -> Result<Plan, ValidationErrors> {
    let mut errs = Errors::default();
    let base = config.defaults.check.over(&CheckOverrides::builtin());
    let default_check = resolve_check(&base, None, "defaults.check", &mut errs);

    let (endpoints, targets) = resolve_endpoints(config, &base, default_check.as_ref(), &mut errs);
    check_sinks(config, &mut errs);
    check_telemetry(&config.telemetry, &mut errs);
    if config.endpoints.len() > config.limits.max_endpoints {
        errs.push(
            "endpoints",
            format!(
                "{} endpoints, more than limits.max_endpoints ({}); raise the limit if this machine can probe that many (see bench/README.md)",
                config.endpoints.len(),
                config.limits.max_endpoints
            ),
        );
    }
    let rate = config.api.max_requests_per_second;
    if !(rate.is_finite() && rate >= 1.0) {
        errs.push("api.max_requests_per_second", "must be at least 1");
    }
    if config.reload.interval < Duration::from_millis(100) {
        errs.push("reload.interval", "must be at least 100ms");
    }
    let tenants = resolve_tenants(config, &endpoints, &mut errs);

    if let Some(grace) = config.defaults.startup_grace {
        if grace.is_zero() {
            errs.push("defaults.startup_grace", "must be greater than 0");
        }
    }
    if !errs.0.is_empty() {
        return Err(ValidationErrors(errs.0));
    }
    let endpoints: Vec<Endpoint> = endpoints.into_iter().flatten().collect();
    Ok(Plan {
        api_listen: config.api.listen,
        api_token_file: config.api.token_file.clone(),
        api_max_requests_per_second: config.api.max_requests_per_second,
        startup_grace: config
            .defaults
            .startup_grace
            .unwrap_or_else(|| default_startup_grace(&targets)),
        shutdown_timeout: config.defaults.shutdown_timeout,
        targets,
        endpoints,
        tenants,
        sinks: config.sinks.clone(),
        owner_id: config.owner_id.clone(),
        telemetry: config.telemetry.clone(),
        reload: config.reload.clone(),
        limits: config.limits,
    })
}

/// Resolves one check given on its own (the `probe` command's flags) over the built-in
/// defaults, with the same rules as the config; errors are located under `check`.
pub fn resolve_standalone_check(check: &CheckOverrides) -> Result<CheckSpec, ValidationErrors> {
    let mut errs = Errors::default();
    let merged = check.over(&CheckOverrides::builtin());
    match resolve_check(&merged, Some(check), "check", &mut errs) {
        Some(spec) if errs.0.is_empty() => Ok(spec),
        _ => Err(ValidationErrors(errs.0)),
    }
}

/// Resolves each endpoint; `None` marks one with errors so later indices stay aligned
/// with the config for error paths.
fn resolve_endpoints(
    config: &Config,
    base: &CheckOverrides,
    default_check: Option<&CheckSpec>,
    errs: &mut Errors,
) -> (Vec<Option<Endpoint>>, Vec<Target>) {
    if config.endpoints.is_empty() {
        errs.push("endpoints", "none configured: there is nothing to probe");
    }
    let mut seen = HashMap::new();
    let mut targets: Vec<Target> = Vec::new();
    let mut target_ids: HashMap<Target, usize> = HashMap::new();
    let mut out = Vec::with_capacity(config.endpoints.len());
    for (i, ep) in config.endpoints.iter().enumerate() {
        let path = format!("endpoints[{i}]");
        let mut ok = true;
        if let Err(e) = check_object_name(&ep.name) {
            errs.push(format!("{path}.name"), e);
            ok = false;
        } else if let Some(first) = seen.insert(ep.name.as_str(), i) {
            errs.push(
                format!("{path}.name"),
                format!(
                    "duplicate endpoint name \"{}\" (first at endpoints[{first}])",
                    ep.name
                ),
            );
            ok = false;
        }
        let address = match ep.address.parse::<IpAddr>() {
            Ok(a) => Some(a),
            Err(_) => {
                errs.push(
                    format!("{path}.address"),
                    format!("\"{}\" is not an IP address", ep.address),
                );
                None
            }
        };
        let check = if ep.check == CheckOverrides::default() {
            default_check.cloned()
        } else {
            resolve_check(
                &ep.check.over(base),
                Some(&ep.check),
                &format!("{path}.check"),
                errs,
            )
        };
        match (address, check, ok) {
            (Some(address), Some(check), true) => {
                let target = Target { address, check };
                let next = targets.len();
                let id = *target_ids.entry(target.clone()).or_insert(next);
                if id == next {
                    targets.push(target);
                }
                out.push(Some(Endpoint {
                    name: ep.name.clone(),
                    address,
                    labels: ep.labels.clone(),
                    weight: ep.weight.unwrap_or(1),
                    priority: ep.priority.unwrap_or(0),
                    target: id,
                }));
            }
            _ => out.push(None),
        }
    }
    (out, targets)
}

/// Resolves a merged check. `own` is what the endpoint set itself (`None` for the defaults
/// table): fields it sets that its kind does not use are errors there, while the defaults
/// may carry fields for other kinds.
fn resolve_check(
    merged: &CheckOverrides,
    own: Option<&CheckOverrides>,
    path: &str,
    errs: &mut Errors,
) -> Option<CheckSpec> {
    let before = errs.0.len();
    let mut missing = |field: &str| errs.push(format!("{path}.{field}"), "missing");
    let (
        Some(kind),
        Some(port),
        Some(interval),
        Some(timeout),
        Some(fast_interval),
        Some(rise),
        Some(fall),
    ) = (
        merged.kind,
        merged.port,
        merged.interval,
        merged.timeout,
        merged.fast_interval,
        merged.rise,
        merged.fall,
    )
    else {
        for (name, set) in [
            ("kind", merged.kind.is_some()),
            ("port", merged.port.is_some()),
            ("interval", merged.interval.is_some()),
            ("timeout", merged.timeout.is_some()),
            ("fast_interval", merged.fast_interval.is_some()),
            ("rise", merged.rise.is_some()),
            ("fall", merged.fall.is_some()),
        ] {
            if !set {
                missing(name);
            }
        }
        return None;
    };
    let at = |field: &str| format!("{path}.{field}");
    let human = |d: Duration| humantime::format_duration(d).to_string();
    if port == 0 {
        errs.push(at("port"), "must be between 1 and 65535");
    }
    if interval.is_zero() {
        errs.push(at("interval"), "must be greater than 0");
    }
    if timeout.is_zero() {
        errs.push(at("timeout"), "must be greater than 0");
    } else if timeout >= interval {
        errs.push(
            at("timeout"),
            format!(
                "timeout ({}) must be shorter than interval ({}) so probes of one target never overlap",
                human(timeout),
                human(interval)
            ),
        );
    }
    if fast_interval.is_zero() {
        errs.push(at("fast_interval"), "must be greater than 0");
    } else if fast_interval > interval {
        errs.push(
            at("fast_interval"),
            format!(
                "fast_interval ({}) must not be longer than interval ({})",
                human(fast_interval),
                human(interval)
            ),
        );
    }
    if rise == 0 {
        errs.push(at("rise"), "must be at least 1");
    }
    let damping = merged
        .damping
        .as_ref()
        .filter(|d| d.enabled)
        .and_then(|d| resolve_damping(d, &at("damping"), errs));
    if fall == 0 {
        errs.push(at("fall"), "must be at least 1");
    }
    if let Some(own) = own {
        let http_only = [
            ("path", own.path.is_some()),
            ("expect_status", own.expect_status.is_some()),
            ("host", own.host.is_some()),
            ("headers", own.headers.is_some()),
            ("body_contains", own.body_contains.is_some()),
            ("body_limit", own.body_limit.is_some()),
        ];
        let tls_only = [
            ("insecure", own.insecure.is_some()),
            ("ca_file", own.ca_file.is_some()),
        ];
        let unused: Vec<&str> = match kind {
            CheckKind::Tcp => http_only
                .iter()
                .chain(&tls_only)
                .filter(|f| f.1)
                .map(|f| f.0)
                .collect(),
            CheckKind::Http => tls_only.iter().filter(|f| f.1).map(|f| f.0).collect(),
            CheckKind::Https => Vec::new(),
        };
        for field in unused {
            errs.push(
                at(field),
                format!("not used by kind \"{}\"", kind_name(kind)),
            );
        }
    }
    let protocol = match kind {
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
        port,
        protocol: protocol?,
        timing: Timing {
            interval,
            timeout,
            fast_interval,
            rise,
            fall,
            damping,
        },
    })
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

fn kind_name(kind: CheckKind) -> &'static str {
    match kind {
        CheckKind::Http => "http",
        CheckKind::Https => "https",
        CheckKind::Tcp => "tcp",
    }
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
    if errs.0.len() > before {
        return None;
    }
    Some(HttpCheck {
        path: req_path,
        host: merged.host.clone(),
        headers,
        expect_status,
        body_contains: merged.body_contains.clone(),
        body_limit,
    })
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

fn check_sinks(config: &Config, errs: &mut Errors) {
    if let Err(e) = check_object_name(&config.owner_id) {
        errs.push("owner_id", e);
    }
    let mut dirs: HashMap<&std::path::Path, &str> = HashMap::new();
    let mut configmaps: HashMap<(&String, &String), &str> = HashMap::new();
    for (name, sink) in &config.sinks {
        let at = |field: &str| format!("sinks.{name}.{field}");
        if let Err(e) = check_object_name(name) {
            errs.push(format!("sinks.{name}"), e);
        }
        check_delivery(sink.delivery(), &at("delivery"), errs);
        match sink {
            SinkConfig::HostsFile { dir, .. } => {
                if dir.as_os_str().is_empty() {
                    errs.push(at("dir"), "must not be empty");
                } else if let Some(other) = dirs.insert(dir.as_path(), name) {
                    errs.push(
                        at("dir"),
                        format!(
                            "same directory as sinks.{other}; two sinks would write the same files"
                        ),
                    );
                }
            }
            SinkConfig::PowerDns(c) => {
                if let Err(e) = check_url(&c.url) {
                    errs.push(at("url"), e);
                }
                check_secret_source(
                    c.api_key_file.is_some(),
                    c.api_key_env.as_deref(),
                    "api_key_file",
                    "api_key_env",
                    &format!("sinks.{name}"),
                    errs,
                );
                if let Err(e) = normalize_domain(&c.zone) {
                    errs.push(at("zone"), e);
                }
                if c.server_id.is_empty() || c.server_id.contains('/') {
                    errs.push(at("server_id"), "must be a non-empty id without '/'");
                }
                check_timeout(c.timeout, &at("timeout"), errs);
            }
            SinkConfig::Webhook(c) => {
                if let Err(e) = check_url(&c.url) {
                    errs.push(at("url"), e);
                }
                check_secret_source(
                    c.secret_file.is_some(),
                    c.secret_env.as_deref(),
                    "secret_file",
                    "secret_env",
                    &format!("sinks.{name}"),
                    errs,
                );
                for (h, v) in &c.headers {
                    if let Err(e) = check_header_name(h).and_then(|_| check_header_value(v)) {
                        errs.push(at(&format!("headers.{h}")), e);
                    }
                }
                if c.insecure && c.ca_file.is_some() {
                    errs.push(
                        at("insecure"),
                        "insecure = true ignores ca_file; set one or the other",
                    );
                }
                check_timeout(c.timeout, &at("timeout"), errs);
            }
            SinkConfig::CorednsConfigMap(c) => {
                if let Err(e) = check_kube_name(&c.namespace, 63) {
                    errs.push(at("namespace"), e);
                }
                if let Err(e) = check_kube_name(&c.name, 253) {
                    errs.push(at("name"), e);
                }
                if let Some(other) = configmaps.insert((&c.namespace, &c.name), name) {
                    errs.push(
                        at("name"),
                        format!("same ConfigMap as sinks.{other}; two sinks would fight over it"),
                    );
                }
                if c.kubeconfig
                    .as_ref()
                    .is_some_and(|p| p.as_os_str().is_empty())
                {
                    errs.push(at("kubeconfig"), "must not be empty when set");
                }
                if c.context.as_ref().is_some_and(String::is_empty) {
                    errs.push(at("context"), "must not be empty when set");
                }
                check_timeout(c.timeout, &at("timeout"), errs);
            }
            SinkConfig::Route53(c) => {
                let id = c.hosted_zone_id.trim_start_matches("/hostedzone/");
                if id.is_empty() || !id.chars().all(|ch| ch.is_ascii_alphanumeric()) {
                    errs.push(
                        at("hosted_zone_id"),
                        format!("\"{}\" is not a hosted zone id (letters and digits, e.g. Z0123456789ABC)", c.hosted_zone_id),
                    );
                }
                if let Err(e) = normalize_domain(&c.zone) {
                    errs.push(at("zone"), e);
                }
                if let Some(url) = &c.endpoint_url {
                    if let Err(e) = check_url(url) {
                        errs.push(at("endpoint_url"), e);
                    }
                }
                if c.region.as_ref().is_some_and(String::is_empty) {
                    errs.push(at("region"), "must not be empty when set");
                }
                if !(c.max_requests_per_second.is_finite() && c.max_requests_per_second > 0.0) {
                    errs.push(at("max_requests_per_second"), "must be a number above 0");
                }
                check_timeout(c.timeout, &at("timeout"), errs);
            }
        }
    }
}

fn check_telemetry(t: &TelemetryConfig, errs: &mut Errors) {
    if let Some(url) = &t.otlp_endpoint {
        if let Err(e) = check_url(url) {
            errs.push("telemetry.otlp_endpoint", e);
        }
    }
    if !(0.0..=1.0).contains(&t.probe_sample_ratio) {
        errs.push(
            "telemetry.probe_sample_ratio",
            "must be between 0.0 and 1.0",
        );
    }
    if t.service_name.is_empty() {
        errs.push("telemetry.service_name", "must not be empty");
    }
    if !(1..=1_000_000).contains(&t.queue_size) {
        errs.push("telemetry.queue_size", "must be between 1 and 1000000");
    }
    check_timeout(t.timeout, "telemetry.timeout", errs);
    for (h, v) in &t.headers {
        if let Err(e) = check_header_name(h).and_then(|_| check_header_value(v)) {
            errs.push(format!("telemetry.headers.{h}"), e);
        }
    }
}

/// Kubernetes object names: lower-case letters, digits, '-' and '.', starting and ending
/// with a letter or digit (RFC 1123), at most `max` characters.
fn check_kube_name(name: &str, max: usize) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= max
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "\"{name}\" is not a Kubernetes name (lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, at most {max} characters)"
        ))
    }
}

fn check_secret_source(
    file: bool,
    env: Option<&str>,
    file_field: &str,
    env_field: &str,
    path: &str,
    errs: &mut Errors,
) {
    match (file, env) {
        (true, Some(_)) => errs.push(path, format!("set {file_field} or {env_field}, not both")),
        (false, None) => errs.push(
            path,
            format!("needs {file_field} or {env_field}: secrets are never written in the config"),
        ),
        (false, Some("")) => errs.push(format!("{path}.{env_field}"), "must not be empty"),
        _ => {}
    }
}

fn check_timeout(timeout: Duration, path: &str, errs: &mut Errors) {
    if timeout.is_zero() {
        errs.push(path, "must be greater than 0");
    }
}

fn check_delivery(d: &Delivery, path: &str, errs: &mut Errors) {
    if !(d.max_writes_per_second > 0.0 && d.max_writes_per_second.is_finite()) {
        errs.push(
            format!("{path}.max_writes_per_second"),
            "must be greater than 0",
        );
    }
    if d.burst == 0 {
        errs.push(format!("{path}.burst"), "must be at least 1");
    }
    if d.reconcile_interval < Duration::from_secs(1) {
        errs.push(format!("{path}.reconcile_interval"), "must be at least 1s");
    }
    if d.backoff_min.is_zero() || d.backoff_min > d.backoff_max {
        errs.push(
            format!("{path}.backoff_min"),
            "must be greater than 0 and not above backoff_max",
        );
    }
}

/// Policy-specific fields and what the tenant's sinks can express.
fn check_policy(
    config: &Config,
    t: &TenantConfig,
    selected: &[usize],
    sinks: &BTreeSet<String>,
    path: &str,
    errs: &mut Errors,
) {
    let policy = t.policy;
    if !t.weights.is_empty() && policy != RoutingPolicy::Weighted {
        errs.push(
            format!("{path}.weights"),
            "only used with policy = \"weighted\"",
        );
    }
    if t.default_geo.is_some() && policy != RoutingPolicy::Geo {
        errs.push(
            format!("{path}.default_geo"),
            "only used with policy = \"geo\"",
        );
    }
    if policy == RoutingPolicy::Geo {
        let geos: BTreeSet<&str> = selected
            .iter()
            .filter_map(|&i| config.endpoints[i].labels.get("geo").map(String::as_str))
            .collect();
        for &i in selected {
            if !config.endpoints[i].labels.contains_key("geo") {
                errs.push(
                    path,
                    format!(
                        "endpoint \"{}\" has no label \"geo\" (policy = \"geo\")",
                        config.endpoints[i].name
                    ),
                );
            }
        }
        match &t.default_geo {
            None => errs.push(
                format!("{path}.default_geo"),
                "required with policy = \"geo\"",
            ),
            Some(g) if !geos.contains(g.as_str()) => errs.push(
                format!("{path}.default_geo"),
                format!(
                    "no endpoint of the tenant has geo = \"{g}\" (present: {})",
                    geos.iter().copied().collect::<Vec<_>>().join(", ")
                ),
            ),
            Some(_) => {}
        }
    }
    for s in sinks {
        if let Some(sink) = config.sinks.get(s) {
            if !sink.supports(policy) {
                let hint = if matches!(sink, SinkConfig::PowerDns(_)) {
                    " (set lua = true on it)"
                } else {
                    ""
                };
                errs.push(
                    format!("{path}.policy"),
                    format!(
                        "sink \"{s}\" ({}) cannot express policy \"{}\"{hint}",
                        sink.kind(),
                        policy.as_str()
                    ),
                );
            }
            if matches!(sink, SinkConfig::Route53(_)) {
                check_route53_policy(config, t, selected, s, path, errs);
            }
        }
    }
}

/// Route53 takes weights 0-255 and geolocations as ISO country codes (`DE`) or country
/// subdivisions (`US-CA`); anything else would be refused by the API at the first write.
fn check_route53_policy(
    config: &Config,
    t: &TenantConfig,
    selected: &[usize],
    sink: &str,
    path: &str,
    errs: &mut Errors,
) {
    match t.policy {
        RoutingPolicy::Weighted => {
            for &i in selected {
                let ep = &config.endpoints[i];
                if ep.weight.is_some_and(|w| w > 255) {
                    errs.push(
                        format!("endpoints[{i}].weight"),
                        format!("route53 sink \"{sink}\" takes weights 0-255"),
                    );
                }
            }
            for (ri, rule) in t.weights.iter().enumerate() {
                if rule.weight > 255 {
                    errs.push(
                        format!("{path}.weights[{ri}].weight"),
                        format!("route53 sink \"{sink}\" takes weights 0-255"),
                    );
                }
            }
        }
        RoutingPolicy::Geo => {
            let valid = |g: &str| {
                let (country, sub) = g.split_once('-').unwrap_or((g, ""));
                country.len() == 2
                    && country.chars().all(|c| c.is_ascii_uppercase())
                    && (sub.is_empty() || g.starts_with("US-"))
                    && sub.len() <= 3
                    && sub
                        .chars()
                        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
            };
            for &i in selected {
                let ep = &config.endpoints[i];
                if let Some(g) = ep.labels.get("geo").filter(|g| !valid(g)) {
                    errs.push(
                        format!("endpoints[{i}].labels.geo"),
                        format!("\"{g}\" is not a Route53 location for sink \"{sink}\" (an ISO country code such as DE, or a US state such as US-CA)"),
                    );
                }
            }
        }
        RoutingPolicy::All | RoutingPolicy::Failover => {}
    }
}

/// Up to ten names for "(defined: ...)" hints.
fn list_names<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let all: Vec<&str> = names.collect();
    if all.is_empty() {
        return "none defined".into();
    }
    let mut text = format!(
        "defined: {}",
        all.iter().take(10).copied().collect::<Vec<_>>().join(", ")
    );
    if all.len() > 10 {
        text.push_str(&format!(", ... {} more", all.len() - 10));
    }
    text
}

fn resolve_tenants(
    config: &Config,
    endpoints: &[Option<Endpoint>],
    errs: &mut Errors,
) -> Vec<Tenant> {
    if config.tenants.is_empty() {
        errs.push("tenants", "none configured: nothing would be published");
    }
    let by_name: HashMap<&str, usize> = config
        .endpoints
        .iter()
        .enumerate()
        .map(|(i, e)| (e.name.as_str(), i))
        .rev()
        .collect();
    let mut seen_tenants = HashMap::new();
    let mut seen_domains: HashMap<String, String> = HashMap::new();
    let mut out = Vec::new();
    for (ti, t) in config.tenants.iter().enumerate() {
        let path = format!("tenants[{ti}]");
        if let Err(e) = check_object_name(&t.name) {
            errs.push(format!("{path}.name"), e);
        } else if let Some(first) = seen_tenants.insert(t.name.as_str(), ti) {
            errs.push(
                format!("{path}.name"),
                format!(
                    "duplicate tenant name \"{}\" (first at tenants[{first}])",
                    t.name
                ),
            );
        }
        let mut domains = Vec::new();
        if t.domains.is_empty() {
            errs.push(format!("{path}.domains"), "must list at least one domain");
        }
        for (di, d) in t.domains.iter().enumerate() {
            match normalize_domain(d) {
                Err(e) => errs.push(format!("{path}.domains[{di}]"), e),
                Ok(n) => match seen_domains.get(&n) {
                    Some(owner) => errs.push(
                        format!("{path}.domains[{di}]"),
                        format!("\"{n}\" is already published by tenant \"{owner}\""),
                    ),
                    None => {
                        seen_domains.insert(n.clone(), t.name.clone());
                        domains.push(n);
                    }
                },
            }
        }
        let before_refs = errs.0.len();
        let picked: Vec<usize> = match &t.endpoints {
            EndpointSelection::All => (0..config.endpoints.len()).collect(),
            EndpointSelection::Names(names) => {
                let mut picked = Vec::new();
                for (ni, n) in names.iter().enumerate() {
                    match by_name.get(n.as_str()) {
                        None => errs.push(
                            format!("{path}.endpoints[{ni}]"),
                            format!(
                                "no endpoint named \"{n}\" ({})",
                                list_names(config.endpoints.iter().map(|e| e.name.as_str()))
                            ),
                        ),
                        Some(&i) if picked.contains(&i) => errs.push(
                            format!("{path}.endpoints[{ni}]"),
                            format!("\"{n}\" is listed twice"),
                        ),
                        Some(&i) => picked.push(i),
                    }
                }
                picked
            }
        };
        let selected: Vec<usize> = picked
            .into_iter()
            .filter(|&i| {
                let labels = &config.endpoints[i].labels;
                t.selector.iter().all(|(k, v)| labels.get(k) == Some(v))
            })
            .collect();
        if selected.is_empty() && errs.0.len() == before_refs {
            errs.push(
                path.clone(),
                "selects no endpoints: a tenant needs at least one (check `endpoints` and `selector`)",
            );
        }
        let mut addresses: BTreeMap<IpAddr, &str> = BTreeMap::new();
        for &i in &selected {
            if let Some(ep) = &endpoints[i] {
                if let Some(other) = addresses.insert(ep.address, &ep.name) {
                    errs.push(
                        path.clone(),
                        format!(
                            "endpoints \"{other}\" and \"{}\" share address {}; a tenant publishes each address once",
                            ep.name, ep.address
                        ),
                    );
                }
            }
        }
        if t.sinks.is_empty() {
            errs.push(
                format!("{path}.sinks"),
                "must name at least one sink: nothing would be published",
            );
        }
        let mut sinks = BTreeSet::new();
        for (si, s) in t.sinks.iter().enumerate() {
            if !config.sinks.contains_key(s) {
                errs.push(
                    format!("{path}.sinks[{si}]"),
                    format!(
                        "no sink named \"{s}\" ({})",
                        list_names(config.sinks.keys().map(String::as_str))
                    ),
                );
            } else if !sinks.insert(s.clone()) {
                errs.push(
                    format!("{path}.sinks[{si}]"),
                    format!("\"{s}\" is listed twice"),
                );
            }
        }
        check_policy(config, t, &selected, &sinks, &path, errs);
        for s in &sinks {
            let zone = match config.sinks.get(s) {
                Some(SinkConfig::PowerDns(c)) => &c.zone,
                Some(SinkConfig::Route53(c)) => &c.zone,
                _ => continue,
            };
            let Ok(zone) = normalize_domain(zone) else {
                continue;
            };
            for d in &domains {
                if d != &zone && !d.ends_with(&format!(".{zone}")) {
                    errs.push(
                        format!("{path}.domains"),
                        format!("\"{d}\" is not inside zone \"{zone}\" of sink \"{s}\""),
                    );
                }
            }
        }
        if t.ttl < Duration::from_secs(1) {
            errs.push(format!("{path}.ttl"), "must be at least 1s");
        }
        if !(0.0..=1.0).contains(&t.min_healthy) {
            errs.push(
                format!("{path}.min_healthy"),
                format!("{} is not a share between 0.0 and 1.0", t.min_healthy),
            );
        }
        out.push(Tenant {
            name: t.name.clone(),
            domains,
            endpoints: selected,
            sinks: t.sinks.clone(),
            ttl: t.ttl,
            on_all_unhealthy: t.on_all_unhealthy,
            min_healthy: t.min_healthy,
            cleanup_on_remove: t.cleanup_on_remove,
            policy: t.policy,
            weights: t.weights.clone(),
            default_geo: t.default_geo.clone(),
        });
    }
    out
}
