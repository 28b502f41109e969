//! Which layer gave a value: a file or an `HO_*` variable, named as parse errors name it,
//! so that a validation error (`max_in_flight` of 0, a port of 0) says where to fix it too.
//!
//! Figment tags every value with the provider that gave it. Validation works on the typed
//! configuration, where that is gone, so each error's path is looked up in the layered
//! figment: the value at the path says which layer gave it. A key a table lacks (a tenant
//! without `sinks`) is the table's; a key an endpoint's check lacks is not named, as it may
//! be inherited from `defaults.check`, nor is a built-in default.

use std::fmt;

use figment::value::{Tag, Value};
use figment::{Figment, Metadata};

use super::env_variable;
use crate::model::Config;
use crate::validate::ValidationErrors;

/// Validation errors, each with the file or variable its value came from when one did.
#[derive(Debug)]
pub struct InvalidConfig {
    errors: ValidationErrors,
    sources: Vec<Option<String>>,
}

impl InvalidConfig {
    /// `errors` of `config`, each located in `layered`, the figment `config` was extracted
    /// from.
    pub(super) fn locate(errors: ValidationErrors, layered: &Figment, config: &Config) -> Self {
        let sources = errors
            .0
            .iter()
            .map(|e| source_of(layered, config, &keys(&e.path)))
            .collect();
        Self { errors, sources }.inherited_once()
    }

    /// An endpoint's check refused for a value it does not set, for the reason
    /// `defaults.check` is refused, is that one error: said once, at `defaults.check`, with
    /// the checks that inherit it (`interval = "0s"` there was a line for every endpoint with
    /// a check table of its own, none naming a file).
    fn inherited_once(self) -> Self {
        let Self { errors, sources } = self;
        let mut heirs: Vec<Vec<&str>> = vec![Vec::new(); errors.0.len()];
        let mut kept = vec![true; errors.0.len()];
        for (i, e) in errors.0.iter().enumerate() {
            let Some((check, key)) = endpoint_check_key(&e.path) else {
                continue;
            };
            let at_defaults = (errors.0.iter()).position(|d| {
                d.reason == e.reason && d.path.strip_prefix("defaults.check") == Some(key)
            });
            if let (None, Some(d)) = (&sources[i], at_defaults) {
                heirs[d].push(check);
                kept[i] = false;
            }
        }
        let heirs: Vec<String> = heirs.iter().map(|h| h.join(", ")).collect();
        let (errors, sources) = (errors.0.into_iter().zip(sources).enumerate())
            .filter(|(i, _)| kept[*i])
            .map(|(i, (mut e, source))| {
                if !heirs[i].is_empty() {
                    e.reason = format!("{} (inherited by {})", e.reason, heirs[i]);
                }
                (e, source)
            })
            .unzip();
        Self {
            errors: ValidationErrors(errors),
            sources,
        }
    }

    /// The errors, without their sources.
    pub fn errors(&self) -> &ValidationErrors {
        &self.errors
    }
}

impl fmt::Display for InvalidConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (e, source)) in self.errors.0.iter().zip(&self.sources).enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            if let Some(source) = source {
                write!(f, "{source}: ")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

/// A file as the operator gave it, or the `HO_*` variable that holds the value at `path`.
pub(super) fn source_name(metadata: &Metadata, path: &[String]) -> String {
    match &metadata.source {
        Some(figment::Source::File(file)) => file.display().to_string(),
        Some(other) => other.to_string(),
        None if metadata.name.ends_with("environment variable(s)") => env_variable(path)
            .map_or_else(|| metadata.name.to_string(), |v| format!("environment {v}")),
        None => metadata.name.to_string(),
    }
}

/// A validation path's keys as figment's: `tenants[1].sinks[0]` is `tenants.1.sinks.0`, and
/// `networks."10.1.0.0/16"` one key.
fn keys(path: &str) -> Vec<String> {
    let (mut keys, mut key, mut quoted) = (Vec::new(), String::new(), false);
    for c in path.chars() {
        match c {
            '"' => quoted = !quoted,
            '.' | '[' | ']' if !quoted => {
                if !key.is_empty() {
                    keys.push(std::mem::take(&mut key));
                }
            }
            c => key.push(c),
        }
    }
    if !key.is_empty() {
        keys.push(key);
    }
    keys
}

/// The layer that gave the value at `path`, or (when it is missing) the top-level table or
/// array element that holds it; `None` when that is the built-in layer. An element the
/// figment holds only as its layer's empty array (see [`super::arrays`]) is read from
/// `config`, under the array's layer.
fn source_of(layered: &Figment, config: &Config, path: &[String]) -> Option<String> {
    let mut at = layered.find_value(path.first()?).ok()?;
    let mut tag = at.tag();
    for (depth, key) in path.iter().enumerate().skip(1) {
        let next = match at {
            Value::Dict(_, mut dict) => dict.remove(key),
            Value::Array(_, mut items) => key
                .parse::<usize>()
                .ok()
                .filter(|&i| i < items.len())
                .map(|i| items.swap_remove(i))
                .or_else(|| element(config, &path[0], key)),
            _ => None,
        };
        match next {
            Some(Value::Empty(..)) | None if inherits(&path[..depth]) => return None,
            Some(Value::Empty(..)) | None => break,
            Some(next) => {
                if next.tag() != Tag::Default {
                    tag = next.tag();
                }
                at = next;
            }
        }
    }
    let metadata = layered.get_metadata(tag)?;
    (metadata.name != std::any::type_name::<Config>()).then(|| source_name(metadata, path))
}

/// An endpoint's check and the key below it: `endpoints[1].check.rise` is
/// (`endpoints[1].check`, `.rise`), `endpoints[0].checks[2].port` (`endpoints[0].checks[2]`,
/// `.port`).
fn endpoint_check_key(path: &str) -> Option<(&str, &str)> {
    let element = "endpoints[".len() + path.strip_prefix("endpoints[")?.find(']')? + 1;
    let after = &path[element..];
    let check = match after.strip_prefix(".checks[") {
        Some(rest) => ".checks[".len() + rest.find(']')? + 1,
        None if after.starts_with(".check.") => ".check".len(),
        None => return None,
    };
    let (check, key) = path.split_at(element + check);
    key.starts_with('.').then_some((check, key))
}

/// Whether a key missing below `parent` may be inherited: an endpoint's checks take what
/// they do not set from `defaults.check`.
fn inherits(parent: &[String]) -> bool {
    parent.iter().any(|key| key == "check" || key == "checks")
}

/// Element `index` of `config`'s `array` as a value; a key it does not set is absent or
/// empty.
fn element(config: &Config, array: &str, index: &str) -> Option<Value> {
    let i: usize = index.parse().ok()?;
    match array {
        "endpoints" => Value::serialize(config.endpoints.get(i)?).ok(),
        "tenants" => Value::serialize(config.tenants.get(i)?).ok(),
        _ => None,
    }
}
