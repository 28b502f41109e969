//! The clusters' reports (`[multi_cluster]`) in a Route53 hosted zone: one simple TXT record
//! set per cluster and tenant. Requests share the sink's writer, so they are paced with its
//! writes by the same limiter (Route53's 5 requests a second per account).

use aws_sdk_route53::types::{ChangeAction, ResourceRecordSet};
use ho_engine::multi_cluster::report::{from_presentation, to_presentation};
use ho_engine::sink::reports::Rrset;

use super::records::{RecordSet, Routing};
use super::{api, changes, HostedZone};
use crate::rounds::reports::HoldsReports;

/// TTL of report records: read through the API, not by resolvers.
const REPORT_TTL: i64 = 60;

impl HoldsReports for HostedZone {
    type Set = ResourceRecordSet;
    /// Batches, each one `ChangeResourceRecordSets`.
    type Change = Vec<Vec<(ChangeAction, ResourceRecordSet)>>;

    /// A TXT set's name (no trailing dot) and texts.
    fn txt(set: &ResourceRecordSet) -> Option<(String, Vec<String>)> {
        let set = api::from_sdk(set);
        let texts = set.values.iter().map(|v| from_presentation(v)).collect();
        (set.rtype == "TXT").then(|| (set.name.trim_end_matches('.').to_owned(), texts))
    }

    /// Every report upserted, whatever the zone holds, in as few batches as Route53's
    /// per-request limits allow.
    fn report_change(&self, _: &[ResourceRecordSet], reports: &[Rrset]) -> Option<Self::Change> {
        let groups = (reports.iter())
            .map(|Rrset { name, texts }| {
                vec![RecordSet {
                    name: format!("{name}."),
                    rtype: "TXT".into(),
                    set_id: None,
                    routing: Routing::Simple,
                    ttl: REPORT_TTL,
                    values: texts.iter().map(|t| to_presentation(t)).collect(),
                    alias: None,
                }]
            })
            .collect();
        let batches: Self::Change = changes::pack(groups, |s| {
            (s.values.len(), s.values.iter().map(String::len).sum())
        })
        .into_iter()
        .map(|batch| {
            (batch.iter())
                .map(|s| (ChangeAction::Upsert, api::to_sdk(s, &self.zone_id)))
                .collect()
        })
        .collect();
        (!batches.is_empty()).then_some(batches)
    }

    /// The delete of the TXT set `name` as listed.
    fn removal(&self, zone: &[ResourceRecordSet], name: &str) -> Option<Self::Change> {
        let name = format!("{name}.");
        let set = zone
            .iter()
            .find(|s| s.name().eq_ignore_ascii_case(&name) && s.r#type().as_str() == "TXT")?;
        Some(vec![vec![(ChangeAction::Delete, set.clone())]])
    }
}
