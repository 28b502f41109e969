//! Where the clusters of `[multi_cluster]` keep their reports: a zone they share, reached
//! through the sink that writes it. The engine's rounds (`crate::multi_cluster`) read and
//! write reports through this trait; the sink kinds that can hold them implement it.

use std::future::Future;
use std::pin::Pin;

use super::SinkError;

/// One TXT rrset of the zone the reports live in: its name (no trailing dot) and the text
/// of each of its records.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rrset {
    /// The rrset's name, without the trailing dot.
    pub name: String,
    /// The text of each record (a report, in `multi_cluster::report`'s format).
    pub texts: Vec<String>,
}

impl Rrset {
    /// The rrset `name` of `texts`.
    pub fn new(name: impl Into<String>, texts: Vec<String>) -> Rrset {
        Rrset {
            name: name.into(),
            texts,
        }
    }
}

/// What a report exchange returns.
pub type StoreFuture<T> = Pin<Box<dyn Future<Output = Result<T, SinkError>> + Send>>;

/// A zone the clusters share, as the place their reports live: implemented by sinks whose
/// kind answers `holds_reports` (PowerDNS, Route53). Names carry no trailing dot. Each call
/// is one request where the API allows it, since Route53 allows 5 a second per account.
pub trait ReportStore: Send + Sync {
    /// Replaces each TXT rrset named (this cluster's reports) with records of its texts,
    /// in one change.
    fn write(&self, reports: Vec<Rrset>) -> StoreFuture<()>;

    /// Every TXT rrset whose name ends with one of `suffixes`, as (name, the text of each
    /// record), from one read of the zone.
    fn read(&self, suffixes: Vec<String>) -> StoreFuture<Vec<Rrset>>;

    /// Removes the TXT rrset `name`, if there (`cluster leave`).
    fn remove(&self, name: String) -> StoreFuture<()>;
}
