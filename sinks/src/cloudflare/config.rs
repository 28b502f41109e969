//! `kind = "cloudflare"`: settings, checks and capabilities.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ho_config::names::{check_url, normalize_domain};
use ho_config::{Delivery, FieldError, RoutingPolicy, SinkSpec, TenantUse};
use schemars::JsonSchema;
use serde::Deserialize;

use ho_engine::sink::kind::{
    check_timeout, default_timeout, one_cname_per_name, BuildContext, KindFuture, Problems,
    SinkSettings,
};

/// Cloudflare DNS records (API v4), with an ownership TXT record per managed name.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CloudflareConfig {
    /// The zone's id (32 hexadecimal characters, on the zone's overview page).
    pub zone_id: String,
    /// The zone's name, e.g. `example.com` (normalised when parsed): checked against the
    /// tenants' domains when the config loads and against the zone itself at the first
    /// write.
    pub zone: String,
    /// File holding an API token with `Zone.DNS Edit` on the zone (preferred: never in
    /// the config or the environment dump).
    #[serde(default)]
    pub api_token_file: Option<PathBuf>,
    /// Environment variable holding the API token.
    #[serde(default)]
    pub api_token_env: Option<String>,
    /// The API's base URL (tests point it elsewhere).
    #[serde(default = "default_url")]
    pub url: String,
    /// API requests this sink may make in any one second, no burst on top: Cloudflare allows 1,200 per five
    /// minutes per user, 4 a second.
    #[serde(default = "default_rate")]
    pub max_requests_per_second: f64,
    /// Most operations in one batch request: 200 on the Free plan, up to 3,500 on paid
    /// plans. A mass failure of many tenants goes out in fewer, larger requests with it.
    #[serde(default = "default_max_batch")]
    pub max_batch: usize,
    /// The smallest TTL the zone's plan takes: 60s, or 30s on Enterprise. A tenant's
    /// `ttl` or `degraded_ttl` below it is a config error, not a silent change.
    #[serde(default = "default_min_ttl", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub min_ttl: Duration,
    /// Deadline of one API request.
    #[serde(default = "default_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub timeout: Duration,
}

fn default_min_ttl() -> Duration {
    Duration::from_secs(60)
}

fn default_url() -> String {
    "https://api.cloudflare.com/client/v4".into()
}

fn default_rate() -> f64 {
    4.0
}

fn default_max_batch() -> usize {
    super::api::FREE_BATCH
}

impl SinkSettings for CloudflareConfig {
    const KIND: &'static str = "cloudflare";

    fn check(&mut self, p: &mut Problems<'_>) {
        if self.zone_id.len() != 32 || !self.zone_id.chars().all(|c| c.is_ascii_hexdigit()) {
            p.at(
                "zone_id",
                format!(
                    "\"{}\" is not a zone id (32 hexadecimal characters)",
                    self.zone_id
                ),
            );
        }
        match normalize_domain(&self.zone) {
            Ok(zone) => self.zone = zone,
            Err(e) => {
                p.at("zone", e);
                self.zone.clear();
            }
        }
        ho_engine::sink::kind::check_secret_source(
            self.api_token_file.is_some(),
            self.api_token_env.as_deref(),
            ("api_token_file", "api_token_env"),
            p,
        );
        if let Err(e) = check_url(&self.url) {
            p.at("url", e);
        }
        if !(self.max_requests_per_second.is_finite() && self.max_requests_per_second > 0.0) {
            p.at("max_requests_per_second", "must be a number above 0");
        }
        if !(1..=super::api::PAID_BATCH).contains(&self.max_batch) {
            p.at(
                "max_batch",
                format!(
                    "{} is not between 1 and {} (200 on the Free plan)",
                    self.max_batch,
                    super::api::PAID_BATCH
                ),
            );
        }
        if self.min_ttl != Duration::from_secs(30) && self.min_ttl != Duration::from_secs(60) {
            p.at("min_ttl", "is 60s, or 30s on an Enterprise plan");
        }
        check_timeout(self.timeout, p);
    }

    fn build<'a>(&'a self, ctx: BuildContext<'a>) -> KindFuture<'a> {
        Box::pin(async move { Ok(Arc::new(super::CloudflareSink::new(self, ctx.owner_id)?) as _) })
    }

    fn preflight(&self, p: &mut Problems<'_>) {
        ho_engine::sink::kind::preflight_secret(
            self.api_token_file.as_deref(),
            self.api_token_env.as_deref(),
            ("api_token_file", "api_token_env"),
            p,
        );
    }
}

impl SinkSpec for CloudflareConfig {
    fn canary_reads_listing(&self) -> bool {
        true
    }

    fn holds_reports(&self) -> bool {
        true
    }

    /// One CNAME per name to the first healthy host (`TenantSnapshot::cname`), the apex
    /// included: Cloudflare flattens a CNAME there into the target's addresses.
    fn takes_cnames(&self, policy: RoutingPolicy) -> Result<(), &'static str> {
        one_cname_per_name(policy)
    }

    /// The sink writes every waiting tenant in one round and paces its API requests itself
    /// (`max_requests_per_second`), as the Route53 sink does: the default per-tenant write
    /// limit would only make a mass failure wait to be handed over.
    fn default_delivery(&self) -> Delivery {
        Delivery::local()
    }

    fn kind(&self) -> &'static str {
        Self::KIND
    }

    /// Cloudflare answers a `*` first label as a wildcard (RFC 4592, several levels deep);
    /// the mark at `_health-orchestrator.*.<parent>` is an ordinary name to it, where a `*`
    /// below the first label is a literal character.
    fn takes_wildcards(&self) -> Result<(), &'static str> {
        Ok(())
    }

    /// Cloudflare's DNS answers every record of a name alike: per-client answers are its
    /// Load Balancing product, not records.
    fn supports(&self, policy: RoutingPolicy) -> Result<(), &'static str> {
        match policy {
            RoutingPolicy::All | RoutingPolicy::Failover => Ok(()),
            RoutingPolicy::Weighted | RoutingPolicy::Geo => Err(
                " (Cloudflare DNS records answer every address alike; publish weighted or geo names through a route53, dns_server or powerdns (lua = true) sink)",
            ),
        }
    }

    /// Domains inside the zone; TTLs the zone's plan takes (`min_ttl` to a day).
    fn check_tenant(&self, sink: &str, tenant: &TenantUse<'_>, errs: &mut Vec<FieldError>) {
        let t = tenant.tenant;
        for (key, ttl) in [("ttl", Some(t.ttl)), ("degraded_ttl", t.degraded_ttl)] {
            if let Some(ttl) = ttl.filter(|d| *d < self.min_ttl || *d > Duration::from_secs(86_400))
            {
                errs.push(FieldError {
                    path: format!("{}.{key}", tenant.path),
                    reason: format!(
                        "cloudflare sink \"{sink}\" takes TTLs from {} (its min_ttl) to 1d, not {}",
                        humantime::format_duration(self.min_ttl),
                        humantime::format_duration(ttl)
                    ),
                });
            }
        }
        if !self.zone.is_empty() {
            tenant.domains_inside(&self.zone, sink, errs);
        }
    }
}
