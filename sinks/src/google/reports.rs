//! The clusters' reports (`[multi_cluster]`) in a Cloud DNS zone: one TXT record set per
//! cluster and tenant, replaced in one change.

use std::sync::Arc;

use ho_engine::multi_cluster::report::{from_presentation, to_presentation};
use ho_engine::sink::reports::{ReportStore, Rrset, StoreFuture};

use super::api::{rrset, Change};
use super::Inner;
use crate::rounds::Rounds;

/// TTL of report records: read through the API, not by resolvers.
const REPORT_TTL: u64 = 60;

/// The report store of one Cloud DNS sink.
pub(super) struct GoogleReports(pub(super) Arc<Rounds<Inner>>);

impl ReportStore for GoogleReports {
    fn write(&self, reports: Vec<Rrset>) -> StoreFuture<()> {
        let rounds = self.0.clone();
        Box::pin(async move {
            // Between rounds: one listing decides at a time.
            let mut inner = rounds.writer().await;
            let zone = inner.list().await?;
            let mut change = Change::default();
            for Rrset { name, texts } in &reports {
                let mut data: Vec<String> = texts.iter().map(|t| to_presentation(t)).collect();
                data.sort();
                let old = zone
                    .iter()
                    .find(|s| s.rtype == "TXT" && s.name.eq_ignore_ascii_case(name));
                if old.is_some_and(|o| o.data == data && o.ttl == REPORT_TTL) {
                    continue;
                }
                change.deletions.extend(old.map(|o| o.raw.clone()));
                change
                    .additions
                    .push(rrset(name, "TXT", REPORT_TTL, &data, None));
            }
            if change.is_empty() {
                return Ok(());
            }
            inner
                .post(&change, &format!("{} reports", reports.len()))
                .await
        })
    }

    fn read(&self, suffixes: Vec<String>) -> StoreFuture<Vec<Rrset>> {
        let rounds = self.0.clone();
        Box::pin(async move {
            let mut inner = rounds.writer().await;
            let zone = inner.list().await?;
            Ok(zone
                .into_iter()
                .filter(|s| {
                    s.rtype == "TXT" && suffixes.iter().any(|x| s.name.ends_with(x.as_str()))
                })
                .map(|s| {
                    let texts = s.data.iter().map(|d| from_presentation(d)).collect();
                    Rrset::new(s.name, texts)
                })
                .collect())
        })
    }

    fn remove(&self, name: String) -> StoreFuture<()> {
        let rounds = self.0.clone();
        Box::pin(async move {
            // Between rounds: one listing decides at a time.
            let mut inner = rounds.writer().await;
            let zone = inner.list().await?;
            let change = Change {
                deletions: zone
                    .iter()
                    .filter(|s| s.rtype == "TXT" && s.name.eq_ignore_ascii_case(&name))
                    .map(|s| s.raw.clone())
                    .collect(),
                additions: Vec::new(),
            };
            if change.is_empty() {
                return Ok(());
            }
            inner.post(&change, &format!("remove report {name}")).await
        })
    }
}
