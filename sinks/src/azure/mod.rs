//! `kind = "azure_dns"`: record sets in an Azure DNS zone through Azure Resource Manager's
//! REST API, by hand over the HTTP client the other network sinks share (the Azure SDK for
//! Rust brings its own HTTP and identity stacks for the four calls used).
//!
//! Azure DNS has no batch of changes: each record set is one `PUT` or `DELETE`. The sink
//! still writes zones, not tenants, as the other cloud sinks do: tenants due while a round
//! runs wait for it and share its one listing (100 sets a page); then each tenant's changed
//! sets are written ([`plan::for_tenant`]), each on the condition that it is still as
//! listed (its `etag`), so a change made meanwhile by someone else is refused (412) and the
//! tenant is tried again from a new listing instead of overwriting it. Requests are paced
//! to `max_requests_per_second` in any one second; a 429 stops the round (its tenants are retried
//! after `Retry-After`).

pub mod config;

mod api;
mod auth;
mod plan;
mod reports;

use std::collections::BTreeMap;

use bytes::Bytes;
use ho_config::TlsCheck;
use ho_engine::sink::{Applied, SinkError};
use hyper::header::{HeaderValue, IF_MATCH, IF_NONE_MATCH};
use hyper::{Method, StatusCode};
use serde_json::Value;

use self::api::{Listed, Op, Page, API_VERSION};
use self::auth::{Credentials, Tokens};
use self::config::AzureDnsConfig;
use crate::bearer::refusal;
use crate::http::{bearer_json, Answer, HttpClient};
use crate::listing::served;
use crate::pace::Pacer;
use crate::rounds::provider::{Provider, RoundsSink, Serve};
use crate::rounds::{Done, Outcome, Round};
use ho_engine::sink::SetupError;

/// Writes tenants' records into one Azure DNS zone.
pub type AzureDnsSink = RoundsSink<AzureDns>;

/// The calls of Azure Resource Manager's DNS API on one zone.
pub struct AzureDns {
    client: HttpClient,
    /// `{url}/subscriptions/{s}/resourceGroups/{rg}/providers/Microsoft.Network/dnsZones/{zone}`.
    zone_url: String,
    zone: String,
    tokens: Tokens,
    owner_id: String,
    pacer: Pacer,
}

impl AzureDnsSink {
    /// Builds the sink; fails if the credentials cannot be read.
    pub fn new(config: &AzureDnsConfig, owner_id: &str) -> Result<AzureDnsSink, SetupError> {
        let credentials = Credentials::of(config)?;
        let rate = config.max_requests_per_second;
        Ok(RoundsSink::of(AzureDns {
            client: HttpClient::new(&TlsCheck::verify_with(None), config.timeout)?,
            zone_url: format!(
                "{}/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Network/dnsZones/{}",
                config.url.trim_end_matches('/'),
                config.subscription_id,
                config.resource_group,
                config.zone
            ),
            zone: config.zone.clone(),
            tokens: Tokens::new(credentials, config),
            owner_id: owner_id.to_owned(),
            pacer: Pacer::per_second(rate),
        }))
    }
}

/// What a request carries besides its method and URL.
struct Call<'a> {
    body: Option<&'a Value>,
    /// `If-Match` (`Some(etag)`) or `If-None-Match: *` (`Some("")`: create only).
    precondition: Option<&'a str>,
    what: &'a str,
}

impl AzureDns {
    /// Sends one request to `url` when the pace allows; the answer, or the specific error.
    async fn call(
        &mut self,
        method: Method,
        url: &str,
        send: Call<'_>,
    ) -> Result<Answer, SinkError> {
        let bearer = self.tokens.bearer(&self.client).await?;
        let body = send
            .body
            .map(|b| Bytes::from(serde_json::to_vec(b).expect("serializable")))
            .unwrap_or_default();
        let mut request = bearer_json(method, url, &bearer, body, send.what)?;
        let headers = request.headers_mut();
        match send.precondition {
            Some("") => {
                headers.insert(IF_NONE_MATCH, HeaderValue::from_static("*"));
            }
            Some(etag) => {
                if let Ok(v) = HeaderValue::from_str(etag) {
                    headers.insert(IF_MATCH, v);
                }
            }
            None => {}
        }
        let answer = self
            .pacer
            .around(self.client.send(request, send.what))
            .await?;
        if answer.status.is_success() {
            return Ok(answer);
        }
        Err(self.refused(&answer, send.what))
    }

    /// The error for a refused request.
    fn refused(&mut self, answer: &Answer, what: &str) -> SinkError {
        let detail = api::error_text(&answer.body);
        if answer.status == StatusCode::PRECONDITION_FAILED {
            return SinkError::retriable(format!(
                "{what}: HTTP 412: {detail} (the set changed since it was listed; listing again)"
            ));
        }
        let zone = &self.zone;
        let role = format!("the identity needs the DNS Zone Contributor role on zone {zone}");
        let missing = format!("no such subscription, resource group or zone for {zone}");
        refusal(
            answer,
            what,
            &detail,
            || self.tokens.forget(),
            [&role, &missing],
        )
    }

    /// Writes one set change.
    async fn apply_op(&mut self, op: &Op) -> Result<(), SinkError> {
        let (method, rtype, name, body, precondition) = match op {
            Op::Put {
                rtype,
                name,
                body,
                etag,
            } => (
                Method::PUT,
                rtype,
                name,
                Some(body),
                Some(etag.as_deref().unwrap_or("")),
            ),
            Op::Delete { rtype, name, etag } => {
                (Method::DELETE, rtype, name, None, Some(etag.as_str()))
            }
        };
        let rel = api::relative(name, &self.zone);
        let url = format!("{}/{rtype}/{rel}?api-version={API_VERSION}", self.zone_url);
        let what = format!("{method} {rtype} {name}");
        let send = Call {
            body,
            precondition,
            what: &what,
        };
        match self.call(method.clone(), &url, send).await {
            // Already gone: what a delete wanted.
            Err(e) if method == Method::DELETE && e.message.contains("HTTP 404") => Ok(()),
            other => other.map(|_| ()),
        }
    }
}

impl Provider for AzureDns {
    const KIND: &'static str = "azure_dns";
    const SERVED: Option<Serve<Self>> =
        Some(|_, zone| served(zone.into_iter().map(|s| (s.name, s.rtype, s.data))));

    /// Checks once that the zone is there.
    async fn check_zone(&mut self) -> Result<(), SinkError> {
        let what = format!("GET zone {}", self.zone);
        let url = format!("{}?api-version={API_VERSION}", self.zone_url);
        let send = Call {
            body: None,
            precondition: None,
            what: &what,
        };
        self.call(Method::GET, &url, send).await?;
        Ok(())
    }

    /// Every record set of the zone, page by page.
    async fn list(&mut self) -> Result<Vec<Listed>, SinkError> {
        let mut all = Vec::new();
        let mut url = format!("{}/recordsets?api-version={API_VERSION}", self.zone_url);
        for page in 1.. {
            let what = format!("GET zone {} record sets, page {page}", self.zone);
            let send = Call {
                body: None,
                precondition: None,
                what: &what,
            };
            let answer = self.call(Method::GET, &url, send).await?;
            let listed: Page = serde_json::from_slice(&answer.body)
                .map_err(|e| SinkError::retriable(format!("{what}: unexpected answer: {e}")))?;
            all.extend(
                listed
                    .value
                    .iter()
                    .filter_map(|s| Listed::of(s, &self.zone)),
            );
            match listed.next_link.filter(|l| !l.is_empty()) {
                Some(next) => url = next,
                None => break,
            }
        }
        Ok(all)
    }

    /// One round on the zone's listing: each tenant's set changes, each tenant told its
    /// result (`done`) as soon as its sets are written.
    async fn write_round(
        &mut self,
        zone: Vec<Self::Set>,
        round: &Round,
        done: &mut Done,
    ) -> Outcome {
        let mut results = BTreeMap::new();
        let mut throttled: Option<SinkError> = None;
        for (tenant, snapshot) in round {
            if let Some(e) = &throttled {
                results.insert(tenant.clone(), Err(e.clone()));
                continue;
            }
            let planned = plan::for_tenant(&zone, snapshot, &self.owner_id);
            let mut result = Ok(if planned.ops.is_empty() {
                Applied::Unchanged
            } else {
                Applied::Changed
            });
            for op in &planned.ops {
                if let Err(e) = self.apply_op(op).await {
                    if e.throttled {
                        throttled = Some(e.clone());
                    }
                    result = Err(e);
                    break;
                }
            }
            if result.is_ok() {
                result =
                    ho_engine::sink::ownership::outcome(&planned.foreign, !planned.ops.is_empty());
            }
            done.tell(tenant, &result);
            results.insert(tenant.clone(), result);
        }
        Ok(results)
    }

    /// Writes `ops` one after another, stopping at the first refused.
    async fn send(&mut self, ops: Vec<Op>, _what: &str) -> Result<(), SinkError> {
        for op in &ops {
            self.apply_op(op).await?;
        }
        Ok(())
    }
}
