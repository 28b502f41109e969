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

/// One request as RBAC judges it: (API group, resource with subresource, namespace, verb,
/// the object's name when the path names one).
type Attributes = (String, String, Option<String>, &'static str, Option<String>);

/// `request` (as the test server logs it) as RBAC judges it.
fn attributes(request: &str) -> Option<Attributes> {
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
    let (resource, name) = match rest {
        [r] => ((*r).to_owned(), None),
        [r, name] => ((*r).to_owned(), Some(*name)),
        [r, name, sub] => (format!("{r}/{sub}"), Some(*name)),
        _ => return None,
    };
    let verb = match (method, name.is_some()) {
        ("GET", true) => "get",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", _) => "delete",
        _ => return None,
    };
    let name = name.map(|n| n.split('?').next().unwrap_or(n).to_owned());
    Some((group, resource, namespace, verb, name))
}

/// Whether a rule (apiGroups, resources, verbs, resourceNames) of `role` allows it; a rule
/// limited by name allows only requests naming one of its names (a collection's path
/// names none).
fn allows(role: &Value, group: &str, resource: &str, verb: &str, name: Option<&str>) -> bool {
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
                && (rule["resourceNames"].is_null()
                    || name.is_some_and(|n| has(rule, "resourceNames", n)))
        })
}

/// Fails naming every request of `requests` (as the test server logs them) that the
/// rendered RBAC does not allow the orchestrator's ServiceAccount: ClusterRoles bound by
/// ClusterRoleBindings anywhere, Roles only in their own namespace.
pub(crate) fn assert_rbac_allows(requests: &[String]) {
    assert_rbac_allows_with(requests, &[]);
}

/// The shipped template granting `secrets` of namespace `ns` (`probe-header-secrets.yaml`),
/// filled in as its comment says: the allowance's `header_secrets` as its TOML writes them.
pub(crate) fn header_secret_role(ns: &str, secrets: &[&str]) -> Vec<Value> {
    let list = toml::Value::from(secrets.to_vec()).to_string();
    header_secret_role_from(ns, &list)
}

/// The template with `header_secrets` (a TOML array, as the allowance writes it) pasted in.
fn header_secret_role_from(ns: &str, header_secrets: &str) -> Vec<Value> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let template =
        std::fs::read_to_string(repo.join("deploy/kubernetes/kuadrant/probe-header-secrets.yaml"))
            .unwrap();
    let text = template
        .replace("TEAM_NAMESPACE", ns)
        .replace("HEADER_SECRETS", header_secrets);
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap())
        .collect()
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
        let Some((group, resource, ns, verb, name)) = attributes(request) else {
            continue;
        };
        let name = name.as_deref();
        let in_ns = |r: &&&Value| {
            let of = r["metadata"]["namespace"]
                .as_str()
                .unwrap_or("dns-failover");
            Some(of) == ns.as_deref()
        };
        let ok = cluster
            .iter()
            .any(|r| allows(r, &group, &resource, verb, name))
            || local
                .iter()
                .filter(in_ns)
                .any(|r| allows(r, &group, &resource, verb, name));
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
            allows(kuadrant, group, resource, verb, Some("any")),
            "{resource} {verb}"
        );
    }
}

/// The header Secrets' Role rendered as its comment says from an allowance's
/// `header_secrets` (the value pasted as the config writes it) validates strictly, is bound
/// to the orchestrator's ServiceAccount in the team's namespace, and grants `get` on
/// exactly the listed Secrets: no other Secret, no list, no other verb.
#[test]
fn the_header_secrets_role_grants_get_on_exactly_the_allowances_secrets() {
    let config: toml::Table =
        "[[kubernetes.allow]]\nnamespace = \"team-a\"\ndomains = [\"team-a.io\"]\n\
         sinks = [\"dns\"]\nheader_secrets = [\"probe-headers\", \"api-token\"]\n"
            .parse()
            .unwrap();
    let allowance = &config["kubernetes"]["allow"][0];
    let listed = allowance["header_secrets"].to_string();
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let filled: String = header_secret_role_from("team-a", &listed)
        .iter()
        .map(|d| format!("---\n{}", serde_yaml::to_string(d).unwrap()))
        .collect();
    std::fs::write(tmp.path().join("role.yaml"), filled).unwrap();
    std::fs::write(
        tmp.path().join("kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - role.yaml\n",
    )
    .unwrap();
    let docs: Vec<Value> = serde_yaml::Deserializer::from_str(&render_and_validate_at(tmp.path()))
        .map(|d| Value::deserialize(d).unwrap())
        .collect();
    let role = docs.iter().find(|d| d["kind"] == "Role").unwrap();
    assert_eq!(role["metadata"]["namespace"], "team-a");
    let get = |verb: &str, path: &str| {
        let (group, resource, _, verb_of, name) = attributes(&format!("{verb} {path}")).unwrap();
        allows(role, &group, &resource, verb_of, name.as_deref())
    };
    let secrets = "/api/v1/namespaces/team-a/secrets";
    assert!(get("GET", &format!("{secrets}/probe-headers")));
    assert!(get("GET", &format!("{secrets}/api-token")));
    assert!(!get("GET", &format!("{secrets}/other-secret")));
    assert!(!get("GET", secrets), "listing Secrets");
    assert!(!get("PATCH", &format!("{secrets}/probe-headers")));
    let binding = docs.iter().find(|d| d["kind"] == "RoleBinding").unwrap();
    assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
    assert_eq!(binding["subjects"][0]["name"], "health-orchestrator");
}
