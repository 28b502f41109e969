//! The large arrays, `[[endpoints]]` and `[[tenants]]`, read from each layer's TOML straight
//! into the typed model; figment layers only the rest of the configuration.
//!
//! Figment holds a configuration as a tree of dynamic values (a dictionary per endpoint)
//! and copies it to extract the typed one: at 100,000 endpoints that tree, its growth and its
//! copies made most of a 433 MiB heap peak, at every start and reload, for a 22 MiB plan.
//! Read with serde from the TOML text, element by element ([`super::sections`]), the arrays
//! never exist as such a tree, nor as the `toml` crate's tree of the whole document.
//!
//! The result is the one figment's path gives, by construction: figment's merge replaces an
//! array by a later layer's (it merges only tables), so the last layer that gives an array
//! wins here too, and whatever this path does not take on sends the load back to figment's
//! path: a layer that does not parse or whose array does not fit the model, an `HO_*`
//! variable under `endpoints` or `tenants`, any error in the rest. Every error is therefore
//! figment's, naming the file and the key path (`endpoints[3].check.port`), each element's
//! found alone ([`super::every_error`]), with what validating the rest finds besides unknown
//! keys.

use std::fmt;

use figment::providers::{Format, Serialized, Toml};
use figment::value::{Dict, Map, Value};
use figment::{Figment, Metadata, Profile, Provider};
use serde::de::{Deserialize, DeserializeOwned, Deserializer, MapAccess, Visitor};

use super::sections::{Sections, CUT};
use super::{builtin, environment, Layer};
use crate::model::{Config, EndpointConfig, TenantConfig};

/// The layered configuration and the figment of its rest, or `None` when figment's path
/// must load it (see the module documentation for when). In that figment a layer that gives
/// an array gives an empty one, so that it tells which layer gave the array.
pub(crate) fn load(layers: &[Layer]) -> Option<(Config, Figment)> {
    if environment_sets_an_array() {
        return None;
    }
    let mut fig = Figment::from(Serialized::defaults(builtin()));
    let (mut endpoints, mut tenants) = (None, None);
    for layer in layers {
        let (split, metadata) = match layer {
            Layer::File(path) => (
                split(&std::fs::read_to_string(path).ok()?)?,
                Toml::file_exact(path).metadata(),
            ),
            Layer::Translated(toml) => (split(toml)?, Toml::string(toml).metadata()),
        };
        let mut rest = split.rest;
        for (key, given) in CUT
            .into_iter()
            .zip([split.endpoints.is_some(), split.tenants.is_some()])
        {
            if given {
                rest.insert(key.to_owned(), Value::from(Vec::<Value>::new()));
            }
        }
        endpoints = split.endpoints.or(endpoints);
        tenants = split.tenants.or(tenants);
        fig = fig.merge(Rest {
            metadata,
            dict: rest,
        });
    }
    let fig = fig.merge(environment());
    let mut config: Config = fig.extract().ok()?;
    if let Some(endpoints) = endpoints {
        config.endpoints = endpoints;
    }
    if let Some(tenants) = tenants {
        config.tenants = tenants;
    }
    Some((config, fig))
}

/// Whether an `HO_*` variable names a key under one of [`CUT`]: figment then merges it
/// with the files' array (`HO_ENDPOINTS='[...]'` replaces it), so figment's path loads it.
fn environment_sets_an_array() -> bool {
    environment().iter().any(|(key, _)| {
        let top = key.split('.').next().unwrap_or_default();
        CUT.iter().any(|a| top.eq_ignore_ascii_case(a))
    })
}

/// A layer's TOML split, or `None` when it does not parse or an array does not fit: cut
/// into pieces when it can be ([`Sections`]), else parsed whole.
fn split(toml: &str) -> Option<Split> {
    split_by_sections(toml).or_else(|| toml::from_str(toml).ok())
}

/// The layer parsed piece by piece: the rest as one document, each element alone. `None`
/// when there is nothing to cut, a cut may not be sound, or the rest gives a cut array too
/// (`[endpoints.check]` after `[[endpoints]]`): parsing whole then decides.
fn split_by_sections(toml: &str) -> Option<Split> {
    let sections = Sections::cut(toml);
    if !sections.has_elements() || !sections.check() {
        return None;
    }
    let mut split: Split = toml::from_str(&sections.rest.concat()).ok()?;
    let [endpoints, tenants] = &sections.elements;
    if !endpoints.is_empty() {
        split.endpoints.is_none().then_some(())?;
        split.endpoints = Some(elements(endpoints)?);
    }
    if !tenants.is_empty() {
        split.tenants.is_none().then_some(())?;
        split.tenants = Some(elements(tenants)?);
    }
    Some(split)
}

/// Each element's text parsed into its type.
fn elements<T: DeserializeOwned>(texts: &[&str]) -> Option<Vec<T>> {
    let mut parsed = Vec::with_capacity(texts.len());
    for text in texts {
        parsed.push(toml::from_str(text).ok()?);
    }
    Some(parsed)
}

/// One layer: its arrays typed when it gives them, every other top-level key as figment
/// reads it (the same values figment's TOML provider makes).
#[derive(Default)]
struct Split {
    endpoints: Option<Vec<EndpointConfig>>,
    tenants: Option<Vec<TenantConfig>>,
    rest: Dict,
}

impl<'de> Deserialize<'de> for Split {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(SplitVisitor)
    }
}

struct SplitVisitor;

impl<'de> Visitor<'de> for SplitVisitor {
    type Value = Split;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a TOML document")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Split, A::Error> {
        let mut split = Split::default();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "endpoints" => split.endpoints = Some(map.next_value()?),
                "tenants" => split.tenants = Some(map.next_value()?),
                _ => {
                    let value: Value = map.next_value()?;
                    split.rest.insert(key, value);
                }
            }
        }
        Ok(split)
    }
}

/// The rest of a layer as a figment provider, under the metadata figment's TOML provider
/// gives the same layer, so errors name the file as figment's path names it.
#[derive(Clone)]
pub(super) struct Rest {
    pub metadata: Metadata,
    pub dict: Dict,
}

impl Provider for Rest {
    fn metadata(&self) -> Metadata {
        self.metadata.clone()
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        Ok(Profile::Default.collect(self.dict.clone()))
    }
}
