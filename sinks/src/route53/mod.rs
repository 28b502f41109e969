//! `kind = "route53"`: AWS Route53 record sets through the official SDK.
//!
//! Route53 allows 5 API requests per second per account and takes up to 1,000 records per
//! `ChangeResourceRecordSets`, so this sink writes zones, not tenants: writes that arrive
//! while a round is running wait for it and then go out together. A round reads the zone
//! once, decides each waiting tenant's changes ([`changes::for_tenant`]: ownership first,
//! then the difference), packs all of them into as few batches as the limits allow, and
//! paces every request (reads included) to `max_requests_per_second` in any one second
//! ([`crate::pace`]).
//!
//! The zone is not listed again for every change: the sink keeps its view of the zone as
//! last listed, with its own accepted changes applied ([`View`]). It lists again for
//! a round that writes a state again (a reconcile, `delivery.reconcile_interval`, or a
//! retry), so changes someone else made are found and repaired as before; after any change
//! Route53 refused (a conflict means the view is stale); and whenever the report store lists
//! the zone anyway. At 300 record sets a page and 5 requests a second, a zone of 5,000
//! record sets is 17 pages: listing it before every write cost 3.4 s. A stale view cannot
//! overwrite someone else's record: a name this sink has not claimed is claimed with
//! CREATEs, which Route53 refuses when the record set exists; the refusal drops the view,
//! and the retry's listing shows the foreign record, left alone as always.
//! Throttling answers are retried by the sink actor with backoff; the SDK's own retries are
//! off, so every attempt shows in `/status` and the metrics.
//!
//! Names are guarded like external-dns does it: a name is ours only with the TXT record
//! `_health-orchestrator.<name>` = `"heritage=health-orchestrator,owner=<owner_id>"`. Record
//! sets without it, or with another owner's, are never changed or deleted.

pub mod config;

mod api;
mod changes;
mod listing;
mod records;
mod reports;

use std::collections::BTreeMap;

use self::config::{RecordStyle, Route53Config};
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_route53::config::retry::RetryConfig;
use aws_sdk_route53::config::timeout::TimeoutConfig;
use aws_sdk_route53::types::{ChangeAction, ResourceRecordSet};
use aws_sdk_route53::Client;
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};
use ho_engine::sink::reports::Rrset;
use ho_engine::sink::{Applied, SinkError};

use crate::pace::Pacer;
use crate::rounds::provider::{Provider, RoundsSink, Serve};
use crate::rounds::reports::HoldsReports;
use crate::rounds::{Done, Outcome, Round, RoundResults, View};
use changes::RecordChange;
use records::RecordSet;

/// Region the client signs for when none is configured: Route53 is a global service whose
/// API lives in `us-east-1`.
const DEFAULT_REGION: &str = "us-east-1";

/// Writes tenants' record sets into one hosted zone.
pub type Route53Sink = RoundsSink<HostedZone>;

/// The calls of the Route53 API on one hosted zone, and the zone as last known.
pub struct HostedZone {
    client: Client,
    zone_id: String,
    zone: String,
    owner_id: String,
    style: RecordStyle,
    /// What the apex may alias (`alias_zones`).
    aliases: records::AliasZones,
    pacer: Pacer,
    /// The zone as this sink last knew it, and what each tenant last had written.
    view: View<ResourceRecordSet>,
}

/// Loads region and credentials the standard AWS way (environment, profile, web identity,
/// container and instance metadata), with `region` from the config first; without any
/// region the client signs for `us-east-1`.
pub async fn standard_sdk_config(config: &Route53Config) -> SdkConfig {
    let mut loader = aws_config::defaults(BehaviorVersion::latest()).http_client(https_client());
    if let Some(region) = &config.region {
        loader = loader.region(Region::new(region.clone()));
    }
    loader.load().await
}

fn https_client() -> aws_sdk_route53::config::SharedHttpClient {
    aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
        .build_https()
}

impl Route53Sink {
    /// A sink for `config`, with region and credentials from `sdk` (see
    /// [`standard_sdk_config`]). Nothing is sent until the first write.
    pub fn new(config: &Route53Config, owner_id: &str, sdk: &SdkConfig) -> Route53Sink {
        let mut builder = aws_sdk_route53::config::Builder::from(sdk)
            .http_client(https_client())
            .retry_config(RetryConfig::disabled())
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(config.timeout)
                    .operation_attempt_timeout(config.timeout)
                    .build(),
            );
        if sdk.region().is_none() {
            builder = builder.region(Region::from_static(DEFAULT_REGION));
        }
        if let Some(url) = &config.endpoint_url {
            builder = builder.endpoint_url(url);
        }
        let rate = config.max_requests_per_second;
        RoundsSink::of(HostedZone {
            client: Client::from_conf(builder.build()),
            zone_id: config.hosted_zone_id.clone(),
            zone: format!("{}.", config.zone),
            owner_id: owner_id.to_string(),
            style: config.record_style,
            aliases: records::AliasZones(config.alias_zones.clone()),
            // A burst of one second's worth, then the rate.
            pacer: Pacer::per_second(rate),
            view: View::default(),
        })
    }
}

/// `sets` after Route53 accepted `changes`: every record set a change names is replaced by
/// what the batch leaves there (a batch deletes before it creates). One pass over the
/// zone, however many changes.
fn apply(sets: &mut Vec<ResourceRecordSet>, changes: Vec<(ChangeAction, ResourceRecordSet)>) {
    // As the rounds compare names: unescaped, lower case.
    let key = |s: &ResourceRecordSet| {
        let r = api::from_sdk(s);
        (r.name.to_ascii_lowercase(), r.rtype, r.set_id)
    };
    let changed: std::collections::HashSet<_> = changes.iter().map(|(_, s)| key(s)).collect();
    sets.retain(|s| !changed.contains(&key(s)));
    sets.extend(
        changes
            .into_iter()
            .filter(|(action, _)| *action != ChangeAction::Delete)
            .map(|(_, set)| set),
    );
}

impl HostedZone {
    /// Sends `batches` in order, stopping at the first Route53 refuses: the tenants with
    /// changes in it or later fail. The zone as it is after what was sent, or `None` after a
    /// failure (the view may be what made Route53 refuse: the next round lists the zone).
    async fn send_round(
        &mut self,
        mut view: Vec<ResourceRecordSet>,
        batches: &[Vec<(usize, RecordChange)>],
        tenants: &[&String],
        results: &mut RoundResults,
    ) -> Option<Vec<ResourceRecordSet>> {
        for (i, batch) in batches.iter().enumerate() {
            let sdk_changes: Vec<_> = batch
                .iter()
                .map(|(_, c)| match c {
                    RecordChange::Delete(z) => (ChangeAction::Delete, view[*z].clone()),
                    RecordChange::Create(r) => {
                        (ChangeAction::Create, api::to_sdk(r, &self.zone_id))
                    }
                    RecordChange::Upsert(r) => {
                        (ChangeAction::Upsert, api::to_sdk(r, &self.zone_id))
                    }
                })
                .collect();
            let change = api::change(&self.client, &self.zone_id, sdk_changes.clone());
            if let Err(e) = self.pacer.around(change).await {
                for (t, _) in batches[i..].iter().flatten() {
                    results.insert(tenants[*t].clone(), Err(e.clone()));
                }
                return None;
            }
            apply(&mut view, sdk_changes);
        }
        Some(view)
    }
}

impl Provider for HostedZone {
    const KIND: &'static str = "route53";
    const SERVED: Option<Serve<Self>> = Some(|zone, sets| {
        listing::served(
            sets.iter()
                .map(|s| api::from_sdk(s).listed_in(&zone.zone_id)),
        )
    });
    /// The hosted zone is the zone the config names.
    async fn check_zone(&mut self) -> Result<(), SinkError> {
        let name = self
            .pacer
            .around(api::zone_name(&self.client, &self.zone_id))
            .await?;
        if name != self.zone {
            return Err(SinkError::permanent(format!(
                "hosted zone {} is {name}, but the config says zone = \"{}\"",
                self.zone_id, self.zone
            )));
        }
        Ok(())
    }

    /// The zone as last known, unless the round writes a state again or there is none.
    async fn zone_for(&mut self, round: &Round) -> Result<Vec<ResourceRecordSet>, SinkError> {
        match self.view.take_for(round) {
            Some(sets) => Ok(sets),
            None => self.list().await,
        }
    }

    /// Every record set of the zone, page by page; the listing is also the sink's new view
    /// of the zone.
    async fn list(&mut self) -> Result<Vec<ResourceRecordSet>, SinkError> {
        let mut all = Vec::new();
        let mut from = None;
        for _ in 0..api::MAX_PAGES {
            let page = self
                .pacer
                .around(api::list_page(&self.client, &self.zone_id, from))
                .await?;
            all.extend(page.sets);
            match page.next {
                Some(next) => from = Some(next),
                None => {
                    self.view.sets = Some(all.clone());
                    return Ok(all);
                }
            }
        }
        Err(SinkError::permanent(format!(
            "hosted zone {} still had more record sets after {} pages; refusing to write on a partial view",
            self.zone_id,
            api::MAX_PAGES
        )))
    }

    /// One round on the zone as last known (`zone_for`): each tenant's changes, as few
    /// batches as Route53's limits allow.
    async fn write_round(
        &mut self,
        listed: Vec<Self::Set>,
        round: &Round,
        _: &mut Done,
    ) -> Outcome {
        let zone: Vec<RecordSet> = (listed.iter())
            .map(|s| api::from_sdk(s).listed_in(&self.zone_id))
            .collect();
        let mut results = BTreeMap::new();
        let mut groups: Vec<Vec<(usize, RecordChange)>> = Vec::new();
        let tenants: Vec<&String> = round.keys().collect();
        for (t, tenant) in tenants.iter().enumerate() {
            let want = records::desired(&round[*tenant], self.style, &self.zone, &self.aliases);
            let planned = changes::for_tenant(&zone, &want, &self.owner_id);
            let result = if !planned.refused.is_empty() {
                Err(SinkError::permanent(planned.refused.join("; ")))
            } else if planned.groups.is_empty() {
                Ok(Applied::Unchanged)
            } else {
                Ok(Applied::Changed)
            };
            results.insert((*tenant).clone(), result);
            groups.extend(
                planned
                    .groups
                    .into_iter()
                    .map(|g| g.into_iter().map(|c| (t, c)).collect()),
            );
        }
        let batches = changes::pack(groups, |(_, c)| changes::cost(c, &zone));
        self.view.sets = self
            .send_round(listed, &batches, &tenants, &mut results)
            .await;
        self.view.wrote(round, &results);
        Ok(results)
    }

    /// Sends `batches` in order, each applied to the view once Route53 accepted it.
    async fn send(&mut self, batches: Self::Change, _what: &str) -> Result<(), SinkError> {
        for batch in batches {
            let change = api::change(&self.client, &self.zone_id, batch.clone());
            self.pacer.around(change).await?;
            if let Some(view) = &mut self.view.sets {
                apply(view, batch);
            }
        }
        Ok(())
    }

    /// Upserts replace a set whatever it holds: reports are written without a listing.
    async fn write_reports(&mut self, reports: &[Rrset]) -> Result<(), SinkError> {
        match self.report_change(&[], reports) {
            Some(batches) => self.send(batches, "reports").await,
            None => Ok(()),
        }
    }
}
