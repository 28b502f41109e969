//! The frame of every zone-writing kind that writes in rounds (Route53, Cloudflare, Cloud
//! DNS, Azure DNS, external-dns webhooks): [`RoundsSink`] is the [`Sink`], its report store
//! and its listing once; a kind supplies a [`Provider`]: its API calls, its plan of a round
//! and how its record sets hold reports. Pacing lives in each provider's requests
//! ([`crate::pace`]), so a round, a report exchange and a listing share one limiter: the
//! frame hands each of them the provider only between rounds.

use std::future::Future;
use std::sync::Arc;

use ho_engine::sink::listing::{Listed, Listing, ListingFuture};
use ho_engine::sink::reports::{ReportStore, Rrset};
use ho_engine::sink::{Sink, SinkError, SinkFuture};
use ho_engine::snapshot::TenantSnapshot;

use super::reports::HoldsReports;
use super::{Done, Outcome, Round, RoundFuture, RoundWriter, Rounds};

/// Turns a listing of `P`'s zone into what each name answers.
pub type Serve<P> = fn(&P, Vec<<P as HoldsReports>::Set>) -> Listed;

/// What a kind supplies to the frame: the calls of its API and its plan of a round (how
/// its sets hold reports is its [`HoldsReports`]).
pub trait Provider: HoldsReports + Send + Sized + 'static {
    /// The config `kind`, for status and metrics.
    const KIND: &'static str;

    /// What each name of a listed zone answers, for the answer canary; `None` for a kind
    /// whose zone the canary does not read back through its API.
    const SERVED: Option<Serve<Self>>;

    /// Checks, before the first round and again until it passes, that the zone is the
    /// one configured.
    fn check_zone(&mut self) -> impl Future<Output = Result<(), SinkError>> + Send {
        async { Ok(()) }
    }

    /// Every set of the zone, paced with the writes.
    fn list(&mut self) -> impl Future<Output = Result<Vec<Self::Set>, SinkError>> + Send;

    /// The zone to plan `round` on: a listing, unless the kind keeps a view of the zone.
    fn zone_for(
        &mut self,
        _round: &Round,
    ) -> impl Future<Output = Result<Vec<Self::Set>, SinkError>> + Send {
        self.list()
    }

    /// Writes one round planned on `zone`: every waiting tenant's latest snapshot, by tenant
    /// name (see [`RoundWriter::write`]).
    fn write_round(
        &mut self,
        zone: Vec<Self::Set>,
        round: &Round,
        done: &mut Done,
    ) -> impl Future<Output = Outcome> + Send;

    /// Sends `change` (`what` names it in errors).
    fn send(
        &mut self,
        change: Self::Change,
        what: &str,
    ) -> impl Future<Output = Result<(), SinkError>> + Send;

    /// Writes this cluster's reports: one listing decides, one change writes. A kind whose
    /// API replaces a set without knowing it (an upsert) writes without the listing.
    fn write_reports(
        &mut self,
        reports: &[Rrset],
    ) -> impl Future<Output = Result<(), SinkError>> + Send {
        async move {
            let zone = self.list().await?;
            match self.report_change(&zone, reports) {
                Some(change) => {
                    self.send(change, &format!("{} reports", reports.len()))
                        .await
                }
                None => Ok(()),
            }
        }
    }
}

/// The end of a [`Provider::check_zone`] that read the zone's name (`found`) from the API:
/// the configured `zone`, whatever the case, or an error saying both (`named` says where
/// the name was found).
pub(crate) fn zone_named(found: &str, zone: &str, named: &str) -> Result<(), SinkError> {
    if found.eq_ignore_ascii_case(zone) {
        return Ok(());
    }
    Err(SinkError::permanent(format!(
        "{named} {found:?}, but the config says zone = \"{zone}\""
    )))
}

/// A provider, and whether its zone passed [`Provider::check_zone`].
pub(super) struct Checked<P> {
    pub(super) provider: P,
    checked: bool,
}

impl<P: Provider> RoundWriter for Checked<P> {
    fn write<'a>(&'a mut self, round: &'a Round, done: &'a mut Done) -> RoundFuture<'a> {
        Box::pin(async move {
            if !self.checked {
                self.provider.check_zone().await?;
                self.checked = true;
            }
            let zone = self.provider.zone_for(round).await?;
            self.provider.write_round(zone, round, done).await
        })
    }
}

/// The sink of a kind that writes in rounds: tenants due together share a listing and
/// packed changes, reports and the canary's listing go through the same provider.
pub struct RoundsSink<P> {
    rounds: Arc<Rounds<Checked<P>>>,
}

impl<P: Provider> RoundsSink<P> {
    /// The sink writing through `provider`; nothing is sent before the first write.
    pub(crate) fn of(provider: P) -> RoundsSink<P> {
        let checked = Checked {
            provider,
            checked: false,
        };
        RoundsSink {
            rounds: Arc::new(Rounds::new(checked)),
        }
    }
}

impl<P: Provider> Sink for RoundsSink<P> {
    fn kind(&self) -> &'static str {
        P::KIND
    }

    fn reports(&self) -> Option<Arc<dyn ReportStore>> {
        Some(Arc::new(super::reports::Reports(self.rounds.clone())))
    }

    fn listing(&self) -> Option<Arc<dyn Listing>> {
        let rounds = self.rounds.clone();
        P::SERVED.map(|served| Arc::new(ZoneListing { rounds, served }) as Arc<dyn Listing>)
    }

    fn apply(&self, snapshot: Arc<TenantSnapshot>) -> SinkFuture {
        let rounds = self.rounds.clone();
        Box::pin(async move { rounds.apply(snapshot).await })
    }
}

/// The canary's listing: one listing of the zone between rounds, turned into what each
/// name answers.
struct ZoneListing<P: Provider> {
    rounds: Arc<Rounds<Checked<P>>>,
    served: Serve<P>,
}

impl<P: Provider> Listing for ZoneListing<P> {
    fn list(&self) -> ListingFuture {
        let (rounds, served) = (self.rounds.clone(), self.served);
        Box::pin(async move {
            let provider = &mut rounds.writer().await.provider;
            let zone = provider.list().await?;
            Ok(served(provider, zone))
        })
    }
}
