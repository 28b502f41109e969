//! A `resourceRef` by label selector (`matchLabels`, `matchExpressions`), resolved as k8gb
//! resolves it: the objects of the referenced kind in the Gslb's own namespace whose labels
//! match, of which there must be exactly one ("exactly 1 Ingress resource expected but 2
//! were found"). Here the objects are the documents given.

use std::collections::BTreeMap;

use serde_yaml::Value;

use super::super::text;
use super::target::Documents;

/// Why a selector names no one object among the documents.
#[derive(Debug, thiserror::Error)]
pub(super) enum SelectError {
    /// No object of the kind carries the labels.
    #[error("{at}: resourceRef selects its {kind} by labels ({selector}), and no {kind} given in namespace {namespace} carries them{given}: pass the {kind} it selects (kubectl get {lower} -n {namespace} -l '{selector}' -o yaml)", lower = kind.to_lowercase())]
    None {
        at: String,
        kind: String,
        namespace: String,
        selector: String,
        /// The objects of that kind given, with their labels (empty when none was).
        given: String,
    },
    /// Several objects carry them (each named with its labels).
    #[error("{at}: resourceRef selects its {kind} by labels ({selector}), which {count} {kind} objects carry ({names}); k8gb refuses that too (it expects exactly one): give the one it means a label of its own, or name it in resourceRef.name", count = names.len(), names = names.join(", "))]
    Several {
        at: String,
        kind: String,
        selector: String,
        names: Vec<String>,
    },
    /// An expression Kubernetes would refuse.
    #[error("{at}: resourceRef.matchExpressions[{index}]: {problem}")]
    Expression {
        at: String,
        index: usize,
        problem: String,
    },
}

/// One requirement of a label selector.
enum Requirement {
    Equals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|l| !vs.contains(l)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        }
    }

    /// As `kubectl -l` writes it.
    fn kubectl(&self) -> String {
        match self {
            Requirement::Equals(k, v) => format!("{k}={v}"),
            Requirement::In(k, vs) => format!("{k} in ({})", vs.join(",")),
            Requirement::NotIn(k, vs) => format!("{k} notin ({})", vs.join(",")),
            Requirement::Exists(k) => k.clone(),
            Requirement::DoesNotExist(k) => format!("!{k}"),
        }
    }
}

/// The name of the one `kind` in `namespace` among `docs` that `reference`'s selector
/// matches.
pub(super) fn select(
    reference: &Value,
    kind: &str,
    namespace: &str,
    docs: &Documents,
    at: &str,
) -> Result<String, SelectError> {
    let requirements = requirements(reference, at)?;
    let selector: Vec<String> = requirements.iter().map(Requirement::kubectl).collect();
    let selector = selector.join(",");
    let candidates: Vec<(&str, BTreeMap<String, String>)> = docs
        .of_kind(kind, namespace)
        .filter_map(|d| Some((d.get("metadata").and_then(|m| text(m, "name"))?, labels(d))))
        .collect();
    let matching: Vec<&(&str, BTreeMap<String, String>)> = candidates
        .iter()
        .filter(|(_, l)| requirements.iter().all(|r| r.matches(l)))
        .collect();
    match matching.as_slice() {
        [(one, _)] => Ok((*one).to_owned()),
        [] => Err(SelectError::None {
            at: at.to_owned(),
            kind: kind.to_owned(),
            namespace: namespace.to_owned(),
            selector,
            given: given(&candidates),
        }),
        _ => Err(SelectError::Several {
            at: at.to_owned(),
            kind: kind.to_owned(),
            selector,
            names: matching.iter().map(|(n, l)| labelled(n, l)).collect(),
        }),
    }
}

/// `name [k=v,...]`: an object as a refusal names it, with the labels that tell it apart.
fn labelled(name: &str, labels: &BTreeMap<String, String>) -> String {
    let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{name} [{}]", labels.join(","))
}

/// The objects given, each with its labels, as the refusal lists them.
fn given(candidates: &[(&str, BTreeMap<String, String>)]) -> String {
    if candidates.is_empty() {
        return String::new();
    }
    let each: Vec<String> = candidates.iter().map(|(n, l)| labelled(n, l)).collect();
    format!(" (given: {})", each.join(", "))
}

/// The selector's requirements: `matchLabels` as equalities, then `matchExpressions`.
fn requirements(reference: &Value, at: &str) -> Result<Vec<Requirement>, SelectError> {
    let mut out: Vec<Requirement> = reference
        .get("matchLabels")
        .and_then(Value::as_mapping)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some(Requirement::Equals(scalar(k)?, scalar(v)?)))
        .collect();
    let expressions = reference
        .get("matchExpressions")
        .and_then(Value::as_sequence)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (index, expression) in expressions.iter().enumerate() {
        let problem = |problem: &str| SelectError::Expression {
            at: at.to_owned(),
            index,
            problem: problem.to_owned(),
        };
        let key = text(expression, "key")
            .ok_or_else(|| problem("no key"))?
            .to_owned();
        let values: Vec<String> = expression
            .get("values")
            .and_then(Value::as_sequence)
            .into_iter()
            .flatten()
            .filter_map(scalar)
            .collect();
        let requirement = match (text(expression, "operator"), values.is_empty()) {
            (Some("In"), false) => Requirement::In(key, values),
            (Some("NotIn"), false) => Requirement::NotIn(key, values),
            (Some("Exists"), true) => Requirement::Exists(key),
            (Some("DoesNotExist"), true) => Requirement::DoesNotExist(key),
            (Some("In" | "NotIn"), true) => return Err(problem("In and NotIn need values")),
            (Some("Exists" | "DoesNotExist"), false) => {
                return Err(problem("Exists and DoesNotExist take no values"))
            }
            (other, _) => {
                return Err(problem(&format!(
                "operator {other:?}: Kubernetes' operators are In, NotIn, Exists and DoesNotExist"
            )))
            }
        };
        out.push(requirement);
    }
    Ok(out)
}

/// A document's `metadata.labels`.
fn labels(doc: &Value) -> BTreeMap<String, String> {
    doc.get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_mapping)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((scalar(k)?, scalar(v)?)))
        .collect()
}

/// A label key or value as text (YAML may read `version: 2` as a number).
fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}
