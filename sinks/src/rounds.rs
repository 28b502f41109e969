//! Zone-writing sinks (Route53, Cloudflare) write zones, not tenants: tenants due while a
//! round runs wait for it and go out together, so a mass failure costs one reading of the
//! zone and a few batched changes instead of both for every tenant. This is the waiting
//! room and the turn; each sink's [`RoundWriter`] decides and sends a round.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use ho_engine::sink::{Applied, SinkError};
use ho_engine::snapshot::TenantSnapshot;
use tokio::sync::oneshot;

/// Each tenant's result of a round.
pub type RoundResults = BTreeMap<String, Result<Applied, SinkError>>;

/// The future [`RoundWriter::write`] returns: each tenant's result, or one error for all.
pub type RoundFuture<'a> =
    Pin<Box<dyn Future<Output = Result<RoundResults, SinkError>> + Send + 'a>>;

/// Writes one round: every waiting tenant's latest snapshot, by tenant name.
pub trait RoundWriter: Send {
    /// Writes `round`; a tenant missing from the results is unchanged.
    fn write<'a>(&'a mut self, round: &'a BTreeMap<String, Arc<TenantSnapshot>>)
        -> RoundFuture<'a>;
}

/// The tenants waiting for the next round, and the writer whose turn it is.
pub struct Rounds<W> {
    waiting: Mutex<BTreeMap<String, Waiting>>,
    writer: tokio::sync::Mutex<W>,
}

struct Waiting {
    snapshot: Arc<TenantSnapshot>,
    replies: Vec<oneshot::Sender<Result<Applied, SinkError>>>,
}

impl<W: RoundWriter> Rounds<W> {
    /// Rounds written by `writer`.
    pub fn new(writer: W) -> Rounds<W> {
        Rounds {
            waiting: Mutex::new(BTreeMap::new()),
            writer: tokio::sync::Mutex::new(writer),
        }
    }

    /// Writes `snapshot` in the next round (a newer snapshot of the tenant replaces it);
    /// its result.
    pub async fn apply(&self, snapshot: Arc<TenantSnapshot>) -> Result<Applied, SinkError> {
        let mut reply = self.enqueue(snapshot);
        // Whoever holds the writer runs a round for everyone waiting, ours included unless a
        // running round already took it; then its result is there once the writer is free.
        let mut writer = self.writer.lock().await;
        if let Ok(result) = reply.try_recv() {
            return result;
        }
        let round = std::mem::take(&mut *self.waiting.lock().expect("not poisoned"));
        let snapshots = round
            .iter()
            .map(|(t, w)| (t.clone(), w.snapshot.clone()))
            .collect();
        let results = match writer.write(&snapshots).await {
            Ok(results) => results,
            Err(e) => round.keys().map(|t| (t.clone(), Err(e.clone()))).collect(),
        };
        // Told before the writer is free: a tenant of this round that gets the writer next
        // finds its result instead of running an empty round.
        for (tenant, waiting) in round {
            let result = results
                .get(&tenant)
                .cloned()
                .unwrap_or(Ok(Applied::Unchanged));
            for reply in waiting.replies {
                let _ = reply.send(result.clone());
            }
        }
        drop(writer);
        reply.await.unwrap_or_else(|_| {
            Err(SinkError::retriable(
                "the round writing this tenant was cancelled",
            ))
        })
    }

    /// The writer, once no round runs (for the report store, whose requests share its
    /// pacing and its view of the zone).
    pub async fn writer(&self) -> tokio::sync::MutexGuard<'_, W> {
        self.writer.lock().await
    }

    fn enqueue(
        &self,
        snapshot: Arc<TenantSnapshot>,
    ) -> oneshot::Receiver<Result<Applied, SinkError>> {
        let (tx, rx) = oneshot::channel();
        let mut waiting = self.waiting.lock().expect("not poisoned");
        let entry = waiting
            .entry(snapshot.tenant.clone())
            .or_insert_with(|| Waiting {
                snapshot: snapshot.clone(),
                replies: Vec::new(),
            });
        if snapshot.seq >= entry.snapshot.seq {
            entry.snapshot = snapshot;
        }
        entry.replies.push(tx);
        rx
    }
}

/// A batch of operations on a zone that rounds pack into requests.
pub trait Packable: Default {
    /// Its size against a request's limit.
    fn size(&self) -> usize;
    /// Takes `other`'s operations in.
    fn absorb(&mut self, other: Self);
    /// Cut into batches of at most `max`.
    fn split(self, max: usize) -> Vec<Self>;
}

/// Several tenants' batches packed into as few requests of at most `max` as fit, each
/// tenant's operations in one request (so the zone applies them together) unless it alone
/// has more; each request with the tenants it carries.
pub fn pack<B: Packable>(groups: Vec<(String, B)>, max: usize) -> Vec<(Vec<String>, B)> {
    let mut out = Vec::new();
    let mut current: (Vec<String>, B) = (Vec::new(), B::default());
    for (tenant, batch) in groups {
        if batch.size() > max {
            out.extend(
                batch
                    .split(max)
                    .into_iter()
                    .map(|b| (vec![tenant.clone()], b)),
            );
            continue;
        }
        if current.1.size() + batch.size() > max {
            out.push(std::mem::take(&mut current));
        }
        current.0.push(tenant);
        current.1.absorb(batch);
    }
    if current.1.size() > 0 {
        out.push(current);
    }
    out
}
