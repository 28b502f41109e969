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
//!
//! The table is a slab: the pool's side of the wheel gives each started target a place (the
//! lowest free one), so the thread finds a record by index, with no hash table, and a bucket
//! entry is two `u32`s.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use actix_rt::ArbiterHandle;
use futures_util::future::{AbortHandle, AbortRegistration, Abortable};
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;

use super::{Prober, Reporting};
use crate::schedule::Grid;

/// A target's place in its thread's table.
type Place = u32;

/// What the pool asks of a prober thread.
enum Command {
    /// Probe this target, at this place, from its record's first slot on.
    Start(Place, Box<Prober>),
    /// Stop probing the target at this place, an attempt in flight included.
    Stop(Place),
}

/// One prober thread's wheel, as the pool sees it.
#[derive(Clone)]
pub struct Wheel(Arc<Sender>);

/// The pool's side of a wheel: its commands, and the places in its table.
struct Sender {
    commands: mpsc::UnboundedSender<Command>,
    places: Mutex<Places>,
}

/// The places of a thread's table: those given back, then those never given.
#[derive(Default)]
struct Places {
    free: Vec<Place>,
    next: Place,
}

impl Places {
    fn take(&mut self) -> Place {
        self.free.pop().unwrap_or_else(|| {
            self.next += 1;
            self.next - 1
        })
    }
}

/// Stops one target's probing on its thread. Dropping the handle leaves it probing.
pub struct ProberHandle {
    wheel: Wheel,
    place: Place,
}

impl ProberHandle {
    /// Stops the prober (a target removed by a reload, a ring gate closed): at once, a
    /// probe in flight included. Its place can be given again: the thread takes the stop
    /// before a later start there, the commands being in order.
    pub fn stop(&self) {
        let sender = &self.wheel.0;
        // A closed channel is a stopped thread: nothing left to stop.
        let _ = sender.commands.send(Command::Stop(self.place));
        sender
            .places
            .lock()
            .expect("not poisoned")
            .free
            .push(self.place);
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
        Wheel(Arc::new(Sender {
            commands,
            places: Mutex::default(),
        }))
    }

    /// Hands `prober` to this thread, its first attempt due at its slot.
    pub fn start(&self, prober: Prober) -> ProberHandle {
        let place = self.0.places.lock().expect("not poisoned").take();
        // A closed channel is a stopped thread, which probes nothing any more.
        let _ = self
            .0
            .commands
            .send(Command::Start(place, Box::new(prober)));
        ProberHandle {
            wheel: self.clone(),
            place,
        }
    }
}

/// A place of this thread's table: free, or a target waiting for its slot or in an attempt.
/// `round` tells a target's start from a later start at the same place, so a bucket entry
/// or an attempt of an earlier one is not taken for it.
///
/// The record is boxed: a place then holds 16 bytes, and the table's spare capacity costs
/// that, not the record.
enum Entry {
    Free,
    Waiting { round: u32, prober: Box<Prober> },
    InFlight { round: u32, abort: AbortHandle },
}

impl Entry {
    fn round(&self) -> Option<u32> {
        match self {
            Entry::Free => None,
            Entry::Waiting { round, .. } | Entry::InFlight { round, .. } => Some(*round),
        }
    }
}

/// The thread's targets and when each is due.
struct Table {
    /// By place.
    targets: Vec<Entry>,
    /// Targets due (place and round), by the tick their attempt starts on.
    due: BTreeMap<Instant, Vec<(Place, u32)>>,
    next_round: u32,
    /// The grid the records' times lie on.
    grid: Grid,
    /// Wakes the turning task when an attempt hands back a record due before its sleep ends.
    earlier: Rc<Notify>,
    live: Gauge,
}

/// An attempt to start: the target's place, its round and its record.
type Due = (Place, u32, Box<Prober>, AbortRegistration);

impl Table {
    fn new(live: Gauge, grid: Grid) -> Table {
        Table {
            targets: Vec::new(),
            due: BTreeMap::new(),
            next_round: 0,
            grid,
            earlier: Rc::new(Notify::new()),
            live,
        }
    }

    fn apply(&mut self, command: Command) {
        match command {
            Command::Start(place, prober) => {
                let round = self.next_round;
                self.next_round = self.next_round.wrapping_add(1);
                let index = place as usize;
                if index >= self.targets.len() {
                    self.targets.resize_with(index + 1, || Entry::Free);
                }
                // The pool gives a place again only after stopping its target.
                self.stop(place);
                self.live.inc();
                self.wait(place, round, prober);
            }
            Command::Stop(place) => self.stop(place),
        }
    }

    fn stop(&mut self, place: Place) {
        let Some(entry) = self.targets.get_mut(place as usize) else {
            return;
        };
        match std::mem::replace(entry, Entry::Free) {
            Entry::InFlight { abort, .. } => abort.abort(),
            Entry::Waiting { .. } => {}
            Entry::Free => return,
        }
        self.live.dec();
    }

    /// Files `prober`, at `place`, to start at its slot's tick.
    fn wait(&mut self, place: Place, round: u32, prober: Box<Prober>) {
        let start = prober.starts_at(self.grid);
        if self.due.first_key_value().is_none_or(|(&t, _)| start < t) {
            self.earlier.notify_one();
        }
        self.due.entry(start).or_default().push((place, round));
        self.targets[place as usize] = Entry::Waiting { round, prober };
    }

    /// An attempt of start `round` at `place` ended: files the record for its next slot,
    /// unless the target was stopped (or another started there) meanwhile.
    fn returned(&mut self, place: Place, round: u32, prober: Box<Prober>) {
        let current = self.targets.get(place as usize).and_then(Entry::round);
        if current == Some(round) {
            self.wait(place, round, prober);
        }
    }

    /// Takes the records due by `now` out of their entries, each left in flight.
    fn take_due(&mut self, now: Instant) -> Vec<Due> {
        let mut taken = Vec::new();
        while let Some(entry) = self.due.first_entry() {
            if *entry.key() > now {
                break;
            }
            for (place, round) in entry.remove() {
                let Some(slot_entry) = self.targets.get_mut(place as usize) else {
                    continue;
                };
                if !matches!(slot_entry, Entry::Waiting { round: r, .. } if *r == round) {
                    continue;
                }
                let (abort, registration) = AbortHandle::new_pair();
                let flight = Entry::InFlight { round, abort };
                if let Entry::Waiting { prober, .. } = std::mem::replace(slot_entry, flight) {
                    taken.push((place, round, prober, registration));
                }
            }
        }
        taken
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        let held = self.targets.iter().filter(|e| e.round().is_some()).count();
        self.live.dec_by(held as i64);
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
    for (place, round, mut prober, registration) in due {
        let (table, reporting) = (table.clone(), reporting.clone());
        let attempt = async move {
            prober.attempt(&reporting).await;
            table.borrow_mut().returned(place, round, prober);
        };
        actix_rt::spawn(Abortable::new(attempt, registration));
    }
}

#[cfg(test)]
mod tests {
    use super::{Entry, Place, Prober};

    /// What a waiting target costs its thread: its place in the table, its entry in a
    /// bucket and its boxed record. All stay small, so a target between probes holds about
    /// a hundred bytes, not a task.
    #[test]
    fn a_waiting_target_is_a_small_entry_and_record() {
        let place = std::mem::size_of::<Entry>();
        assert!(place <= 16, "a place of the table is {place} bytes");
        let due = std::mem::size_of::<(Place, u32)>();
        assert!(due <= 8, "a bucket entry is {due} bytes");
        let record = std::mem::size_of::<Prober>();
        assert!(record <= 96, "a prober record is {record} bytes");
    }
}
