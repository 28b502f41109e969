//! YAML documents as `kubectl` writes them, for `import` and `check-config --resource`:
//! any number per file, and a list standing for its items. `kubectl get gslb,ingress -o
//! yaml` prints one `kind: List` document; the API's own lists (`GslbList`, `kubectl get
//! --raw`) name the kind once, on the list, and their items not at all. Lists nest (a
//! `kind: List` in one document of a multi-document file, a list among another's items).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_yaml::Value;

/// A file that could not be read as YAML documents.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be read.
    #[error("reading {}", file.display())]
    Read {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A document is not YAML.
    #[error("{} is not YAML", file.display())]
    Yaml {
        file: PathBuf,
        #[source]
        source: serde_yaml::Error,
    },
    /// A list whose `items` is not a sequence.
    #[error("{}: a {kind} whose items is not a list of objects", file.display())]
    Items { file: PathBuf, kind: String },
}

/// One object of a file: a document, or an item of a list in one.
pub struct Document {
    /// The file it was read from.
    pub file: PathBuf,
    /// The object.
    pub value: Value,
}

/// Every object of `files`, lists replaced by their items, empty documents left out.
pub fn read(files: &[PathBuf]) -> Result<Vec<Document>, ReadError> {
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).map_err(|source| ReadError::Read {
            file: file.clone(),
            source,
        })?;
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let value = Value::deserialize(doc).map_err(|source| ReadError::Yaml {
                file: file.clone(),
                source,
            })?;
            let mut values = Vec::new();
            flatten(value, file, &mut values)?;
            out.extend(values.into_iter().map(|value| Document {
                file: file.clone(),
                value,
            }));
        }
    }
    Ok(out)
}

/// `value` into `out`: itself, or when it is a list its items (each flattened in turn);
/// nothing for an empty document.
fn flatten(value: Value, file: &Path, out: &mut Vec<Value>) -> Result<(), ReadError> {
    if value.is_null() {
        return Ok(());
    }
    let Some(kind) = list_kind(&value) else {
        out.push(value);
        return Ok(());
    };
    let items_error = || ReadError::Items {
        file: file.to_owned(),
        kind: kind.to_owned(),
    };
    let item_kind = kind.strip_suffix("List").filter(|k| !k.is_empty());
    let api_version = value.get("apiVersion").cloned();
    let items = match value.get("items") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Sequence(items)) => items.clone(),
        Some(_) => return Err(items_error()),
    };
    for mut item in items {
        let Some(map) = item.as_mapping_mut() else {
            return Err(items_error());
        };
        // An item of a typed list (`GslbList`) names neither its kind nor its version.
        if let (Some(kind), None) = (item_kind, map.get("kind")) {
            map.insert("kind".into(), kind.into());
            if let Some(version) = &api_version {
                map.entry("apiVersion".into()).or_insert(version.clone());
            }
        }
        flatten(item, file, out)?;
    }
    Ok(())
}

/// The kind of a list document: `List`, or a kind ending in `List` (the API's lists).
fn list_kind(value: &Value) -> Option<&str> {
    let kind = value.get("kind")?.as_str()?;
    kind.ends_with("List").then_some(kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flat(yaml: &str) -> Vec<Value> {
        let mut out = Vec::new();
        flatten(
            serde_yaml::from_str(yaml).unwrap(),
            Path::new("f"),
            &mut out,
        )
        .unwrap();
        out
    }

    #[test]
    fn lists_stand_for_their_items_nested_and_typed() {
        let out = flat(
            "apiVersion: v1\nkind: List\nitems:\n- {kind: Gslb, metadata: {name: a}}\n\
             - apiVersion: v1\n  kind: List\n  items: [{kind: Ingress, metadata: {name: b}}]\n\
             - apiVersion: k8gb.io/v1beta1\n  kind: GslbList\n  items: [{metadata: {name: c}}]\n",
        );
        let names: Vec<(&str, &str)> = out
            .iter()
            .map(|v| {
                (
                    v["kind"].as_str().unwrap(),
                    v["metadata"]["name"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(names, [("Gslb", "a"), ("Ingress", "b"), ("Gslb", "c")]);
        assert_eq!(out[2]["apiVersion"], "k8gb.io/v1beta1");
    }

    #[test]
    fn an_empty_list_is_nothing_and_a_broken_one_an_error() {
        assert!(flat("apiVersion: v1\nkind: List\nitems: []\n").is_empty());
        let mut out = Vec::new();
        let broken = serde_yaml::from_str("kind: List\nitems: 3\n").unwrap();
        let e = flatten(broken, Path::new("f.yaml"), &mut out).unwrap_err();
        assert_eq!(
            e.to_string(),
            "f.yaml: a List whose items is not a list of objects"
        );
    }
}
