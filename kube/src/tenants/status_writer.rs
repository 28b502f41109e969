//! Writes statuses to the status subresource: one pass per second at most, each resource
//! at most once per pass, only what differs from what this process last wrote (or wrote
//! more than [`RECHECK`] ago), only while this replica is the writer. A tenant's Ready
//! flipping ten times in a second costs one write.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use ho_engine::leadership::Leadership;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::Client;
use serde_json::{json, Value};
use tokio::sync::watch;
use tracing::warn;

use super::admit::Key;
use super::resource::DNSFailoverStatus;

/// How long a status written is taken to be on its way back through the watch. Still
/// wanted after that, the object does not show it: it was deleted and made again under its
/// name (between two passes), or another writer changed it; it is written again.
const RECHECK: Duration = Duration::from_secs(3);

/// The statuses the controller wants written (latest wins), as merge patches of `status`.
pub struct Statuses(watch::Sender<BTreeMap<Key, Value>>);

impl Statuses {
    /// Replaces what is wanted: the statuses that differ from the objects' own.
    pub fn send(&self, wanted: BTreeMap<Key, Value>) {
        self.0.send_replace(wanted);
    }
}

/// Starts the writer task for objects of type `resource`.
pub fn spawn(client: Client, leadership: Leadership, resource: ApiResource) -> Statuses {
    let (tx, rx) = watch::channel(BTreeMap::new());
    tokio::spawn(write(client, rx, leadership, resource));
    Statuses(tx)
}

async fn write(
    client: Client,
    mut wanted: watch::Receiver<BTreeMap<Key, Value>>,
    leadership: Leadership,
    resource: ApiResource,
) {
    let mut written: HashMap<Key, (Value, tokio::time::Instant)> = HashMap::new();
    while wanted.changed().await.is_ok() {
        let pass = tokio::time::Instant::now();
        let batch = wanted.borrow_and_update().clone();
        for (k, status) in &batch {
            if written
                .get(k)
                .is_some_and(|(v, at)| v == status && at.elapsed() < RECHECK)
            {
                continue;
            }
            if !leadership.may_write() {
                break;
            }
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &k.0, &resource);
            let patch = json!({ "status": status });
            let params = PatchParams::default();
            let patched = tokio::time::timeout(
                super::controller::REQUEST_TIMEOUT,
                api.patch_status(&k.1, &params, &Patch::Merge(patch)),
            )
            .await;
            match patched {
                Ok(Ok(_)) => {
                    written.insert(k.clone(), (status.clone(), tokio::time::Instant::now()));
                }
                Ok(Err(kube::Error::Api(e))) if e.code == 404 => {
                    written.remove(k);
                }
                Ok(Err(e)) => warn!(namespace = %k.0, resource = %k.1, "status not written: {e}"),
                Err(_) => {
                    warn!(namespace = %k.0, resource = %k.1, "status not written: the API server did not answer")
                }
            }
        }
        // A resource no longer in the batch shows what it should: forget it, so the map
        // holds only resources whose new status the watch has not brought back yet.
        written.retain(|k, _| batch.contains_key(k));
        tokio::time::sleep_until(pass + Duration::from_secs(1)).await;
    }
}

/// A `DNSFailover` status as a merge patch: fields the status no longer has are written
/// as `null`, so a refused resource does not keep showing what it published before.
pub fn with_nulls(status: &DNSFailoverStatus) -> Value {
    let mut value = serde_json::to_value(status).unwrap_or_default();
    if let Value::Object(map) = &mut value {
        for field in ["published", "endpoints", "sinks"] {
            map.entry(field).or_insert(Value::Null);
        }
    }
    value
}
