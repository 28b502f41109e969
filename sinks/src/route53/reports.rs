//! The clusters' reports (`[multi_cluster]`) in a Route53 hosted zone: one simple TXT record
//! set per cluster and tenant. Requests share the sink's writer, so they are paced with its
//! writes by the same token bucket (Route53's 5 requests a second per account).

use std::sync::Arc;

use aws_sdk_route53::types::ChangeAction;
use ho_engine::multi_cluster::report::{from_presentation, to_presentation};
use ho_engine::multi_cluster::{ReportStore, StoreFuture};

use super::records::{RecordSet, Routing};
use super::{api, Shared};

/// TTL of report records: read through the API, not by resolvers.
const REPORT_TTL: i64 = 60;

/// The report store of one Route53 sink.
pub(super) struct Route53Reports(pub(super) Arc<Shared>);

impl ReportStore for Route53Reports {
    fn write(&self, name: String, texts: Vec<String>) -> StoreFuture<()> {
        let shared = self.0.clone();
        Box::pin(async move {
            let set = RecordSet {
                name: format!("{name}."),
                rtype: "TXT".into(),
                set_id: None,
                routing: Routing::Simple,
                ttl: REPORT_TTL,
                values: texts.iter().map(|t| to_presentation(t)).collect(),
            };
            let mut writer = shared.writer.lock().await;
            writer.pace().await;
            api::change(
                &writer.client,
                &writer.zone_id,
                vec![(ChangeAction::Upsert, api::to_sdk(&set))],
            )
            .await
        })
    }

    fn read(&self, suffix: String) -> StoreFuture<Vec<(String, Vec<String>)>> {
        let shared = self.0.clone();
        Box::pin(async move {
            let suffix = format!("{suffix}.");
            let listed = shared.writer.lock().await.list_zone().await?;
            Ok(listed
                .iter()
                .map(api::from_sdk)
                .filter(|s| s.rtype == "TXT" && s.name.ends_with(&suffix))
                .map(|s| {
                    let name = s.name.trim_end_matches('.').to_owned();
                    (
                        name,
                        s.values.iter().map(|v| from_presentation(v)).collect(),
                    )
                })
                .collect())
        })
    }

    fn remove(&self, name: String) -> StoreFuture<()> {
        let shared = self.0.clone();
        Box::pin(async move {
            let name = format!("{name}.");
            let mut writer = shared.writer.lock().await;
            let listed = writer.list_zone().await?;
            let Some(set) = listed
                .into_iter()
                .find(|s| s.name().eq_ignore_ascii_case(&name) && s.r#type().as_str() == "TXT")
            else {
                return Ok(());
            };
            writer.pace().await;
            api::change(
                &writer.client,
                &writer.zone_id,
                vec![(ChangeAction::Delete, set)],
            )
            .await
        })
    }
}
