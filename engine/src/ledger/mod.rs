//! The availability ledger: for every published name, the stretches it was served as
//! decided, served a dead address, answered nothing, or was held by an operator
//! (maintenance), worked out from the engine's events and the answer canary's
//! observations ([`book`]), kept as changes (not samples) under `<state_dir>/ledger/`
//! ([`store`]) for `ledger.retention`, and read back as availability figures ([`tally`]).
//!
//! With several replicas every one works the conditions out all the time; the writer (the
//! holder of the writer Lease) records, and with `[ledger] standbys_record` (a `state_dir`
//! each) the standbys record their own view too. A replica that starts recording first
//! appends what it saw since the folder's last record (module `handover`), so a new writer
//! continues the ledger whether the replicas share one folder or keep one each.

pub mod book;
mod degraded;
mod format;
mod handover;
mod slo;
pub mod store;
pub mod tally;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use ho_config::Plan;
use serde::Serialize;
use tokio::sync::{mpsc, watch};

use crate::canary::Observation;
use crate::clock::Timestamp;
use crate::events::Events;
use crate::leadership::Leadership;
use crate::metrics::{Metrics, WindowLabels};
use book::{Book, Change, CheckKey, Condition, EndpointPlan, TenantPlan};
use degraded::unwritable;
use handover::take_over;
use store::{Store, StoreError, Unwritten};
use tally::{spans, Figures, Interval, Tally};

/// History kept in memory for the gauges (and for queries without a `state_dir`).
const RECENT: Duration = Duration::from_secs(30 * 86_400);

/// How often the ledger notes it is recording and checks whether it is the writer.
const TICK: Duration = Duration::from_secs(10);

/// Events taken from the queue at once at most: enough that a burst of transitions is
/// judged in a few passes, few enough that the lock on the ledger is held briefly.
const BATCH: usize = 4096;

/// How often the availability gauges are worked out again (a pass over 30 days of every
/// name's changes).
const GAUGES_EVERY: u64 = 60_000;

/// After this long without a note, nobody was recording: the time is unknown.
const UNRECORDED: u64 = 3 * TICK.as_millis() as u64;

/// Most intervals one answer lists (the newest).
const MAX_INTERVALS: usize = 10_000;

/// The gauges' windows.
const WINDOWS: [(&str, u64); 3] = [
    ("1h", 3_600_000),
    ("24h", 86_400_000),
    ("30d", 30 * 86_400_000),
];

fn now_ms() -> u64 {
    crate::clock::unix_millis(SystemTime::now())
}

/// Most changes kept for a store that cannot take them (each name's file retried at every
/// tick): a day of a thousand names failing over every few minutes.
const PENDING: usize = 500_000;

/// Most problems `/status` lists.
const PROBLEMS: usize = 20;

/// The ledger's state, shared by its task and the API.
struct Inner {
    book: Book,
    store: Option<Store>,
    /// Where the store should be (`None`: no `state_dir`, memory only): opened again at
    /// every tick while it could not be.
    folder: Option<std::path::PathBuf>,
    /// Changes the store could not take yet, oldest first.
    pending: Vec<Change>,
    /// What keeps the ledger from recording as configured, newest last, each with whether
    /// it stays (a file of a newer version, left alone: its name is not recorded) or goes
    /// once the store takes every change again.
    problems: Vec<(String, bool)>,
    metrics: Arc<Metrics>,
    events: Events,
    /// Each tenant's seconds per condition, for its SLO.
    accounts: slo::Accounts,
    /// Each name's changes over the last [`RECENT`], oldest first.
    recent: HashMap<String, Vec<(u64, Condition)>>,
    /// Whether this replica recorded at its last check.
    writing: bool,
    /// When this ledger started following (unix ms): it knows the time since.
    started: u64,
    /// Whether it records while not the writer (`ledger.standbys_record`).
    standbys_record: bool,
    /// This replica's identity in the folder's mark.
    me: String,
    /// The other replica it defers to, once logged.
    deferred_to: Option<String>,
    retention: Duration,
    last_prune: u64,
    last_gauges: u64,
}

impl Inner {
    /// Keeps `changes` in the recent history.
    fn remember(&mut self, changes: &[Change]) {
        self.accounts.changed(changes);
        for c in changes {
            let list = self.recent.entry(c.name.clone()).or_default();
            list.retain(|(t, _)| *t < c.at);
            list.push((c.at, c.condition));
        }
    }

    /// Appends `changes` to the store, after any it could not take before; what it cannot
    /// take now waits for the next tick (at most [`PENDING`], the oldest dropped).
    fn append(&mut self, changes: &[Change]) {
        self.pending.extend_from_slice(changes);
        let Some(store) = &mut self.store else {
            return self.bound_pending();
        };
        if self.pending.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut self.pending);
        let result = store.append(&pending);
        let troubles = store.troubles();
        for t in troubles {
            self.trouble(&t);
        }
        match result {
            Ok(()) => self.recovered(),
            Err(Unwritten { error, changes }) => {
                self.metrics.answers.ledger_write_failures.inc();
                self.problem(format!(
                    "cannot append to {error}; retried with the next change and every {}s",
                    TICK.as_secs()
                ));
                self.pending = changes;
                self.bound_pending();
            }
        }
    }

    fn bound_pending(&mut self) {
        if self.pending.len() > PENDING {
            let dropped = self.pending.len() - PENDING;
            self.pending.drain(..dropped);
            self.problem(format!(
                "{dropped} changes not recorded: the store took none for too long"
            ));
        }
    }

    /// Notes the role, starts recording when it became the writer (or, with
    /// `standbys_record`, whenever no other replica records into its folder), retries what
    /// the store could not take, marks the folder and prunes it once a day.
    fn keep_recording(&mut self, writer: bool, now: u64) {
        let changes = self.book.role(writer, now);
        self.remember(&changes);
        let records = writer || (self.standbys_record && !self.defers(now));
        let mut failed = Vec::new();
        if records && !self.writing {
            if let Some(store) = &mut self.store {
                match take_over(store, &self.recent, self.book.current(), self.started) {
                    Ok(missed) => self.pending.extend(missed),
                    Err(e) => failed.push(format!("cannot take over recording: {e}")),
                }
            }
        } else if self.writing {
            self.pending.extend(changes);
        }
        self.writing = records;
        if let (true, Some(store)) = (records, &mut self.store) {
            if let Err(e) = store.mark_alive(now, &self.me) {
                failed.push(unwritable(&e));
            }
            if now.saturating_sub(self.last_prune) >= 86_400_000 {
                self.last_prune = now;
                let before = now.saturating_sub(self.retention.as_millis() as u64);
                if let Err(e) = store.prune(before) {
                    failed.push(format!("cannot prune {e}"));
                }
            }
        }
        for f in failed {
            self.problem(f);
        }
        if records {
            self.append(&[]);
        }
    }

    /// Works the availability gauges out again, at most every [`GAUGES_EVERY`].
    fn gauges(&mut self, now: u64, metrics: &Metrics) {
        if now.saturating_sub(self.last_gauges) < GAUGES_EVERY {
            return;
        }
        self.last_gauges = now;
        let since = now.saturating_sub(RECENT.as_millis() as u64);
        for (name, changes) in &mut self.recent {
            let cut = changes
                .partition_point(|(t, _)| *t < since)
                .saturating_sub(1);
            changes.drain(..cut);
            for (window, ms) in WINDOWS {
                let figures = Tally::of(&spans(changes, now.saturating_sub(ms), now)).figures();
                let gauge = metrics
                    .answers
                    .name_availability
                    .get_or_create(&WindowLabels {
                        name: name.clone(),
                        window,
                    });
                gauge.set(figures.availability.unwrap_or(f64::NAN));
            }
        }
    }

    /// Whether this replica, not the writer, leaves the folder to another replica that
    /// marked it recently (one `state_dir` mounted by several: two appending to one file
    /// would garble it). Logged once per replica deferred to.
    fn defers(&mut self, now: u64) -> bool {
        let mark = self.store.as_ref().and_then(Store::alive);
        let Some(other) = handover::other_recorder(mark, &self.me, now) else {
            return false;
        };
        if self.deferred_to.as_deref() != Some(other.as_str()) {
            tracing::error!(
                "availability ledger: replica {other:?} records into this state_dir too; it is shared, so set [ledger] standbys_record = false (this replica records only while it is the writer)"
            );
            self.deferred_to = Some(other);
        }
        true
    }
}

/// What resolvers are handed, as the API reads it: each sink's canary and the ledger.
#[derive(Clone)]
pub struct Answers {
    /// The availability ledger.
    pub ledger: Ledger,
    /// Each sink's answer canary.
    pub canaries: crate::canary::Board,
}

/// The running ledger: cheap to clone, queried by the API.
#[derive(Clone)]
pub struct Ledger(Arc<Mutex<Inner>>);

/// One name's figures over a window.
#[derive(Debug, Clone, Serialize)]
pub struct NameAvailability {
    /// The name.
    pub name: String,
    /// Its tenant now (`null`: no longer configured).
    pub tenant: Option<String>,
    /// Window start.
    pub from: Timestamp,
    /// Window end.
    pub to: Timestamp,
    /// The figures.
    #[serde(flatten)]
    pub figures: Figures,
    /// The stretches other than "answered" outside maintenance, newest last (at most
    /// 10,000); empty unless asked for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<Interval>,
    /// One entry per UTC day of the window, when asked for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub days: Vec<DayFigures>,
}

/// One day's figures.
#[derive(Debug, Clone, Serialize)]
pub struct DayFigures {
    /// The day's start (00:00 UTC).
    pub day: Timestamp,
    /// The figures.
    #[serde(flatten)]
    pub figures: Figures,
}

/// What a query asks for besides the window's figures.
#[derive(Debug, Clone, Copy, Default)]
pub struct Detail {
    /// The stretches.
    pub intervals: bool,
    /// Per-day figures.
    pub days: bool,
}

impl Ledger {
    /// Opens the store under `state_dir` (none: memory only) and starts following the
    /// engine's events, the canary's observations and the plans. `held`: the endpoints
    /// operators hold at start.
    pub fn start(
        events: &Events,
        observations: mpsc::UnboundedReceiver<Observation>,
        plans: watch::Receiver<Arc<Plan>>,
        held: Vec<String>,
        leadership: Leadership,
        metrics: Arc<Metrics>,
    ) -> Ledger {
        let plan = plans.borrow().clone();
        let mut inner = Inner {
            book: Book::new(held),
            store: None,
            folder: plan.state_dir.as_deref().map(|d| d.join("ledger")),
            pending: Vec::new(),
            problems: Vec::new(),
            metrics: metrics.clone(),
            events: events.clone(),
            accounts: slo::Accounts::new(metrics.clone()),
            recent: HashMap::new(),
            writing: false,
            started: now_ms(),
            standbys_record: plan.ledger.standbys_record,
            me: leadership.identity().unwrap_or("single").to_owned(),
            deferred_to: None,
            retention: plan.ledger.retention,
            last_prune: 0,
            last_gauges: 0,
        };
        inner.reopen();
        inner.load_recent();
        let ledger = Ledger(Arc::new(Mutex::new(inner)));
        ledger.lock().accounts.plan(&plan);
        ledger.apply(|b| b.plan(tenants_of(&plan), now_ms()));
        tokio::spawn(ledger.clone().follow(
            events.follow(),
            observations,
            plans,
            leadership,
            metrics,
        ));
        ledger
    }

    async fn follow(
        self,
        mut events: mpsc::UnboundedReceiver<Arc<crate::events::Event>>,
        mut observations: mpsc::UnboundedReceiver<Observation>,
        mut plans: watch::Receiver<Arc<Plan>>,
        leadership: Leadership,
        metrics: Arc<Metrics>,
    ) {
        let mut tick = tokio::time::interval(TICK);
        let mut became_writer = leadership.subscribe();
        loop {
            tokio::select! {
                Some(event) = events.recv() => {
                    // With what queued meanwhile: a burst of transitions is judged once
                    // (`Book::events`), so a mass failure costs a pass per batch, not per
                    // endpoint.
                    let mut batch = vec![event];
                    while batch.len() < BATCH {
                        let Ok(event) = events.try_recv() else { break };
                        batch.push(event);
                    }
                    self.apply(|b| b.events(&batch))
                }
                Some(o) = observations.recv() => {
                    self.apply(|b| b.observed(&o));
                }
                changed = plans.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    let plan = plans.borrow_and_update().clone();
                    self.lock().accounts.plan(&plan);
                    self.apply(|b| b.plan(tenants_of(&plan), now_ms()));
                }
                _ = tick.tick() => self.tick(leadership.may_write(), &metrics),
                Ok(()) = became_writer.changed() => self.tick(leadership.may_write(), &metrics),
                else => return,
            }
        }
    }

    /// Runs `step` on the book and records the changes it makes.
    fn apply(&self, step: impl FnOnce(&mut Book) -> Vec<Change>) {
        let mut inner = self.lock();
        let changes = step(&mut inner.book);
        inner.remember(&changes);
        if inner.writing {
            inner.append(&changes);
        }
    }

    /// Notes it is recording, starts recording when it became the writer (or, with
    /// `standbys_record`, whenever no other replica records into its folder), prunes once
    /// a day and refreshes the gauges.
    fn tick(&self, writer: bool, metrics: &Metrics) {
        let now = now_ms();
        let mut inner = self.lock();
        inner.reopen();
        inner.keep_recording(writer, now);
        inner.accounts.tick(now);
        inner.gauges(now, metrics);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the ledger records as configured, for `/status`.
    pub fn status(&self) -> crate::status::LedgerStatus {
        let inner = self.lock();
        let state = match (&inner.folder, inner.problems.is_empty()) {
            (_, false) => "degraded",
            (None, true) => "memory",
            (Some(_), true) => "recording",
        };
        crate::status::LedgerStatus {
            state,
            problems: inner.problems.iter().map(|(p, _)| p.clone()).collect(),
        }
    }

    /// Every name the ledger knows (configured now or with history).
    pub fn names(&self) -> Result<Vec<String>, StoreError> {
        let inner = self.lock();
        let mut names: Vec<String> = match &inner.store {
            Some(store) => store.names()?,
            None => Vec::new(),
        };
        names.extend(inner.recent.keys().cloned());
        names.extend(inner.book.current().map(|(n, _, _)| n.to_owned()));
        names.sort();
        names.dedup();
        Ok(names)
    }

    /// `name`'s figures over `[from, to)` (unix ms), with the detail asked for.
    pub fn availability(
        &self,
        name: &str,
        from: u64,
        to: u64,
        detail: Detail,
    ) -> Result<NameAvailability, StoreError> {
        let mut inner = self.lock();
        let changes = match &mut inner.store {
            Some(store) => store.read(name)?,
            None => inner.recent.get(name).cloned().unwrap_or_default(),
        };
        let tenant = inner.book.tenant_of(name).map(str::to_owned);
        drop(inner);
        let window = spans(&changes, from, to);
        let mut intervals: Vec<Interval> = if detail.intervals {
            window
                .iter()
                .filter(|s| s.condition.served != book::Served::Answered || s.condition.maintenance)
                .map(Interval::from)
                .collect()
        } else {
            Vec::new()
        };
        if intervals.len() > MAX_INTERVALS {
            intervals.drain(..intervals.len() - MAX_INTERVALS);
        }
        let days = if detail.days {
            let first = from - from % 86_400_000;
            (first..to)
                .step_by(86_400_000)
                .map(|day| DayFigures {
                    day: crate::clock::at_unix_millis(day),
                    figures: Tally::of(&spans(&changes, day.max(from), (day + 86_400_000).min(to)))
                        .figures(),
                })
                .collect()
        } else {
            Vec::new()
        };
        Ok(NameAvailability {
            name: name.to_owned(),
            tenant,
            from: crate::clock::at_unix_millis(from),
            to: crate::clock::at_unix_millis(to),
            figures: Tally::of(&window).figures(),
            intervals,
            days,
        })
    }
}

/// `endpoint` as the book judges it: its checks by target key (`keys`: each plan target's).
fn endpoint_of(keys: &[CheckKey], endpoint: &ho_config::Endpoint) -> EndpointPlan {
    let also = endpoint.composite().into_iter().flat_map(|c| &c.also);
    EndpointPlan {
        name: endpoint.name.to_string(),
        address: endpoint.address,
        checks: std::iter::once(&endpoint.target())
            .chain(also)
            .map(|&t| keys[t])
            .collect(),
        composite: endpoint.composite().cloned().map(Box::new),
    }
}

/// The tenants of `plan` as the book needs them.
fn tenants_of(plan: &Plan) -> Vec<TenantPlan> {
    let canaried = crate::canary::canaried(plan);
    let keys: Vec<CheckKey> = (plan.targets.iter())
        .map(|t| CheckKey::of(&t.key()))
        .collect();
    plan.tenants
        .iter()
        .map(|t| TenantPlan {
            tenant: t.name.clone(),
            names: t.domains.clone(),
            sinks: t.sinks.clone(),
            observed: canaried
                .iter()
                .filter(|(_, c)| c.watched.iter().any(|w| w.tenant == t.name))
                .map(|(sink, _)| sink.clone())
                .collect(),
            shared: (t.sinks.iter())
                .filter(|s| plan.sinks.get(*s).is_some_and(|p| p.spec.shared()))
                .cloned()
                .collect(),
            vantages: (canaried.values())
                .flat_map(|c| &c.watched)
                .filter(|w| w.tenant == t.name)
                .filter_map(|w| Some(w.vantage.as_ref()?.geo.clone()))
                .collect(),
            endpoints: (t.endpoints.iter())
                .map(|&e| endpoint_of(&keys, &plan.endpoints[e]))
                .collect(),
        })
        .collect()
}
