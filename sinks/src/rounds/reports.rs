//! The clusters' reports (`[multi_cluster]`) in the zone of a kind that writes in rounds:
//! one TXT set per cluster and tenant, read from one listing and written or removed by one
//! change of the provider's. Each exchange runs between rounds, so one listing decides at a
//! time and its requests are paced with the writes.

use std::collections::BTreeMap;
use std::sync::Arc;

use ho_engine::sink::reports::{ReportStore, Rrset, StoreFuture};

use super::provider::{Checked, Provider};
use super::Rounds;

/// How a kind's record sets hold the clusters' reports (each kind's `reports.rs`).
pub trait HoldsReports {
    /// One record set (or record) as the API lists it.
    type Set: Send + Sync + 'static;

    /// The changes one request makes (a batch, a change, a list of set writes).
    type Change: Send + 'static;

    /// A TXT set's name (no trailing dot) and the text of each of its records, if `set` is
    /// one: how reports are read back.
    fn txt(set: &Self::Set) -> Option<(String, Vec<String>)>;

    /// The change that makes `zone` hold `reports` (each TXT set replaced by its texts), or
    /// `None` when it holds them already.
    fn report_change(&self, zone: &[Self::Set], reports: &[Rrset]) -> Option<Self::Change>;

    /// The change that removes the TXT set `name` from `zone`, or `None` when it is not there.
    fn removal(&self, zone: &[Self::Set], name: &str) -> Option<Self::Change>;
}

/// The report store of one sink that writes in rounds.
pub(super) struct Reports<P>(pub(super) Arc<Rounds<Checked<P>>>);

impl<P: Provider> ReportStore for Reports<P> {
    fn write(&self, reports: Vec<Rrset>) -> StoreFuture<()> {
        let rounds = self.0.clone();
        Box::pin(async move { rounds.writer().await.provider.write_reports(&reports).await })
    }

    fn read(&self, suffixes: Vec<String>) -> StoreFuture<Vec<Rrset>> {
        let rounds = self.0.clone();
        Box::pin(async move {
            let zone = rounds.writer().await.provider.list().await?;
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
            let provider = &mut rounds.writer().await.provider;
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
