//! Where the clusters of `[multi_cluster]` keep their reports: a zone they share, reached
//! through the sink that writes it. The engine's rounds (`crate::multi_cluster`) read and
//! write reports through this trait; the sink kinds that can hold them implement it.

use std::future::Future;
use std::pin::Pin;

use super::SinkError;

/// What a report exchange returns.
pub type StoreFuture<T> = Pin<Box<dyn Future<Output = Result<T, SinkError>> + Send>>;

/// A zone the clusters share, as the place their reports live: implemented by sinks whose
/// kind answers `holds_reports` (PowerDNS, Route53). Names carry no trailing dot. Each call
/// is one request where the API allows it, since Route53 allows 5 a second per account.
pub trait ReportStore: Send + Sync {
    /// Replaces each TXT rrset named (this cluster's reports) with records of its texts,
    /// in one change.
    fn write(&self, reports: Vec<(String, Vec<String>)>) -> StoreFuture<()>;

    /// Every TXT rrset whose name ends with one of `suffixes`, as (name, the text of each
    /// record), from one read of the zone.
    fn read(&self, suffixes: Vec<String>) -> StoreFuture<Vec<(String, Vec<String>)>>;

    /// Removes the TXT rrset `name`, if there (`cluster leave`).
    fn remove(&self, name: String) -> StoreFuture<()>;
}
