//! The contract between the engine and a DNS back end.
//!
//! A sink does one thing: make its back end match a tenant's full desired state. Everything
//! else (coalescing, retries, backoff, status, metrics) lives once in
//! [`crate::delivery::SinkActor`], the same for every sink.
//!
//! Beside the contract, what every crate that holds sink kinds shares: how a kind is
//! registered ([`kind`]), how a written record is marked ours ([`ownership`]), the hosts
//! file format ([`hosts_format`]), the nearest-location fallback of geo answers ([`geo`]),
//! where several clusters keep their reports ([`reports`]) and how a back end's zone is read
//! back for the answer canary ([`listing`]).

pub mod geo;
pub mod hosts_format;
pub mod kind;
pub mod listing;
pub mod ownership;
pub mod reports;
mod setup;
pub use setup::SetupError;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use ho_config::Plan;

use crate::metrics::Metrics;
use crate::snapshot::TenantSnapshot;
use reports::ReportStore;

/// What a successful write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The back end was changed to match.
    Changed,
    /// The back end already matched; nothing was written.
    Unchanged,
}

impl Applied {
    /// The name in logs, metrics and events.
    pub fn as_str(self) -> &'static str {
        match self {
            Applied::Changed => "changed",
            Applied::Unchanged => "unchanged",
        }
    }
}

/// A failed write, and whether trying again can help.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SinkError {
    /// What went wrong, specific enough to act on (shown in logs and `/status`).
    pub message: String,
    /// Whether to retry with backoff (back end down, 5xx, timeout) or wait for the next
    /// snapshot or reconcile (bad request, permission denied).
    pub retriable: bool,
    /// The back end asked to wait this long (HTTP 429 `Retry-After`).
    pub retry_after: Option<Duration>,
    /// The back end refused for rate (HTTP 429, Route53 `Throttling`): the zone or API is
    /// at its limit, which `sink_throttled_total` shows apart from failures.
    pub throttled: bool,
}

impl SinkError {
    /// An error worth retrying.
    pub fn retriable(message: impl Into<String>) -> SinkError {
        SinkError {
            message: message.into(),
            retriable: true,
            retry_after: None,
            throttled: false,
        }
    }

    /// An error that retrying the same write will not fix.
    pub fn permanent(message: impl Into<String>) -> SinkError {
        SinkError {
            message: message.into(),
            retriable: false,
            retry_after: None,
            throttled: false,
        }
    }

    /// A throttling answer: retry, but not before `after`.
    pub fn throttled(message: impl Into<String>, after: Option<Duration>) -> SinkError {
        SinkError {
            message: message.into(),
            retriable: true,
            retry_after: after,
            throttled: true,
        }
    }
}

/// The future a write returns.
pub type SinkFuture = Pin<Box<dyn Future<Output = Result<Applied, SinkError>> + Send>>;

/// A DNS back end.
pub trait Sink: Send + Sync + 'static {
    /// The config `kind`, for status and metrics.
    fn kind(&self) -> &'static str;

    /// Makes the back end's records for `snapshot.tenant` match `snapshot`, touching nothing
    /// else. Must be idempotent: the actor calls it again after errors and on new snapshots.
    fn apply(&self, snapshot: Arc<TenantSnapshot>) -> SinkFuture;

    /// Where the clusters keep their reports in this sink's zone (`[multi_cluster]`), for
    /// kinds whose spec answers `holds_reports`.
    fn reports(&self) -> Option<Arc<dyn ReportStore>> {
        None
    }

    /// What the back end serves, read through its own API, for kinds whose zone has no DNS
    /// port the answer canary can ask (see [`listing`]).
    fn listing(&self) -> Option<Arc<dyn listing::Listing>> {
        None
    }

    /// The running plan is now `plan` (a reload, a tenant source's round), which holds this
    /// sink whether or not it was rebuilt for it; `source_arrived`: the followed tenant
    /// source's first round is applied (false until then, and while none is followed). For
    /// sinks that answer queries themselves, which must not say that a tenant's name does
    /// not exist before its first snapshot.
    fn plan_applied(&self, _plan: &Plan, _source_arrived: bool) {}

    /// Where the back end's DNS server listens, asked through its API, for kinds whose spec
    /// answers `finds_dns_port` (see [`listing::DnsPort`]).
    fn dns_port(&self) -> Option<Arc<dyn listing::DnsPort>> {
        None
    }
}

/// Why a sink could not be built (a secret, TLS file or kubeconfig that cannot be read).
#[derive(Debug, thiserror::Error)]
#[error("sinks.{sink}: {source}")]
pub struct SinkBuildError {
    /// The sink's name.
    pub sink: String,
    /// Why, specific enough to act on.
    #[source]
    pub source: SetupError,
}

/// The future [`SinkFactory::build`] returns.
pub type BuildFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Arc<dyn Sink>, SinkBuildError>> + Send + 'a>>;

/// Builds the sink named `name` in a plan. The engine calls it for every sink at start and
/// for every new or changed sink on reload, so whatever the factory carries (AWS region and
/// credentials, an HTTP client) applies to reloaded sinks as it did at start. The engine
/// knows no concrete sink: the binary hands it the factory of the sinks crate.
pub trait SinkFactory: Send + Sync + 'static {
    /// Builds sink `name` of `plan` (`plan.sinks[name]` exists). Looks up credentials but
    /// does not contact the back end. `metrics` are the engine's, for sinks that count
    /// what happens outside their writes (the DNS server's queries).
    fn build<'a>(
        &'a self,
        name: &'a str,
        plan: &'a Plan,
        metrics: &'a Arc<Metrics>,
    ) -> BuildFuture<'a>;

    /// Registers the kinds' own [`MetricSet`](crate::metrics::MetricSet)s at start, so that
    /// `/metrics` lists every series the program can export before a sink of that kind
    /// exists (dashboards and alert rules see them from the first scrape).
    fn register_metrics(&self, _metrics: &Metrics) {}
}
