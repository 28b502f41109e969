//! The clusters' reports (`[multi_cluster]`) in an Azure DNS zone: one TXT record set per
//! cluster and tenant, each replaced by one conditional `PUT`.

use std::sync::Arc;

use ho_engine::sink::reports::{ReportStore, Rrset, StoreFuture};

use super::api::{body, Op};
use super::Inner;
use crate::rounds::Rounds;

/// TTL of report records: read through the API, not by resolvers.
const REPORT_TTL: u64 = 60;

/// The report store of one Azure DNS sink.
pub(super) struct AzureReports(pub(super) Arc<Rounds<Inner>>);

impl ReportStore for AzureReports {
    fn write(&self, reports: Vec<Rrset>) -> StoreFuture<()> {
        let rounds = self.0.clone();
        Box::pin(async move {
            // Between rounds: one listing decides at a time.
            let mut inner = rounds.writer().await;
            let zone = inner.list().await?;
            for Rrset { name, texts } in &reports {
                let mut data = texts.clone();
                data.sort();
                let old = zone
                    .iter()
                    .find(|s| s.rtype == "TXT" && s.name.eq_ignore_ascii_case(name));
                if old.is_some_and(|o| o.data == data && o.ttl == REPORT_TTL) {
                    continue;
                }
                let op = Op::Put {
                    rtype: "TXT".into(),
                    name: name.clone(),
                    body: body("TXT", REPORT_TTL, &data),
                    etag: old.map(|o| o.etag.clone()),
                };
                inner.apply_op(&op).await?;
            }
            Ok(())
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
                .map(|s| Rrset::new(s.name, s.data))
                .collect())
        })
    }

    fn remove(&self, name: String) -> StoreFuture<()> {
        let rounds = self.0.clone();
        Box::pin(async move {
            let mut inner = rounds.writer().await;
            let zone = inner.list().await?;
            let old = zone
                .iter()
                .find(|s| s.rtype == "TXT" && s.name.eq_ignore_ascii_case(&name));
            let Some(old) = old else {
                return Ok(());
            };
            let op = Op::Delete {
                rtype: "TXT".into(),
                name: name.clone(),
                etag: old.etag.clone(),
            };
            inner.apply_op(&op).await
        })
    }
}
