//! `kind = "rfc2136"`: settings, checks and capabilities.

use std::any::Any;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ho_config::names::normalize_domain;
use ho_config::{FieldError, Parsed, RoutingPolicy, SinkSpec, SinkTable, TenantUse};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::registry::{
    check_timeout, default_timeout, parse_checked, plain_lists_only, spec_of, BuildContext, Kind,
    KindFuture,
};

/// Any DNS server that takes RFC 2136 dynamic updates (BIND, Knot, PowerDNS with
/// dnsupdate, Windows DNS, Infoblox): each write reads the names' current records and
/// sends one UPDATE whose prerequisites say "still as read", signed with TSIG.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Rfc2136Config {
    /// The primary server's address (`"192.0.2.53:53"`); reads and updates go over TCP.
    pub server: SocketAddr,
    /// The zone holding the tenants' domains; normalised (lower case, no trailing dot).
    pub zone: String,
    /// The TSIG key updates are signed with. Without it updates go unsigned, which only a
    /// server restricting updates by address accepts.
    #[serde(default)]
    pub tsig: Option<TsigConfig>,
    /// Deadline of one exchange with the server.
    #[serde(default = "default_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub timeout: Duration,
}

/// A TSIG key (RFC 8945).
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TsigConfig {
    /// The key's name, as in the server's `key "NAME" { ... }`.
    pub name: String,
    /// `hmac-sha256` (tsig-keygen's default), `hmac-sha384` or `hmac-sha512`.
    #[serde(default = "default_algorithm")]
    pub algorithm: String,
    /// File holding the base64 secret: the bare secret, or a BIND `key` statement as
    /// `tsig-keygen` prints it. Read at load and reload, never logged.
    pub secret_file: PathBuf,
}

fn default_algorithm() -> String {
    "hmac-sha256".into()
}

/// TSIG algorithms the signer implements.
pub const ALGORITHMS: [&str; 3] = ["hmac-sha256", "hmac-sha384", "hmac-sha512"];

/// The kind, as registered.
pub struct Rfc2136Kind;

/// Registered in [`crate::registry::KINDS`].
pub const KIND: Rfc2136Kind = Rfc2136Kind;

impl Kind for Rfc2136Kind {
    fn name(&self) -> &'static str {
        "rfc2136"
    }

    fn settings_schema(&self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        generator.subschema_for::<Rfc2136Config>()
    }

    fn parse(&self, sink: &str, table: &SinkTable) -> Parsed {
        parse_checked(sink, table, |c: &mut Rfc2136Config, p| {
            match normalize_domain(&c.zone) {
                Ok(zone) => c.zone = zone,
                Err(e) => {
                    p.at("zone", e);
                    c.zone.clear();
                }
            }
            if let Some(tsig) = &mut c.tsig {
                match normalize_domain(&tsig.name) {
                    Ok(name) => tsig.name = name,
                    Err(e) => p.at("tsig.name", e),
                }
                tsig.algorithm.make_ascii_lowercase();
                if !ALGORITHMS.contains(&tsig.algorithm.as_str()) {
                    p.at(
                        "tsig.algorithm",
                        format!(
                            "\"{}\" is not supported (one of {}; tsig-keygen makes hmac-sha256 keys)",
                            tsig.algorithm,
                            ALGORITHMS.join(", ")
                        ),
                    );
                }
            }
            check_timeout(c.timeout, p);
        })
    }

    fn build<'a>(&'a self, spec: &'a dyn SinkSpec, ctx: BuildContext<'a>) -> KindFuture<'a> {
        let config = spec_of::<Rfc2136Config>(spec);
        Box::pin(async move { Ok(Arc::new(super::Rfc2136Sink::new(config, ctx.owner_id)?) as _) })
    }
}

impl SinkSpec for Rfc2136Config {
    fn kind(&self) -> &'static str {
        KIND.name()
    }

    /// A zone holds address lists; it cannot answer per client.
    fn supports(&self, policy: RoutingPolicy) -> Result<(), &'static str> {
        plain_lists_only(policy)
    }

    /// Every domain must be inside the zone.
    fn check_tenant(&self, sink: &str, tenant: &TenantUse<'_>, errs: &mut Vec<FieldError>) {
        if !self.zone.is_empty() {
            tenant.domains_inside(&self.zone, sink, errs);
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
