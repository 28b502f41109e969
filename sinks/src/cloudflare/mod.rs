//! `kind = "cloudflare"`: DNS records in a Cloudflare zone through its API v4, by hand over
//! the HTTP client the other network sinks share (the official SDKs are Go, TypeScript and
//! Python; the community Rust crates pull a second HTTP stack for the four calls used).
//!
//! The sink writes zones, not tenants, as the Route53 sink does: tenants due while a round
//! runs wait for it and go out together. A round lists the zone once (5,000 records a
//! page), decides each waiting tenant's changes from it ([`plan::for_tenant`]: ownership
//! first, then the records that differ) and packs them into as few
//! `POST /zones/{id}/dns_records/batch` requests as Cloudflare takes (`max_batch`: 200
//! operations on the Free plan, up to 3,500 on paid plans; a tenant's operations in one
//! request, which Cloudflare applies in one transaction: deletes, then creates). Requests are paced to
//! `max_requests_per_second` in any one second (Cloudflare allows 1,200 per five minutes), so 500 tenants
//! changing at once cost a listing and a few batches, not a listing and a batch each. Names are guarded as the Route53 sink guards them: a name is
//! ours only with the TXT record `_health-orchestrator.<name>` naming this owner; records
//! are never proxied (what is published is what was probed).

pub mod config;

mod api;
mod plan;
mod reports;

use bytes::Bytes;
use ho_config::TlsCheck;
use ho_engine::sink::SinkError;
use hyper::{Method, StatusCode};
use serde::de::DeserializeOwned;

use self::api::{Batch, DnsRecord, Envelope};
use self::config::CloudflareConfig;
use crate::http::{bearer_json, error_for, HttpClient};
use crate::listing::served;
use crate::pace::Pacer;
use crate::rounds::packed::{planned, send_packed};
use crate::rounds::provider::{zone_named, Provider, RoundsSink, Serve};
use crate::rounds::{Done, Outcome, Packable, Round};
use ho_engine::secret::Secret;
use ho_engine::sink::SetupError;

/// Writes tenants' records into one Cloudflare zone.
pub type CloudflareSink = RoundsSink<Cloudflare>;

/// The calls of Cloudflare's API v4 on one zone.
pub struct Cloudflare {
    client: HttpClient,
    /// `{url}/zones/{zone_id}`.
    zone_url: String,
    zone: String,
    token: Secret,
    owner_id: String,
    pacer: Pacer,
    /// Most operations per batch request (`max_batch`: the plan's limit).
    max_batch: usize,
}

impl CloudflareSink {
    /// Builds the sink; fails if the API token cannot be read.
    pub fn new(config: &CloudflareConfig, owner_id: &str) -> Result<CloudflareSink, SetupError> {
        let token = Secret::load(
            config.api_token_file.as_deref(),
            config.api_token_env.as_deref(),
        )
        .map_err(SetupError::secret("api token"))?;
        let trust = TlsCheck::verify_with(None);
        let rate = config.max_requests_per_second;
        Ok(RoundsSink::of(Cloudflare {
            client: HttpClient::new(&trust, config.timeout)?,
            zone_url: format!(
                "{}/zones/{}",
                config.url.trim_end_matches('/'),
                config.zone_id
            ),
            zone: config.zone.clone(),
            token,
            owner_id: owner_id.to_owned(),
            pacer: Pacer::per_second(rate),
            max_batch: config.max_batch,
        }))
    }
}

impl Cloudflare {
    /// Sends one request (`path` after the zone's URL) when the pace allows, and reads the
    /// envelope's result; a failure is the specific error, retried or not by its status.
    async fn call<T: DeserializeOwned>(
        &mut self,
        method: Method,
        path: &str,
        body: Bytes,
        what: &str,
    ) -> Result<Envelope<T>, SinkError> {
        let url = format!("{}{path}", self.zone_url);
        let request = bearer_json(method, &url, self.token.expose(), body, what)?;
        let answer = self.pacer.around(self.client.send(request, what)).await?;
        if !answer.status.is_success() {
            let detail = api::error_text(&answer.body);
            return Err(error_for(
                &answer,
                &self.explain(answer.status, what),
                &detail,
            ));
        }
        let envelope: Envelope<T> = serde_json::from_slice(&answer.body)
            .map_err(|e| SinkError::retriable(format!("{what}: unexpected answer: {e}")))?;
        if !envelope.success {
            return Err(SinkError::permanent(format!(
                "{what}: Cloudflare answered success = false: {}",
                api::error_text(&answer.body)
            )));
        }
        Ok(envelope)
    }

    /// A specific message for the answers operators get wrong most.
    fn explain(&self, status: StatusCode, what: &str) -> String {
        match status {
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => format!(
                "Cloudflare rejected the API token: it needs Zone.DNS Edit on zone {} ({what})",
                self.zone
            ),
            StatusCode::NOT_FOUND => format!("no such zone id for zone {} ({what})", self.zone),
            _ => what.to_owned(),
        }
    }
}

impl Provider for Cloudflare {
    const KIND: &'static str = "cloudflare";
    const SERVED: Option<Serve<Self>> =
        Some(|_, zone| served(zone.into_iter().map(|r| (r.name, r.rtype, vec![r.content]))));

    /// Checks once that the zone id names the configured zone.
    async fn check_zone(&mut self) -> Result<(), SinkError> {
        let what = format!("GET zone {}", self.zone);
        let zone: Envelope<api::Zone> = self.call(Method::GET, "", Bytes::new(), &what).await?;
        let name = zone.result.map(|z| z.name).unwrap_or_default();
        zone_named(&name, &self.zone, "the zone id names zone")
    }

    /// Every record of the zone, page by page.
    async fn list(&mut self) -> Result<Vec<DnsRecord>, SinkError> {
        let mut all = Vec::new();
        let mut page = 1;
        loop {
            let what = format!("GET zone {} records, page {page}", self.zone);
            let path = format!("/dns_records?per_page={}&page={page}", api::PAGE);
            let listed: Envelope<Vec<DnsRecord>> =
                self.call(Method::GET, &path, Bytes::new(), &what).await?;
            all.extend(listed.result.unwrap_or_default());
            let pages = listed.result_info.map_or(1, |i| i.total_pages);
            if page >= pages {
                return Ok(all);
            }
            page += 1;
        }
    }

    /// One round on the zone's listing: each tenant's changes, as few batch requests as
    /// fit; each tenant's result.
    async fn write_round(&mut self, zone: Vec<Self::Set>, round: &Round, _: &mut Done) -> Outcome {
        let (mut results, groups) = planned(round, |snapshot| {
            let planned = plan::for_tenant(&zone, snapshot, &self.owner_id);
            (planned.batch, planned.foreign)
        });
        let max = self.max_batch;
        send_packed(self, groups, max, &mut results).await;
        Ok(results)
    }

    /// Sends `batch` in requests of at most `max_batch` operations (deletes first).
    async fn send(&mut self, batch: Batch, what: &str) -> Result<(), SinkError> {
        for part in batch.split(self.max_batch) {
            let body = serde_json::to_vec(&part).expect("serializable");
            let what = format!(
                "POST zone {} batch ({what}: {} deletes, {} creates)",
                self.zone,
                part.deletes.len(),
                part.posts.len()
            );
            let path = "/dns_records/batch";
            self.call::<serde_json::Value>(Method::POST, path, body.into(), &what)
                .await?;
        }
        Ok(())
    }
}
