//! What the orchestrator writes on Gateways, as Kuadrant's design asks of a DNSPolicy's
//! controller (seed 004):
//!
//! - the condition `gateway.networking.k8s.io/PolicyAffected` (`True`, `PolicyApplied`) on
//!   every Gateway an accepted DNSPolicy targets, taken away when none does. A Gateway's
//!   conditions are its controller's: ours is added to the list read, on that version
//!   (`resourceVersion`), so a concurrent write by the Gateway's controller is never lost.
//! - with `[kubernetes] kuadrant_default_policy = true`, the default policy on a discovered
//!   Gateway of an allowed namespace that no DNSPolicy targets: a DNSPolicy `GATEWAY-dns`
//!   naming it (round robin; checked as the config's `[defaults.check]`), which the team may
//!   then edit or replace. A Gateway annotated `healthorchestrator.io/default-dns-policy:
//!   "false"` gets none.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{json, Value};
use tracing::{debug, info};

use super::super::resource::Condition;
use super::super::status::{condition, Observed};
use super::translate::Policies;
use super::KuadrantStores;

/// The condition Gateway API asks a policy's target to carry.
pub const AFFECTED: &str = "gateway.networking.k8s.io/PolicyAffected";

/// The annotation that keeps the default policy off a Gateway.
pub const NO_DEFAULT: &str = "healthorchestrator.io/default-dns-policy";

/// The Gateway's conditions with ours as it should be: `None` when they already are.
pub fn affected_conditions(
    gateway: &DynamicObject,
    applied: &[String],
    now: f64,
) -> Option<Vec<Value>> {
    let current: Vec<Value> = gateway.data["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let ours: Vec<Condition> = current
        .iter()
        .filter(|c| c["type"] == AFFECTED)
        .filter_map(|c| serde_json::from_value(c.clone()).ok())
        .collect();
    let want = (!applied.is_empty()).then(|| {
        let at = Observed {
            generation: gateway.metadata.generation,
            now,
        };
        let message = format!("DNSPolicy {} has been applied", applied.join(", "));
        condition(&ours, at, AFFECTED, true, "PolicyApplied", message)
    });
    let same = match (&want, ours.first()) {
        (None, None) => true,
        (Some(w), Some(o)) => {
            w.status == o.status && w.reason == o.reason && w.message == o.message
        }
        _ => false,
    };
    if same {
        return None;
    }
    let mut conditions: Vec<Value> = current
        .into_iter()
        .filter(|c| c["type"] != AFFECTED)
        .collect();
    conditions.extend(want.map(|w| serde_json::to_value(w).expect("a condition serializes")));
    Some(conditions)
}

/// The accepted policies targeting each Gateway, by (namespace, gateway).
pub fn applied(
    policies: &Policies,
    objects: &[Arc<DynamicObject>],
) -> BTreeMap<(String, String), Vec<String>> {
    let mut out: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for p in objects {
        let ns = p.metadata.namespace.clone().unwrap_or_default();
        let name = p.name_any();
        let accepted =
            matches!(policies.get(&(ns.clone(), name.clone())), Some(Ok(o)) if o.invalid.is_none());
        if let (true, Some(gw)) = (accepted, p.data["spec"]["targetRef"]["name"].as_str()) {
            out.entry((ns, gw.to_owned())).or_default().push(name);
        }
    }
    out
}

/// Writes `conditions` to the Gateway's status, on the version read.
pub async fn write_conditions(client: &Client, gateway: &DynamicObject, conditions: Vec<Value>) {
    let ns = gateway.metadata.namespace.clone().unwrap_or_default();
    let name = gateway.name_any();
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &gateway_type());
    let patch = json!({
        "metadata": {"resourceVersion": gateway.metadata.resource_version},
        "status": {"conditions": conditions},
    });
    match api
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(_) => debug!(namespace = %ns, gateway = %name, "PolicyAffected written"),
        // A conflict: the Gateway changed meanwhile; its next version starts a round.
        Err(e) => debug!(namespace = %ns, gateway = %name, "PolicyAffected not written yet: {e}"),
    }
}

/// The default policies to create: one per Gateway of an allowed namespace that no policy
/// targets, that does not opt out, and that this process has not made one for already
/// (`made`: a policy the team deleted is not made again until a restart).
pub fn missing_defaults<'a>(
    gateways: &'a [Arc<DynamicObject>],
    policies: &[Arc<DynamicObject>],
    allowed: &dyn Fn(&str) -> bool,
    made: &HashSet<(String, String)>,
) -> Vec<&'a DynamicObject> {
    gateways
        .iter()
        .filter(|g| {
            let ns = g.metadata.namespace.clone().unwrap_or_default();
            let name = g.name_any();
            let targeted = policies.iter().any(|p| {
                p.metadata.namespace.as_deref() == Some(ns.as_str())
                    && p.data["spec"]["targetRef"]["name"].as_str() == Some(name.as_str())
            });
            let opted_out = g
                .annotations()
                .get(NO_DEFAULT)
                .is_some_and(|v| v == "false");
            allowed(&ns) && !targeted && !opted_out && !made.contains(&(ns, name))
        })
        .map(|g| g.as_ref())
        .collect()
}

/// Creates the default policy of `gateway`.
pub async fn create_default(client: &Client, gateway: &DynamicObject) {
    let ns = gateway.metadata.namespace.clone().unwrap_or_default();
    let gw = gateway.name_any();
    let name = format!("{gw}-dns");
    let policy: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kuadrant.io/v1", "kind": "DNSPolicy",
        "metadata": {
            "name": name, "namespace": ns,
            "labels": {"app.kubernetes.io/managed-by": "health-orchestrator"},
            "annotations": {"healthorchestrator.io/made-for": "the default policy of a discovered Gateway; edit or replace it"},
        },
        "spec": {"targetRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": gw}},
    }))
    .expect("a DNSPolicy");
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &ns, &KuadrantStores::policy_type());
    match api.create(&PostParams::default(), &policy).await {
        Ok(_) => {
            info!(namespace = %ns, gateway = %gw, policy = %name, "default DNSPolicy made for a discovered Gateway")
        }
        Err(e) => debug!(namespace = %ns, gateway = %gw, "default DNSPolicy not made yet: {e}"),
    }
}

fn gateway_type() -> kube::api::ApiResource {
    kube::api::ApiResource {
        group: "gateway.networking.k8s.io".into(),
        version: "v1".into(),
        api_version: "gateway.networking.k8s.io/v1".into(),
        kind: "Gateway".into(),
        plural: "gateways".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gateway(conditions: Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": "ns", "generation": 2},
            "status": {"conditions": conditions},
        }))
        .unwrap()
    }

    #[test]
    fn ours_is_added_beside_the_controllers_conditions_and_taken_away_alone() {
        let programmed = json!({"type": "Programmed", "status": "True", "reason": "Programmed",
                                "message": "", "lastTransitionTime": "2026-11-27T00:00:00Z"});
        let applied = vec!["p".to_owned()];
        let added = affected_conditions(&gateway(json!([programmed])), &applied, 0.0).unwrap();
        assert_eq!(added.len(), 2);
        assert_eq!(added[0], programmed, "the controller's condition is kept");
        assert_eq!(added[1]["type"], AFFECTED);
        assert_eq!(added[1]["reason"], "PolicyApplied");
        assert_eq!(added[1]["message"], "DNSPolicy p has been applied");
        // Written: nothing more to write.
        assert_eq!(
            affected_conditions(&gateway(Value::Array(added.clone())), &applied, 9.0),
            None
        );
        // No policy applies any more: ours goes, theirs stays.
        let taken = affected_conditions(&gateway(Value::Array(added)), &[], 9.0).unwrap();
        assert_eq!(taken, vec![programmed]);
    }
}
