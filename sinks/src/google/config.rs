//! `kind = "google_cloud_dns"`: settings, checks and capabilities.

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

/// Record sets in a Google Cloud DNS managed zone (API v1), with an ownership TXT record
/// per managed name.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GoogleCloudDnsConfig {
    /// The Google Cloud project holding the zone.
    pub project: String,
    /// The managed zone's name in Cloud DNS (`gcloud dns managed-zones list`, e.g.
    /// `example-com`), not its DNS name.
    pub managed_zone: String,
    /// The zone's DNS name, e.g. `example.com` (normalised when parsed): checked against
    /// the tenants' domains when the config loads and against the zone itself at the
    /// first write.
    pub zone: String,
    /// A service account key file (JSON, as `gcloud iam service-accounts keys create`
    /// writes it) with `roles/dns.admin` on the zone. Unset: the file named by
    /// `GOOGLE_APPLICATION_CREDENTIALS`, else the metadata server's account (GKE Workload
    /// Identity, a VM's service account).
    #[serde(default)]
    pub credentials_file: Option<PathBuf>,
    /// The API's base URL (tests point it elsewhere).
    #[serde(default = "default_url")]
    pub url: String,
    /// The metadata server's base URL (tests point it elsewhere).
    #[serde(default = "default_metadata_url")]
    pub metadata_url: String,
    /// API requests this sink may make in any one second, no burst on top. Cloud DNS counts requests per project
    /// per minute (see the project's quota page; 240 reads a minute is the figure Kuadrant's
    /// distributed-DNS design cites): 4 a second stays at it.
    #[serde(default = "default_rate")]
    pub max_requests_per_second: f64,
    /// Deadline of one API request.
    #[serde(default = "default_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub timeout: Duration,
}

fn default_url() -> String {
    "https://dns.googleapis.com/dns/v1".into()
}

fn default_metadata_url() -> String {
    "http://metadata.google.internal/computeMetadata/v1".into()
}

fn default_rate() -> f64 {
    4.0
}

impl GoogleCloudDnsConfig {
    /// The key file in effect: `credentials_file`, else `GOOGLE_APPLICATION_CREDENTIALS`.
    pub fn key_file(&self) -> Option<PathBuf> {
        self.credentials_file.clone().or_else(|| {
            std::env::var_os("GOOGLE_APPLICATION_CREDENTIALS")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        })
    }
}

impl SinkSettings for GoogleCloudDnsConfig {
    const KIND: &'static str = "google_cloud_dns";

    fn check(&mut self, p: &mut Problems<'_>) {
        let project_ok = (6..=30).contains(&self.project.len())
            && self
                .project
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !project_ok {
            p.at(
                "project",
                format!(
                    "\"{}\" is not a project id (6-30 lower-case letters, digits and '-')",
                    self.project
                ),
            );
        }
        if self.managed_zone.is_empty() || self.managed_zone.contains('.') {
            p.at(
                "managed_zone",
                format!(
                    "\"{}\" is not a managed zone's name (its name in Cloud DNS, e.g. example-com, not its DNS name)",
                    self.managed_zone
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
        for (field, url) in [("url", &self.url), ("metadata_url", &self.metadata_url)] {
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
        Box::pin(
            async move { Ok(Arc::new(super::GoogleCloudDnsSink::new(self, ctx.owner_id)?) as _) },
        )
    }

    fn preflight(&self, p: &mut Problems<'_>) {
        if let Some(file) = self.key_file() {
            if let Err(e) = super::auth::ServiceAccount::load(&file) {
                p.at("credentials_file", e);
            }
        }
    }
}

impl SinkSpec for GoogleCloudDnsConfig {
    fn canary_reads_listing(&self) -> bool {
        true
    }

    fn holds_reports(&self) -> bool {
        true
    }

    /// The sink writes every waiting tenant in one round and paces its API requests itself,
    /// as the Route53 and Cloudflare sinks do.
    fn default_delivery(&self) -> Delivery {
        Delivery::local()
    }

    fn kind(&self) -> &'static str {
        Self::KIND
    }

    /// Weighted round robin and geolocation are Cloud DNS routing policies; geolocation
    /// routes by Google Cloud region (`us-east1`), which Kuadrant's geo codes name on Google.
    fn supports(&self, policy: RoutingPolicy) -> Result<(), &'static str> {
        match policy {
            RoutingPolicy::All
            | RoutingPolicy::Failover
            | RoutingPolicy::Weighted
            | RoutingPolicy::Geo => Ok(()),
        }
    }

    /// Domains inside the zone; under `geo`, every endpoint's `geo` label a Google Cloud
    /// region (`europe-west1`), which Cloud DNS's geolocation policy routes by.
    fn check_tenant(&self, sink: &str, tenant: &TenantUse<'_>, errs: &mut Vec<FieldError>) {
        if !self.zone.is_empty() {
            tenant.domains_inside(&self.zone, sink, errs);
        }
        if tenant.tenant.policy != RoutingPolicy::Geo {
            return;
        }
        for (i, endpoint) in &tenant.endpoints {
            let geo = endpoint.labels.get("geo").map(String::as_str);
            if !geo.is_some_and(is_region) {
                errs.push(FieldError {
                    path: format!("endpoints[{i}].labels.geo"),
                    reason: format!(
                        "{} is not a Google Cloud region (\"europe-west1\", \"us-east1\"): sink \"{sink}\" publishes geo names with Cloud DNS's geolocation policy, which routes each client to the nearest region listed",
                        geo.map_or("none".to_owned(), |g| format!("\"{g}\""))
                    ),
                });
            }
        }
    }
}

/// Whether `geo` reads as a Google Cloud region: `area-direction` and a number
/// (`europe-west1`, `us-east1`, `northamerica-northeast2`), as Cloud DNS's geolocation
/// items name them.
fn is_region(geo: &str) -> bool {
    let Some((area, rest)) = geo.split_once('-') else {
        return false;
    };
    let direction = rest.trim_end_matches(|c: char| c.is_ascii_digit());
    let number = &rest[direction.len()..];
    [area, direction]
        .iter()
        .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase()))
        && !number.is_empty()
}

#[cfg(test)]
mod tests {
    #[test]
    fn regions_read_as_google_names_them() {
        for region in [
            "europe-west1",
            "us-east1",
            "northamerica-northeast2",
            "asia-south2",
        ] {
            assert!(super::is_region(region), "{region}");
        }
        for not in [
            "IE",
            "eu",
            "europe-west",
            "Europe-West1",
            "us_east1",
            "-west1",
            "europe-1",
        ] {
            assert!(!super::is_region(not), "{not}");
        }
    }
}
