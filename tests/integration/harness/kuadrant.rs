//! What the live Kuadrant tests share: the set-up they start from (the Kubernetes API test
//! server, the operator's folder and config), and what an object's status says, as they
//! read it from the test server.

use serde_json::Value;

use super::TestConfig;
use crate::fakes::kube_api::KubeApi;
use crate::kube_tenants::operator_config;

/// A fresh Kubernetes API test server, the folder the operator runs in, and its config
/// for them following Kuadrant's resources (team-a and team-b allowed, gateways checked on
/// the port given): each test extends the config, then runs the operator on it.
pub struct KuadrantSetup {
    pub kube: KubeApi,
    pub dir: tempfile::TempDir,
    pub config: TestConfig,
}

impl KuadrantSetup {
    /// The test server started, gateways checked on `port`.
    pub async fn start(port: u16) -> KuadrantSetup {
        let kube = KubeApi::default();
        let kube_addr = kube.start().await;
        let dir = tempfile::tempdir().unwrap();
        let config = operator_config(dir.path(), kube_addr, port).set("kubernetes.kuadrant", true);
        KuadrantSetup { kube, dir, config }
    }
}

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
