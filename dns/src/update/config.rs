//! `kind = "rfc2136"`: settings, checks and capabilities.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ho_config::names::normalize_domain;
use ho_config::{FieldError, RoutingPolicy, SinkSpec, TenantUse};
use schemars::JsonSchema;
use serde::Deserialize;

use ho_engine::sink::kind::{
    check_timeout, default_timeout, one_cname_per_name, plain_lists_only, BuildContext, KindFuture,
    Problems, SinkSettings,
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
    pub tsig: Option<crate::wire::key::TsigConfig>,
    /// Deadline of one exchange with the server.
    #[serde(default = "default_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub timeout: Duration,
}

impl SinkSettings for Rfc2136Config {
    const KIND: &'static str = "rfc2136";

    fn check(&mut self, p: &mut Problems<'_>) {
        match normalize_domain(&self.zone) {
            Ok(zone) => self.zone = zone,
            Err(e) => {
                p.at("zone", e);
                self.zone.clear();
            }
        }
        if let Some(tsig) = &mut self.tsig {
            tsig.check("tsig", p);
        }
        check_timeout(self.timeout, p);
    }

    fn build<'a>(&'a self, ctx: BuildContext<'a>) -> KindFuture<'a> {
        Box::pin(async move { Ok(Arc::new(super::Rfc2136Sink::new(self, ctx.owner_id)?) as _) })
    }

    fn preflight(&self, p: &mut Problems<'_>) {
        if let Some(tsig) = &self.tsig {
            tsig.preflight("tsig", p);
        }
    }
}

impl SinkSpec for Rfc2136Config {
    fn kind(&self) -> &'static str {
        Self::KIND
    }

    /// The primary that takes the updates answers for them too.
    fn answers_at(&self) -> Option<SocketAddr> {
        Some(self.server)
    }

    /// A zone holds address lists; it cannot answer per client.
    fn supports(&self, policy: RoutingPolicy) -> Result<(), &'static str> {
        plain_lists_only(policy)
    }

    /// A wildcard is an ordinary owner name to an update (RFC 2136 2.5), and the primary
    /// and its secondaries answer it as RFC 4592 says; its mark sits at
    /// `_health-orchestrator.*.<parent>`, where `*` is a plain label.
    fn takes_wildcards(&self) -> Result<(), &'static str> {
        Ok(())
    }

    /// A name below the zone's apex holds one CNAME to the first healthy host
    /// (`TenantSnapshot::cname`); the apex cannot (RFC 1912 2.4) and holds its addresses.
    fn takes_cnames(&self, policy: RoutingPolicy) -> Result<(), &'static str> {
        one_cname_per_name(policy)
    }

    /// Every domain must be inside the zone.
    fn check_tenant(&self, sink: &str, tenant: &TenantUse<'_>, errs: &mut Vec<FieldError>) {
        if !self.zone.is_empty() {
            tenant.domains_inside(&self.zone, sink, errs);
        }
    }
}
