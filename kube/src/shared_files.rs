//! State files every replica keeps in its own `state_dir` but all must agree on (the
//! embedded DNS server's ACME challenges: an update reaches one replica through the Service,
//! the ACME server asks any of them), shared through the operator-state ConfigMap
//! (`[kubernetes] operator_state`), one key per file.
//!
//! Each replica looks at its files every [`EVERY`]; a file that changed since it was last
//! shared is merged into the ConfigMap's copy (the file kind's three-way merge: what was
//! shared before, this replica's file, the ConfigMap's now) and written back conditionally
//! on the ConfigMap's `resourceVersion`, so two replicas changing the file at once both
//! land. A copy another replica shared (the watch) replaces the local file under the file's
//! lock unless the local file has changes of its own not yet shared, which the next look
//! merges instead. The DNS server reads the file again when it changed.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use futures_util::StreamExt;
use ho_engine::state_file::{self, StateFileError};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::runtime::watcher;
use kube::Client;
use tracing::{info, warn};

/// How often a replica looks for files changed here.
pub const EVERY: Duration = Duration::from_millis(200);

/// Most attempts at one change when other replicas keep changing the ConfigMap meanwhile.
const ATTEMPTS: usize = 8;

/// Merges three versions of a file: what this replica last shared (none at first), its
/// file now, and the ConfigMap's copy now.
pub type Merge = fn(Option<&[u8]>, &[u8], &[u8]) -> Result<Vec<u8>, StateFileError>;

/// Why a file was not shared (it is tried again at the next look).
#[derive(Debug, thiserror::Error)]
enum ShareError {
    #[error("the Kubernetes API: {0}")]
    Api(#[from] kube::Error),
    #[error(transparent)]
    File(#[from] StateFileError),
    #[error("locking the file: {0}")]
    Lock(#[from] std::io::Error),
    #[error("the merge is not text: {0}")]
    NotText(#[from] std::string::FromUtf8Error),
    #[error("the ConfigMap kept changing through {ATTEMPTS} attempts")]
    Contended,
}

/// The files shared: those in `state_dir` whose names start with `prefix` and end in
/// `.json`, merged with `merge`.
#[derive(Clone, Copy)]
pub struct SharedFiles {
    /// `acme-`.
    pub prefix: &'static str,
    /// The file kind's merge.
    pub merge: Merge,
}

/// Shares `files` of `dir` through ConfigMap `name` in `namespace` while the process runs.
pub fn share(client: Client, namespace: &str, name: &str, dir: PathBuf, files: SharedFiles) {
    let api: Api<ConfigMap> = Api::namespaced(client, namespace);
    let mut mirror = Mirror {
        api: api.clone(),
        name: name.to_owned(),
        dir,
        files,
        shared: BTreeMap::new(),
    };
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = watcher::watcher(api, config).boxed();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => mirror.push_changed().await,
                event = events.next() => match event {
                    Some(Ok(watcher::Event::Apply(cm) | watcher::Event::InitApply(cm))) => {
                        mirror.pull(&cm)
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => warn!(configmap = %mirror.name, "watching the shared state files: {e}"),
                    None => return,
                },
            }
        }
    });
    info!(
        namespace,
        configmap = name,
        prefix = files.prefix,
        "state files shared with the other replicas"
    );
}

struct Mirror {
    api: Api<ConfigMap>,
    name: String,
    dir: PathBuf,
    files: SharedFiles,
    /// Per file (the ConfigMap key), its content as last shared: the merge's base.
    shared: BTreeMap<String, String>,
}

impl Mirror {
    /// Shares every file that changed here since it was last shared.
    async fn push_changed(&mut self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let keys: Vec<String> = entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|k| k.starts_with(self.files.prefix) && k.ends_with(".json"))
            .collect();
        for key in keys {
            let Ok(ours) = std::fs::read_to_string(self.dir.join(&key)) else {
                continue;
            };
            if self.shared.get(&key) != Some(&ours) {
                if let Err(e) = self.push(&key, ours).await {
                    warn!(configmap = %self.name, file = %key, "not shared with the other replicas: {e}");
                }
            }
        }
    }

    /// Merges `ours` into the ConfigMap's copy of `key`, conditionally on its version.
    async fn push(&mut self, key: &str, ours: String) -> Result<(), ShareError> {
        for _ in 0..ATTEMPTS {
            let current = self.api.get_opt(&self.name).await?;
            let theirs = current
                .as_ref()
                .and_then(|cm| cm.data.as_ref()?.get(key).cloned());
            let merged = match &theirs {
                Some(t) if *t != ours => {
                    let base = self.shared.get(key).map(String::as_bytes);
                    let merged = (self.files.merge)(base, ours.as_bytes(), t.as_bytes())?;
                    String::from_utf8(merged)?
                }
                _ => ours.clone(),
            };
            let written = match current {
                _ if theirs.as_ref() == Some(&merged) => Ok(()),
                Some(mut cm) => {
                    cm.data
                        .get_or_insert_with(BTreeMap::new)
                        .insert(key.to_owned(), merged.clone());
                    self.api
                        .replace(&self.name, &PostParams::default(), &cm)
                        .await
                        .map(|_| ())
                }
                None => {
                    let cm = ConfigMap {
                        metadata: ObjectMeta {
                            name: Some(self.name.clone()),
                            ..ObjectMeta::default()
                        },
                        data: Some(BTreeMap::from([(key.to_owned(), merged.clone())])),
                        ..ConfigMap::default()
                    };
                    self.api
                        .create(&PostParams::default(), &cm)
                        .await
                        .map(|_| ())
                }
            };
            match written {
                Ok(()) => {
                    // The local file takes the merge unless it changed again meanwhile;
                    // then what the ConfigMap holds includes `ours`, which is the base of
                    // the next merge.
                    let base = if merged == ours || self.write_if_unchanged(key, &ours, &merged)? {
                        merged
                    } else {
                        ours
                    };
                    self.shared.insert(key.to_owned(), base);
                    return Ok(());
                }
                // Another replica changed it since it was read: merge again.
                Err(kube::Error::Api(e)) if e.code == 409 => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(ShareError::Contended)
    }

    /// Takes the copies another replica shared, where this replica has no change of its own
    /// waiting to be merged.
    fn pull(&mut self, cm: &ConfigMap) {
        let Some(data) = &cm.data else {
            return;
        };
        let prefix = self.files.prefix;
        let shared = data
            .iter()
            .filter(|(k, _)| k.starts_with(prefix) && k.ends_with(".json"));
        for (key, theirs) in shared {
            if self.shared.get(key) == Some(theirs) {
                continue;
            }
            let local = std::fs::read_to_string(self.dir.join(key)).ok();
            let unshared_here = local.is_some() && local.as_ref() != self.shared.get(key);
            if unshared_here {
                continue;
            }
            let expected = local.unwrap_or_default();
            match self.write_if_unchanged(key, &expected, theirs) {
                Ok(true) => {
                    self.shared.insert(key.clone(), theirs.clone());
                }
                Ok(false) => {}
                Err(e) => warn!(file = %key, "another replica's copy is not taken: {e}"),
            }
        }
    }

    /// Replaces file `key` with `content` under its lock if it still holds `expected` (a
    /// missing file holds ""): whether it did (if not, the next look merges).
    fn write_if_unchanged(
        &self,
        key: &str,
        expected: &str,
        content: &str,
    ) -> Result<bool, ShareError> {
        let path = self.dir.join(key);
        let _lock = state_file::lock(&path)?;
        if std::fs::read_to_string(&path).unwrap_or_default() != expected {
            return Ok(false);
        }
        state_file::write(&path, content.as_bytes(), true)?;
        Ok(true)
    }
}
