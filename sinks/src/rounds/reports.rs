//! The clusters' reports (`[multi_cluster]`) in the zone of a kind that writes in rounds:
//! one TXT set per cluster and tenant, read from one listing and written or removed by one
//! change of the provider's. Each exchange runs between rounds, so one listing decides at a
//! time and its requests are paced with the writes.

use std::collections::BTreeMap;
use std::sync::Arc;

use ho_engine::sink::reports::{ReportStore, Rrset, StoreFuture};

use super::provider::Provider;
use super::Rounds;

/// The report store of one sink that writes in rounds.
pub(super) struct Reports<P>(pub(super) Arc<Rounds<P>>);

impl<P: Provider> ReportStore for Reports<P> {
    fn write(&self, reports: Vec<Rrset>) -> StoreFuture<()> {
        let rounds = self.0.clone();
        Box::pin(async move { rounds.writer().await.write_reports(&reports).await })
    }

    fn read(&self, suffixes: Vec<String>) -> StoreFuture<Vec<Rrset>> {
        let rounds = self.0.clone();
        Box::pin(async move {
            let zone = rounds.writer().await.list().await?;
            // By name: a kind that lists records, not sets, lists a set's records apart.
            let mut found: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for (name, texts) in zone.iter().filter_map(P::txt) {
                if suffixes.iter().any(|s| name.ends_with(s.as_str())) {
                    found.entry(name).or_default().extend(texts);
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
            let mut provider = rounds.writer().await;
            let zone = provider.list().await?;
            match provider.removal(&zone, &name) {
                Some(change) => {
                    provider
                        .send(change, &format!("remove report {name}"))
                        .await
                }
                None => Ok(()),
            }
        })
    }
}
