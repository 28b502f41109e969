//! `kind = "powerdns"`: settings, checks and capabilities.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ho_config::names::{check_url, normalize_domain};
use ho_config::{FieldError, RoutingPolicy, SinkSpec, TenantUse};
use schemars::JsonSchema;
use serde::Deserialize;

use ho_engine::sink::kind::{
    check_timeout, default_timeout, one_cname_per_name, BuildContext, KindFuture, Problems,
    SinkSettings,
};

/// The PowerDNS Authoritative HTTP API: one rrset per domain and address family.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PowerDnsConfig {
    /// Base URL of the API, e.g. `http://pdns:8081`.
    pub url: String,
    /// File holding the API key (preferred: never in the config or the environment dump).
    #[serde(default)]
    pub api_key_file: Option<PathBuf>,
    /// Environment variable holding the API key.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// PowerDNS server id.
    #[serde(default = "default_server_id")]
    pub server_id: String,
    /// The zone holding the tenants' domains, e.g. `tenant-a.io.`; normalised when parsed
    /// (lower case, no trailing dot).
    pub zone: String,
    /// Take over rrsets that exist without this orchestrator's ownership mark. Off by
    /// default: records someone else wrote are left alone and reported.
    #[serde(default)]
    pub adopt: bool,
    /// Write LUA records (`pickwhashed` for `weighted`, `country()` for `geo` tenants) so
    /// PowerDNS answers per client. Needs `enable-lua-records` on the server.
    #[serde(default)]
    pub lua: bool,
    /// Deadline of one API request.
    #[serde(default = "default_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub timeout: Duration,
}

fn default_server_id() -> String {
    "localhost".into()
}

impl SinkSettings for PowerDnsConfig {
    const KIND: &'static str = "powerdns";

    fn check(&mut self, p: &mut Problems<'_>) {
        if let Err(e) = check_url(&self.url) {
            p.at("url", e);
        }
        ho_engine::sink::kind::check_secret_source(
            self.api_key_file.is_some(),
            self.api_key_env.as_deref(),
            ("api_key_file", "api_key_env"),
            p,
        );
        match normalize_domain(&self.zone) {
            Ok(zone) => self.zone = zone,
            Err(e) => {
                p.at("zone", e);
                self.zone.clear();
            }
        }
        if self.server_id.is_empty() || self.server_id.contains('/') {
            p.at("server_id", "must be a non-empty id without '/'");
        }
        check_timeout(self.timeout, p);
    }

    fn build<'a>(&'a self, ctx: BuildContext<'a>) -> KindFuture<'a> {
        Box::pin(async move { Ok(Arc::new(super::PowerDnsSink::new(self, ctx.owner_id)?) as _) })
    }

    fn preflight(&self, p: &mut Problems<'_>) {
        ho_engine::sink::kind::preflight_secret(
            self.api_key_file.as_deref(),
            self.api_key_env.as_deref(),
            ("api_key_file", "api_key_env"),
            p,
        );
    }
}

impl SinkSpec for PowerDnsConfig {
    /// PowerDNS serves wildcard rrsets (`*.apps.example.com.`) as RFC 4592 says: for names
    /// that do not exist, never for one that does.
    fn takes_wildcards(&self) -> Result<(), &'static str> {
        Ok(())
    }

    fn holds_reports(&self) -> bool {
        true
    }

    /// The API reports the server's `local-address` and `local-port`.
    fn finds_dns_port(&self) -> bool {
        true
    }

    fn kind(&self) -> &'static str {
        Self::KIND
    }

    /// Per-client answers (`weighted`, `geo`) need LUA records.
    fn supports(&self, policy: RoutingPolicy) -> Result<(), &'static str> {
        match policy {
            RoutingPolicy::All | RoutingPolicy::Failover => Ok(()),
            RoutingPolicy::Weighted | RoutingPolicy::Geo if self.lua => Ok(()),
            RoutingPolicy::Weighted | RoutingPolicy::Geo => Err(" (set lua = true on it)"),
        }
    }

    /// A CNAME rrset holds one host: the first of the tenant's (`TenantSnapshot::cname`).
    /// A per-client CNAME would need a `LUA CNAME` record, not written yet.
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
