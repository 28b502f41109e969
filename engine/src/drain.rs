//! What operators set by hand, kept in `<state_dir>/drains.json` so a restart does not
//! quietly undo it: drains (endpoints taken out of DNS on purpose, for maintenance) and
//! forced health (gdnsd's `admin_state`: an endpoint held up or down whatever its probes say).
//!
//! A drained endpoint keeps being probed and shown; it only leaves the published sets.
//! It never empties a tenant: when every endpoint of a tenant is drained, the drains are
//! ignored for that tenant (its endpoints are decided as if none were drained) and
//! `/status` says so, because an empty answer takes the whole name down. Forced-down
//! endpoints follow the same rule: when every endpoint of a tenant is forced down, the
//! force-downs are ignored there.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::state_file::{self, StateFileError};

/// What operators set, as the file holds it.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorState {
    /// Drained endpoint names.
    pub drained: BTreeSet<String>,
    /// Endpoints whose health an operator forced, by name (absent from older files).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub forced: BTreeMap<String, Forced>,
}

impl OperatorState {
    /// Every endpoint an operator holds by hand: drained or forced either way.
    pub fn held(&self) -> Vec<String> {
        let mut held: BTreeSet<&String> = self.drained.iter().collect();
        held.extend(self.forced.keys());
        held.into_iter().cloned().collect()
    }
}

/// Health an operator forced on an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Forced {
    /// Published as healthy whatever its probes say (a probe path known broken).
    Up,
    /// Withdrawn as unhealthy whatever its probes say (stay out after an incident).
    Down,
}

/// Where drains are kept; `None` keeps them in memory only (no `state_dir`: tests and
/// embedders without operator actions).
#[derive(Debug, Clone, Default)]
pub struct DrainStore {
    path: Option<PathBuf>,
    /// Where every save is also handed, for the replicas to share (`[kubernetes]
    /// operator_state`): the latest state wins.
    share: Option<tokio::sync::watch::Sender<OperatorState>>,
}

impl DrainStore {
    /// The store under `state_dir`.
    pub fn new(state_dir: Option<&Path>) -> DrainStore {
        DrainStore {
            path: state_dir.map(|d| d.join("drains.json")),
            share: None,
        }
    }

    /// What was saved before, nothing when there is no file yet. A file that cannot be
    /// read or parsed is an error naming it: starting without the drains would publish
    /// endpoints an operator took out.
    pub fn load(&self) -> Result<OperatorState, StateFileError> {
        let Some(path) = &self.path else {
            return Ok(OperatorState::default());
        };
        Ok(state_file::read(path)?.unwrap_or_default())
    }

    /// Replaces the file with `state`, atomically and flushed to the disk, and hands it
    /// to the replicas sharing it.
    pub fn save(&self, state: &OperatorState) -> Result<(), StateFileError> {
        self.keep(state)?;
        if let Some(share) = &self.share {
            share.send_replace(state.clone());
        }
        Ok(())
    }

    /// Replaces the file with `state` (one another replica set): not handed on again.
    pub fn keep(&self, state: &OperatorState) -> Result<(), StateFileError> {
        match &self.path {
            Some(path) => state_file::write_state(path, state, true),
            None => Ok(()),
        }
    }

    /// Hands every later save to `share` as well.
    pub fn share_with(&mut self, share: tokio::sync::watch::Sender<OperatorState>) {
        self.share = Some(share);
    }
}

/// `drains.json`. Format 2 adds `version` to format 1's fields.
impl state_file::StateFormat for OperatorState {
    const WHAT: &'static str = "drain";
    const LOSS: &'static str = "the drains, forced health and held fail-backs in it are then lost";
    const VERSION: u64 = 2;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drains_round_trip_and_a_broken_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let store = DrainStore::new(Some(dir.path()));
        assert_eq!(
            store.load().unwrap(),
            OperatorState::default(),
            "no file yet: none drained"
        );
        let state = OperatorState {
            drained: ["gw-1".to_string(), "gw-3".to_string()].into(),
            forced: [("gw-2".to_string(), Forced::Down)].into(),
        };
        store.save(&state).unwrap();
        assert_eq!(store.load().unwrap(), state);
        // A file from before forced health reads as no override.
        std::fs::write(dir.path().join("drains.json"), r#"{"drained": ["gw-1"]}"#).unwrap();
        assert!(store.load().unwrap().forced.is_empty());
        std::fs::write(dir.path().join("drains.json"), "{not json").unwrap();
        let e = store.load().unwrap_err();
        assert!(e.to_string().contains("drains.json"), "{e}");
    }
}
