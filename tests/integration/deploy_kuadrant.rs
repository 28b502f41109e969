//! The Kuadrant component (`deploy/kubernetes/kuadrant`): rendered over the base, it
//! validates strictly, turns `[kubernetes] kuadrant` on, and its RBAC grants every request
//! the orchestrator makes of the API server while it follows Kuadrant's resources (the
//! requests a live run made of the Kubernetes API test server, judged here by the rules
//! RBAC applies), and nothing of Secrets.

use std::path::Path;

use serde::Deserialize;
use serde_yaml::Value;

use crate::deploy::render_and_validate_at;

/// The base with the component, rendered and validated.
pub(crate) fn rendered() -> Vec<Value> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    // kustomize takes only relative paths to other kustomizations.
    let up = pathdiff(tmp.path(), repo);
    std::fs::write(
        tmp.path().join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: dns-failover\n\
             resources:\n  - {up}/deploy/kubernetes\ncomponents:\n  - {up}/deploy/kubernetes/kuadrant\n"
        ),
    )
    .unwrap();
    let text = render_and_validate_at(tmp.path());
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap())
        .collect()
}

/// The relative path from `from` to `to` (both absolute).
fn pathdiff(from: &Path, to: &Path) -> String {
    let (f, t): (Vec<_>, Vec<_>) = (from.components().collect(), to.components().collect());
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let ups = std::iter::repeat_n("..".to_owned(), f.len() - common);
    let downs = t[common..]
        .iter()
        .map(|c| c.as_os_str().to_string_lossy().into_owned());
    ups.chain(downs).collect::<Vec<_>>().join("/")
}

/// One request as RBAC judges it: (API group, resource with subresource, namespace, verb).
fn attributes(request: &str) -> Option<(String, String, Option<String>, &'static str)> {
    let mut words = request.split_whitespace();
    let (method, path) = (words.next()?, words.next()?);
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match parts.as_slice() {
        ["api", "v1", rest @ ..] => (String::new(), rest),
        ["apis", group, _version, rest @ ..] => ((*group).to_owned(), rest),
        _ => return None,
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some((*ns).to_owned()), rest),
        _ => (None, rest),
    };
    let (resource, named) = match rest {
        [r] => ((*r).to_owned(), false),
        [r, _name] => ((*r).to_owned(), true),
        [r, _name, sub] => (format!("{r}/{sub}"), true),
        _ => return None,
    };
    let verb = match (method, named) {
        ("GET", true) => "get",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", _) => "delete",
        _ => return None,
    };
    Some((group, resource, namespace, verb))
}

/// Whether a rule (apiGroups, resources, verbs, resourceNames) of `role` allows it; names
/// are not known from a collection's path, so a rule limited by name allows named requests
/// only.
fn allows(role: &Value, group: &str, resource: &str, verb: &str, named: bool) -> bool {
    let has = |rule: &Value, key: &str, want: &str| {
        rule[key].as_sequence().is_some_and(|l| {
            l.iter()
                .any(|v| v.as_str() == Some(want) || v.as_str() == Some("*"))
        })
    };
    role["rules"]
        .as_sequence()
        .into_iter()
        .flatten()
        .any(|rule| {
            has(rule, "apiGroups", group)
                && has(rule, "resources", resource)
                && has(rule, "verbs", verb)
                && (rule["resourceNames"].is_null() || named)
        })
}

/// Fails naming every request of `requests` (as the test server logs them) that the
/// rendered RBAC does not allow the orchestrator's ServiceAccount: ClusterRoles bound by
/// ClusterRoleBindings anywhere, Roles only in their own namespace.
pub(crate) fn assert_rbac_allows(requests: &[String]) {
    assert_rbac_allows_with(requests, &[]);
}

/// The shipped template granting `secrets` of namespace `ns` (`probe-header-secrets.yaml`),
/// filled in as its comment says, one per Secret.
pub(crate) fn header_secret_role(ns: &str, secrets: &[&str]) -> Vec<Value> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let template =
        std::fs::read_to_string(repo.join("deploy/kubernetes/kuadrant/probe-header-secrets.yaml"))
            .unwrap();
    let mut docs = Vec::new();
    for secret in secrets {
        let text = template
            .replace("TEAM_NAMESPACE", ns)
            .replace("HEADER_SECRET", secret)
            .replace(
                "health-orchestrator-probe-headers",
                &format!("probe-headers-{secret}"),
            );
        docs.extend(
            serde_yaml::Deserializer::from_str(&text).map(|d| Value::deserialize(d).unwrap()),
        );
    }
    docs
}

/// [`assert_rbac_allows`] with `more` (Roles and bindings applied beside the manifests).
pub(crate) fn assert_rbac_allows_with(requests: &[String], more: &[Value]) {
    let mut docs = rendered();
    docs.extend(more.iter().cloned());
    let bound =
        |kind: &str, binding: &str| -> Vec<String> {
            docs.iter()
                .filter(|d| d["kind"] == binding)
                .filter(|d| d["roleRef"]["kind"] == kind)
                .filter(|d| {
                    d["subjects"].as_sequence().into_iter().flatten().any(|s| {
                        s["kind"] == "ServiceAccount" && s["name"] == "health-orchestrator"
                    })
                })
                .map(|d| d["roleRef"]["name"].as_str().unwrap().to_owned())
                .collect()
        };
    let (cluster, local) = (
        bound("ClusterRole", "ClusterRoleBinding"),
        bound("Role", "RoleBinding"),
    );
    let roles = |kind: &str, names: &[String]| -> Vec<&Value> {
        docs.iter()
            .filter(|d| d["kind"] == kind)
            .filter(|d| {
                names
                    .iter()
                    .any(|n| d["metadata"]["name"].as_str() == Some(n))
            })
            .collect()
    };
    let (cluster, local) = (roles("ClusterRole", &cluster), roles("Role", &local));
    let mut denied = std::collections::BTreeSet::new();
    for request in requests {
        let Some((group, resource, ns, verb)) = attributes(request) else {
            continue;
        };
        let named = verb != "list" && verb != "create";
        let in_ns = |r: &&&Value| {
            let of = r["metadata"]["namespace"]
                .as_str()
                .unwrap_or("dns-failover");
            Some(of) == ns.as_deref()
        };
        let ok = cluster
            .iter()
            .any(|r| allows(r, &group, &resource, verb, named))
            || local
                .iter()
                .filter(in_ns)
                .any(|r| allows(r, &group, &resource, verb, named));
        if !ok {
            denied.insert(format!("{verb} {group}/{resource} in {ns:?} ({request})"));
        }
    }
    assert!(
        denied.is_empty(),
        "not allowed by the rendered RBAC:\n{}",
        denied.iter().cloned().collect::<Vec<_>>().join("\n")
    );
}

/// The component renders over the base, validates strictly, turns Kuadrant on through the
/// environment layer, and grants nothing of Secrets and no wildcard.
#[test]
fn the_kuadrant_component_renders_validates_and_grants_no_secrets() {
    let docs = rendered();
    let container = docs
        .iter()
        .find(|d| d["kind"] == "StatefulSet")
        .map(|d| d["spec"]["template"]["spec"]["containers"][0].clone())
        .unwrap();
    let env = container["env"].as_sequence().unwrap();
    assert!(
        env.iter()
            .any(|e| e["name"] == "HO_KUBERNETES__KUADRANT" && e["value"] == "true"),
        "{env:?}"
    );
    let rules: Vec<&Value> = docs
        .iter()
        .filter(|d| d["kind"] == "ClusterRole" || d["kind"] == "Role")
        .flat_map(|d| d["rules"].as_sequence().unwrap())
        .collect();
    for rule in &rules {
        let strings = |k: &str| -> Vec<&str> {
            rule[k]
                .as_sequence()
                .unwrap()
                .iter()
                .filter_map(Value::as_str)
                .collect()
        };
        assert!(!strings("resources").contains(&"secrets"), "{rule:?}");
        for k in ["apiGroups", "resources", "verbs"] {
            assert!(!strings(k).contains(&"*"), "{rule:?}");
        }
    }
    let kuadrant = docs
        .iter()
        .find(|d| {
            d["kind"] == "ClusterRole" && d["metadata"]["name"] == "health-orchestrator-kuadrant"
        })
        .expect("the component's ClusterRole");
    for (resource, verb) in [
        ("dnsrecords", "patch"),
        ("dnsrecords/status", "patch"),
        ("gateways/status", "patch"),
    ] {
        let group = if resource.starts_with("gateways") {
            "gateway.networking.k8s.io"
        } else {
            "kuadrant.io"
        };
        assert!(
            allows(kuadrant, group, resource, verb, true),
            "{resource} {verb}"
        );
    }
}
