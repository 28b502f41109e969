//! Kuadrant's documents read once, at the edge (the files `import` is given, the objects
//! ho-kube watches), into their types ([`super::objects`]). A document that does not read
//! is not dropped: it is [`Malformed`], naming the object, the field and why, and the
//! translation refuses it as it refuses any other bad object of its kind (a record keeps
//! its last accepted answer, a policy's records keep theirs, a probe refuses the records
//! naming its address), so a bad edit never withdraws what was accepted before.

use serde::de::DeserializeOwned;
use serde_yaml::Value;

use super::objects::{DnsHealthCheckProbe, DnsPolicy, DnsRecord, Gateway};

/// The kinds the translation reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// `DNSRecord`.
    Record,
    /// `DNSPolicy`.
    Policy,
    /// `DNSHealthCheckProbe`.
    Probe,
    /// Gateway API's `Gateway`.
    Gateway,
}

impl Kind {
    /// The kind as Kubernetes spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Record => "DNSRecord",
            Kind::Policy => "DNSPolicy",
            Kind::Probe => "DNSHealthCheckProbe",
            Kind::Gateway => "Gateway",
        }
    }

    fn of(kind: &str) -> Option<Kind> {
        [Kind::Record, Kind::Policy, Kind::Probe, Kind::Gateway]
            .into_iter()
            .find(|k| k.as_str() == kind)
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which object: its kind, namespace (none for a file given to `import`) and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    /// Its kind.
    pub kind: Kind,
    /// Its namespace, when it has one.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind, self.name)
    }
}

/// A document of a kind the translation reads whose field does not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{object}: {field}: {why}")]
pub struct Malformed {
    /// The object.
    pub object: ObjectKey,
    /// The field, as a path from the document's top (`spec.endpoints[0].recordTTL`).
    pub field: String,
    /// What was wrong with it.
    pub why: String,
}

/// One of Kuadrant's objects, read.
#[derive(Debug, Clone)]
pub enum Object {
    /// A DNSRecord.
    Record(DnsRecord),
    /// A DNSPolicy (boxed: its two shapes make it the largest).
    Policy(Box<DnsPolicy>),
    /// A DNSHealthCheckProbe.
    Probe(DnsHealthCheckProbe),
    /// A Gateway.
    Gateway(Gateway),
}

/// One document as given: of a kind the translation reads (read or malformed), or of
/// another kind (`kind` as written, when it is a string).
#[derive(Debug, Clone)]
pub struct Document {
    read: Read,
    /// The document as written: the translation notes its keys without an equivalent.
    raw: Value,
}

#[derive(Debug, Clone)]
enum Read {
    Object(Box<Object>),
    Malformed(Malformed),
    Other(Option<String>),
}

impl Document {
    /// A document as the API server holds it (JSON).
    pub fn from_json(doc: &serde_json::Value) -> Document {
        // A JSON value always is a YAML one (both are trees of maps, lists and scalars).
        let raw = serde_yaml::to_value(doc).unwrap_or(Value::Null);
        Document::read(raw)
    }

    /// A document as `import` reads it from a file.
    pub fn read(raw: Value) -> Document {
        let read = match raw.get("kind").and_then(Value::as_str) {
            Some(kind) => match Kind::of(kind) {
                Some(kind) => match typed(kind, &raw) {
                    Ok(object) => Read::Object(Box::new(object)),
                    Err(malformed) => Read::Malformed(malformed),
                },
                None => Read::Other(Some(kind.to_owned())),
            },
            None => Read::Other(None),
        };
        Document { read, raw }
    }

    /// The object, or why it does not read; `None` for a document of another kind.
    pub fn object(&self) -> Option<Result<&Object, &Malformed>> {
        match &self.read {
            Read::Object(o) => Some(Ok(o)),
            Read::Malformed(m) => Some(Err(m)),
            Read::Other(_) => None,
        }
    }

    /// Its kind, when the translation reads it.
    pub fn kind(&self) -> Option<Kind> {
        match &self.read {
            Read::Object(o) => Some(o.kind()),
            Read::Malformed(m) => Some(m.object.kind),
            Read::Other(_) => None,
        }
    }

    /// The kind of a document the translation does not read, as written.
    pub fn other_kind(&self) -> Option<Option<&str>> {
        match &self.read {
            Read::Other(kind) => Some(kind.as_deref()),
            _ => None,
        }
    }

    /// Its name: `metadata.name` (or the RFCs' top-level `name`), as far as it reads.
    pub fn name(&self) -> Option<&str> {
        text_at(&self.raw, &["metadata", "name"]).or_else(|| text_at(&self.raw, &["name"]))
    }

    /// The Gateway a DNSPolicy's `targetRef` names, as far as it reads (a policy that does
    /// not read still governs its Gateway's records, which keep their last accepted answer).
    pub fn policy_target(&self) -> Option<&str> {
        match self.kind() {
            Some(Kind::Policy) => self.text(&["spec", "targetRef", "name"]),
            _ => None,
        }
    }

    /// The document as written.
    pub(super) fn raw(&self) -> &Value {
        &self.raw
    }

    /// A string at `path` of a document, as far as it reads: what a malformed object is
    /// still known by (its name, a policy's target, a probe's address).
    pub(super) fn text(&self, path: &[&str]) -> Option<&str> {
        text_at(&self.raw, path)
    }
}

impl Object {
    /// Its kind.
    pub fn kind(&self) -> Kind {
        match self {
            Object::Record(_) => Kind::Record,
            Object::Policy(_) => Kind::Policy,
            Object::Probe(_) => Kind::Probe,
            Object::Gateway(_) => Kind::Gateway,
        }
    }
}

fn text_at<'a>(doc: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter()
        .try_fold(doc, |v, key| v.get(*key))
        .and_then(Value::as_str)
}

/// `raw` read as a `kind`, or which field does not read and why.
fn typed(kind: Kind, raw: &Value) -> Result<Object, Malformed> {
    Ok(match kind {
        Kind::Record => Object::Record(field_typed(kind, raw)?),
        Kind::Policy => Object::Policy(Box::new(field_typed(kind, raw)?)),
        Kind::Probe => Object::Probe(field_typed(kind, raw)?),
        Kind::Gateway => Object::Gateway(field_typed(kind, raw)?),
    })
}

fn field_typed<T: DeserializeOwned>(kind: Kind, raw: &Value) -> Result<T, Malformed> {
    serde_path_to_error::deserialize(raw).map_err(|e| {
        let name = text_at(raw, &["metadata", "name"])
            .or_else(|| text_at(raw, &["name"]))
            .unwrap_or("(unnamed)");
        Malformed {
            object: ObjectKey {
                kind,
                namespace: text_at(raw, &["metadata", "namespace"]).map(str::to_owned),
                name: name.to_owned(),
            },
            field: e.path().to_string(),
            why: e.into_inner().to_string(),
        }
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde::Deserialize;

    use super::super::{convert, Mode};
    use super::*;

    /// Every document of Kuadrant's own examples (and their host-name variants) reads into
    /// its type: the types are no stricter than Kuadrant's CRDs.
    #[test]
    fn kuadrants_examples_read_into_their_types() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/kuadrant");
        let mut files = vec![dir.clone()];
        let mut read = 0;
        while let Some(path) = files.pop() {
            if path.is_dir() {
                files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
                continue;
            }
            if path.extension().is_none_or(|e| e != "yaml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for doc in serde_yaml::Deserializer::from_str(&text) {
                let doc = Document::read(Value::deserialize(doc).unwrap());
                if let Some(Err(malformed)) = doc.object() {
                    panic!("{}: {malformed}", path.display());
                }
                read += usize::from(doc.kind().is_some());
            }
        }
        assert!(read >= 30, "only {read} documents of Kuadrant's kinds");
    }

    /// `import` refuses a document whose field has the wrong type, naming the object and
    /// the field, where it read past it before (the record published as if untyped).
    #[test]
    fn import_names_the_field_that_does_not_read() {
        let record = |ttl: &str| -> Value {
            serde_yaml::from_str(&format!(
                "kind: DNSRecord\nmetadata: {{name: api}}\nspec:\n  rootHost: api.example.com\n  endpoints:\n  - {{dnsName: api.example.com, recordType: A, recordTTL: {ttl}, targets: [192.0.2.1]}}\n"
            ))
            .unwrap()
        };
        assert!(convert(&[record("60")], Mode::Import).is_ok());
        let e = convert(&[record("\"60s\"")], Mode::Import)
            .err()
            .expect("refused")
            .to_string();
        assert_eq!(
            e,
            "DNSRecord api: spec.endpoints[0].recordTTL: invalid type: string \"60s\", expected i64"
        );
    }
}
