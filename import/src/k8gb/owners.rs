//! Ingresses a Gslb owns. k8gb makes an Ingress named like the Gslb of its embedded
//! `spec.ingress` and sets the Gslb as its controller (`ownerReferences`), so deleting the
//! Gslb, the last step of leaving k8gb, has Kubernetes' garbage collector delete the
//! Ingress: the application loses its Ingress, and the DNSFailover reading its addresses
//! finds none. Once the reference is gone k8gb keeps the Ingress's spec in step with the
//! Gslb until it is deleted, but never puts the reference back.

use crate::resource::{DNSFailover, EndpointSource};
use serde_json::{json, Value as Json};
use serde_yaml::Value;

use super::super::text;

/// A step for each Ingress a Gslb owns, or is known to own (an embedded-ingress Gslb's
/// Ingress not given), saying what deleting the Gslb does and what to run first.
/// Documents naming no namespace are in `default_namespace` (`--namespace`).
pub(super) fn steps(
    docs: &[Value],
    resources: &[DNSFailover],
    default_namespace: Option<&str>,
) -> Vec<String> {
    let mut steps = Vec::new();
    for doc in docs {
        let namespace = meta(doc, "namespace").or(default_namespace);
        let Some(name) = meta(doc, "name") else {
            continue;
        };
        match text(doc, "kind") {
            Some("Ingress") => {
                let owners = doc
                    .get("metadata")
                    .and_then(|m| m.get("ownerReferences"))
                    .and_then(Value::as_sequence)
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                for (index, owner) in owners.iter().enumerate() {
                    if text(owner, "kind") == Some("Gslb") {
                        let gslb = text(owner, "name").unwrap_or_default();
                        let patch = Patch {
                            index,
                            gslb,
                            uid: text(owner, "uid"),
                        };
                        steps.push(step(namespace, name, gslb, &patch, resources));
                    }
                }
            }
            Some("Gslb")
                if embeds_ingress(doc) && !given(docs, namespace, name, default_namespace) =>
            {
                let patch = Patch {
                    index: 0,
                    gslb: name,
                    uid: None,
                };
                steps.push(step(namespace, name, name, &patch, resources));
            }
            _ => {}
        }
    }
    steps
}

/// Which owner reference to remove: its index, and what the JSON patch `test`s there
/// first (the Gslb's uid when known, else its kind and name), so the command removes that
/// entry and keeps every other owner, or fails when the list has changed since the export.
struct Patch<'a> {
    index: usize,
    gslb: &'a str,
    uid: Option<&'a str>,
}

impl Patch<'_> {
    /// The `kubectl patch` argument.
    fn json(&self) -> String {
        let at = format!("/metadata/ownerReferences/{}", self.index);
        let test = |key: &str, value: &str| json!({"op": "test", "path": format!("{at}/{key}"), "value": value});
        let mut ops = match self.uid {
            Some(uid) => vec![test("uid", uid)],
            None => vec![test("kind", "Gslb"), test("name", self.gslb)],
        };
        ops.push(json!({"op": "remove", "path": at}));
        Json::Array(ops).to_string()
    }
}

fn step(
    namespace: Option<&str>,
    ingress: &str,
    gslb: &str,
    patch: &Patch,
    resources: &[DNSFailover],
) -> String {
    let ns = namespace.map(|n| format!(" -n {n}")).unwrap_or_default();
    let readers: Vec<String> = resources
        .iter()
        .filter(|r| namespace.is_none_or(|n| r.metadata.namespace.as_deref() == Some(n)))
        .filter(|r| {
            let source = |s: &EndpointSource| s.ingress.as_deref() == Some(ingress);
            r.spec.endpoints.iter().any(source)
        })
        .filter_map(|r| r.metadata.name.clone())
        .collect();
    let readers = match readers.as_slice() {
        [] => String::new(),
        names => format!(
            " while DNSFailover {} keeps publishing the addresses it last read from the Ingress (discovery never empties a name) and its check, healthy up to status 499, counts those 404s as up",
            names.join(", ")
        ),
    };
    let known = match patch.uid {
        Some(_) => "names it as its owner (ownerReferences)".to_owned(),
        None => format!("is owned by it (k8gb sets the ownerReference on the Ingress it makes of spec.ingress: kubectl get ingress {ingress}{ns} -o yaml shows it)"),
    };
    format!(
        "before deleting Gslb {gslb}: Ingress {ingress}{ns} {known}, so deleting the Gslb has Kubernetes' garbage collector delete the Ingress: its controller stops routing the application's hosts (404){readers}. First run: kubectl patch ingress {ingress}{ns} --type=json -p '{}' (or delete the Gslb with kubectl delete gslb {gslb}{ns} --cascade=orphan); k8gb does not put the reference back",
        patch.json()
    )
}

/// Whether a Gslb embeds the Ingress k8gb makes for it.
fn embeds_ingress(gslb: &Value) -> bool {
    gslb.get("spec")
        .and_then(|s| s.get("ingress"))
        .is_some_and(|i| i.get("rules").is_some())
}

/// Whether an Ingress `namespace/name` is among the documents.
fn given(docs: &[Value], namespace: Option<&str>, name: &str, default: Option<&str>) -> bool {
    docs.iter().any(|d| {
        text(d, "kind") == Some("Ingress")
            && meta(d, "name") == Some(name)
            && meta(d, "namespace").or(default) == namespace
    })
}

fn meta<'v>(doc: &'v Value, key: &str) -> Option<&'v str> {
    doc.get("metadata").and_then(|m| text(m, key))
}
