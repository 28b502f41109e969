//! Pushed health: the heartbeats endpoints of kind `heartbeat` send
//! (`POST /v1/heartbeat/{endpoint}`), as Consul's TTL checks take them. The API records each
//! on the board; the kind's probe, scheduled like any other, reads how old the last one is,
//! so missed heartbeats go through the same hysteresis, fail-open rules and sinks as failed
//! probes.
//!
//! Heartbeats are kept per address, as every verdict is. The board is saved to
//! `<state_dir>/heartbeats.json` at most once a second while it changes, so a restart does
//! not mark every pushed endpoint down: a heartbeat older than its `ttl` at restart is
//! missed as it would have been.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, SystemTime};

use ho_config::Plan;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use tracing::warn;

use super::HeartbeatCheck;
use crate::secret::Secret;
use crate::state_file::{self, StateFileError};

/// How often a changed board is saved.
const SAVE_EVERY: Duration = Duration::from_secs(1);

/// The heartbeats received and the endpoints that send them; shared by the API (which
/// records) and the probes of kind `heartbeat` (which read). Cloning shares it.
#[derive(Clone, Default)]
pub struct Heartbeats(Arc<Board>);

#[derive(Default)]
struct Board {
    /// The last heartbeat per address, on this process's clock.
    last: Mutex<HashMap<IpAddr, Instant>>,
    /// The endpoints of kind `heartbeat`, by name.
    endpoints: RwLock<HashMap<String, Pusher>>,
    /// A heartbeat arrived since the last save.
    changed: AtomicBool,
}

/// An endpoint that pushes its heartbeats.
#[derive(Clone)]
struct Pusher {
    address: IpAddr,
    /// Its own token (`token_file`), instead of `api.heartbeat_token_file`'s.
    token: Option<Secret>,
}

/// Why a heartbeat was not taken.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// No endpoint of kind `heartbeat` has that name.
    Unknown,
    /// The token is missing or wrong.
    Unauthorized,
    /// Neither the endpoint nor the API has a token: nobody may push.
    NoToken,
}

impl Heartbeats {
    /// Learns which endpoints of `plan` push heartbeats (at start and at every reload), and
    /// forgets the heartbeats of addresses none of them has any more.
    pub fn learn(&self, plan: &Plan) {
        let endpoints: HashMap<String, Pusher> = plan
            .endpoints
            .iter()
            .filter_map(|e| {
                // Its heartbeat check: its `check`, or one of its `checks`.
                let (target, check) = e.targets().find_map(|t| {
                    let target = &plan.targets[t];
                    Some((target, target.check.settings.downcast::<HeartbeatCheck>()?))
                })?;
                Some((
                    e.name.to_string(),
                    Pusher {
                        address: target.address,
                        token: check.token.clone(),
                    },
                ))
            })
            .collect();
        let addresses: std::collections::HashSet<IpAddr> =
            endpoints.values().map(|p| p.address).collect();
        self.0
            .last
            .lock()
            .expect("not poisoned")
            .retain(|a, _| addresses.contains(a));
        *self.0.endpoints.write().expect("not poisoned") = endpoints;
    }

    /// Records a heartbeat of endpoint `name`, sent with bearer token `given`; `api_token`
    /// is `api.heartbeat_token_file`'s, used when the endpoint has none of its own.
    pub fn beat(
        &self,
        name: &str,
        given: Option<&str>,
        api_token: Option<&str>,
    ) -> Result<(), Refused> {
        let pusher = self
            .0
            .endpoints
            .read()
            .expect("not poisoned")
            .get(name)
            .cloned()
            .ok_or(Refused::Unknown)?;
        let want = match (&pusher.token, api_token) {
            (Some(own), _) => own.expose(),
            (None, Some(api)) => api,
            (None, None) => return Err(Refused::NoToken),
        };
        if !given.is_some_and(|g| crate::secret::same_secret(g.as_bytes(), want.as_bytes())) {
            return Err(Refused::Unauthorized);
        }
        self.record(pusher.address, Instant::now());
        Ok(())
    }

    fn record(&self, address: IpAddr, at: Instant) {
        let mut last = self.0.last.lock().expect("not poisoned");
        let entry = last.entry(address).or_insert(at);
        *entry = (*entry).max(at);
        self.0.changed.store(true, Ordering::Relaxed);
    }

    /// How long ago `address` last sent a heartbeat; `None`: never (since its last save).
    pub fn age(&self, address: IpAddr) -> Option<Duration> {
        let last = *self.0.last.lock().expect("not poisoned").get(&address)?;
        Some(last.elapsed())
    }

    /// Restores the heartbeats saved under `state_dir` (none without one), then saves the
    /// board there every second it changed, for as long as the board is in use.
    pub fn keep_in(&self, state_dir: Option<&Path>) {
        let Some(dir) = state_dir else { return };
        let store = HeartbeatStore {
            path: dir.join("heartbeats.json"),
        };
        match store.load() {
            Ok(saved) => {
                let (now, wall) = (Instant::now(), SystemTime::now());
                let pushers: std::collections::HashSet<IpAddr> = (self.0.endpoints)
                    .read()
                    .expect("not poisoned")
                    .values()
                    .map(|p| p.address)
                    .collect();
                for (address, at) in saved.into_iter().filter(|(a, _)| pushers.contains(a)) {
                    let age = wall.duration_since(at).unwrap_or_default();
                    if let Some(at) = now.checked_sub(age) {
                        self.record(address, at);
                    }
                }
            }
            // Starting without them only marks pushed endpoints down until they push.
            Err(e) => warn!("{e}; heartbeats start empty"),
        }
        let board: Weak<Board> = Arc::downgrade(&self.0);
        actix::spawn(async move {
            loop {
                tokio::time::sleep(SAVE_EVERY).await;
                let Some(board) = board.upgrade() else { return };
                if board.changed.swap(false, Ordering::Relaxed) {
                    let snapshot = Heartbeats(board).snapshot();
                    if let Err(e) = store.save(&snapshot) {
                        warn!("{e}");
                    }
                }
            }
        });
    }

    /// The board on the wall clock, for saving.
    fn snapshot(&self) -> BTreeMap<IpAddr, SystemTime> {
        let (now, wall) = (Instant::now(), SystemTime::now());
        self.0
            .last
            .lock()
            .expect("not poisoned")
            .iter()
            .map(|(a, at)| (*a, wall - now.duration_since(*at)))
            .collect()
    }
}

/// The file's content: each address's last heartbeat, Unix milliseconds.
#[derive(Serialize, Deserialize)]
struct HeartbeatFile {
    heartbeats: BTreeMap<IpAddr, u64>,
}

/// `heartbeats.json`. Format 2 adds `version` to format 1's fields.
impl state_file::StateFormat for HeartbeatFile {
    const WHAT: &'static str = "heartbeat";
    const LOSS: &'static str =
        "the last heartbeat of each endpoint in it is then lost: they are unknown until they beat again";
    const VERSION: u64 = 2;
}

/// Where the board is saved.
struct HeartbeatStore {
    path: PathBuf,
}

impl HeartbeatStore {
    fn load(&self) -> Result<BTreeMap<IpAddr, SystemTime>, StateFileError> {
        let Some(file) = state_file::read::<HeartbeatFile>(&self.path)? else {
            return Ok(BTreeMap::new());
        };
        Ok(file
            .heartbeats
            .into_iter()
            .map(|(a, ms)| (a, crate::clock::after_epoch(Duration::from_millis(ms))))
            .collect())
    }

    /// Replaces the file atomically (temporary file, rename; rewritten while beats come,
    /// so not flushed each time).
    fn save(&self, board: &BTreeMap<IpAddr, SystemTime>) -> Result<(), StateFileError> {
        let file = HeartbeatFile {
            heartbeats: board
                .iter()
                .map(|(a, at)| {
                    let ms = crate::clock::since_epoch(*at).as_millis();
                    (*a, ms as u64)
                })
                .collect(),
        };
        state_file::write_state(&self.path, &file, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_board_survives_a_save_and_a_load_by_age() {
        let dir = tempfile::tempdir().unwrap();
        let store = HeartbeatStore {
            path: dir.path().join("heartbeats.json"),
        };
        assert!(store.load().unwrap().is_empty());
        let at = SystemTime::now() - Duration::from_secs(2);
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        store.save(&BTreeMap::from([(a, at)])).unwrap();
        let back = store.load().unwrap();
        let drift = back[&a].duration_since(at).unwrap_or_else(|e| e.duration());
        assert!(drift < Duration::from_millis(1), "{drift:?}");
        std::fs::write(&store.path, "{").unwrap();
        assert!(store
            .load()
            .unwrap_err()
            .to_string()
            .contains("is not a heartbeat file"));
    }
}
