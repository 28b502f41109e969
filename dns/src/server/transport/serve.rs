//! What every way in serves with: the [`respond`] both the sockets and the AF_XDP path
//! answer through, the [`Tally`] they count with, what they share with the listener's
//! handle, and how often they look at the stop flag.

use std::net::IpAddr;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use crate::server::answer::{Authority, Reply};
use crate::server::metrics::{ActionLabel, QueryLabels, ServerMetrics};
use crate::server::rate_limit::{truncated, Verdict};

/// How often UDP threads look at the stop flag while no query arrives.
pub(super) const STOP_POLL: Duration = Duration::from_millis(200);

/// What the serving threads share with the handle.
pub(super) struct Shared {
    pub(super) authority: RwLock<Arc<Authority>>,
    pub(super) stop: AtomicBool,
    pub(super) stop_tcp: tokio::sync::watch::Sender<bool>,
    pub(super) metrics: ServerMetrics,
}

impl Shared {
    /// The authority to answer from now (a reload may swap it between batches).
    pub(super) fn current(&self) -> Arc<Authority> {
        self.authority.read().expect("not poisoned").clone()
    }
}

/// One thread's query counts and latencies, added to the shared metrics in batches: at
/// 200,000 queries a second, updating shared counters per query makes the threads
/// contend for them.
pub(in crate::server) struct Tally<'a> {
    metrics: &'a ServerMetrics,
    /// Answers by (type, rcode): a handful of pairs, found faster by a scan than a hash.
    counts: Vec<((&'static str, &'static str), u64)>,
    latencies: Vec<f64>,
    /// Answers rate limiting held back: dropped, slipped.
    limited: [u64; 2],
    flushed: Instant,
}

impl<'a> Tally<'a> {
    const BATCH: usize = 256;
    const MAX_AGE: Duration = Duration::from_secs(1);

    pub(in crate::server) fn new(metrics: &'a ServerMetrics) -> Tally<'a> {
        Tally {
            metrics,
            counts: Vec::new(),
            latencies: Vec::with_capacity(Self::BATCH),
            limited: [0; 2],
            flushed: Instant::now(),
        }
    }

    /// Counts `reply`, sent `seconds` after its query arrived (the serving loops read the
    /// clock once per batch, not per answer).
    pub(super) fn record(&mut self, reply: &Reply, seconds: f64) {
        let key = (reply.qtype, reply.rcode);
        match self.counts.iter_mut().find(|(k, _)| *k == key) {
            Some((_, n)) => *n += 1,
            None => self.counts.push((key, 1)),
        }
        self.latencies.push(seconds);
    }

    /// After a batch: adds to the shared metrics once enough is counted or a second has
    /// passed since the last time.
    pub(super) fn batch_done(&mut self, now: Instant) {
        if self.latencies.len() >= Self::BATCH || now.duration_since(self.flushed) >= Self::MAX_AGE
        {
            self.flush();
        }
    }

    /// An answer rate limiting dropped or sent truncated.
    fn limit(&mut self, verdict: Verdict) {
        match verdict {
            Verdict::Send => {}
            Verdict::Drop => self.limited[0] += 1,
            Verdict::Slip => self.limited[1] += 1,
        }
    }

    pub(super) fn flush(&mut self) {
        for (action, n) in ["dropped", "slipped"].into_iter().zip(self.limited) {
            if n > 0 {
                self.metrics
                    .rate_limited
                    .get_or_create(&ActionLabel { action })
                    .inc_by(n);
            }
        }
        self.limited = [0; 2];
        for ((qtype, rcode), n) in self.counts.drain(..) {
            self.metrics
                .queries
                .get_or_create(&QueryLabels { qtype, rcode })
                .inc_by(n);
        }
        for seconds in self.latencies.drain(..) {
            self.metrics.answer_seconds.observe(seconds);
        }
        self.flushed = Instant::now();
    }
}

impl Drop for Tally<'_> {
    fn drop(&mut self) {
        self.flush();
    }
}

/// The answer to send to a UDP query from `client`, if any: `None` for a message that
/// gets no answer and for one rate limiting drops; truncated when it slips.
pub(in crate::server) fn respond(
    authority: &Authority,
    tally: &mut Tally<'_>,
    request: &[u8],
    client: IpAddr,
    arrived: Instant,
) -> Option<Reply> {
    let mut reply = authority.answer(request, client, true)?;
    let verdict = authority.rate_limit(client, request, &reply, arrived);
    tally.limit(verdict);
    match verdict {
        Verdict::Send => Some(reply),
        Verdict::Slip => {
            reply.bytes = truncated(&reply.bytes);
            Some(reply)
        }
        Verdict::Drop => None,
    }
}
