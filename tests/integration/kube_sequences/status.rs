//! What `kubectl get` must show after a step: every refusal on an object's status, every
//! accepted write read as accepted, deleted objects gone.

use serde_json::Value;

use super::objects::locate;
use super::oracle::Model;
use super::steps::{Addresses, Object, Step};
use crate::fakes::kube_api::KubeApi;

/// The first thing the statuses do not show yet, if any.
pub fn refusal_shown(kube: &KubeApi, model: &Model) -> Option<String> {
    for object in [
        Object::Failover(0),
        Object::Failover(1),
        Object::Record(0),
        Object::Record(1),
        Object::Outsider,
        Object::Gateway,
        Object::Policy,
        Object::Probe,
    ] {
        let (plural, ns, name) = locate(object);
        let stored = kube.object(plural, ns, &name);
        let exists = model.existing().any(|o| o == object);
        let wrong = match (exists, stored) {
            (false, None) => None,
            (false, Some(_)) => Some("deleted, but still there (its finalizer held)".into()),
            (true, None) => Some("written, but missing".into()),
            (true, Some(o)) => shown(object, &o, model, kube),
        };
        if let Some(wrong) = wrong {
            return Some(format!("{plural} {ns}/{name}: {wrong}"));
        }
    }
    None
}

/// What is wrong with `object`'s status, if anything.
fn shown(object: Object, stored: &Value, model: &Model, kube: &KubeApi) -> Option<String> {
    let refused = model.refused(object);
    let accepted = condition(stored, "Accepted");
    let status = accepted
        .as_ref()
        .map(|c| c["status"].as_str().unwrap_or(""));
    match object {
        Object::Failover(_) | Object::Record(_) | Object::Outsider => {
            let want = if refused { "False" } else { "True" };
            (status != Some(want)).then(|| format!("Accepted should be {want}: {accepted:?}"))
        }
        Object::Policy if refused => (status != Some("False")
            || accepted.as_ref().unwrap()["reason"] != "Invalid")
            .then(|| format!("Accepted should be False (Invalid): {accepted:?}")),
        Object::Policy => {
            let target = kube.object("gateways", "team-a", "gw-0").is_some();
            (target && status != Some("True"))
                .then(|| format!("Accepted should be True: {accepted:?}"))
        }
        Object::Probe if refused => {
            let s = &stored["status"];
            let said = s["healthy"] == false && s["reason"].as_str().is_some_and(|r| !r.is_empty());
            (!said).then(|| format!("should read healthy: false with a reason: {s}"))
        }
        Object::Probe => None,
        Object::Gateway => gateway_refusal_shown(model, kube),
    }
}

/// A Gateway without an address refuses its listeners' records kept from before, which have
/// no object of their own: the policy's status names them.
fn gateway_refusal_shown(model: &Model, kube: &KubeApi) -> Option<String> {
    let gateway = model.latest_write(Object::Gateway)?;
    let Step::Gateway {
        listeners,
        addresses: Addresses::Empty,
    } = *gateway
    else {
        return None;
    };
    if listeners == 0
        || !model.keeps_listeners()
        || model
            .latest_write(Object::Policy)
            .is_none_or(|p| p.invalid())
    {
        return None;
    }
    let policy = kube.object("dnspolicies", "team-a", "gw-0-dns")?;
    let named = policy["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| {
            c["message"]
                .as_str()
                .is_some_and(|m| m.contains("(from a listener) is refused"))
        });
    (!named).then(|| {
        format!(
            "the policy does not name the refused listener records: {}",
            policy["status"]
        )
    })
}

fn condition(object: &Value, type_: &str) -> Option<Value> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .cloned()
}
