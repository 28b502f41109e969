//! `kind = "google_cloud_dns"`: record sets in a Google Cloud DNS managed zone through its
//! REST API v1, by hand over the HTTP client the other network sinks share (Google's Rust
//! client crates bring their own HTTP and auth stacks for the three calls used; the token
//! exchange is a signed JWT, [`auth`]).
//!
//! The sink writes zones, not tenants, as the Route53 and Cloudflare sinks do: tenants due
//! while a round runs wait for it and go out together. A round lists the zone once (1,000
//! sets a page), decides each waiting tenant's change from it ([`plan::for_tenant`]:
//! ownership first, then the sets that differ) and packs the tenants into as few
//! `changes.create` calls as Cloud DNS takes (1,000 additions and 1,000 deletions each; a
//! tenant's sets in one change, which Cloud DNS applies atomically). Requests are paced
//! to `max_requests_per_second` in any one second. A change refused because the zone moved since
//! the listing (`conditionNotMet`, `alreadyExists`) is retried from a new listing.

pub mod auth;
pub mod config;

mod api;
mod plan;
mod reports;

use bytes::Bytes;
use ho_config::TlsCheck;
use ho_engine::sink::SinkError;
use hyper::Method;
use serde_json::Value;

use self::api::{Change, Listed, Page};
use self::auth::{Credentials, ServiceAccount, Tokens};
use self::config::GoogleCloudDnsConfig;
use crate::bearer::refusal;
use crate::http::{bearer_json, Answer, HttpClient};
use crate::listing::served;
use crate::pace::Pacer;
use crate::rounds::packed::{planned, send_packed};
use crate::rounds::provider::{zone_named, Provider, RoundsSink, Serve};
use crate::rounds::{Done, Outcome, Round};
use ho_engine::sink::SetupError;

/// Writes tenants' records into one Cloud DNS managed zone.
pub type GoogleCloudDnsSink = RoundsSink<CloudDns>;

/// The calls of the Cloud DNS API on one managed zone.
pub struct CloudDns {
    client: HttpClient,
    /// `{url}/projects/{project}/managedZones/{managed_zone}`.
    zone_url: String,
    zone: String,
    tokens: Tokens,
    owner_id: String,
    pacer: Pacer,
}

impl GoogleCloudDnsSink {
    /// Builds the sink; fails if the key file cannot be read.
    pub fn new(
        config: &GoogleCloudDnsConfig,
        owner_id: &str,
    ) -> Result<GoogleCloudDnsSink, SetupError> {
        let credentials = match config.key_file() {
            Some(file) => Credentials::Key(Box::new(ServiceAccount::load(&file).map_err(|e| {
                SetupError::Setting {
                    field: "credentials_file".into(),
                    reason: e.to_string(),
                }
            })?)),
            None => Credentials::Metadata(config.metadata_url.trim_end_matches('/').to_owned()),
        };
        let rate = config.max_requests_per_second;
        Ok(RoundsSink::of(CloudDns {
            client: HttpClient::new(&TlsCheck::verify_with(None), config.timeout)?,
            zone_url: format!(
                "{}/projects/{}/managedZones/{}",
                config.url.trim_end_matches('/'),
                config.project,
                config.managed_zone
            ),
            zone: config.zone.clone(),
            tokens: Tokens::new(credentials),
            owner_id: owner_id.to_owned(),
            pacer: Pacer::per_second(rate),
        }))
    }
}

impl CloudDns {
    /// Sends one request (`path` after the zone's URL) when the pace allows; the answer's
    /// JSON, or the specific error, retried or not by what Google says.
    async fn call(
        &mut self,
        method: Method,
        path: &str,
        body: Bytes,
        what: &str,
    ) -> Result<Value, SinkError> {
        let bearer = self.tokens.bearer(&self.client).await?;
        let url = format!("{}{path}", self.zone_url);
        let request = bearer_json(method, &url, &bearer, body, what)?;
        let answer = self.pacer.around(self.client.send(request, what)).await?;
        if !answer.status.is_success() {
            return Err(self.refused(&answer, what));
        }
        serde_json::from_slice(&answer.body)
            .map_err(|e| SinkError::retriable(format!("{what}: unexpected answer: {e}")))
    }

    /// The error for a refused request: quota answers are throttling, a zone that moved
    /// since the listing is retried, credentials and names the operator set are not.
    fn refused(&mut self, answer: &Answer, what: &str) -> SinkError {
        let (reasons, message) = api::error_text(&answer.body);
        let detail = if reasons.is_empty() {
            message.clone()
        } else {
            format!("{}: {message}", reasons.join(", "))
        };
        let has = |r: &str| reasons.iter().any(|x| x == r);
        let message = format!("{what}: HTTP {}: {detail}", answer.status.as_u16());
        if has("rateLimitExceeded") || has("userRateLimitExceeded") || has("quotaExceeded") {
            return SinkError::throttled(message, answer.retry_after);
        }
        if has("conditionNotMet") || has("alreadyExists") {
            return SinkError::retriable(format!(
                "{message} (the zone changed since it was listed; listing again)"
            ));
        }
        let role = format!(
            "the account needs roles/dns.admin on managed zone of {}",
            self.zone
        );
        let missing = format!("no such project or managed zone for zone {}", self.zone);
        refusal(
            answer,
            what,
            &detail,
            || self.tokens.forget(),
            [&role, &missing],
        )
    }
}

impl Provider for CloudDns {
    const KIND: &'static str = "google_cloud_dns";
    const SERVED: Option<Serve<Self>> =
        Some(|_, zone| served(zone.into_iter().map(|s| (s.name, s.rtype, s.data))));

    /// Checks once that the managed zone serves the configured zone.
    async fn check_zone(&mut self) -> Result<(), SinkError> {
        let what = format!("GET managed zone of {}", self.zone);
        let zone = self.call(Method::GET, "", Bytes::new(), &what).await?;
        let name = zone
            .get("dnsName")
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim_end_matches('.');
        zone_named(name, &self.zone, "the managed zone serves")
    }

    /// Every record set of the zone, page by page.
    async fn list(&mut self) -> Result<Vec<Listed>, SinkError> {
        let mut all = Vec::new();
        let mut token: Option<String> = None;
        for page in 1.. {
            let what = format!("GET zone {} record sets, page {page}", self.zone);
            let mut path = format!("/rrsets?maxResults={}", api::PAGE);
            if let Some(t) = &token {
                path.push_str(&format!("&pageToken={t}"));
            }
            let listed: Page =
                serde_json::from_value(self.call(Method::GET, &path, Bytes::new(), &what).await?)
                    .map_err(|e| SinkError::retriable(format!("{what}: unexpected answer: {e}")))?;
            all.extend(listed.rrsets.into_iter().filter_map(Listed::of));
            token = listed.next_page_token.filter(|t| !t.is_empty());
            if token.is_none() {
                break;
            }
        }
        Ok(all)
    }

    /// One round on the zone's listing: each tenant's change, as few changes as fit; each
    /// tenant's result.
    async fn write_round(&mut self, zone: Vec<Self::Set>, round: &Round, _: &mut Done) -> Outcome {
        let (mut results, groups) = planned(round, |snapshot| {
            let planned = plan::for_tenant(&zone, snapshot, &self.owner_id);
            (planned.change, planned.foreign)
        });
        send_packed(self, groups, api::MAX_CHANGE, &mut results).await;
        Ok(results)
    }

    /// One `changes.create`.
    async fn send(&mut self, change: Change, what: &str) -> Result<(), SinkError> {
        let body = serde_json::to_vec(&change).expect("serializable");
        let what = format!(
            "POST zone {} change ({what}: {} deletions, {} additions)",
            self.zone,
            change.deletions.len(),
            change.additions.len()
        );
        self.call(Method::POST, "/changes", body.into(), &what)
            .await
            .map(|_| ())
    }
}
