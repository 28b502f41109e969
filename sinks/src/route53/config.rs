//! `kind = "route53"`: settings, checks and capabilities.

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

/// AWS Route53 record sets, with an ownership TXT record per managed name.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Route53Config {
    /// The hosted zone's id, e.g. `Z0123456789ABCDEFGHIJ`; a `/hostedzone/` prefix is
    /// removed when parsed.
    pub hosted_zone_id: String,
    /// The hosted zone's name, e.g. `example.com` (normalised when parsed): checked
    /// against the tenants' domains when the config loads and against the zone itself at
    /// the first write.
    pub zone: String,
    /// AWS region of the API client. Unset: the standard chain (`AWS_REGION`, profile).
    #[serde(default)]
    pub region: Option<String>,
    /// Another Route53-compatible endpoint (tests, LocalStack, moto). Unset: AWS.
    #[serde(default)]
    pub endpoint_url: Option<String>,
    /// How `all` and `failover` tenants are written: `multivalue` (one multivalue-answer
    /// record set per address, named after its endpoint) or `simple` (one record set per
    /// domain and family holding every address).
    #[serde(default)]
    pub record_style: RecordStyle,
    /// Route53 API requests this sink may make in any one second, no burst on top (list and
    /// change together); AWS allows 5 per account.
    #[serde(default = "default_route53_rate")]
    pub max_requests_per_second: f64,
    /// Deadline of one API request.
    #[serde(default = "default_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub timeout: Duration,
    /// Host-name suffixes an `answer = "cname"` tenant's apex may alias, each with the
    /// hosted zone id of the AWS targets under it: an ELB's canonical hosted zone id in its
    /// region (AWS's "Elastic Load Balancing endpoints" table, or `aws elbv2
    /// describe-load-balancers`), e.g. `{ "us-east-1.elb.amazonaws.com" = "Z35SXDOTRQ7X7K" }`.
    /// The apex then holds A and AAAA aliases of the host the policy picks, which follow its
    /// addresses as they rotate; a host matching none is published as its addresses.
    #[serde(default)]
    pub alias_zones: std::collections::BTreeMap<String, String>,
}

/// Route53 record shape for tenants without per-client routing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RecordStyle {
    /// One multivalue-answer record set per address (Route53 answers up to 8 at random).
    #[default]
    Multivalue,
    /// One plain record set per domain and family with every address.
    Simple,
}

fn default_route53_rate() -> f64 {
    5.0
}

impl SinkSettings for Route53Config {
    const KIND: &'static str = "route53";

    fn check(&mut self, p: &mut Problems<'_>) {
        let id = self.hosted_zone_id.trim_start_matches("/hostedzone/");
        if id.is_empty() || !id.chars().all(|ch| ch.is_ascii_alphanumeric()) {
            p.at(
                "hosted_zone_id",
                format!(
                    "\"{}\" is not a hosted zone id (letters and digits, e.g. Z0123456789ABC)",
                    self.hosted_zone_id
                ),
            );
        }
        self.hosted_zone_id = id.to_owned();
        match normalize_domain(&self.zone) {
            Ok(zone) => self.zone = zone,
            Err(e) => {
                p.at("zone", e);
                self.zone.clear();
            }
        }
        if let Some(url) = &self.endpoint_url {
            if let Err(e) = check_url(url) {
                p.at("endpoint_url", e);
            }
        }
        if self.region.as_ref().is_some_and(String::is_empty) {
            p.at("region", "must not be empty when set");
        }
        if !(self.max_requests_per_second.is_finite() && self.max_requests_per_second > 0.0) {
            p.at("max_requests_per_second", "must be a number above 0");
        }
        check_timeout(self.timeout, p);
        for (suffix, zone) in &self.alias_zones {
            if let Err(e) = normalize_domain(suffix) {
                p.at(&format!("alias_zones.\"{suffix}\""), e);
            }
            let id = zone.trim_start_matches("/hostedzone/");
            if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric()) {
                p.at(
                    &format!("alias_zones.\"{suffix}\""),
                    format!("{zone:?} is not a hosted zone id (letters and digits, e.g. Z35SXDOTRQ7X7K)"),
                );
            }
        }
    }

    fn build<'a>(&'a self, ctx: BuildContext<'a>) -> KindFuture<'a> {
        Box::pin(async move {
            let sink = match ctx.extensions.get::<aws_config::SdkConfig>() {
                Some(sdk) => super::Route53Sink::new(self, ctx.owner_id, sdk),
                None => {
                    let sdk = super::standard_sdk_config(self).await;
                    super::Route53Sink::new(self, ctx.owner_id, &sdk)
                }
            };
            Ok(Arc::new(sink) as _)
        })
    }
}

impl SinkSpec for Route53Config {
    /// Route53 keeps `*.apps.example.com` as a wildcard record set (listed back as
    /// `\\052.apps...`, read as `*`), answered as RFC 4592 says.
    fn takes_wildcards(&self) -> Result<(), &'static str> {
        Ok(())
    }

    fn canary_reads_listing(&self) -> bool {
        true
    }

    fn holds_reports(&self) -> bool {
        true
    }

    /// A name below the zone's apex holds one CNAME record set to the first healthy host
    /// (`TenantSnapshot::cname`); the apex, which cannot hold a CNAME, holds its addresses.
    fn takes_cnames(&self, policy: RoutingPolicy) -> Result<(), &'static str> {
        one_cname_per_name(policy)
    }

    /// The sink writes every waiting tenant in one round and paces its API requests itself
    /// (`max_requests_per_second`): limiting tenant writes as well (10 a second by default)
    /// made 500 tenants changing at once wait 50 s to be handed over.
    fn default_delivery(&self) -> Delivery {
        Delivery::local()
    }

    fn kind(&self) -> &'static str {
        Self::KIND
    }

    /// Weighted and geolocation record sets express every policy.
    fn supports(&self, _: RoutingPolicy) -> Result<(), &'static str> {
        Ok(())
    }

    /// Domains inside the zone; weights 0-255 (of weighted tenants, and of geo tenants
    /// weighting inside each location) and geolocations as ISO country codes (`DE`) or US
    /// states (`US-CA`): anything else the API would refuse at the first write.
    fn check_tenant(&self, sink: &str, tenant: &TenantUse<'_>, errs: &mut Vec<FieldError>) {
        let mut push = |path: String, reason: String| errs.push(FieldError { path, reason });
        let t = tenant.tenant;
        let geo = t.policy == RoutingPolicy::Geo;
        // Weighted tenants, and geo tenants weighting inside each location (a record tree).
        let weighs = t.policy == RoutingPolicy::Weighted
            || (geo && (!t.weights.is_empty() || t.default_weight.is_some()));
        if weighs {
            for (i, ep) in &tenant.endpoints {
                if ep.weight.is_some_and(|w| w > 255) {
                    push(
                        format!("endpoints[{i}].weight"),
                        format!("route53 sink \"{sink}\" takes weights 0-255"),
                    );
                }
            }
            if t.default_weight.is_some_and(|w| w > 255) {
                push(
                    format!("{}.default_weight", tenant.path),
                    format!("route53 sink \"{sink}\" takes weights 0-255"),
                );
            }
            for (ri, rule) in t.weights.iter().enumerate() {
                if rule.weight > 255 {
                    push(
                        format!("{}.weights[{ri}].weight", tenant.path),
                        format!("route53 sink \"{sink}\" takes weights 0-255"),
                    );
                }
            }
        }
        if geo {
            for (i, ep) in &tenant.endpoints {
                if let Some(g) = ep.labels.get("geo").filter(|g| !is_location(g)) {
                    push(format!("endpoints[{i}].labels.geo"), format!("\"{g}\" is not a Route53 location for sink \"{sink}\" (an ISO country code such as DE, a US state such as US-CA, or a continent such as GEO-EU)"));
                }
            }
        }
        if !self.zone.is_empty() {
            tenant.domains_inside(&self.zone, sink, errs);
        }
    }
}

/// An ISO 3166 country code, a US state as `US-XX`, or a continent as `GEO-EU`.
fn is_location(g: &str) -> bool {
    if ho_engine::sink::geo::continent_of_label(g).is_some() {
        return true;
    }
    let (country, sub) = g.split_once('-').unwrap_or((g, ""));
    country.len() == 2
        && country.chars().all(|c| c.is_ascii_uppercase())
        && (sub.is_empty() || g.starts_with("US-"))
        && sub.len() <= 3
        && sub
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
}
