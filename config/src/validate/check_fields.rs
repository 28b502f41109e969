//! Which check kinds read each field of a check table, read from the `x-kinds` tag that
//! every field of [`CheckOverrides`] carries in its schema. The tag beside the field is the
//! one list: a field an endpoint sets for a kind that ignores it is refused from it, and the
//! tests refuse a field without a tag or a tag naming no kind, so adding a field or a kind
//! cannot leave a hand-kept list behind.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde_json::Value;

use crate::model::{CheckKind, CheckOverrides};

/// The kinds that read one field of a check table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readers {
    /// Every kind (`"all"`): kind, port, timing, thresholds, damping.
    All,
    /// Only these kinds, by their names in the config.
    Kinds(Vec<String>),
}

impl Readers {
    fn reads(&self, kind: &str) -> bool {
        match self {
            Readers::All => true,
            Readers::Kinds(kinds) => kinds.iter().any(|k| k == kind),
        }
    }
}

/// Field name -> the kinds that read it, for every field of a check table.
pub fn check_fields() -> &'static BTreeMap<String, Readers> {
    static FIELDS: OnceLock<BTreeMap<String, Readers>> = OnceLock::new();
    FIELDS.get_or_init(|| {
        let schema = schemars::schema_for!(CheckOverrides);
        let properties = schema
            .as_value()
            .get("properties")
            .and_then(Value::as_object)
            .expect("a check table's schema lists its fields");
        properties
            .iter()
            .map(|(name, field)| (name.clone(), readers(&field["x-kinds"])))
            .collect()
    })
}

/// A field's `x-kinds` tag; a field without one is read by every kind, so a forgotten tag
/// never refuses a valid config (the tests refuse the forgotten tag instead).
fn readers(tag: &Value) -> Readers {
    match tag.as_array() {
        Some(kinds) => Readers::Kinds(
            kinds
                .iter()
                .filter_map(|k| k.as_str().map(str::to_owned))
                .collect(),
        ),
        None => Readers::All,
    }
}

/// A kind's name as the config writes it (`"https"`).
pub fn kind_name(kind: CheckKind) -> String {
    match serde_json::to_value(kind) {
        Ok(Value::String(name)) => name,
        _ => format!("{kind:?}").to_lowercase(),
    }
}

/// The fields `own` sets that `kind` does not read, by name.
pub(super) fn unused_by(own: &CheckOverrides, kind: CheckKind) -> Vec<String> {
    let kind = kind_name(kind);
    let set = match serde_json::to_value(own) {
        Ok(Value::Object(set)) => set,
        _ => return Vec::new(),
    };
    let fields = check_fields();
    set.keys()
        .filter(|name| fields.get(*name).is_some_and(|r| !r.reads(&kind)))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind the config accepts, from the schema of [`CheckKind`] (one documented
    /// `const` per variant).
    fn kinds() -> Vec<String> {
        let schema = schemars::schema_for!(CheckKind);
        let mut names: Vec<String> = schema.as_value()["oneOf"]
            .as_array()
            .expect("documented variants are a oneOf")
            .iter()
            .filter_map(|v| v["const"].as_str().map(str::to_owned))
            .collect();
        names.sort();
        names
    }

    #[test]
    fn every_field_names_the_kinds_that_read_it() {
        let schema = schemars::schema_for!(CheckOverrides);
        let kinds = kinds();
        assert_eq!(kinds, ["http", "https", "tcp"]);
        for (name, field) in schema.as_value()["properties"].as_object().unwrap() {
            let tag = &field["x-kinds"];
            if tag == "all" {
                continue;
            }
            let listed = tag
                .as_array()
                .unwrap_or_else(|| panic!("check field `{name}` has no x-kinds tag: {field}"));
            assert!(!listed.is_empty(), "`{name}`: x-kinds lists no kind");
            for kind in listed {
                assert!(
                    kinds.iter().any(|k| kind == k),
                    "`{name}`: x-kinds names {kind}, which is no check kind"
                );
            }
        }
    }

    #[test]
    fn fields_a_kind_ignores_are_named() {
        let own = CheckOverrides {
            path: Some("/x".into()),
            insecure: Some(true),
            port: Some(1),
            ..CheckOverrides::default()
        };
        assert_eq!(unused_by(&own, CheckKind::Tcp), ["insecure", "path"]);
        assert_eq!(unused_by(&own, CheckKind::Http), ["insecure"]);
        assert!(unused_by(&own, CheckKind::Https).is_empty());
        assert_eq!(kind_name(CheckKind::Https), "https");
    }
}
