//! `kind = "external_dns_webhook"`: any DNS provider external-dns reaches through its
//! webhook-provider protocol (Hetzner, IONOS, Infoblox, Gandi, Technitium, ..., and every
//! in-tree provider run with `external-dns --webhook-server`), spoken directly: the
//! orchestrator is the provider's client in external-dns's place, and no external-dns
//! runs in between to add its own interval.
//!
//! The sink writes rounds, as the zone-writing sinks do: tenants due while a round runs
//! wait for it and go out together. A round lists every record set once (`GET /records`),
//! decides each waiting tenant's wanted sets ([`plan::wanted`]: ownership first), hands
//! them to the provider's `POST /adjustendpoints` (so a provider that raises a TTL or
//! normalises a name is compared with what it will keep, and no reconcile rewrites it
//! forever), and sends the differences as `POST /records` changes, `max_changes` record
//! sets a request with each tenant's in one request. A request the provider refuses (4xx)
//! is sent again tenant by tenant, so one tenant's refused change fails that tenant only.
//! Requests are paced to `max_requests_per_second` in any one second, and a `Retry-After`
//! holds every request to the provider until the time it names ([`crate::pace`],
//! [`crate::retry_after`]).
//!
//! The record sets are not listed again for every round: the sink keeps its view as last
//! listed, with its own accepted changes applied, as the Route53 sink does. It lists again
//! for a round that writes a state again (a reconcile or a retry), so changes someone else
//! made are found and repaired; after any failed request; and when the report store
//! removed a report. A failover burst then costs an adjustment and a change per round, not
//! a listing as well. A stale view cannot overwrite someone else's record set: a set we did
//! not list is created, and a provider refuses to create what exists (external-dns's
//! in-memory provider and the APIs behind real ones do); the refusal drops the view.
//!
//! With `[multi_cluster]` every listing the report store makes (one a round) becomes the
//! view, and this cluster's report writes are planned on it and applied to it: a report
//! heartbeat is one change, and a cluster that learns a vote after another cluster wrote
//! it finds the names as wanted and sends nothing, not even an adjustment. Several
//! clusters then cost the provider one write per change of the published set, not one per
//! cluster (unless they learn it in the same instant).
//!
//! Ownership is external-dns's TXT registry ([`plan`]): an external-dns deployment with
//! another `--txt-owner-id` on the same zone leaves our names alone, and we leave its names
//! alone.

pub mod config;

mod api;
mod domain_filter;
mod plan;
mod reports;

use std::collections::BTreeMap;

use bytes::Bytes;
use ho_config::TlsCheck;
use ho_engine::sink::reports::Rrset;
use ho_engine::sink::{Applied, SinkError};
use http_body_util::Full;
use hyper::header::{HeaderValue, ACCEPT, CONTENT_TYPE};
use hyper::{Method, Request, StatusCode};
use serde::de::DeserializeOwned;

use self::api::{Changes, Endpoint, MEDIA_TYPE};
use self::config::ExternalDnsWebhookConfig;
use self::domain_filter::DomainFilter;
use crate::http::{error_for, Answer, HttpClient};
use crate::pace::Pacer;
use crate::rounds::provider::{Provider, RoundsSink, Serve};
use crate::rounds::reports::HoldsReports;
use crate::rounds::{Done, Outcome, Packable, Round, RoundResults, View};
use ho_engine::sink::SetupError;

/// Writes tenants' record sets through one external-dns webhook provider.
pub type ExternalDnsWebhookSink = RoundsSink<Webhook>;

/// The calls of external-dns's webhook-provider protocol on one provider.
pub struct Webhook {
    client: HttpClient,
    /// The provider's base URL, without a trailing slash.
    url: String,
    /// Its owner id and wildcard stand-in in external-dns's TXT registry.
    registry: plan::Registry,
    pacer: Pacer,
    /// Most record sets changed in one `POST /records`.
    max_changes: usize,
    /// The provider's domain filter, once negotiated.
    filter: Option<DomainFilter>,
    /// The record sets as last listed, with this sink's accepted changes applied.
    view: View<Endpoint>,
}

impl ExternalDnsWebhookSink {
    /// Builds the sink (no request is made before the first write).
    pub fn new(
        config: &ExternalDnsWebhookConfig,
        owner_id: &str,
    ) -> Result<ExternalDnsWebhookSink, SetupError> {
        let rate = config.max_requests_per_second;
        Ok(RoundsSink::of(Webhook {
            client: HttpClient::new(&TlsCheck::verify_with(None), config.timeout)?,
            url: config.url.trim_end_matches('/').to_owned(),
            registry: plan::Registry {
                owner: owner_id.to_owned(),
                wildcard: config.txt_wildcard_replacement.clone(),
            },
            pacer: Pacer::per_second(rate),
            max_changes: config.max_changes,
            filter: None,
            view: View::default(),
        }))
    }
}

impl Packable for Changes {
    fn size(&self) -> usize {
        self.len()
    }

    fn absorb(&mut self, other: Changes) {
        Changes::absorb(self, other);
    }

    /// Cut list by list; a replacement's old and new halves stay together.
    fn split(self, max: usize) -> Vec<Changes> {
        let mut out = vec![Changes::default()];
        fn room(out: &mut Vec<Changes>, max: usize) -> &mut Changes {
            if out.last().is_some_and(|c| c.len() >= max) {
                out.push(Changes::default());
            }
            out.last_mut().expect("never empty")
        }
        for e in self.delete {
            room(&mut out, max).delete.push(e);
        }
        for (old, new) in self.update_old.into_iter().zip(self.update_new) {
            let c = room(&mut out, max);
            c.update_old.push(old);
            c.update_new.push(new);
        }
        for e in self.create {
            room(&mut out, max).create.push(e);
        }
        out
    }
}

impl Webhook {
    /// One request of the protocol (`path` after the provider's URL), when the pace allows;
    /// the successful answer, or the specific error, retried or not by its status.
    async fn call(
        &mut self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        what: &str,
    ) -> Result<Answer, SinkError> {
        let has_body = body.is_some();
        let mut request = Request::new(Full::new(Bytes::from(body.unwrap_or_default())));
        *request.method_mut() = method;
        *request.uri_mut() = format!("{}{path}", self.url)
            .parse()
            .map_err(|e| SinkError::permanent(format!("{what}: {e}")))?;
        let media = HeaderValue::from_static(MEDIA_TYPE);
        request.headers_mut().insert(ACCEPT, media.clone());
        if has_body {
            request.headers_mut().insert(CONTENT_TYPE, media);
        }
        let answer = self.pacer.around(self.client.send(request, what)).await?;
        if !answer.status.is_success() {
            let explained = match answer.status {
                StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED => format!(
                    "{what} (the provider at {} does not serve this route of external-dns's webhook protocol: is url its webhook port, usually 8888, not its health port?)",
                    self.url
                ),
                StatusCode::NOT_ACCEPTABLE | StatusCode::UNSUPPORTED_MEDIA_TYPE => format!(
                    "{what} (the provider refuses the media type {MEDIA_TYPE})"
                ),
                _ => what.to_owned(),
            };
            return Err(error_for(&answer, &explained, ""));
        }
        Ok(answer)
    }

    /// A request whose answer is JSON of type `T`.
    async fn json<T: DeserializeOwned>(
        &mut self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        what: &str,
    ) -> Result<T, SinkError> {
        let answer = self.call(method, path, body, what).await?;
        serde_json::from_slice(&answer.body).map_err(|e| {
            SinkError::retriable(format!(
                "{what}: the provider's answer is not external-dns's JSON: {e}"
            ))
        })
    }

    /// Negotiates once (as external-dns does at start): the provider must answer the media
    /// type; its domain filter is kept to refuse names it would not take.
    async fn negotiate(&mut self) -> Result<DomainFilter, SinkError> {
        if let Some(filter) = &self.filter {
            return Ok(filter.clone());
        }
        let what = format!("GET {}/ (negotiation)", self.url);
        let answer = self.call(Method::GET, "/", None, &what).await?;
        let content_type = answer.content_type.as_deref().unwrap_or("");
        if !same_media_type(content_type, MEDIA_TYPE) {
            return Err(SinkError::permanent(format!(
                "{what}: the provider answered Content-Type {content_type:?}, not {MEDIA_TYPE}: it does not speak version 1 of external-dns's webhook protocol"
            )));
        }
        let filter = DomainFilter::from_json(&answer.body).map_err(|e| {
            SinkError::permanent(format!(
                "{what}: the provider's domain filter is not one external-dns takes: {e}"
            ))
        })?;
        self.filter = Some(filter.clone());
        Ok(filter)
    }

    /// `records` as the provider will keep them.
    async fn adjust(&mut self, records: &[Endpoint]) -> Result<Vec<Endpoint>, SinkError> {
        if records.is_empty() {
            return Ok(Vec::new());
        }
        let what = format!(
            "POST {}/adjustendpoints ({} record sets)",
            self.url,
            records.len()
        );
        let body = serde_json::to_vec(records).expect("serializable");
        self.json(Method::POST, "/adjustendpoints", Some(body), &what)
            .await
    }

    /// Applies `changes` (`POST /records`).
    async fn post(&mut self, changes: &Changes, what: &str) -> Result<(), SinkError> {
        let what = format!(
            "POST {}/records ({what}: {} creates, {} updates, {} deletes)",
            self.url,
            changes.create.len(),
            changes.update_old.len(),
            changes.delete.len()
        );
        let body = serde_json::to_vec(changes).expect("serializable");
        self.call(Method::POST, "/records", Some(body), &what)
            .await
            .map(|_| ())
    }

    /// Each tenant's changes against `listed`, after the provider adjusted every wanted set
    /// in one request; a tenant whose record the provider dropped fails (it would not be
    /// published) and one with nothing to change is done.
    async fn changes(
        &mut self,
        listed: &[Endpoint],
        parts: Vec<(&String, plan::Wanted)>,
        results: &mut RoundResults,
    ) -> Result<Vec<(String, Changes)>, SinkError> {
        // A tenant whose sets are listed as it wants them is done without the provider's
        // adjustment: what the provider lists is what it keeps. The clusters that learn a
        // vote after another wrote it then send nothing.
        let parts: Vec<(&String, plan::Wanted)> = parts
            .into_iter()
            .filter(|(tenant, wanted)| {
                let done =
                    plan::changes(listed, &wanted.names, &wanted.records, &wanted.marks).is_empty();
                if done {
                    results.insert((*tenant).clone(), outcome(&wanted.foreign, false));
                }
                !done
            })
            .collect();
        let desired: Vec<Endpoint> = parts
            .iter()
            .flat_map(|(_, w)| w.records.iter().cloned())
            .collect();
        let adjusted = self.adjust(&desired).await?;
        let mut groups = Vec::new();
        for (tenant, wanted) in parts {
            let (records, dropped): (Vec<_>, Vec<_>) = wanted
                .records
                .iter()
                .map(|r| {
                    adjusted
                        .iter()
                        .find(|a| a.is(&r.dns_name, &r.record_type))
                        .ok_or(r)
                })
                .partition(Result::is_ok);
            if let Some(Err(r)) = dropped.first() {
                results.insert(
                    tenant.clone(),
                    Err(SinkError::permanent(format!(
                        "the provider's /adjustendpoints dropped {} {}: it would not publish it",
                        r.record_type, r.dns_name
                    ))),
                );
                continue;
            }
            let records: Vec<Endpoint> = records.into_iter().flatten().cloned().collect();
            let changes = plan::changes(listed, &wanted.names, &records, &wanted.marks);
            results.insert(
                tenant.clone(),
                outcome(&wanted.foreign, !changes.is_empty()),
            );
            if !changes.is_empty() {
                groups.push((tenant.clone(), changes));
            }
        }
        Ok(groups)
    }

    /// Sends `groups` packed into as few requests as fit; a refused request is sent again
    /// per tenant, so only the tenant refused fails. The listing, with what was sent applied,
    /// is kept for the next round unless something failed.
    async fn send_all(
        &mut self,
        listed: Vec<Endpoint>,
        groups: &[(String, Changes)],
        results: &mut RoundResults,
    ) {
        let requests = crate::rounds::pack(groups.to_vec(), self.max_changes);
        let mut view = Some(listed);
        for (tenants, changes) in &requests {
            let sent = self
                .post(changes, &format!("{} tenants", tenants.len()))
                .await;
            let e = match sent {
                Ok(()) => {
                    apply(&mut view, changes);
                    continue;
                }
                Err(e) => e,
            };
            // The view may be what the provider refused: the next round lists afresh.
            view = None;
            if e.retriable || tenants.len() == 1 {
                for tenant in tenants {
                    results.insert(tenant.clone(), Err(e.clone()));
                }
                continue;
            }
            // Refused: each tenant's changes alone, so only the one refused fails.
            for tenant in tenants {
                let own = groups.iter().find(|(t, _)| t == tenant).map(|(_, c)| c);
                for part in own.cloned().unwrap_or_default().split(self.max_changes) {
                    if let Err(e) = self.post(&part, tenant).await {
                        results.insert(tenant.clone(), Err(e));
                        break;
                    }
                }
            }
        }
        self.view.sets = view;
    }
}

/// `changes`, accepted by the provider, applied to `view`.
fn apply(view: &mut Option<Vec<Endpoint>>, changes: &Changes) {
    let Some(sets) = view else { return };
    let key = |e: &Endpoint| {
        (
            e.dns_name.trim_end_matches('.').to_ascii_lowercase(),
            e.record_type.to_ascii_uppercase(),
            e.set_identifier.clone(),
        )
    };
    let gone: Vec<_> = changes
        .delete
        .iter()
        .chain(&changes.update_old)
        .map(key)
        .collect();
    sets.retain(|e| !gone.contains(&key(e)));
    sets.extend(changes.update_new.iter().chain(&changes.create).cloned());
}

/// A tenant's result once its names are planned: an error naming the names left alone,
/// else changed or not.
fn outcome(foreign: &[String], changes: bool) -> Result<Applied, SinkError> {
    if !foreign.is_empty() {
        return Err(SinkError::permanent(format!(
            "left alone because they hold records without this orchestrator's external-dns registry mark (TXT a-<name> naming this owner) or are marked by another owner: {}",
            foreign.join(", ")
        )));
    }
    Ok(if changes {
        Applied::Changed
    } else {
        Applied::Unchanged
    })
}

impl Provider for Webhook {
    const KIND: &'static str = "external_dns_webhook";
    const SERVED: Option<Serve<Self>> = None;

    /// Negotiates (as external-dns does at start) before the first round.
    async fn check_zone(&mut self) -> Result<(), SinkError> {
        self.negotiate().await.map(drop)
    }

    /// The view, unless the round writes a state again or there is none.
    async fn zone_for(&mut self, round: &Round) -> Result<Vec<Endpoint>, SinkError> {
        match self.view.take_for(round) {
            Some(sets) => Ok(sets),
            None => self.list().await,
        }
    }

    /// Every record set the provider holds; kept as the view, so a listing the report store
    /// made serves the next round too.
    async fn list(&mut self) -> Result<Vec<Endpoint>, SinkError> {
        let what = format!("GET {}/records", self.url);
        let listed: Vec<Endpoint> = self.json(Method::GET, "/records", None, &what).await?;
        self.view.sets = Some(listed.clone());
        Ok(listed)
    }

    /// This cluster's reports, planned on the view when there is one: only this cluster
    /// writes its report sets, so the view holds them as the provider does, and a heartbeat
    /// costs one change, not a listing as well. A refused change drops the view.
    async fn write_reports(&mut self, reports: &[Rrset]) -> Result<(), SinkError> {
        let listed = match self.view.sets.clone() {
            Some(sets) => sets,
            None => self.list().await?,
        };
        let Some(change) = self.report_change(&listed, reports) else {
            return Ok(());
        };
        let sent = self
            .post(&change, &format!("{} reports", reports.len()))
            .await;
        match &sent {
            Ok(()) => apply(&mut self.view.sets, &change),
            Err(_) => self.view.sets = None,
        }
        sent
    }

    /// One round on the negotiated filter and the sets `zone_for` gave: each tenant's wanted
    /// sets adjusted by the provider in one request, the differences in as few change
    /// requests as fit.
    async fn write_round(
        &mut self,
        listed: Vec<Self::Set>,
        round: &Round,
        _: &mut Done,
    ) -> Outcome {
        // Negotiated before the first round (`check_zone`): kept since.
        let filter = self.negotiate().await?;
        let mut results = BTreeMap::new();
        let mut parts = Vec::new();
        for (tenant, snapshot) in round {
            let refused: Vec<&str> = snapshot
                .domains
                .iter()
                .filter(|d| !filter.takes(d))
                .map(String::as_str)
                .collect();
            if refused.is_empty() {
                parts.push((tenant, plan::wanted(&listed, snapshot, &self.registry)));
            } else {
                results.insert(
                    tenant.clone(),
                    Err(SinkError::permanent(format!(
                        "the provider's domain filter ({}) does not take {}: nothing of this tenant is sent",
                        filter.describe(),
                        refused.join(", ")
                    ))),
                );
            }
        }
        let groups = self.changes(&listed, parts, &mut results).await?;
        self.send_all(listed, &groups, &mut results).await;
        self.view.wrote(round, &results);
        Ok(results)
    }

    /// Applies `changes` outside a round (a report's removal, which listed afresh): the
    /// next round lists again too.
    async fn send(&mut self, changes: Changes, what: &str) -> Result<(), SinkError> {
        self.view.sets = None;
        self.post(&changes, what).await
    }
}

/// Whether two media types are the same, ignoring case and spaces around parameters.
fn same_media_type(a: &str, b: &str) -> bool {
    let norm = |s: &str| {
        s.split(';')
            .map(|p| p.trim().to_ascii_lowercase())
            .collect::<Vec<_>>()
    };
    norm(a) == norm(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_keeps_replacements_whole_and_requests_within_the_limit() {
        let e = |n: &str| Endpoint::new(n, "A", vec!["192.0.2.1".into()], 60);
        let changes = Changes {
            create: vec![e("c1"), e("c2")],
            update_old: vec![e("u1"), e("u2")],
            update_new: vec![e("u1"), e("u2")],
            delete: vec![e("d1")],
        };
        let parts = changes.split(2);
        assert!(parts.iter().all(|p| p.len() <= 2));
        assert_eq!(parts.iter().map(Changes::len).sum::<usize>(), 5);
        assert!(parts
            .iter()
            .all(|p| p.update_old.len() == p.update_new.len()));
    }

    #[test]
    fn media_types_compare_without_case_or_spaces() {
        assert!(same_media_type(
            "application/external.dns.webhook+json; version=1",
            MEDIA_TYPE
        ));
        assert!(!same_media_type("application/json", MEDIA_TYPE));
        assert!(!same_media_type(
            "application/external.dns.webhook+json;version=2",
            MEDIA_TYPE
        ));
    }
}
