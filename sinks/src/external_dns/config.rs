//! `kind = "external_dns_webhook"`: settings, checks and capabilities.

use std::sync::Arc;
use std::time::Duration;

use ho_config::names::check_url;
use ho_config::{Delivery, FieldError, RoutingPolicy, SinkSpec, TenantUse};
use schemars::JsonSchema;
use serde::Deserialize;

use ho_engine::sink::kind::{
    check_timeout, default_timeout, BuildContext, KindFuture, Problems, SinkSettings,
};

/// Any DNS provider with an external-dns webhook provider, spoken to directly, with
/// external-dns's TXT registry for ownership.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExternalDnsWebhookConfig {
    /// The provider's webhook address, as external-dns's `--webhook-provider-url` names it
    /// (a sidecar usually listens on `http://localhost:8888`).
    pub url: String,
    /// Requests to the provider in any one second, no burst on top; a provider reaches a DNS API with limits of
    /// its own (Hetzner: 3,600 an hour; IONOS: about 10 a second).
    #[serde(default = "default_rate")]
    pub max_requests_per_second: f64,
    /// Most record sets changed in one `POST /records` (external-dns sends each of its
    /// plans whole; some providers batch them to their API in pieces of this size).
    #[serde(default = "default_max_changes")]
    pub max_changes: usize,
    /// Deadline of one request.
    #[serde(default = "default_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub timeout: Duration,
    /// What stands for a wildcard's `*` in the TXT registry's mark names (a label such as
    /// `wildcard`: `*.apps.example.com`'s A mark is `a-wildcard.apps.example.com`), as
    /// external-dns's `--txt-wildcard-replacement`; give the same as any external-dns on the
    /// zone. Wildcard names need it: a mark named `a-*.apps...` is refused by most
    /// providers.
    #[serde(default)]
    pub txt_wildcard_replacement: Option<String>,
}

fn default_rate() -> f64 {
    5.0
}

fn default_max_changes() -> usize {
    500
}

impl SinkSettings for ExternalDnsWebhookConfig {
    const KIND: &'static str = "external_dns_webhook";

    fn check(&mut self, p: &mut Problems<'_>) {
        if let Err(e) = check_url(&self.url) {
            p.at("url", e);
        }
        if !(self.max_requests_per_second.is_finite() && self.max_requests_per_second > 0.0) {
            p.at("max_requests_per_second", "must be a number above 0");
        }
        if self.max_changes == 0 {
            p.at("max_changes", "must be at least 1");
        }
        check_timeout(self.timeout, p);
        if let Some(stand_in) = &self.txt_wildcard_replacement {
            let label = !stand_in.is_empty()
                && stand_in.len() <= 63
                && stand_in
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-');
            if !label {
                p.at(
                    "txt_wildcard_replacement",
                    format!("{stand_in:?} must be one DNS label (letters, digits, '-'), e.g. \"wildcard\""),
                );
            }
        }
    }

    fn build<'a>(&'a self, ctx: BuildContext<'a>) -> KindFuture<'a> {
        Box::pin(async move {
            Ok(Arc::new(super::ExternalDnsWebhookSink::new(self, ctx.owner_id)?) as _)
        })
    }
}

impl SinkSpec for ExternalDnsWebhookConfig {
    fn kind(&self) -> &'static str {
        Self::KIND
    }

    /// Reports are TXT record sets, which every external-dns provider carries.
    fn holds_reports(&self) -> bool {
        true
    }

    /// The sink writes every waiting tenant in one round and paces its requests itself.
    fn default_delivery(&self) -> Delivery {
        Delivery::local()
    }

    /// A provider answers every target of a record set alike; weights and locations are
    /// `providerSpecific` properties each provider spells its own way (or not at all).
    fn supports(&self, policy: RoutingPolicy) -> Result<(), &'static str> {
        match policy {
            RoutingPolicy::All | RoutingPolicy::Failover => Ok(()),
            RoutingPolicy::Weighted | RoutingPolicy::Geo => Err(
                " (an external-dns provider answers every target of a record set alike; publish weighted or geo names through a route53, dns_server or powerdns (lua = true) sink)",
            ),
        }
    }

    /// A provider keeps `*.apps.example.com` as a wildcard record set; its registry mark
    /// needs a stand-in for the `*`.
    fn takes_wildcards(&self) -> Result<(), &'static str> {
        match self.txt_wildcard_replacement {
            Some(_) => Ok(()),
            None => Err(
                " without txt_wildcard_replacement (as external-dns's --txt-wildcard-replacement, e.g. \"wildcard\"): its TXT registry cannot name a mark for it otherwise",
            ),
        }
    }

    /// Nothing beyond the names: the provider's domain filter is negotiated at the first
    /// write, and a name outside it fails that tenant's write with the filter named.
    fn check_tenant(&self, _: &str, _: &TenantUse<'_>, _: &mut Vec<FieldError>) {}
}
