//! The clusters' reports (`[multi_cluster]`) in a Cloudflare zone: the TXT records of one
//! name per cluster and tenant, replaced in one batch.

use std::sync::Arc;

use ho_engine::multi_cluster::report::{from_presentation, to_presentation};
use ho_engine::sink::reports::{ReportStore, Rrset, StoreFuture};

use super::api::{Batch, Id, NewRecord};
use super::Inner;
use crate::rounds::Rounds;

/// TTL of report records: read through the API, not by resolvers.
const REPORT_TTL: u32 = 60;

/// The report store of one Cloudflare sink.
pub(super) struct CloudflareReports(pub(super) Arc<Rounds<Inner>>);

impl ReportStore for CloudflareReports {
    fn write(&self, reports: Vec<Rrset>) -> StoreFuture<()> {
        let rounds = self.0.clone();
        Box::pin(async move {
            // Between rounds: one listing decides at a time.
            let mut inner = rounds.writer().await;
            let zone = inner.list().await?;
            let mut batch = Batch::default();
            for Rrset { name, texts } in &reports {
                let mut wanted: Vec<&String> = texts.iter().collect();
                for record in zone
                    .iter()
                    .filter(|r| r.rtype == "TXT" && r.name.eq_ignore_ascii_case(name))
                {
                    let text = from_presentation(&record.content);
                    match wanted.iter().position(|w| **w == text) {
                        Some(i) if record.ttl == REPORT_TTL => {
                            wanted.swap_remove(i);
                        }
                        _ => batch.deletes.push(Id {
                            id: record.id.clone(),
                        }),
                    }
                }
                batch.posts.extend(wanted.into_iter().map(|t| NewRecord {
                    rtype: "TXT",
                    name: name.clone(),
                    content: to_presentation(t),
                    ttl: REPORT_TTL,
                    proxied: false,
                }));
            }
            if batch.is_empty() {
                return Ok(());
            }
            inner
                .send(batch, &format!("{} reports", reports.len()))
                .await
        })
    }

    fn read(&self, suffixes: Vec<String>) -> StoreFuture<Vec<Rrset>> {
        let rounds = self.0.clone();
        Box::pin(async move {
            let mut inner = rounds.writer().await;
            let zone = inner.list().await?;
            let mut found: std::collections::BTreeMap<String, Vec<String>> = Default::default();
            for record in zone.iter().filter(|r| r.rtype == "TXT") {
                let name = record.name.to_ascii_lowercase();
                if suffixes.iter().any(|s| name.ends_with(s.as_str())) {
                    found
                        .entry(name)
                        .or_default()
                        .push(from_presentation(&record.content));
                }
            }
            Ok(found
                .into_iter()
                .map(|(name, texts)| Rrset::new(name, texts))
                .collect())
        })
    }

    fn remove(&self, name: String) -> StoreFuture<()> {
        let rounds = self.0.clone();
        Box::pin(async move {
            // Between rounds: one listing decides at a time.
            let mut inner = rounds.writer().await;
            let zone = inner.list().await?;
            let batch = Batch {
                deletes: zone
                    .iter()
                    .filter(|r| r.rtype == "TXT" && r.name.eq_ignore_ascii_case(&name))
                    .map(|r| Id { id: r.id.clone() })
                    .collect(),
                posts: Vec::new(),
            };
            if batch.is_empty() {
                return Ok(());
            }
            inner.send(batch, &format!("remove report {name}")).await
        })
    }
}
