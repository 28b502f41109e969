//! The clusters' reports (`[multi_cluster]`) through an external-dns provider: one TXT
//! record set per cluster and tenant, created, replaced or deleted whole.

use std::sync::Arc;

use ho_engine::multi_cluster::report::{from_presentation, to_presentation};
use ho_engine::sink::reports::{ReportStore, Rrset, StoreFuture};

use super::api::{Changes, Endpoint};
use super::Inner;
use crate::rounds::Rounds;

/// TTL of report records: read through the provider, not by resolvers.
const REPORT_TTL: u32 = 60;

/// The report store of one webhook sink.
pub(super) struct WebhookReports(pub(super) Arc<Rounds<Inner>>);

impl ReportStore for WebhookReports {
    fn write(&self, reports: Vec<Rrset>) -> StoreFuture<()> {
        let rounds = self.0.clone();
        Box::pin(async move {
            // Between rounds: one listing decides at a time.
            let mut inner = rounds.writer().await;
            let listed = inner.list().await?;
            let mut changes = Changes::default();
            for Rrset { name, texts } in &reports {
                let targets = texts.iter().map(|t| to_presentation(t)).collect();
                let wanted = Endpoint::new(name, "TXT", targets, REPORT_TTL);
                match listed.iter().find(|e| e.is(name, "TXT")) {
                    None => changes.create.push(wanted),
                    Some(current) if !wanted.serves_as(current) => {
                        changes.update_old.push(current.clone());
                        changes.update_new.push(wanted);
                    }
                    Some(_) => {}
                }
            }
            if changes.is_empty() {
                return Ok(());
            }
            // Listed afresh above; the sink's next round lists again too.
            inner.view = None;
            inner
                .send(&changes, &format!("{} reports", reports.len()))
                .await
        })
    }

    fn read(&self, suffixes: Vec<String>) -> StoreFuture<Vec<Rrset>> {
        let rounds = self.0.clone();
        Box::pin(async move {
            let listed = rounds.writer().await.list().await?;
            Ok(listed
                .into_iter()
                .filter(|e| e.record_type == "TXT" && e.set_identifier.is_empty())
                .filter_map(|e| {
                    let name = e.dns_name.trim_end_matches('.').to_ascii_lowercase();
                    suffixes
                        .iter()
                        .any(|s| name.ends_with(s.as_str()))
                        .then(|| {
                            Rrset::new(
                                name,
                                e.targets.iter().map(|t| from_presentation(t)).collect(),
                            )
                        })
                })
                .collect())
        })
    }

    fn remove(&self, name: String) -> StoreFuture<()> {
        let rounds = self.0.clone();
        Box::pin(async move {
            let mut inner = rounds.writer().await;
            let listed = inner.list().await?;
            let changes = Changes {
                delete: listed.into_iter().filter(|e| e.is(&name, "TXT")).collect(),
                ..Default::default()
            };
            if changes.is_empty() {
                return Ok(());
            }
            inner.view = None;
            inner.send(&changes, &format!("remove report {name}")).await
        })
    }
}
