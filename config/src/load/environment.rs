//! The `HO_*` environment layer, with `HO_ENDPOINTS` and `HO_TENANTS` read as TOML.
//!
//! Figment reads a variable's value with its own lenient syntax and keeps what it cannot
//! read as a string: `[{name="e0", address=}]` became an endpoint with an empty address, a
//! broken array the text "expected a sequence". These two hold whole arrays written as
//! TOML, so they are parsed as TOML, and one that does not parse says where and why.

use figment::providers::Env;
use figment::value::{Dict, Map, Value};
use figment::{Metadata, Profile, Provider};
use serde::Deserialize;

use super::sections::CUT;
use super::ENV_PREFIX;

/// The `HO_*` variables; `__` separates nesting levels.
pub(super) struct Environment(Env);

impl Environment {
    pub(super) fn new() -> Self {
        Self(Env::prefixed(ENV_PREFIX).split("__"))
    }

    /// Each variable's key path (`defaults.check.port`) and value.
    pub(super) fn iter(&self) -> impl Iterator<Item = (String, String)> + '_ {
        self.0.iter().map(|(key, value)| (key.to_string(), value))
    }
}

impl Provider for Environment {
    fn metadata(&self) -> Metadata {
        self.0.metadata()
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        let mut data = self.0.data()?;
        let dict = data.entry(Profile::Default).or_default();
        for (key, text) in self.iter() {
            if let Some(array) = CUT.iter().find(|a| key.eq_ignore_ascii_case(a)) {
                let value =
                    toml_value(&text).map_err(|why| figment::Error::from(why).with_path(array))?;
                dict.insert((*array).to_owned(), value);
            }
        }
        Ok(data)
    }
}

/// `text`, a variable's value, parsed as a TOML value; else where and why it does not parse.
fn toml_value(text: &str) -> Result<Value, String> {
    /// The value as the right-hand side of a key: its first line's columns are this much
    /// further right.
    const KEY: &str = "v = ";
    #[derive(Deserialize)]
    struct Document {
        v: Value,
    }
    toml::from_str::<Document>(&format!("{KEY}{text}"))
        .map(|d| d.v)
        .map_err(|e| {
            let at = e
                .span()
                .map_or(0, |span| span.start.saturating_sub(KEY.len()));
            let before = &text[..at.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before
                .rsplit('\n')
                .next()
                .unwrap_or_default()
                .chars()
                .count()
                + 1;
            format!(
                "the variable's TOML does not parse: line {line}, column {column}: {}",
                e.message().trim_end().replace('\n', "; ")
            )
        })
}
