//! Every parse error of a load that fails, not only the first.
//!
//! Figment extracts the configuration in one serde pass, which stops at its first error: a
//! file with four bad endpoints took four runs to see them all. Here each element of each
//! layer's `endpoints` and `tenants` arrays is extracted alone, under its layer's metadata,
//! then the rest of the configuration without those arrays, in rounds that each take out
//! the value the last one refused, so that it too gives every error; each error reads as
//! figment's path words it when it is the only one (`FILE: endpoints[3].check.port: ...`).
//! An element of an array that a later layer replaces is reported too: it is an error in a
//! file the operator passed.

use figment::providers::{Format, Serialized, Toml};
use figment::value::{Dict, Value};
use figment::{Figment, Metadata, Profile, Provider};
use serde::Deserialize;

use super::arrays::Rest;
use super::sections::CUT;
use super::{builtin, environment, remove_at, Layer};
use crate::model::{Config, EndpointConfig, TenantConfig};

#[cfg(test)]
mod tests;

/// The load's parse errors, chained in order: each layer's element errors (`endpoints` in
/// element order, then `tenants`), then the rest's. `None` when a layer does not parse as
/// TOML, or nothing fails this way: figment's own error then says it.
pub(super) fn every_error(layers: &[Layer]) -> Option<figment::Error> {
    let mut errors = Vec::new();
    let mut rests = Vec::with_capacity(layers.len() + 1);
    for layer in layers {
        let (metadata, mut dict) = parsed(layer)?;
        errors.extend(element_errors(&metadata, &mut dict));
        rests.push(Rest { metadata, dict });
    }
    // `HO_ENDPOINTS='[...]'` and `HO_TENANTS` are arrays as a file's are: every bad element.
    let env = environment();
    let metadata = env.metadata();
    match env.data().map(|mut d| d.remove(&Profile::Default)) {
        Ok(Some(mut dict)) => {
            errors.extend(element_errors(&metadata, &mut dict));
            rests.push(Rest { metadata, dict });
        }
        Ok(None) => {}
        Err(mut e) => {
            e.metadata = Some(metadata);
            errors.push(e);
        }
    }
    errors.extend(rest_errors(rests));
    errors.into_iter().rev().reduce(|later, e| later.chain(e))
}

/// Every error of the rest of the configuration: serde stops at the first, so each round
/// takes the value it refused out of every layer (the built-in default then stands in for
/// it) and extracts again, until the rest extracts or an error cannot be taken out.
fn rest_errors(mut rests: Vec<Rest>) -> Vec<figment::Error> {
    let mut errors = Vec::new();
    // Serde reports one error per table at a time: a few rounds find them all.
    for _ in 0..64 {
        let rest = rests
            .iter()
            .fold(Figment::from(Serialized::defaults(builtin())), |fig, r| {
                fig.merge(r.clone())
            });
        let Err(e) = rest.extract::<Config>() else {
            break;
        };
        let mut taken_out = false;
        for e in e {
            for r in &mut rests {
                taken_out |= remove_from(&mut r.dict, &e.path);
            }
            errors.push(e);
        }
        if !taken_out {
            break;
        }
    }
    errors
}

/// Removes the key at `path` from `dict`; whether there was one.
fn remove_from(dict: &mut Dict, path: &[String]) -> bool {
    let mut value = Value::from(std::mem::take(dict));
    let removed = remove_at(&mut value, path, None);
    *dict = value.into_dict().unwrap_or_default();
    removed
}

/// A layer's metadata and top-level table as figment's TOML provider reads it.
fn parsed(layer: &Layer) -> Option<(Metadata, Dict)> {
    let provider = match layer {
        Layer::File(path) => Toml::file_exact(path),
        Layer::Translated(toml) => Toml::string(toml),
    };
    let dict = provider.data().ok()?.remove(&Profile::Default)?;
    Some((provider.metadata(), dict))
}

/// The errors of each element of `dict`'s arrays, which are taken out of it; a key of
/// [`CUT`] that is not an array stays, for the rest's extraction to report.
fn element_errors(metadata: &Metadata, dict: &mut Dict) -> Vec<figment::Error> {
    let mut errors = Vec::new();
    for key in CUT {
        let items = match dict.remove(key) {
            Some(Value::Array(_, items)) => items,
            Some(other) => {
                dict.insert(key.to_owned(), other);
                continue;
            }
            None => continue,
        };
        for (i, item) in items.into_iter().enumerate() {
            let alone = Rest {
                metadata: metadata.clone(),
                dict: Dict::from([(key.to_owned(), Value::from(vec![item]))]),
            };
            if let Err(e) = Figment::from(alone).extract::<Arrays>() {
                errors.extend(e.into_iter().map(|e| at_index(e, i)));
            }
        }
    }
    errors
}

/// The arrays alone, each element with its own type: an element's error is the one
/// extracting the whole configuration gives, with the path from the array's start.
#[derive(Deserialize)]
#[allow(dead_code)] // Read only for the errors deserializing gives.
struct Arrays {
    #[serde(default)]
    endpoints: Vec<EndpointConfig>,
    #[serde(default)]
    tenants: Vec<TenantConfig>,
}

/// `error`, found in an array of one element, at index `i` of its layer's array.
fn at_index(mut error: figment::Error, i: usize) -> figment::Error {
    if let Some(index) = error.path.get_mut(1) {
        *index = i.to_string();
    }
    error
}
