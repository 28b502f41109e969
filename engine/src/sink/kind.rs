//! How a sink kind is registered: its settings type implements [`SinkSettings`] (parse,
//! check, preflight, build) and one generic [`Registered`] turns it into a [`Kind`], so the
//! list of kinds the program knows (crate `ho-kinds`) is one line per kind. The crates that
//! hold sink kinds (`ho-dns`, `ho-sinks`, `ho-kube`) implement this; none of them knows the
//! others.

use std::any::{Any, TypeId};
use std::future::Future;
use std::marker::PhantomData;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;

use ho_config::validate::parse_keys;
use ho_config::{FieldError, Parsed, Plan, SinkCatalog, SinkSpec, SinkTable};
use serde::de::DeserializeOwned;

use super::{SetupError, Sink};
use crate::metrics::Metrics;

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
/// [`SinkSettings`], so registering a kind is one line in a list of kinds.
pub struct Registered<T>(PhantomData<fn() -> T>);

impl<T> Registered<T> {
    /// The value listed in a list of kinds.
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
    /// What the program hands kinds that need more than their settings (the AWS sinks'
    /// region and credentials), by type; empty: each kind finds its own the standard way.
    pub extensions: &'a Extensions,
    /// The engine's metrics.
    pub metrics: &'a Arc<Metrics>,
}

/// Values the program hands the kinds that want them, one per type: the engine knows none of
/// them (an AWS SDK configuration is the AWS sinks' business), the kinds look theirs up.
#[derive(Default)]
pub struct Extensions(Vec<(TypeId, Box<dyn Any + Send + Sync>)>);

impl Extensions {
    /// Adds `value`, replacing one of the same type.
    pub fn insert<T: Any + Send + Sync>(&mut self, value: T) {
        self.0.retain(|(id, _)| *id != TypeId::of::<T>());
        self.0.push((TypeId::of::<T>(), Box::new(value)));
    }

    /// The value of type `T`, if one was given.
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.0
            .iter()
            .find(|(id, _)| *id == TypeId::of::<T>())
            .and_then(|(_, value)| value.downcast_ref())
    }
}

/// The future [`Kind::build`] returns.
pub type KindFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Arc<dyn Sink>, SetupError>> + Send + 'a>>;

/// One sink kind: parses its settings and builds its writer.
pub trait Kind: Sync {
    /// The `kind` name in the config.
    fn name(&self) -> &'static str;

    /// The JSON Schema of the kind's own keys (a reference into `generator`'s
    /// definitions), for the config's schema.
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

/// Problems found in one sink's table, located under `sinks.NAME`.
pub struct Problems<'a> {
    sink: &'a str,
    errors: Vec<FieldError>,
}

impl Problems<'_> {
    /// A problem with field `field` of the table.
    pub fn at(&mut self, field: &str, reason: impl std::fmt::Display) {
        self.errors.push(FieldError {
            path: format!("sinks.{}.{field}", self.sink),
            reason: reason.to_string(),
        });
    }

    /// A problem with the table as a whole (fields that go together).
    pub fn table(&mut self, reason: impl std::fmt::Display) {
        self.errors.push(FieldError {
            path: format!("sinks.{}", self.sink),
            reason: reason.to_string(),
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

/// `takes_cnames` of a kind whose back end holds one CNAME per name, written from
/// `TenantSnapshot::cname` (the first healthy host by priority): `all` and `failover`; a
/// per-query pick (`weighted`, `geo`) is the embedded server's.
pub fn one_cname_per_name(policy: ho_config::RoutingPolicy) -> Result<(), &'static str> {
    plain_lists_only(policy).map_err(|_| {
        " (a CNAME rrset names one host; a dns_server sink picks one per query by the policy)"
    })
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

/// A list of sink kinds, as validation parses `[sinks.*]` tables with it and as the program
/// builds sinks from it.
pub struct KindList(pub &'static [&'static dyn Kind]);

impl KindList {
    /// The kind named `name`.
    pub fn find(&self, name: &str) -> Option<&'static dyn Kind> {
        self.0.iter().copied().find(|k| k.name() == name)
    }

    /// The kind that parsed `spec`.
    pub fn of(&self, spec: &dyn SinkSpec) -> &'static dyn Kind {
        self.find(spec.kind())
            .expect("every spec comes from a listed kind")
    }
}

impl SinkCatalog for KindList {
    fn kinds(&self) -> Vec<&'static str> {
        self.0.iter().map(|k| k.name()).collect()
    }

    fn parse(&self, name: &str, table: &SinkTable) -> Parsed {
        self.find(&table.kind)
            .expect("validation checks the kind first")
            .parse(name, table)
    }
}

/// A secret must come from exactly one of a file or an environment variable, never from
/// the config itself.
pub fn check_secret_source(
    file: bool,
    env: Option<&str>,
    (file_field, env_field): (&str, &str),
    p: &mut Problems<'_>,
) {
    match (file, env) {
        (true, Some(_)) => p.table(format!("set {file_field} or {env_field}, not both")),
        (false, None) => p.table(format!(
            "needs {file_field} or {env_field}: secrets are never written in the config"
        )),
        (false, Some("")) => p.at(env_field, "must not be empty"),
        _ => {}
    }
}

/// Loads the secret a sink names, as building the sink will, and reports a failure at the
/// field that names the source (`check-config`'s preflight).
pub fn preflight_secret(
    file: Option<&Path>,
    env: Option<&str>,
    (file_field, env_field): (&str, &str),
    p: &mut Problems<'_>,
) {
    if let Err(e) = crate::secret::Secret::load(file, env) {
        p.at(
            if file.is_some() {
                file_field
            } else {
                env_field
            },
            e.to_string(),
        );
    }
}
