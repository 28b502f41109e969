//! The last accepted generation of each resource: what keeps publishing while a later
//! generation is refused (a typo never takes a live name down), kept across restarts in
//! `<state_dir>/accepted.json` when there is a `state_dir`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use ho_config::model::{EndpointConfig, TenantConfig};
use ho_config::Config;
use serde::{Deserialize, Serialize};
use tracing::warn;

use super::admit::{Key, Verdict};
use super::claims::Claims;

/// Every resource's last accepted generation, and where they are kept.
#[derive(Default)]
pub(super) struct LastAccepted {
    by_key: HashMap<Key, Generation>,
    /// `<state_dir>/accepted.json`; `None`: in memory only.
    keep_in: Option<PathBuf>,
    /// What was last written there: a round writes only when it changed.
    kept: Vec<u8>,
}

/// One accepted generation and what it published.
#[derive(Clone, Serialize, Deserialize)]
struct Generation {
    generation: Option<i64>,
    tenant: TenantConfig,
    endpoints: Vec<EndpointConfig>,
}

/// `accepted.json`: each resource's last accepted generation, by `namespace/name`.
#[derive(Default, Serialize, Deserialize)]
struct AcceptedFile {
    resources: BTreeMap<String, Generation>,
}

/// `accepted.json`. Format 2 adds `version` to format 1's fields.
impl ho_engine::state_file::StateFormat for AcceptedFile {
    const WHAT: &'static str = "accepted resources";
    const LOSS: &'static str = "a resource refused now publishes nothing until it is fixed";
    const VERSION: u64 = 2;
}

impl LastAccepted {
    /// Kept in `state_dir` (none: in memory only), starting from what a previous run kept
    /// there. A file that cannot be read is logged and set aside: admission then starts
    /// from nothing, as without `state_dir`.
    pub(super) fn keeping_in(state_dir: Option<&Path>) -> LastAccepted {
        let keep_in = state_dir.map(|d| d.join("accepted.json"));
        let kept = keep_in.as_deref().map_or(Ok(None), |path| {
            ho_engine::state_file::read::<AcceptedFile>(path)
        });
        let by_key = match kept {
            Ok(file) => file
                .unwrap_or_default()
                .resources
                .into_iter()
                .filter_map(|(k, last)| {
                    let (ns, name) = k.split_once('/')?;
                    Some(((ns.to_owned(), name.to_owned()), last))
                })
                .collect(),
            Err(e) => {
                warn!(error = %e, "the last accepted generations are not known: a resource refused now publishes nothing until fixed");
                HashMap::new()
            }
        };
        LastAccepted {
            by_key,
            keep_in,
            kept: Vec::new(),
        }
    }

    /// Resource `k` was accepted at `generation`, publishing the tenant and endpoints in
    /// `alone`.
    pub(super) fn remember(&mut self, k: &Key, generation: Option<i64>, alone: &Config) {
        self.by_key.insert(
            k.clone(),
            Generation {
                generation,
                tenant: alone.tenants[0].clone(),
                endpoints: alone.endpoints.clone(),
            },
        );
    }

    /// A refusal of resource `k`: when an earlier generation was accepted, that one keeps
    /// publishing (its tenant and endpoints left in `alone`, its names claimed again);
    /// otherwise the refusal stands.
    pub(super) fn fall_back(
        &self,
        k: &Key,
        reason: &'static str,
        message: String,
        alone: &mut Config,
        claims: &mut Claims,
    ) -> Verdict {
        let Some(last) = self.by_key.get(k) else {
            return Verdict::Refused { reason, message };
        };
        if claims
            .claim(k, &last.tenant.name, &last.tenant.domains)
            .is_err()
        {
            return Verdict::Refused { reason, message };
        }
        alone.tenants = vec![last.tenant.clone()];
        alone.endpoints = last.endpoints.clone();
        Verdict::KeptLast {
            tenant: last.tenant.name.clone(),
            serving: last.generation,
            reason,
            message,
        }
    }

    /// The resources with a last accepted generation.
    pub(super) fn keys(&self) -> Vec<Key> {
        self.by_key.keys().cloned().collect()
    }

    /// Forgets the resources not in `seen` (deleted).
    pub(super) fn forget_all_but(&mut self, seen: &HashSet<Key>) {
        self.by_key.retain(|k, _| seen.contains(k));
    }

    /// Saves what changed since the last save.
    pub(super) fn save(&mut self) {
        let Some(path) = &self.keep_in else {
            return;
        };
        let file = AcceptedFile {
            resources: self
                .by_key
                .iter()
                .map(|((ns, name), last)| (format!("{ns}/{name}"), last.clone()))
                .collect(),
        };
        let body = ho_engine::state_file::encode(&file);
        if body == self.kept {
            return;
        }
        match ho_engine::state_file::write(path, &body, true) {
            Ok(()) => self.kept = body,
            Err(e) => {
                warn!(error = %e, "the last accepted generations are not kept: a restart with a refused edit in place would publish nothing for it")
            }
        }
    }
}
