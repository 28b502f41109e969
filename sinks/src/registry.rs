//! The one place sink kinds are registered. Adding a sink is: its folder under `src/`
//! (its settings type implementing [`SinkSettings`] and `ho_config::SinkSpec` in
//! `config.rs`, the writer beside it), one line in [`KINDS`], and its back end in the
//! conformance suite (`tests/integration/conformance.rs`).

use std::any::Any;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;

use aws_config::SdkConfig;
use ho_config::validate::parse_keys;
use ho_config::{FieldError, Kinds, Parsed, Plan, SinkCatalog, SinkSpec, SinkTable};
use ho_engine::metrics::Metrics;
use ho_engine::sink::{BuildFuture, Sink, SinkBuildError, SinkFactory};
use serde::de::DeserializeOwned;

use crate::azure::config::AzureDnsConfig;
use crate::cloudflare::config::CloudflareConfig;
use crate::coredns_configmap::config::CorednsConfigMapConfig;
use crate::dns_server::config::DnsServerConfig;
use crate::google::config::GoogleCloudDnsConfig;
use crate::hosts_file::config::HostsFileConfig;
use crate::powerdns::config::PowerDnsConfig;
use crate::rfc2136::config::Rfc2136Config;
use crate::route53::config::Route53Config;
use crate::webhook::config::WebhookConfig;

/// Every sink kind this program knows, in the order error messages list them.
pub const KINDS: &[&dyn Kind] = &[
    &Registered::<HostsFileConfig>::KIND,
    &Registered::<PowerDnsConfig>::KIND,
    &Registered::<WebhookConfig>::KIND,
    &Registered::<CorednsConfigMapConfig>::KIND,
    &Registered::<Route53Config>::KIND,
    &Registered::<DnsServerConfig>::KIND,
    &Registered::<Rfc2136Config>::KIND,
    &Registered::<CloudflareConfig>::KIND,
    &Registered::<GoogleCloudDnsConfig>::KIND,
    &Registered::<AzureDnsConfig>::KIND,
];

/// A sink kind's settings: what the registry needs to parse, check and build it. The
/// settings type is also the kind's `ho_config::SinkSpec` (its capabilities).
pub trait SinkSettings: SinkSpec + DeserializeOwned + schemars::JsonSchema + 'static {
    /// The `kind` name in the config.
    const KIND: &'static str;

    /// Reports problems and normalises values in place; pure (no I/O), so `check-config`
    /// and a reload judge a config the same way.
    fn check(&mut self, problems: &mut Problems<'_>);

    /// Builds the writer: may read secrets and files, does not contact the back end.
    fn build<'a>(&'a self, ctx: BuildContext<'a>) -> KindFuture<'a>;

    /// Reads what building will read (secrets, CA files, kubeconfig, databases) and
    /// reports every problem, without binding a socket or contacting the back end: what
    /// `check-config` adds to validation so it accepts only what `run` starts.
    fn preflight(&self, _problems: &mut Problems<'_>) {}
}

/// The registration of the kind whose settings are `T`: one generic [`Kind`] for every
/// [`SinkSettings`], so registering a kind is one line in [`KINDS`].
pub struct Registered<T>(PhantomData<fn() -> T>);

impl<T> Registered<T> {
    /// The value listed in [`KINDS`].
    pub const KIND: Registered<T> = Registered(PhantomData);
}

impl<T: SinkSettings> Kind for Registered<T> {
    fn name(&self) -> &'static str {
        T::KIND
    }

    fn settings_schema(&self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        generator.subschema_for::<T>()
    }

    fn parse(&self, sink: &str, table: &SinkTable) -> Parsed {
        parse_checked(sink, table, T::check)
    }

    fn build<'a>(&'a self, spec: &'a dyn SinkSpec, ctx: BuildContext<'a>) -> KindFuture<'a> {
        spec_of::<T>(spec).build(ctx)
    }

    fn preflight(&self, sink: &str, spec: &dyn SinkSpec) -> Vec<FieldError> {
        let mut problems = Problems {
            sink,
            errors: Vec::new(),
        };
        spec_of::<T>(spec).preflight(&mut problems);
        problems.errors
    }
}

/// What the sinks need from outside their own settings when they are built.
pub struct BuildContext<'a> {
    /// The sink's name.
    pub name: &'a str,
    /// The plan it is built for (the DNS server reads which tenants it serves).
    pub plan: &'a Plan,
    /// This instance's ownership mark (`owner_id`).
    pub owner_id: &'a str,
    /// Region and credentials for AWS sinks; `None`: the standard AWS chain.
    pub aws: Option<&'a SdkConfig>,
    /// The engine's metrics.
    pub metrics: &'a Arc<Metrics>,
}

/// The future [`Kind::build`] returns.
pub type KindFuture<'a> = Pin<Box<dyn Future<Output = Result<Arc<dyn Sink>, String>> + Send + 'a>>;

/// One sink kind: parses its settings and builds its writer.
pub trait Kind: Sync {
    /// The `kind` name in the config.
    fn name(&self) -> &'static str;

    /// The JSON Schema of the kind's own keys (a reference into `generator`'s
    /// definitions), for the config's schema (`crate::schema`).
    fn settings_schema(&self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema;

    /// Parses sink `sink`'s table (see [`SinkCatalog::parse`]).
    fn parse(&self, sink: &str, table: &SinkTable) -> Parsed;

    /// Builds the writer from the spec this kind parsed.
    fn build<'a>(&'a self, spec: &'a dyn SinkSpec, ctx: BuildContext<'a>) -> KindFuture<'a>;

    /// The problems building sink `sink` would meet (see [`SinkSettings::preflight`]).
    fn preflight(&self, sink: &str, spec: &dyn SinkSpec) -> Vec<FieldError>;
}

/// The spec a kind parsed, as that kind's own type.
pub fn spec_of<T: 'static>(spec: &dyn SinkSpec) -> &T {
    (spec as &dyn Any)
        .downcast_ref::<T>()
        .expect("a spec is built by the kind that parsed it")
}

/// The component kinds of this program, as validation takes them: this crate's sink kinds
/// and the engine's check kinds.
pub const CATALOG: Kinds<'static> = Kinds {
    sinks: &SinkKinds,
    checks: &ho_engine::probe::Checks,
};

/// The catalog validation parses `[sinks.*]` tables with.
pub struct SinkKinds;

impl SinkCatalog for SinkKinds {
    fn kinds(&self) -> Vec<&'static str> {
        KINDS.iter().map(|k| k.name()).collect()
    }

    fn parse(&self, name: &str, table: &SinkTable) -> Parsed {
        let kind = KINDS
            .iter()
            .find(|k| k.name() == table.kind)
            .expect("validation checks the kind first");
        kind.parse(name, table)
    }
}

/// Builds the sinks of this crate for the engine, at start and on every reload.
#[derive(Default)]
pub struct Sinks {
    /// Region and credentials for Route53 sinks; `None` loads them the standard AWS way
    /// (environment, profile, instance role) for each sink.
    aws: Option<SdkConfig>,
}

impl Sinks {
    /// Sinks whose Route53 clients use `aws` (for embedding the engine where the AWS
    /// configuration is already at hand, and for tests against compatible servers).
    pub fn with_aws(aws: SdkConfig) -> Sinks {
        Sinks { aws: Some(aws) }
    }
}

impl SinkFactory for Sinks {
    fn build<'a>(
        &'a self,
        name: &'a str,
        plan: &'a Plan,
        metrics: &'a Arc<Metrics>,
    ) -> BuildFuture<'a> {
        Box::pin(async move {
            let spec = &*plan.sinks[name].spec;
            let kind = KINDS
                .iter()
                .find(|k| k.name() == spec.kind())
                .expect("every spec comes from a registered kind");
            let ctx = BuildContext {
                name,
                plan,
                owner_id: &plan.owner_id,
                aws: self.aws.as_ref(),
                metrics,
            };
            kind.build(spec, ctx)
                .await
                .map_err(|message| SinkBuildError {
                    sink: name.to_owned(),
                    message,
                })
        })
    }
}

/// What `run` would refuse in a valid `plan`: every sink's secrets, CA files, kubeconfig and
/// databases, and every https target's CA file, read as building them reads them. Nothing
/// binds a socket or contacts a back end.
pub fn preflight(plan: &Plan) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (name, sink) in &plan.sinks {
        let kind = KINDS
            .iter()
            .find(|k| k.name() == sink.spec.kind())
            .expect("every spec comes from a registered kind");
        errors.extend(kind.preflight(name, &*sink.spec));
    }
    for (path, file) in [
        ("api.token_file", &plan.api_token_file),
        ("api.admin_token_file", &plan.api_admin_token_file),
        ("api.heartbeat_token_file", &plan.api_heartbeat_token_file),
    ] {
        if let Some(file) = file {
            if let Err(e) = crate::secret::Secret::load(Some(file), None) {
                errors.push(FieldError {
                    path: path.into(),
                    reason: e.to_string(),
                });
            }
        }
    }
    // Every probe as the engine builds it (TLS trust: CA files read); a problem shared by
    // several endpoints is reported at the first.
    let mut ctx = ho_engine::probe::ProbeContext::default();
    let mut seen = std::collections::HashSet::new();
    for (i, endpoint) in plan.endpoints.iter().enumerate() {
        for (j, target) in endpoint.targets().enumerate() {
            if let Err(e) = ho_engine::probe::Probe::new(&plan.targets[target], &mut ctx) {
                if seen.insert(e.to_string()) {
                    errors.push(FieldError {
                        path: match j {
                            0 => format!("endpoints[{i}].check"),
                            j => format!("endpoints[{i}].checks[{}]", j - 1),
                        },
                        reason: e.to_string(),
                    });
                }
            }
        }
    }
    errors
}

/// Loads, layers and validates config files with this crate's sink kinds.
pub fn load_plan(files: &[impl AsRef<std::path::Path>]) -> Result<Plan, ho_config::ConfigError> {
    ho_config::load_plan(files, &CATALOG)
}

/// Problems found in one sink's table, located under `sinks.NAME`.
pub struct Problems<'a> {
    sink: &'a str,
    errors: Vec<FieldError>,
}

impl Problems<'_> {
    /// A problem with field `field` of the table.
    pub fn at(&mut self, field: &str, reason: impl Into<String>) {
        self.errors.push(FieldError {
            path: format!("sinks.{}.{field}", self.sink),
            reason: reason.into(),
        });
    }

    /// A problem with the table as a whole (fields that go together).
    pub fn table(&mut self, reason: impl Into<String>) {
        self.errors.push(FieldError {
            path: format!("sinks.{}", self.sink),
            reason: reason.into(),
        });
    }
}

/// Parses a table into `T`, then lets `check` report problems and normalise values in
/// place (sinks receive normalised settings and never normalise again).
pub fn parse_checked<T: SinkSpec + DeserializeOwned>(
    sink: &str,
    table: &SinkTable,
    check: impl FnOnce(&mut T, &mut Problems<'_>),
) -> Parsed {
    match parse_keys::<T>(&table.settings, &format!("sinks.{sink}")) {
        Err(errors) => Parsed { spec: None, errors },
        Ok(mut spec) => {
            let mut problems = Problems {
                sink,
                errors: Vec::new(),
            };
            check(&mut spec, &mut problems);
            Parsed {
                spec: Some(Arc::new(spec)),
                errors: problems.errors,
            }
        }
    }
}

/// `supports` of a kind that writes plain address lists: `all` and `failover` only.
pub fn plain_lists_only(policy: ho_config::RoutingPolicy) -> Result<(), &'static str> {
    use ho_config::RoutingPolicy::{All, Failover};
    if matches!(policy, All | Failover) {
        Ok(())
    } else {
        Err("")
    }
}

/// Deadline of one back-end request when a sink does not set `timeout`.
pub fn default_timeout() -> std::time::Duration {
    std::time::Duration::from_secs(5)
}

/// A sink's `timeout` must be above zero.
pub fn check_timeout(timeout: std::time::Duration, p: &mut Problems<'_>) {
    if timeout.is_zero() {
        p.at("timeout", "must be greater than 0");
    }
}
