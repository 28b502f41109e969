//! A prober thread's schedule: every target the thread probes as a [`Prober`] record in one
//! table, and their next attempts bucketed by the tick they start on.
//!
//! One task per thread sleeps until the earliest bucket, then moves each due record into a
//! task of its own for one attempt; the attempt hands the record back with its next slot.
//! So a target between probes costs its record and one entry in a bucket, and the thread
//! wakes once per tick with probes due, as the shared tick intends (`schedule`).
//!
//! The pool talks to the thread through [`Wheel`], a channel of start and stop commands:
//! stopping a target drops its record, or aborts its attempt in flight (its socket closes
//! and its result is never reported), as aborting a task per target did.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use actix_rt::ArbiterHandle;
use futures_util::future::{AbortHandle, AbortRegistration, Abortable};
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;

use super::{Prober, Reporting};
use crate::observation::TargetId;
use crate::schedule::Grid;

/// What the pool asks of a prober thread.
enum Command {
    /// Probe this target from its record's first slot on.
    Start(Box<Prober>),
    /// Stop probing this target, an attempt in flight included.
    Stop(TargetId),
}

/// One prober thread's wheel, as the pool sees it.
#[derive(Clone)]
pub struct Wheel(mpsc::UnboundedSender<Command>);

/// Stops one target's probing on its thread. Dropping the handle leaves it probing.
pub struct ProberHandle {
    wheel: Wheel,
    target: TargetId,
}

impl ProberHandle {
    /// Stops the prober (a target removed by a reload, a ring gate closed): at once, a
    /// probe in flight included.
    pub fn stop(&self) {
        // A closed channel is a stopped thread: nothing left to stop.
        let _ = self.wheel.0.send(Command::Stop(self.target));
    }
}

impl Wheel {
    /// Starts the wheel of `arbiter`'s thread, reporting through `reporting`; `live` counts
    /// the targets whose records it holds (`prober_tasks`).
    pub fn spawn(arbiter: &ArbiterHandle, reporting: Reporting, live: Gauge) -> Wheel {
        let (commands, received) = mpsc::unbounded_channel();
        // Built on the arbiter's thread: the outbox its attempts post to is that thread's.
        arbiter.spawn_fn(move || {
            actix_rt::spawn(turn(received, Rc::new(reporting), live));
        });
        Wheel(commands)
    }

    /// Hands `prober` to this thread, its first attempt due at its slot.
    pub fn start(&self, prober: Prober) -> ProberHandle {
        let target = prober.target();
        // A closed channel is a stopped thread, which probes nothing any more.
        let _ = self.0.send(Command::Start(Box::new(prober)));
        ProberHandle {
            wheel: self.clone(),
            target,
        }
    }
}

/// A target on this thread: waiting for its slot, or in an attempt. `round` tells a
/// target's start from a later start of the same target, so a bucket entry or an attempt of
/// an earlier one is not taken for it.
///
/// The record is boxed: the table's buckets then hold 24 bytes each, and a table kept
/// between half and seven eighths full costs that, not the record, for its empty buckets
/// (inline, 20,000 targets' table took 9.8 MiB, 514 bytes a target).
enum Entry {
    Waiting { round: u32, prober: Box<Prober> },
    InFlight { round: u32, abort: AbortHandle },
}

impl Entry {
    fn round(&self) -> u32 {
        match self {
            Entry::Waiting { round, .. } | Entry::InFlight { round, .. } => *round,
        }
    }
}

/// The thread's targets and when each is due.
struct Table {
    targets: HashMap<TargetId, Entry>,
    /// Targets due, by the tick their attempt starts on.
    due: BTreeMap<Instant, Vec<(TargetId, u32)>>,
    next_round: u32,
    /// The grid the records' times lie on.
    grid: Grid,
    /// Wakes the turning task when an attempt hands back a record due before its sleep ends.
    earlier: Rc<Notify>,
    live: Gauge,
}

/// An attempt to start: the target, its round and its record.
type Due = (TargetId, u32, Box<Prober>, AbortRegistration);

impl Table {
    fn new(live: Gauge, grid: Grid) -> Table {
        Table {
            targets: HashMap::new(),
            due: BTreeMap::new(),
            next_round: 0,
            grid,
            earlier: Rc::new(Notify::new()),
            live,
        }
    }

    fn apply(&mut self, command: Command) {
        match command {
            Command::Start(prober) => {
                let target = prober.target();
                let round = self.next_round;
                self.next_round = self.next_round.wrapping_add(1);
                if self.targets.contains_key(&target) {
                    self.stop(target);
                }
                self.live.inc();
                self.wait(target, round, prober);
            }
            Command::Stop(target) => self.stop(target),
        }
    }

    fn stop(&mut self, target: TargetId) {
        match self.targets.remove(&target) {
            Some(Entry::InFlight { abort, .. }) => abort.abort(),
            Some(Entry::Waiting { .. }) => {}
            None => return,
        }
        self.live.dec();
    }

    /// Files `prober` to start at its slot's tick.
    fn wait(&mut self, target: TargetId, round: u32, prober: Box<Prober>) {
        let start = prober.starts_at(self.grid);
        if self.due.first_key_value().is_none_or(|(&t, _)| start < t) {
            self.earlier.notify_one();
        }
        self.due.entry(start).or_default().push((target, round));
        self.targets
            .insert(target, Entry::Waiting { round, prober });
    }

    /// An attempt of `target`'s start `round` ended: files the record for its next slot,
    /// unless the target was stopped (or started again) meanwhile.
    fn returned(&mut self, target: TargetId, round: u32, prober: Box<Prober>) {
        let current = self.targets.get(&target).map(Entry::round);
        if current == Some(round) {
            self.wait(target, round, prober);
        }
    }

    /// Takes the records due by `now` out of their entries, each left in flight.
    fn take_due(&mut self, now: Instant) -> Vec<Due> {
        let mut taken = Vec::new();
        while let Some(entry) = self.due.first_entry() {
            if *entry.key() > now {
                break;
            }
            for (target, round) in entry.remove() {
                let Some(slot_entry) = self.targets.get_mut(&target) else {
                    continue;
                };
                if !matches!(slot_entry, Entry::Waiting { round: r, .. } if *r == round) {
                    continue;
                }
                let (abort, registration) = AbortHandle::new_pair();
                let flight = Entry::InFlight { round, abort };
                if let Entry::Waiting { prober, .. } = std::mem::replace(slot_entry, flight) {
                    taken.push((target, round, prober, registration));
                }
            }
        }
        taken
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        self.live.dec_by(self.targets.len() as i64);
    }
}

/// The thread's wheel turning: applies the pool's commands, starts each tick's attempts.
/// Once the pool is gone its targets are probed on until the thread stops, as a task per
/// target was.
async fn turn(
    mut commands: mpsc::UnboundedReceiver<Command>,
    reporting: Rc<Reporting>,
    live: Gauge,
) {
    let table = Rc::new(RefCell::new(Table::new(live, reporting.grid)));
    let earlier = table.borrow().earlier.clone();
    let mut open = true;
    loop {
        let next = table.borrow().due.first_key_value().map(|(&t, _)| t);
        let sleep = async move {
            match next {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            command = commands.recv(), if open => match command {
                Some(command) => {
                    let mut table = table.borrow_mut();
                    table.apply(command);
                    while let Ok(command) = commands.try_recv() {
                        table.apply(command);
                    }
                }
                None => open = false,
            },
            () = earlier.notified() => {}
            () = sleep => start_due(&table, &reporting),
        }
    }
}

/// Starts every attempt due now, each a task of its own until it hands its record back.
fn start_due(table: &Rc<RefCell<Table>>, reporting: &Rc<Reporting>) {
    let due = table.borrow_mut().take_due(Instant::now());
    for (target, round, mut prober, registration) in due {
        let (table, reporting) = (table.clone(), reporting.clone());
        let attempt = async move {
            prober.attempt(&reporting).await;
            table.borrow_mut().returned(target, round, prober);
        };
        actix_rt::spawn(Abortable::new(attempt, registration));
    }
}

#[cfg(test)]
mod tests {
    use super::{Entry, Prober};

    /// What a waiting target costs its thread: a bucket of the table (its id and entry) and
    /// its boxed record. Both stay small, so a target between probes holds about a hundred
    /// bytes, not a task.
    #[test]
    fn a_waiting_target_is_a_small_entry_and_record() {
        let bucket = std::mem::size_of::<(u64, Entry)>();
        assert!(bucket <= 24, "a table bucket is {bucket} bytes");
        let record = std::mem::size_of::<Prober>();
        assert!(record <= 96, "a prober record is {record} bytes");
    }
}
