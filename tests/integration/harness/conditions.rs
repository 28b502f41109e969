//! What a Kubernetes object's status says, as the Kuadrant tests read it from the
//! Kubernetes API test server.

use serde_json::Value;

use crate::fakes::kube_api::KubeApi;

/// The first condition of type `type_` on object `name` of `plural` in `ns`, as
/// (status, reason, message); `None` while the object or the condition is missing.
pub fn kube_condition(
    kube: &KubeApi,
    plural: &str,
    ns: &str,
    name: &str,
    type_: &str,
) -> Option<(String, String, String)> {
    let object = kube.object(plural, ns, name)?;
    let c = object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)?
        .clone();
    Some((
        c["status"].as_str()?.to_owned(),
        c["reason"].as_str()?.to_owned(),
        c["message"].as_str()?.to_owned(),
    ))
}

/// DNSHealthCheckProbe `name` of `ns`'s status as dns-operator writes it: (healthy,
/// consecutiveFailures, reason); `None` while it has none.
pub fn probe_state(kube: &KubeApi, ns: &str, name: &str) -> Option<(Value, u64, String)> {
    let s = kube.object("dnshealthcheckprobes", ns, name)?["status"].clone();
    Some((
        s["healthy"].clone(),
        s["consecutiveFailures"].as_u64()?,
        s["reason"].as_str()?.to_owned(),
    ))
}
