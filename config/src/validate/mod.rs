//! Pure validation: [`Config`] in, [`Plan`] or every problem at once out. No I/O here, so it
//! runs the same in `check-config`, at start-up and on reload.
//!
//! One file per concern: [`checks`] (probe checks and flap damping; [`check_kinds`] is the
//! seam to the check kinds, which parse their own keys), [`endpoints`]
//! (endpoints into shared probe targets), [`tenants`] (selection, domains, policies),
//! [`sinks`] (the seam to the sink kinds, which check their own tables). Errors keep the
//! order of the file, so an operator reads them top to bottom.

mod check_kinds;
mod checks;
mod endpoints;
mod kubernetes;
mod sinks;
mod tenants;

use std::fmt;
use std::time::Duration;

use crate::model::{
    CheckOverrides, Config, LeaderElectionConfig, MultiClusterConfig, TelemetryConfig,
};
use crate::names::{check_header_name, check_header_value, check_url};
use crate::plan::{CheckSpec, Plan, Target};

pub use check_kinds::{CheckCatalog, KindCheck, ResolvedCheck, SameCheck};
pub use sinks::{Claim, Parsed, SinkCatalog, SinkSpec, TenantUse};

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
#[derive(Debug, Clone, Default, PartialEq, Eq, thiserror::Error)]
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

impl ValidationErrors {
    /// Adds a problem at `path`.
    pub fn push(&mut self, path: impl Into<String>, reason: impl std::fmt::Display) {
        self.0.push(FieldError {
            path: path.into(),
            reason: reason.to_string(),
        });
    }

    /// Whether nothing was found.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Deserializes a component's own keys (a sink table's, a check kind's) into its settings
/// type `T`, reporting errors under `path` in the operator's words ([`crate::explain`]).
/// Serde stops at a table's first bad key: each is left out in turn and the rest read
/// again, so every bad key of the table is said at once (a required key left out or
/// misspelt is not also said missing).
pub fn parse_keys<T: serde::de::DeserializeOwned>(
    keys: &std::collections::BTreeMap<String, figment::value::Value>,
    path: &str,
) -> Result<T, Vec<FieldError>> {
    use figment::error::Kind;
    use figment::value::{Tag, Value};
    let mut dict: figment::value::Dict = keys.clone().into_iter().collect();
    let mut errors = Vec::new();
    let mut left_out: Vec<String> = Vec::new();
    loop {
        let error = match Value::Dict(Tag::Default, dict.clone()).deserialize::<T>() {
            Ok(settings) if errors.is_empty() => return Ok(settings),
            Ok(_) => return Err(errors),
            Err(error) => error,
        };
        let mut again = false;
        for e in error {
            // A required key left out, or misspelt (said as an unknown key), is not also
            // said missing.
            if matches!(&e.kind, Kind::MissingField(key) if left_out.iter()
                .any(|k| k.starts_with(&**key) || key.starts_with(k.as_str())
                    || crate::explain::likely_typo(k, key)))
            {
                continue;
            }
            let mut at = path.to_owned();
            for p in &e.path {
                at.push('.');
                at.push_str(p);
            }
            errors.push(FieldError {
                path: at,
                reason: crate::explain::explain_at(&e.path, &e.kind),
            });
            if let Some(key) = e.path.first() {
                again |= dict.remove(key).is_some();
                left_out.push(key.clone());
            }
        }
        if !again {
            return Err(errors);
        }
    }
}

/// The collector validation pushes into while it walks the config.
type Errors = ValidationErrors;

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

/// The component kinds a program knows: the sink kinds that parse `[sinks.*]` tables and
/// the check kinds that parse check tables. The binary's is `ho_kinds::CATALOG`.
#[derive(Clone, Copy)]
pub struct Kinds<'a> {
    /// The sink kinds (the sinks crate's registry).
    pub sinks: &'a dyn SinkCatalog,
    /// The check kinds (the engine's probe registry).
    pub checks: &'a dyn CheckCatalog,
}

/// Validates `config`; every `[sinks.*]` table and every check table's own keys are parsed
/// and checked by their kind in `kinds`.
pub fn validate(config: &Config, kinds: &Kinds<'_>) -> Result<Plan, ValidationErrors> {
    let mut errs = Errors::default();
    let base = config.defaults.check.over(&CheckOverrides::builtin());
    let default_check =
        checks::resolve_check(&base, None, "defaults.check", kinds.checks, &mut errs);

    let resolved =
        endpoints::resolve_endpoints(config, &base, default_check, kinds.checks, &mut errs);
    let sinks = sinks::resolve_sinks(config, kinds.sinks, &mut errs);
    check_telemetry(&config.telemetry, &mut errs);
    check_limits(config, &mut errs);
    check_leader_election(&config.leader_election, &mut errs);
    check_ring(&config.ring, &mut errs);
    let mut tenants = tenants::resolve_tenants(config, &sinks, &mut errs);
    if let Some(id) = &config.cluster.id {
        if let Err(e) = check_cluster_id(id) {
            errs.push("cluster.id", e);
        }
    }
    check_multi_cluster(&config.multi_cluster, &mut errs);
    check_resolver(&config.resolver, &mut errs);
    kubernetes::check_kubernetes(config, &mut errs);
    if config.api.admin_token_file.is_some() && config.state_dir.is_none() {
        errs.push(
            "api.admin_token_file",
            "needs state_dir: drains must survive a restart",
        );
    }
    if config.ledger.retention < Duration::from_secs(86_400) {
        errs.push("ledger.retention", "must be at least 1d");
    }
    if let Some(grace) = config.defaults.startup_grace {
        if grace.is_zero() {
            errs.push("defaults.startup_grace", "must be greater than 0");
        }
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    let (mut endpoints, mut hosts, targets) = resolved.into_plan_parts(&mut tenants);
    for (t, tenant) in config.tenants.iter().zip(&tenants) {
        if t.hold_failback {
            for &e in &tenant.endpoints {
                endpoints[e].hold_failback = true;
            }
        }
    }
    for host in &mut hosts {
        host.hold_failback |= host
            .tenants
            .iter()
            .any(|&t| config.tenants[t].hold_failback);
    }
    Ok(Plan {
        api_listen: config.api.listen,
        api_token_file: config.api.token_file.clone(),
        api_admin_token_file: config.api.admin_token_file.clone(),
        api_heartbeat_token_file: config.api.heartbeat_token_file.clone(),
        state_dir: config.state_dir.clone(),
        ledger: config.ledger.clone(),
        cluster: config.cluster.clone(),
        multi_cluster: config.multi_cluster.clone(),
        api_max_requests_per_second: config.api.max_requests_per_second,
        startup_grace: config
            .defaults
            .startup_grace
            .unwrap_or_else(|| default_startup_grace(&targets)),
        shutdown_timeout: config.defaults.shutdown_timeout,
        targets,
        endpoints,
        tenants,
        sinks,
        owner_id: config.owner_id.clone(),
        telemetry: config.telemetry.clone(),
        reload: config.reload.clone(),
        limits: config.limits,
        brake: config.brake,
        leader_election: config.leader_election.clone(),
        ring: config.ring.clone(),
        kubernetes: config.kubernetes.clone(),
        hosts,
        resolver: config.resolver.clone(),
    })
}

/// A cluster id: short enough for a DNS label inside the report names, and the same
/// characters the derived ids use.
pub(crate) fn check_cluster_id(id: &str) -> Result<(), ClusterIdError> {
    let valid = (1..=16).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if valid {
        Ok(())
    } else {
        Err(ClusterIdError(id.to_owned()))
    }
}

/// A cluster id [`check_cluster_id`] refuses.
#[derive(Debug, thiserror::Error)]
#[error("\"{0}\" must be 1-16 characters of a-z, 0-9 and '-'")]
pub(crate) struct ClusterIdError(String);

/// `[resolver]`: lookups bounded in time, refreshes in order.
fn check_resolver(r: &crate::model::ResolverConfig, errs: &mut Errors) {
    if r.timeout.is_zero() {
        errs.push("resolver.timeout", "must be more than 0");
    }
    if r.min_refresh < Duration::from_secs(1) {
        errs.push("resolver.min_refresh", "must be at least 1s");
    }
    if r.max_refresh < r.min_refresh {
        errs.push(
            "resolver.max_refresh",
            format!(
                "{} is shorter than min_refresh ({})",
                humantime::format_duration(r.max_refresh),
                humantime::format_duration(r.min_refresh)
            ),
        );
    }
}

/// The vote's numbers: a threshold that can be met, and reports that stay live across a
/// late round.
fn check_multi_cluster(mc: &MultiClusterConfig, errs: &mut Errors) {
    let at = |field: &str| format!("multi_cluster.{field}");
    if !(mc.failure_threshold > 0.0 && mc.failure_threshold <= 1.0) {
        errs.push(
            at("failure_threshold"),
            format!(
                "{} must be above 0 and at most 1 (a share of the live clusters)",
                mc.failure_threshold
            ),
        );
    }
    if mc.report_interval < Duration::from_millis(100) {
        errs.push(at("report_interval"), "must be at least 100ms");
    }
    if mc.report_ttl < mc.report_interval * 2 {
        errs.push(
            at("report_ttl"),
            format!(
                "{:?} must be at least twice report_interval ({:?}): otherwise one late round ages a live cluster out and its down votes stop counting",
                mc.report_ttl, mc.report_interval
            ),
        );
    }
}

/// A ring needs a secret, at least one owner per target, and more than one renewal within
/// a Lease duration (a member must not lapse for one slow renewal).
fn check_ring(ring: &crate::model::RingConfig, errs: &mut Errors) {
    if !ring.enabled {
        return;
    }
    let at = |field: &str| format!("ring.{field}");
    if ring.replication == 0 {
        errs.push(at("replication"), "must be at least 1");
    }
    if ring.secret_file.is_none() {
        errs.push(
            at("secret_file"),
            "required: the members prove to each other that they share it before verdicts are taken",
        );
    }
    if ring.renew_period < Duration::from_millis(100) {
        errs.push(at("renew_period"), "must be at least 100ms");
    }
    if ring.renew_period.as_secs_f64() * 2.0 > ring.lease_duration.as_secs_f64() {
        errs.push(
            at("renew_period"),
            format!(
                "renew_period ({}) must be at most half of lease_duration ({}): a member must not lapse for one slow renewal",
                humantime::format_duration(ring.renew_period),
                humantime::format_duration(ring.lease_duration)
            ),
        );
    }
    if let Err(e) = crate::names::check_kube_name(&ring.name, 253) {
        errs.push(at("name"), e);
    }
}

/// client-go's rules: the leader must give up (`renew_deadline`) before a standby may take
/// over (`lease_duration`), and must get more than one try (`retry_period`) before that.
fn check_leader_election(le: &LeaderElectionConfig, errs: &mut Errors) {
    let at = |field: &str| format!("leader_election.{field}");
    let human = |d: Duration| humantime::format_duration(d).to_string();
    if le.retry_period < Duration::from_millis(100) {
        errs.push(at("retry_period"), "must be at least 100ms");
    }
    if le.renew_deadline >= le.lease_duration {
        errs.push(
            at("renew_deadline"),
            format!(
                "renew_deadline ({}) must be shorter than lease_duration ({}): the leader stops writing before a standby may take over",
                human(le.renew_deadline),
                human(le.lease_duration)
            ),
        );
    }
    if le.renew_deadline.as_secs_f64() <= 1.2 * le.retry_period.as_secs_f64() {
        errs.push(
            at("retry_period"),
            format!(
                "retry_period ({}) must be shorter than renew_deadline ({}) / 1.2, so a leader gets more than one renewal attempt",
                human(le.retry_period),
                human(le.renew_deadline)
            ),
        );
    }
    if le.lease_duration.as_secs() > i32::MAX as u64 || le.lease_duration < Duration::from_secs(1) {
        errs.push(at("lease_duration"), "must be between 1s and 68 years");
    }
    if let Err(e) = crate::names::check_kube_name(&le.name, 253) {
        errs.push(at("name"), e);
    }
    if let Some(ns) = &le.namespace {
        if let Err(e) = crate::names::check_kube_name(ns, 63) {
            errs.push(at("namespace"), e);
        }
    }
    if le.identity.as_deref() == Some("") {
        errs.push(at("identity"), "must not be empty (unset: $HOSTNAME)");
    }
}

/// `limits`, `brake`, `api` and `reload` numbers.
fn check_limits(config: &Config, errs: &mut Errors) {
    let brake = &config.brake;
    if brake.window.is_zero() {
        errs.push("brake.window", "must be more than 0");
    }
    if brake.per_tenant == Some(0) || brake.total == Some(0) {
        errs.push(
            "brake",
            "a limit of 0 would keep every failed address published; leave it out for no limit",
        );
    }
    if !(0.0..=1.0).contains(&brake.impaired_share) {
        errs.push("brake.impaired_share", "must be between 0 (off) and 1");
    }
    if brake.impaired_window.is_zero() {
        errs.push("brake.impaired_window", "must be more than 0");
    }
    if let Some(share) = brake.per_tenant_share {
        if !(share > 0.0 && share <= 1.0) {
            errs.push(
                "brake.per_tenant_share",
                "must be more than 0 and at most 1",
            );
        }
    }
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
}

/// Resolves one check given on its own (the `probe` command's flags) over the built-in
/// defaults, with the same rules as the config; errors are located under `check`.
pub fn resolve_standalone_check(
    check: &CheckOverrides,
    kinds: &dyn CheckCatalog,
) -> Result<CheckSpec, ValidationErrors> {
    let mut errs = Errors::default();
    let merged = check.over(&CheckOverrides::builtin());
    match checks::resolve_check(&merged, Some(check), "check", kinds, &mut errs) {
        Some(spec) if errs.0.is_empty() => Ok(spec),
        _ => Err(errs),
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

/// A deadline must be above zero; shared by every part with a `timeout`.
pub(crate) fn check_timeout(timeout: Duration, path: &str, errs: &mut ValidationErrors) {
    if timeout.is_zero() {
        errs.push(path, "must be greater than 0");
    }
}

/// Up to ten names for "(defined: ...)" hints.
pub(crate) fn list_names<'a>(names: impl Iterator<Item = &'a str>) -> String {
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
