//! Operator drains: endpoints an operator took out of DNS on purpose (maintenance), kept
//! in `<state_dir>/drains.json` so a restart does not quietly put them back.
//!
//! A drained endpoint keeps being probed and shown; it only leaves the published sets.
//! It never empties a tenant: when every endpoint of a tenant is drained, the drains are
//! ignored for that tenant (its endpoints are decided as if none were drained) and
//! `/status` says so, because an empty answer takes the whole name down.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The file's content.
#[derive(Debug, Default, Serialize, Deserialize)]
struct DrainFile {
    /// Drained endpoint names.
    drained: BTreeSet<String>,
}

/// Where drains are kept; `None` keeps them in memory only (no `state_dir`: tests and
/// embedders without operator actions).
#[derive(Debug, Clone, Default)]
pub struct DrainStore {
    path: Option<PathBuf>,
}

impl DrainStore {
    /// The store under `state_dir`.
    pub fn new(state_dir: Option<&Path>) -> DrainStore {
        DrainStore {
            path: state_dir.map(|d| d.join("drains.json")),
        }
    }

    /// The drained names saved before, none when there is no file yet. A file that
    /// cannot be read or parsed is an error naming it: starting without the drains would
    /// publish endpoints an operator took out.
    pub fn load(&self) -> Result<BTreeSet<String>, String> {
        let Some(path) = &self.path else {
            return Ok(BTreeSet::new());
        };
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice::<DrainFile>(&bytes)
                .map(|f| f.drained)
                .map_err(|e| format!("{} is not a drain file: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeSet::new()),
            Err(e) => Err(format!("cannot read {}: {e}", path.display())),
        }
    }

    /// Replaces the file with `drained`, atomically (temporary file, fsync, rename).
    pub fn save(&self, drained: &BTreeSet<String>) -> Result<(), String> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let dir = path.parent().expect("a file under state_dir");
        let tmp = dir.join(".drains.json.tmp");
        let body = serde_json::to_vec_pretty(&DrainFile {
            drained: drained.clone(),
        })
        .expect("serializable");
        let write = || -> std::io::Result<()> {
            std::fs::create_dir_all(dir)?;
            let mut file = std::fs::File::create(&tmp)?;
            file.write_all(&body)?;
            file.sync_all()?;
            std::fs::rename(&tmp, path)?;
            if let Ok(d) = std::fs::File::open(dir) {
                let _ = d.sync_all();
            }
            Ok(())
        };
        write().map_err(|e| format!("cannot write {}: {e}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drains_round_trip_and_a_broken_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let store = DrainStore::new(Some(dir.path()));
        assert!(
            store.load().unwrap().is_empty(),
            "no file yet: none drained"
        );
        let drained: BTreeSet<String> = ["gw-1".to_string(), "gw-3".to_string()].into();
        store.save(&drained).unwrap();
        assert_eq!(store.load().unwrap(), drained);
        std::fs::write(dir.path().join("drains.json"), "{not json").unwrap();
        let e = store.load().unwrap_err();
        assert!(e.contains("drains.json"), "{e}");
    }
}
