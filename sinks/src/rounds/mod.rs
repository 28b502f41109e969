//! Zone-writing sinks write zones, not tenants: tenants due while a round runs wait for it
//! and go out together, so a mass failure costs one reading of the zone and a few batched
//! changes instead of both for every tenant. This is the waiting room and the turn
//! ([`Rounds`]); the frame around it that every kind writing in rounds shares
//! ([`provider::RoundsSink`]: the sink, its report store, its listing); and the packing of
//! tenants' changes into requests ([`pack`], [`packed`]).

pub(crate) mod packed;
pub(crate) mod provider;
pub(crate) mod reports;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use ho_engine::sink::{Applied, SinkError};
use ho_engine::snapshot::TenantSnapshot;
use tokio::sync::oneshot;

/// A round: every waiting tenant's latest snapshot, by tenant name.
pub type Round = BTreeMap<String, Arc<TenantSnapshot>>;

/// Each tenant's result of a round.
pub type RoundResults = BTreeMap<String, Result<Applied, SinkError>>;

/// What a round comes to: each tenant's result, or one error for all.
pub type Outcome = Result<RoundResults, SinkError>;

/// The future [`RoundWriter::write`] returns.
pub type RoundFuture<'a> = Pin<Box<dyn Future<Output = Outcome> + Send + 'a>>;

/// Writes one round: every waiting tenant's latest snapshot, by tenant name.
pub trait RoundWriter: Send {
    /// Writes `round`; a tenant missing from the results is unchanged. A writer whose
    /// tenants are written one after another (no batch) hands each tenant's result to
    /// `done` as soon as it has it, so the tenant is not reported written only when the
    /// whole round ends.
    fn write<'a>(&'a mut self, round: &'a Round, done: &'a mut Done) -> RoundFuture<'a>;
}

/// The tenants of the round running whose result is not told yet.
pub struct Done(BTreeMap<String, Waiting>);

impl Done {
    /// Tells `tenant`'s waiting writes their result now.
    pub fn tell(&mut self, tenant: &str, result: &Result<Applied, SinkError>) {
        if let Some(waiting) = self.0.remove(tenant) {
            for reply in waiting.replies {
                let _ = reply.send(result.clone());
            }
        }
    }
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
        // running round already took it; its result may come while that round still runs.
        let cancelled = || {
            Err(SinkError::retriable(
                "the round writing this tenant was cancelled",
            ))
        };
        let mut writer = tokio::select! {
            told = &mut reply => return told.unwrap_or_else(|_| cancelled()),
            writer = self.writer.lock() => writer,
        };
        if let Ok(result) = reply.try_recv() {
            return result;
        }
        let round = std::mem::take(&mut *self.waiting.lock().expect("not poisoned"));
        let snapshots = round
            .iter()
            .map(|(t, w)| (t.clone(), w.snapshot.clone()))
            .collect();
        let mut done = Done(round);
        let results = match writer.write(&snapshots, &mut done).await {
            Ok(results) => results,
            Err(e) => snapshots
                .keys()
                .map(|t| (t.clone(), Err(e.clone())))
                .collect(),
        };
        // Told before the writer is free: a tenant of this round that gets the writer next
        // finds its result instead of running an empty round.
        let untold: Vec<String> = done.0.keys().cloned().collect();
        for tenant in untold {
            let result = results
                .get(&tenant)
                .cloned()
                .unwrap_or(Ok(Applied::Unchanged));
            done.tell(&tenant, &result);
        }
        drop(writer);
        reply.await.unwrap_or_else(|_| cancelled())
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

/// The zone as a kind last listed it, with its own accepted changes applied, so that a
/// failover burst costs no listing per round; and the snapshot each tenant last had
/// written: a round writing a tenant's state again (a reconcile or a retry) plans on a
/// fresh listing, so changes someone else made are found and repaired.
pub struct View<S> {
    /// The sets; `None`: list them for the next round.
    pub sets: Option<Vec<S>>,
    written: BTreeMap<String, u64>,
}

impl<S> Default for View<S> {
    fn default() -> View<S> {
        View {
            sets: None,
            written: BTreeMap::new(),
        }
    }
}

impl<S> View<S> {
    /// The sets to plan `round` on, or `None` (list the zone) when there are none or the
    /// round writes some tenant's state again.
    pub fn take_for(&mut self, round: &Round) -> Option<Vec<S>> {
        let again = (round.iter()).any(|(t, s)| self.written.get(t).is_some_and(|&n| s.seq <= n));
        self.sets.take().filter(|_| !again)
    }

    /// Remembers the snapshots of `round` whose write succeeded.
    pub fn wrote(&mut self, round: &Round, results: &RoundResults) {
        for (tenant, result) in results {
            if result.is_ok() {
                self.written.insert(tenant.clone(), round[tenant].seq);
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use ho_config::RoutingPolicy;
    use tokio::sync::Notify;

    /// Tells each tenant as it goes, and holds the round open until told to finish.
    struct OneByOne(Arc<Notify>);

    impl RoundWriter for OneByOne {
        fn write<'a>(&'a mut self, round: &'a Round, done: &'a mut Done) -> RoundFuture<'a> {
            Box::pin(async move {
                for tenant in round.keys() {
                    done.tell(tenant, &Ok(Applied::Changed));
                }
                self.0.notified().await;
                Ok(BTreeMap::new())
            })
        }
    }

    fn snapshot(tenant: &str) -> Arc<TenantSnapshot> {
        Arc::new(TenantSnapshot::healthy(
            tenant,
            &["a.example.org"],
            RoutingPolicy::All,
            Vec::new(),
        ))
    }

    /// A tenant told its result has it while its round still runs (the caller running the
    /// round gets its own when the round ends).
    #[tokio::test]
    async fn a_tenant_told_early_does_not_wait_for_the_round() {
        let finish = Arc::new(Notify::new());
        let rounds = Arc::new(Rounds::new(OneByOne(finish.clone())));
        let b = rounds.enqueue(snapshot("b"));
        let r = rounds.clone();
        let runner = tokio::spawn(async move { r.apply(snapshot("a")).await });
        let told = tokio::time::timeout(std::time::Duration::from_secs(5), b)
            .await
            .expect("b told before the round ends")
            .unwrap();
        assert_eq!(told, Ok(Applied::Changed));
        assert!(!runner.is_finished(), "the round still runs");
        finish.notify_one();
        assert_eq!(runner.await.unwrap(), Ok(Applied::Changed));
    }

    /// A kept view plans a round only while no tenant of the round has had that snapshot
    /// (or a newer one) written already; every round takes it. Seeded rounds of five
    /// tenants, each write succeeding or not, against the rule kept by the test.
    #[test]
    fn a_view_plans_a_round_unless_the_round_writes_a_state_again() {
        let mut rng = fastrand::Rng::with_seed(0x5eed);
        let mut view: View<usize> = View::default();
        let mut written: BTreeMap<String, u64> = BTreeMap::new();
        for step in 0..500 {
            let round: Round = (0..rng.usize(1..4))
                .map(|_| {
                    let tenant = format!("t{}", rng.u8(0..5));
                    let mut s = (*snapshot(&tenant)).clone();
                    s.seq = rng.u64(0..20);
                    (tenant, Arc::new(s))
                })
                .collect();
            let again = (round.iter()).any(|(t, s)| written.get(t).is_some_and(|&n| s.seq <= n));
            view.sets = Some(vec![step]);
            let planned_on = view.take_for(&round);
            assert_eq!(planned_on, (!again).then(|| vec![step]), "step {step}");
            assert!(view.sets.is_none(), "a round takes the view");
            let results: RoundResults = (round.keys())
                .map(|t| {
                    let result = match rng.bool() {
                        true => Ok(Applied::Changed),
                        false => Err(SinkError::retriable("refused")),
                    };
                    (t.clone(), result)
                })
                .collect();
            view.wrote(&round, &results);
            for (tenant, _) in results.iter().filter(|(_, r)| r.is_ok()) {
                written.insert(tenant.clone(), round[tenant].seq);
            }
        }
    }
}
