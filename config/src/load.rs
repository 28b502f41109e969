//! Layering: built-in defaults < TOML files (in the order given, later wins) < `HO_*` environment.

use std::fmt;
use std::path::{Path, PathBuf};

use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;

use crate::model::{CheckOverrides, Config, Defaults};
use crate::validate::{validate, SinkCatalog, ValidationErrors};
use crate::Plan;

/// Prefix of environment overrides; `__` separates nesting levels, so
/// `HO_DEFAULTS__CHECK__INTERVAL=250ms` sets `defaults.check.interval`.
pub const ENV_PREFIX: &str = "HO_";

/// Why a configuration could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A file named on the command line cannot be read.
    #[error("config file {path}: {source}")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A layer does not parse or does not fit the schema (unknown field, wrong type, ...).
    #[error("{0}")]
    Parse(ParseErrors),
    /// The configuration parses but is not valid.
    #[error("{0}")]
    Invalid(#[from] ValidationErrors),
}

/// Parse errors, each naming its source (file or environment) and key path.
#[derive(Debug)]
pub struct ParseErrors(Box<figment::Error>);

impl fmt::Display for ParseErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in (*self.0).clone().into_iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            // A file is named as the operator gave it, not relative to the current folder.
            let source = e.metadata.as_ref().map(|m| match &m.source {
                Some(figment::Source::File(path)) => path.display().to_string(),
                Some(other) => other.to_string(),
                None => m.name.to_string(),
            });
            if let Some(source) = source {
                write!(f, "{source}: ")?;
            }
            if !e.path.is_empty() {
                write!(f, "{}: ", e.path.join("."))?;
            }
            write!(f, "{}", e.kind)?;
        }
        Ok(())
    }
}

/// The built-in layer: every default in one place, so `check-config` and the docs agree.
pub fn builtin() -> Config {
    Config {
        api: Default::default(),
        defaults: Defaults {
            check: CheckOverrides::builtin(),
            startup_grace: None,
            shutdown_timeout: std::time::Duration::from_secs(10),
        },
        endpoints: Vec::new(),
        tenants: Vec::new(),
        sinks: Default::default(),
        owner_id: crate::model::DEFAULT_OWNER_ID.into(),
        telemetry: Default::default(),
        reload: Default::default(),
        limits: Default::default(),
        leader_election: Default::default(),
        cluster: Default::default(),
        multi_cluster: Default::default(),
        state_dir: None,
    }
}

/// The figment with every layer, before extraction; exposed so callers can add layers in tests.
pub fn figment(files: &[impl AsRef<Path>]) -> Result<Figment, ConfigError> {
    let mut fig = Figment::from(Serialized::defaults(builtin()));
    for path in files {
        let path = path.as_ref();
        if let Err(source) = std::fs::metadata(path).and_then(|m| {
            if m.is_file() {
                Ok(())
            } else {
                Err(std::io::Error::other("not a regular file"))
            }
        }) {
            return Err(ConfigError::Unreadable {
                path: path.to_owned(),
                source,
            });
        }
        fig = fig.merge(Toml::file_exact(path));
    }
    Ok(fig.merge(Env::prefixed(ENV_PREFIX).split("__")))
}

/// Loads and layers the configuration without validating it.
pub fn load(files: &[impl AsRef<Path>]) -> Result<Config, ConfigError> {
    figment(files)?
        .extract()
        .map_err(|e| ConfigError::Parse(ParseErrors(Box::new(e))))
}

/// Loads, layers and validates: what `run` and `check-config` do. `sinks` parses the
/// `[sinks.*]` tables (the sinks crate's registry).
pub fn load_plan(files: &[impl AsRef<Path>], sinks: &dyn SinkCatalog) -> Result<Plan, ConfigError> {
    Ok(validate(&load(files)?, sinks)?)
}
