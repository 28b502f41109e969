//! `kind = "azure_dns"`: settings, checks and capabilities.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ho_config::names::{check_url, normalize_domain};
use ho_config::{Delivery, FieldError, RoutingPolicy, SinkSpec, TenantUse};
use schemars::JsonSchema;
use serde::Deserialize;

use ho_engine::sink::kind::{
    check_timeout, default_timeout, BuildContext, KindFuture, Problems, SinkSettings,
};

/// Record sets in an Azure DNS zone (Azure Resource Manager, API 2018-05-01), with an
/// ownership TXT record per managed name.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AzureDnsConfig {
    /// The subscription holding the zone (a GUID).
    pub subscription_id: String,
    /// The zone's resource group.
    pub resource_group: String,
    /// The zone's name, e.g. `example.com` (normalised when parsed).
    pub zone: String,
    /// The Microsoft Entra tenant (directory) id, for a client secret. Unset: the
    /// environment's `AZURE_TENANT_ID` (workload identity), else the managed identity.
    #[serde(default)]
    pub tenant_id: Option<String>,
    /// The application (client) id: of the app registration with `client_secret_file`,
    /// or of a user-assigned managed identity. Default: `AZURE_CLIENT_ID`.
    #[serde(default)]
    pub client_id: Option<String>,
    /// File holding the app registration's client secret.
    #[serde(default)]
    pub client_secret_file: Option<PathBuf>,
    /// Environment variable holding the client secret.
    #[serde(default)]
    pub client_secret_env: Option<String>,
    /// Azure Resource Manager's base URL (tests point it elsewhere; sovereign clouds too).
    #[serde(default = "default_url")]
    pub url: String,
    /// Microsoft Entra's login URL.
    #[serde(default = "default_login_url")]
    pub login_url: String,
    /// The instance metadata service's base URL (managed identity).
    #[serde(default = "default_imds_url")]
    pub imds_url: String,
    /// API requests this sink may make in any one second, no burst on top. Resource Manager throttles writes per
    /// subscription and region with a token bucket (200, refilled at 10 a second), and its
    /// network provider, which serves DNS zones, allows 1,000 writes per 5 minutes: 3 a
    /// second stays under both.
    #[serde(default = "default_rate")]
    pub max_requests_per_second: f64,
    /// Deadline of one API request.
    #[serde(default = "default_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub timeout: Duration,
}

fn default_url() -> String {
    "https://management.azure.com".into()
}

fn default_login_url() -> String {
    "https://login.microsoftonline.com".into()
}

fn default_imds_url() -> String {
    "http://169.254.169.254".into()
}

fn default_rate() -> f64 {
    3.0
}

/// An Azure GUID: 8-4-4-4-12 hexadecimal digits.
fn is_guid(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.iter().map(|p| p.len()).eq([8, 4, 4, 4, 12])
        && parts
            .iter()
            .all(|p| p.chars().all(|c| c.is_ascii_hexdigit()))
}

impl SinkSettings for AzureDnsConfig {
    const KIND: &'static str = "azure_dns";

    fn check(&mut self, p: &mut Problems<'_>) {
        if !is_guid(&self.subscription_id) {
            p.at(
                "subscription_id",
                format!(
                    "\"{}\" is not a subscription id (a GUID)",
                    self.subscription_id
                ),
            );
        }
        if self.resource_group.is_empty() || self.resource_group.len() > 90 {
            p.at("resource_group", "must be 1-90 characters");
        }
        match normalize_domain(&self.zone) {
            Ok(zone) => self.zone = zone,
            Err(e) => {
                p.at("zone", e);
                self.zone.clear();
            }
        }
        let secret = self.client_secret_file.is_some() || self.client_secret_env.is_some();
        if secret {
            ho_engine::sink::kind::check_secret_source(
                self.client_secret_file.is_some(),
                self.client_secret_env.as_deref(),
                ("client_secret_file", "client_secret_env"),
                p,
            );
            for (field, value) in [
                ("tenant_id", &self.tenant_id),
                ("client_id", &self.client_id),
            ] {
                if value.is_none() {
                    p.at(field, "is needed with a client secret");
                }
            }
        }
        for (field, value) in [
            ("tenant_id", &self.tenant_id),
            ("client_id", &self.client_id),
        ] {
            if let Some(v) = value.as_deref().filter(|v| !is_guid(v)) {
                p.at(field, format!("\"{v}\" is not a GUID"));
            }
        }
        for (field, url) in [
            ("url", &self.url),
            ("login_url", &self.login_url),
            ("imds_url", &self.imds_url),
        ] {
            if let Err(e) = check_url(url) {
                p.at(field, e);
            }
        }
        if !(self.max_requests_per_second.is_finite() && self.max_requests_per_second > 0.0) {
            p.at("max_requests_per_second", "must be a number above 0");
        }
        check_timeout(self.timeout, p);
    }

    fn build<'a>(&'a self, ctx: BuildContext<'a>) -> KindFuture<'a> {
        Box::pin(async move { Ok(Arc::new(super::AzureDnsSink::new(self, ctx.owner_id)?) as _) })
    }

    fn preflight(&self, p: &mut Problems<'_>) {
        if self.client_secret_file.is_some() || self.client_secret_env.is_some() {
            ho_engine::sink::kind::preflight_secret(
                self.client_secret_file.as_deref(),
                self.client_secret_env.as_deref(),
                ("client_secret_file", "client_secret_env"),
                p,
            );
        }
    }
}

impl SinkSpec for AzureDnsConfig {
    fn canary_reads_listing(&self) -> bool {
        true
    }

    fn holds_reports(&self) -> bool {
        true
    }

    /// The sink writes every waiting tenant in one round and paces its API requests itself,
    /// as the other cloud sinks do.
    fn default_delivery(&self) -> Delivery {
        Delivery::local()
    }

    fn kind(&self) -> &'static str {
        Self::KIND
    }

    /// Azure DNS answers every record of a set alike: weighted and geographic answers are
    /// Traffic Manager's, not DNS records'.
    fn supports(&self, policy: RoutingPolicy) -> Result<(), &'static str> {
        match policy {
            RoutingPolicy::All | RoutingPolicy::Failover => Ok(()),
            RoutingPolicy::Weighted | RoutingPolicy::Geo => Err(
                " (Azure DNS record sets answer every address alike; weighted and geographic answers are Azure Traffic Manager's; publish them through a route53, dns_server or powerdns (lua = true) sink)",
            ),
        }
    }

    /// Domains inside the zone.
    fn check_tenant(&self, sink: &str, tenant: &TenantUse<'_>, errs: &mut Vec<FieldError>) {
        if !self.zone.is_empty() {
            tenant.domains_inside(&self.zone, sink, errs);
        }
    }
}
