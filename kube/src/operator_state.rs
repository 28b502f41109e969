//! What operators set, shared by every replica (`[kubernetes] operator_state`): a ConfigMap
//! holds it (key `state.json`); each replica writes it after an action taken through its
//! API and watches it, applying what another replica wrote. So a drain sent through the
//! Service reaches every replica's answers, whichever replica took it.
//!
//! The ConfigMap holds the whole state, written by the replica that took the latest action
//! (last writer wins): two actions taken on two replicas within the same write (a few
//! milliseconds) can lose one, which `/status` then shows; actions that far apart are rare
//! enough that a merge protocol is not worth its failure modes. A ConfigMap that cannot be
//! written is logged (the action still applies on the replica that took it).

use std::collections::BTreeMap;

use futures_util::StreamExt;
use ho_engine::{Adopter, Engine, OperatorState};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::Client;
use tokio::sync::watch;
use tracing::{info, warn};

/// The key the state is kept under.
const KEY: &str = "state.json";

/// Shares `engine`'s operator state through ConfigMap `name` in `namespace` while the
/// process runs: applies what is there at once, then writes this replica's actions and
/// applies the others'.
pub async fn share(engine: &Engine, client: Client, namespace: &str, name: &str) {
    let Some((mut ours, adopter)) = engine.share_operator_state().await else {
        return;
    };
    // The state now is this replica's own: at start, the ConfigMap's replaces it
    // (`adopt_theirs`), and only later actions are written.
    ours.borrow_and_update();
    let api: Api<ConfigMap> = Api::namespaced(client, namespace);
    tokio::spawn(write_ours(ours, api.clone(), name.to_owned()));
    tokio::spawn(adopt_theirs(adopter, api, name.to_owned()));
    info!(
        namespace,
        configmap = name,
        "operator state shared with the other replicas"
    );
}

/// Writes this replica's state to ConfigMap `cm` after each of its actions (creating the
/// ConfigMap when there is none).
async fn write_ours(mut ours: watch::Receiver<OperatorState>, writer: Api<ConfigMap>, cm: String) {
    while ours.changed().await.is_ok() {
        let state = ours.borrow_and_update().clone();
        let data = BTreeMap::from([(
            KEY.to_owned(),
            serde_json::to_string(&state).expect("serializable"),
        )]);
        let patch = serde_json::json!({ "data": data });
        let written = match writer
            .patch(&cm, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Err(kube::Error::Api(e)) if e.code == 404 => {
                let made = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(cm.clone()),
                        ..ObjectMeta::default()
                    },
                    data: Some(data),
                    ..ConfigMap::default()
                };
                writer
                    .create(&PostParams::default(), &made)
                    .await
                    .map(|_| ())
            }
            other => other.map(|_| ()),
        };
        if let Err(e) = written {
            warn!(configmap = %cm, "what an operator set here is not shared with the other replicas: {e}");
        }
    }
}

/// Applies what ConfigMap `cm` holds whenever it changes (another replica's actions).
async fn adopt_theirs(adopter: Adopter, api: Api<ConfigMap>, cm: String) {
    let config = watcher::Config::default().fields(&format!("metadata.name={cm}"));
    let mut events = watcher::watcher(api, config).boxed();
    while let Some(event) = events.next().await {
        let state = match event {
            Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => o
                .data
                .as_ref()
                .and_then(|d| d.get(KEY))
                .map(|t| serde_json::from_str::<OperatorState>(t)),
            Ok(_) => None,
            Err(e) => {
                warn!(configmap = %cm, "watching the shared operator state: {e}");
                None
            }
        };
        match state {
            Some(Ok(state)) => adopter.adopt(state),
            Some(Err(e)) => {
                warn!(configmap = %cm, "the shared operator state does not parse; the last one stays: {e}")
            }
            None => {}
        }
    }
}
