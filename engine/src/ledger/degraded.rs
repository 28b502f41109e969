//! When the ledger cannot record as configured: what keeps it from it, told once in the
//! log, `/status`, the degraded gauge and an event, and what clears it again. Probing and
//! publishing never wait on any of it.

use super::store::{Store, StoreError};
use super::{now_ms, Inner, PROBLEMS, RECENT};

impl Inner {
    /// Notes what keeps the ledger from recording as configured until the store takes
    /// every change again.
    pub(super) fn problem(&mut self, what: String) {
        self.note(what, false);
    }

    /// Notes a file the store could not use: one moved aside is counted and clears with the
    /// next append that reaches the disk (its name records again); one of a newer version
    /// stays (its name is not recorded while the file is there).
    pub(super) fn trouble(&mut self, t: &super::store::Trouble) {
        if t.moved_to.is_some() {
            self.metrics.answers.ledger_files_set_aside.inc();
        }
        self.note(t.to_string(), t.moved_to.is_none());
    }

    /// Notes a problem, `sticky` when it stays for the process's life: logged, in
    /// `/status`, the degraded gauge and an event (once per change of state).
    pub(super) fn note(&mut self, what: String, sticky: bool) {
        if self.problems.last().is_some_and(|(p, _)| *p == what) {
            return;
        }
        tracing::error!("availability ledger degraded (probing and publishing go on): {what}");
        if self.problems.is_empty() {
            self.metrics.answers.ledger_degraded.set(1);
            self.events.emit(|| crate::events::Event::Degraded {
                at: crate::events::now(),
                part: "ledger",
                degraded: true,
                reason: what.clone(),
            });
        }
        self.problems.push((what, sticky));
        if self.problems.len() > PROBLEMS {
            self.problems.remove(0);
        }
    }

    /// The store took every change: the ledger records as configured again.
    pub(super) fn recovered(&mut self) {
        let before = self.problems.len();
        if before == 0 || self.store.is_none() {
            return;
        }
        self.problems.retain(|(_, sticky)| *sticky);
        if self.problems.len() == before {
            return;
        }
        tracing::info!("availability ledger records again");
        if !self.problems.is_empty() {
            return;
        }
        self.metrics.answers.ledger_degraded.set(0);
        self.events.emit(|| crate::events::Event::Degraded {
            at: crate::events::now(),
            part: "ledger",
            degraded: false,
            reason: String::new(),
        });
    }

    /// The last [`RECENT`] of every name the store holds, for the gauges.
    pub(super) fn load_recent(&mut self) {
        let Some(store) = &mut self.store else { return };
        let since = now_ms().saturating_sub(RECENT.as_millis() as u64);
        let mut failed = Vec::new();
        for name in store.names().unwrap_or_else(|e| {
            failed.push(format!("cannot list {e}"));
            Vec::new()
        }) {
            match store.read(&name) {
                // A file set aside (or left for a newer version) holds nothing here: the
                // name is not one this ledger knows until something records it.
                Ok(changes) if changes.is_empty() => {}
                Ok(changes) => {
                    let cut = changes
                        .partition_point(|(t, _)| *t < since)
                        .saturating_sub(1);
                    self.recent.insert(name, changes[cut..].to_vec());
                }
                Err(e) => failed.push(format!("cannot read {e}")),
            }
        }
        let troubles = store.troubles();
        for f in failed {
            self.problem(f);
        }
        for t in troubles {
            self.trouble(&t);
        }
    }

    /// Opens the store when it could not be opened before.
    pub(super) fn reopen(&mut self) {
        let (None, Some(folder)) = (&self.store, &self.folder) else {
            return;
        };
        match Store::open(folder) {
            Ok(store) => {
                if !self.problems.is_empty() {
                    let folder = folder.display();
                    tracing::info!("availability ledger: {folder} can be written now");
                }
                self.store = Some(store);
            }
            Err(e) => self.problem(unwritable(&e)),
        }
    }
}

/// The problem of a ledger folder that cannot be created or written.
pub(super) fn unwritable(e: &StoreError) -> String {
    format!(
        "cannot write {e}: the ledger keeps the last 30 days in memory until it can (make state_dir writable by this user: in Kubernetes, the pod's securityContext.fsGroup)"
    )
}
