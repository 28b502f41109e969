//! What a cluster knew of its peers' reports before its reader started, for clusters that
//! serve the zone themselves (`reports` on `dns_server`): a cluster restarted while every
//! cluster that knows a peer's gateways is down or cut off from it would otherwise answer
//! without those gateways until it reads one of them.
//!
//! Its source is what the server relayed (each peer's own report as last read): carried
//! over in memory when the configuration is reloaded, and kept in
//! `<state_dir>/reports-<sink>.json` across restarts when `state_dir` is set. The file is
//! written only when the addresses some peer owns changed (stamps and down votes are
//! left out of that comparison: a recalled report lends only its addresses, as a relayed
//! one does), and only once this reader has heard every peer since it started, so a
//! cluster that restarts cut off from its peers never overwrites what it knew with its
//! ignorance. What was recalled counts, and is relayed to the peers, until every peer has
//! answered once; then what the peers say and relay replaces it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ho_engine::state_file::{self, StateFileError, StateFormat};

use tracing::warn;

/// Per report suffix, the texts of every peer report known.
pub type Known = HashMap<String, Vec<String>>;

/// `reports-<sink>.json`: format 1 was the bare map; format 2 holds it under `reports`,
/// beside its `version`.
#[derive(serde::Serialize, serde::Deserialize)]
struct KeptReports {
    reports: Known,
}

impl StateFormat for KeptReports {
    const WHAT: &'static str = "peers' reports";
    const LOSS: &'static str =
        "the peers' gateways are then not recalled at a restart until a peer answers";
    const VERSION: u64 = 2;

    fn migrate(_: u64, content: serde_json::Value) -> Result<serde_json::Value, String> {
        Ok(serde_json::json!({ "reports": content }))
    }
}

/// The recalled reports and where they are kept.
pub struct Recall {
    /// `<state_dir>/reports-<sink>.json`, when there is a `state_dir`.
    path: Option<PathBuf>,
    /// What was recalled, until every peer has answered once.
    held: Mutex<Option<Known>>,
    /// The addresses the file holds (see [`ownership`]), to write only when they change.
    saved: Mutex<Option<Vec<String>>>,
}

impl Recall {
    /// What `relayed` (the server's relays, non-empty after a reload) or else the file at
    /// `path` holds.
    pub fn new(relayed: Known, path: Option<PathBuf>) -> Recall {
        let from_file = || {
            let path = path.as_ref()?;
            match state_file::read::<KeptReports>(path) {
                Ok(kept) => kept.map(|k| k.reports),
                Err(e) => {
                    warn!(error = %e, "the peers' reports are not recalled");
                    None
                }
            }
        };
        let (recalled, saved) = if relayed.values().any(|texts| !texts.is_empty()) {
            (Some(relayed), None)
        } else {
            let kept = from_file();
            let saved = kept.as_ref().map(ownership);
            (kept, saved)
        };
        Recall {
            path,
            held: Mutex::new(recalled),
            saved: Mutex::new(saved),
        }
    }

    /// The texts recalled under `suffix`, while they count.
    pub fn texts(&self, suffix: &str) -> Vec<String> {
        let held = self.held.lock().expect("not poisoned");
        held.as_ref()
            .and_then(|k| k.get(suffix).cloned())
            .unwrap_or_default()
    }

    /// Every peer has answered: what they say replaces what was recalled.
    pub fn forget(&self) {
        self.held.lock().expect("not poisoned").take();
    }

    /// Keeps `known` (the server's relays, once every peer has answered) in the file when
    /// the addresses in it changed.
    pub fn keep(&self, known: &Known) {
        let Some(path) = &self.path else { return };
        let owned = ownership(known);
        let mut saved = self.saved.lock().expect("not poisoned");
        if saved.as_ref() == Some(&owned) {
            return;
        }
        match save(path, known) {
            Ok(()) => *saved = Some(owned),
            // Tried again next round; warned each time the content changes at most.
            Err(e) => warn!(error = %e, "cannot keep the peers' reports for a restart"),
        }
    }
}

/// The header and `own=` items of every text in `known`, sorted: what a recalled report
/// lends (stamps and down votes change every round and are not recalled).
fn ownership(known: &Known) -> Vec<String> {
    let mut owned: Vec<String> = known
        .iter()
        .flat_map(|(suffix, texts)| {
            texts.iter().map(move |text| {
                let kept: Vec<&str> = text
                    .split(' ')
                    .filter(|t| !t.starts_with("t=") && !t.starts_with("down="))
                    .collect();
                format!("{suffix} {}", kept.join(" "))
            })
        })
        .collect();
    owned.sort();
    owned
}

/// Replaces the file atomically (temporary file, rename; rewritten as reports change, so
/// not flushed each time).
fn save(path: &Path, known: &Known) -> Result<(), StateFileError> {
    let kept = KeptReports {
        reports: known.clone(),
    };
    state_file::write_state(path, &kept, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(t: u64, down: &str) -> Known {
        HashMap::from([(
            "._ho-report.a.org".to_string(),
            vec![format!(
                "ho-report=1 owner=o cluster=eu2 t={t} part=1/1 own=192.0.2.7,gw,1,0 down={down}"
            )],
        )])
    }

    #[test]
    fn a_restart_recalls_what_was_known_once_every_peer_had_answered() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("reports-zone.json");
        let first = Recall::new(Known::new(), Some(path.clone()));
        assert!(
            first.texts("._ho-report.a.org").is_empty(),
            "nothing kept yet"
        );
        first.keep(&known(1, "192.0.2.1"));
        let kept = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        first.keep(&known(2, "192.0.2.2"));
        assert!(
            !path.exists(),
            "new stamps and down votes alone are not written"
        );
        std::fs::write(&path, kept).unwrap();
        let restarted = Recall::new(Known::new(), Some(path.clone()));
        assert_eq!(
            restarted.texts("._ho-report.a.org"),
            known(1, "192.0.2.1")["._ho-report.a.org"]
        );
        restarted.forget();
        assert!(
            restarted.texts("._ho-report.a.org").is_empty(),
            "once every peer answered, what they say counts"
        );
    }

    #[test]
    fn a_reload_recalls_the_relays_and_a_broken_file_recalls_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("reports-zone.json");
        std::fs::write(&path, "{not json").unwrap();
        assert!(Recall::new(Known::new(), Some(path.clone()))
            .texts("._ho-report.a.org")
            .is_empty());
        let reloaded = Recall::new(known(4, "192.0.2.1"), Some(path));
        assert_eq!(reloaded.texts("._ho-report.a.org").len(), 1);
    }
}
