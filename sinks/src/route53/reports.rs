//! The clusters' reports (`[multi_cluster]`) in a Route53 hosted zone: one simple TXT record
//! set per cluster and tenant. Requests share the sink's writer, so they are paced with its
//! writes by the same limiter (Route53's 5 requests a second per account).

use std::sync::Arc;

use aws_sdk_route53::types::ChangeAction;
use ho_engine::multi_cluster::report::{from_presentation, to_presentation};
use ho_engine::sink::reports::{ReportStore, Rrset, StoreFuture};

use super::records::{RecordSet, Routing};
use super::{api, changes, Writer};
use crate::rounds::Rounds;

/// TTL of report records: read through the API, not by resolvers.
const REPORT_TTL: i64 = 60;

/// The report store of one Route53 sink.
pub(super) struct Route53Reports(pub(super) Arc<Rounds<Writer>>);

impl ReportStore for Route53Reports {
    fn write(&self, reports: Vec<Rrset>) -> StoreFuture<()> {
        let shared = self.0.clone();
        Box::pin(async move {
            let sets: Vec<RecordSet> = reports
                .iter()
                .map(|Rrset { name, texts }| RecordSet {
                    name: format!("{name}."),
                    rtype: "TXT".into(),
                    set_id: None,
                    routing: Routing::Simple,
                    ttl: REPORT_TTL,
                    values: texts.iter().map(|t| to_presentation(t)).collect(),
                    alias: None,
                })
                .collect();
            let mut writer = shared.writer().await;
            // Within Route53's per-request limits: as few batches as they allow.
            let groups = sets.into_iter().map(|s| vec![s]).collect();
            for batch in changes::pack(groups, |s| {
                (s.values.len(), s.values.iter().map(String::len).sum())
            }) {
                let upserts: Vec<_> = batch
                    .iter()
                    .map(|s| (ChangeAction::Upsert, api::to_sdk(s, &writer.zone_id)))
                    .collect();
                let w = &mut *writer;
                let change = api::change(&w.client, &w.zone_id, upserts.clone());
                w.pacer.around(change).await?;
                if let Some(view) = &mut writer.view {
                    view.apply(upserts);
                }
            }
            Ok(())
        })
    }

    fn read(&self, suffixes: Vec<String>) -> StoreFuture<Vec<Rrset>> {
        let shared = self.0.clone();
        Box::pin(async move {
            let suffixes: Vec<String> = suffixes.iter().map(|s| format!("{s}.")).collect();
            let listed = shared.writer().await.list_zone().await?;
            Ok(listed
                .iter()
                .map(api::from_sdk)
                .filter(|s| {
                    s.rtype == "TXT" && suffixes.iter().any(|x| s.name.ends_with(x.as_str()))
                })
                .map(|s| {
                    let texts = s.values.iter().map(|v| from_presentation(v)).collect();
                    Rrset::new(s.name.trim_end_matches('.'), texts)
                })
                .collect())
        })
    }

    fn remove(&self, name: String) -> StoreFuture<()> {
        let shared = self.0.clone();
        Box::pin(async move {
            let name = format!("{name}.");
            let mut writer = shared.writer().await;
            let listed = writer.list_zone().await?;
            let Some(set) = listed
                .into_iter()
                .find(|s| s.name().eq_ignore_ascii_case(&name) && s.r#type().as_str() == "TXT")
            else {
                return Ok(());
            };
            let delete = vec![(ChangeAction::Delete, set)];
            let w = &mut *writer;
            let change = api::change(&w.client, &w.zone_id, delete.clone());
            w.pacer.around(change).await?;
            if let Some(view) = &mut writer.view {
                view.apply(delete);
            }
            Ok(())
        })
    }
}
