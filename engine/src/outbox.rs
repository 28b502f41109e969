//! Probe results leave each prober thread in batches.
//!
//! A message from a prober thread to the tracker's thread wakes that thread; at 10,000
//! probes per second that is 10,000 cross-thread wake-ups (futex, epoll, context switch on
//! both sides). Instead each arbiter thread collects its probers' results for up to
//! [`FLUSH_AFTER`] and sends them as one [`Observations`] message: a few hundred wake-ups
//! per second, for at most that much added to detection time (measured in bench/README.md).

use std::cell::RefCell;
use std::time::Duration;

use actix::prelude::*;

use crate::observation::Observation;

/// Longest a result waits in its thread's outbox.
pub const FLUSH_AFTER: Duration = Duration::from_millis(5);

/// Results waiting beyond which the outbox is sent at once.
const MAX_BATCH: usize = 512;

/// Probe results of one thread, in the order they were made.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Observations(pub Vec<Observation>);

#[derive(Default)]
struct Outbox {
    pending: Vec<Observation>,
    flush_armed: bool,
}

thread_local! {
    static OUTBOX: RefCell<Outbox> = RefCell::new(Outbox::default());
}

/// Queues `obs` for `tracker`. Must run on an actix arbiter (a prober's thread). Every
/// prober of one engine shares its arbiters' threads and one tracker.
pub fn post(tracker: &Recipient<Observations>, obs: Observation) {
    let full = OUTBOX.with(|o| {
        let mut o = o.borrow_mut();
        o.pending.push(obs);
        if !o.flush_armed {
            o.flush_armed = true;
            let tracker = tracker.clone();
            actix::spawn(async move {
                tokio::time::sleep(FLUSH_AFTER).await;
                flush(&tracker);
            });
        }
        o.pending.len() >= MAX_BATCH
    });
    if full {
        flush(tracker);
    }
}

/// Sends what the outbox holds. The armed timer, if it finds it empty, sends nothing.
fn flush(tracker: &Recipient<Observations>) {
    let batch = OUTBOX.with(|o| {
        let mut o = o.borrow_mut();
        o.flush_armed = false;
        std::mem::take(&mut o.pending)
    });
    if !batch.is_empty() {
        tracker.do_send(Observations(batch));
    }
}
