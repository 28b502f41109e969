//! The server's objects: created, replaced and deleted as the API server does it (revision,
//! `generation`, finalizers), every change published to the watches.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::routes::{ResourceType, Route};
use super::{Key, State};

/// The objects a collection URL names: its type, in its namespace or every one.
pub(super) fn in_route(s: &State, route: &Route) -> Vec<Value> {
    of_route(&s.objects, route)
}

/// The objects of `objects` a collection URL names.
pub(super) fn of_route(objects: &BTreeMap<Key, Value>, route: &Route) -> Vec<Value> {
    objects
        .iter()
        .filter(|(k, _)| {
            k.0 == route.ty.plural && route.namespace.as_ref().is_none_or(|n| *n == k.1)
        })
        .map(|(_, o)| o.clone())
        .collect()
}

/// The namespace part of a key: "" for cluster-scoped resources.
pub(super) fn ns_of(ty: &ResourceType, ns: Option<&str>) -> String {
    if ty.namespaced {
        ns.unwrap_or_default().to_owned()
    } else {
        String::new()
    }
}

/// Stores a new object with uid, creation time, generation 1 and the next revision.
pub(super) fn create(s: &mut State, key: Key, mut object: Value) -> Value {
    s.next_version += 1;
    let meta = &mut object["metadata"];
    meta["resourceVersion"] = json!(s.next_version.to_string());
    meta["uid"] = json!(format!("00000000-0000-4000-8000-{:012}", s.next_version));
    meta["creationTimestamp"] = json!(now_rfc3339());
    meta["generation"] = json!(1);
    s.objects.insert(key.clone(), object.clone());
    s.watches
        .publish(s.next_version, key.0, &key.1, "ADDED", &object);
    note_lease(s, &key, Some(&object));
    object
}

/// Records a Lease's holder after a change (`None`: the Lease went).
fn note_lease(s: &mut State, key: &Key, object: Option<&Value>) {
    if key.0 == "leases" {
        let holder = object.and_then(|o| o["spec"]["holderIdentity"].as_str());
        s.lease_holders.push((
            std::time::Instant::now(),
            key.clone(),
            holder.map(str::to_owned),
        ));
    }
}

/// Replaces an object: `generation` follows `spec`, and a deleting object whose last
/// finalizer went is removed. `None` when it was removed.
pub(super) fn replace(
    s: &mut State,
    _ty: &ResourceType,
    key: Key,
    current: &Value,
    mut next: Value,
) -> Option<Value> {
    s.next_version += 1;
    let generation = current["metadata"]["generation"].as_i64().unwrap_or(1)
        + i64::from(next.get("spec") != current.get("spec"));
    let meta = &mut next["metadata"];
    for kept in ["uid", "creationTimestamp", "deletionTimestamp"] {
        if let Some(v) = current["metadata"].get(kept) {
            meta[kept] = v.clone();
        }
    }
    meta["generation"] = json!(generation);
    meta["resourceVersion"] = json!(s.next_version.to_string());
    let deleting = next["metadata"].get("deletionTimestamp").is_some();
    let finalizers = next["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| !f.is_empty());
    if deleting && !finalizers {
        s.objects.remove(&key);
        s.watches
            .publish(s.next_version, key.0, &key.1, "DELETED", &next);
        note_lease(s, &key, None);
        return None;
    }
    s.objects.insert(key.clone(), next.clone());
    s.watches
        .publish(s.next_version, key.0, &key.1, "MODIFIED", &next);
    note_lease(s, &key, Some(&next));
    Some(next)
}

/// Deletes: finalizers make it a `deletionTimestamp` and wait.
pub(super) fn delete(s: &mut State, ty: &ResourceType, key: Key) -> Option<Value> {
    let current = s.objects.get(&key).cloned()?;
    let finalizers = current["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| !f.is_empty());
    if finalizers {
        if current["metadata"].get("deletionTimestamp").is_some() {
            return Some(current);
        }
        let mut next = current.clone();
        next["metadata"]["deletionTimestamp"] = json!(now_rfc3339());
        return replace(s, ty, key, &current, next);
    }
    s.next_version += 1;
    s.objects.remove(&key);
    let mut gone = current;
    gone["metadata"]["resourceVersion"] = json!(s.next_version.to_string());
    s.watches
        .publish(s.next_version, key.0, &key.1, "DELETED", &gone);
    note_lease(s, &key, None);
    Some(gone)
}

fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs))
        .to_string()
}

/// RFC 7386 JSON merge patch.
pub(super) fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let t = target.as_object_mut().unwrap();
    for (k, v) in p {
        if v.is_null() {
            t.remove(k);
        } else {
            merge(t.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}
