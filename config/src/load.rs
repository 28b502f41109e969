//! Layering: built-in defaults < TOML files (in the order given, later wins) < `HO_*` environment.

use std::fmt;
use std::path::{Path, PathBuf};

use figment::providers::{Format, Serialized, Toml};
use figment::Figment;

use crate::model::{CheckOverrides, Config, Defaults};
use crate::validate::{validate, FieldError, Kinds, ValidationErrors};
use crate::Plan;

pub use located::InvalidConfig;

mod arrays;
mod environment;
mod every_error;
mod located;
mod sections;
#[cfg(test)]
mod tests;

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
    /// A file named on the command line is YAML (an OpenOva config, Kuadrant resources):
    /// said as such, with the command that converts it, instead of a TOML parse error.
    #[error("config file {file}: this is YAML, and the configuration is TOML; convert it with `health-orchestrator import --from openova {file}` (OpenOva's config) or `--from kuadrant` (Kuadrant's DNSPolicy, DNSRecord, DNSHealthCheckProbe)", file = .0.display())]
    Yaml(PathBuf),
    /// A YAML file read as another system's config (`run --config config.yaml`) is not one
    /// the importer can translate.
    #[error("config file {path}: this is YAML, and not OpenOva's config.yaml (the one YAML config read as it is): {message}; the configuration is TOML: convert Kuadrant's resources with `health-orchestrator import --from kuadrant {path}`", path = path.display())]
    Untranslatable {
        /// The file.
        path: PathBuf,
        /// What the importer said.
        message: String,
    },
    /// A layer does not parse or does not fit the schema (unknown field, wrong type, ...).
    #[error("{0}")]
    Parse(ParseErrors),
    /// The configuration parses but is not valid; each error names the file or variable
    /// its value came from.
    #[error("{0}")]
    Invalid(InvalidConfig),
}

/// Parse errors, each naming its source (file or environment) and key path; when they are
/// only unknown keys, also what validating the rest finds, so one error never hides another.
#[derive(Debug)]
pub struct ParseErrors {
    parse: Box<figment::Error>,
    /// Problems of the configuration without its unknown keys.
    also: Option<InvalidConfig>,
}

impl fmt::Display for ParseErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in (*self.parse).clone().into_iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            // A file is named as the operator gave it, not relative to the current folder.
            let source = e
                .metadata
                .as_ref()
                .map(|m| located::source_name(m, &e.path));
            if let Some(source) = &source {
                write!(f, "{source}: ")?;
            }
            if !e.path.is_empty() {
                write!(f, "{}: ", field_path(&e.path))?;
            }
            write!(f, "{}", crate::explain::explain_at(&e.path, &e.kind))?;
            if let Some(variable) = source.as_deref().and_then(|s| two_underscores(s, &e)) {
                write!(f, " (a table's key takes two underscores: {variable})")?;
            }
        }
        if let Some(also) = &self.also {
            write!(f, "\n{also}")?;
        }
        Ok(())
    }
}

/// For an unknown key a variable set with one underscore where a table and its key meet
/// (`HO_API_LISTEN`), the variable meant (`HO_API__LISTEN`); `source` is the error's.
fn two_underscores(source: &str, e: &figment::Error) -> Option<String> {
    let figment::error::Kind::UnknownField(found, expected) = &e.kind else {
        return None;
    };
    source.strip_prefix("environment ")?;
    let (table, key) = (found.match_indices('_'))
        .map(|(i, _)| (&found[..i], &found[i + 1..]))
        .find(|(table, key)| !key.is_empty() && expected.contains(table))?;
    let parents = &e.path[..e.path.len().saturating_sub(1)];
    let keys = (parents.iter().map(String::as_str)).chain([table, key]);
    Some(ENV_PREFIX.to_owned() + &keys.collect::<Vec<_>>().join("__").to_ascii_uppercase())
}

/// The `HO_*` variable that set the value at `path` (figment names only "`HO_` environment
/// variable(s)"): the one whose key is the longest start of the path, since a variable may
/// hold a whole table or array (`HO_ENDPOINTS='[...]'` for `endpoints[3].check.port`).
fn env_variable(path: &[String]) -> Option<String> {
    let variables: Vec<String> = std::env::vars_os()
        .filter_map(|(name, _)| name.into_string().ok())
        .collect();
    let key_of = |name: &str| {
        let prefix = name.get(..ENV_PREFIX.len())?;
        prefix.eq_ignore_ascii_case(ENV_PREFIX).then(|| {
            name[ENV_PREFIX.len()..]
                .to_ascii_lowercase()
                .replace("__", ".")
        })
    };
    let held = (1..=path.len()).rev().find_map(|n| {
        let key = path[..n].join(".");
        variables
            .iter()
            .find(|name| key_of(name).is_some_and(|k| k == key))
            .cloned()
    });
    // An unknown key's path ends at the key (`default` of `HO_DEFAULT__CHECK__PORT`): the
    // variable is one whose key goes on from it.
    let below = path.join(".") + ".";
    held.or_else(|| {
        variables
            .iter()
            .find(|name| key_of(name).is_some_and(|k| k.starts_with(&below)))
            .cloned()
    })
}

/// A figment key path written as validation writes paths: `endpoints[0].check`, not
/// `endpoints.0.check`.
fn field_path(path: &[String]) -> String {
    let mut out = String::new();
    for key in path {
        if is_index(key) {
            out.push_str(&format!("[{key}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(key);
        }
    }
    out
}

/// Whether a figment path key is an array index.
fn is_index(key: &str) -> bool {
    !key.is_empty() && key.bytes().all(|b| b.is_ascii_digit())
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
        brake: Default::default(),
        leader_election: Default::default(),
        ring: Default::default(),
        cluster: Default::default(),
        multi_cluster: Default::default(),
        kubernetes: Default::default(),
        resolver: Default::default(),
        state_dir: None,
        ledger: Default::default(),
    }
}

/// Translates a YAML config file (another system's: OpenOva's `config.yaml`) into this
/// configuration's TOML at load, or says why it cannot. The binary owns the importers and
/// hands one in; without one a YAML file is refused with the command that converts it.
pub type YamlReader<'a> = &'a dyn Fn(&Path) -> Result<String, String>;

/// The figment with every layer, before extraction; exposed so callers can add layers in tests.
pub fn figment(files: &[impl AsRef<Path>]) -> Result<Figment, ConfigError> {
    figment_reading(files, None)
}

/// The file `--config PATH` means: PATH itself, or for a directory (a mounted ConfigMap)
/// its `config.toml`, else its `config.yaml`.
pub fn config_file(path: &Path) -> PathBuf {
    if !path.is_dir() {
        return path.to_owned();
    }
    let toml = path.join("config.toml");
    match toml.exists() || !path.join("config.yaml").exists() {
        true => toml,
        false => path.join("config.yaml"),
    }
}

/// [`figment`], with YAML files translated by `yaml` when given.
pub fn figment_reading(
    files: &[impl AsRef<Path>],
    yaml: Option<YamlReader<'_>>,
) -> Result<Figment, ConfigError> {
    Ok(figment_of(&layers(files, yaml)?))
}

/// One configuration layer a file gives: TOML as it is, or YAML translated to TOML.
pub(crate) enum Layer {
    /// A TOML file.
    File(PathBuf),
    /// The TOML a YAML file was translated to.
    Translated(String),
}

/// The layers `files` give, in order: each checked to be a regular file, YAML ones translated
/// by `yaml` (refused without it).
fn layers(
    files: &[impl AsRef<Path>],
    yaml: Option<YamlReader<'_>>,
) -> Result<Vec<Layer>, ConfigError> {
    let mut layers = Vec::with_capacity(files.len());
    for path in files {
        let path = &config_file(path.as_ref());
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
        layers.push(match (looks_like_yaml(path), yaml) {
            (false, _) => Layer::File(path.to_owned()),
            (true, None) => return Err(ConfigError::Yaml(path.to_owned())),
            (true, Some(translate)) => Layer::Translated(translate(path).map_err(|message| {
                ConfigError::Untranslatable {
                    path: path.to_owned(),
                    message,
                }
            })?),
        });
    }
    Ok(layers)
}

/// Built-in defaults, then `layers` in order, then the `HO_*` environment.
fn figment_of(layers: &[Layer]) -> Figment {
    let mut fig = Figment::from(Serialized::defaults(builtin()));
    for layer in layers {
        fig = match layer {
            Layer::File(path) => fig.merge(Toml::file_exact(path)),
            Layer::Translated(toml) => fig.merge(Toml::string(toml)),
        };
    }
    fig.merge(environment())
}

/// The `HO_*` environment layer.
fn environment() -> environment::Environment {
    environment::Environment::new()
}

/// Whether `path` is YAML rather than TOML: by its extension, or by a first line that is a
/// YAML document start or a `key: value` line (never valid TOML).
fn looks_like_yaml(path: &Path) -> bool {
    if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml"))
    {
        return true;
    }
    let Ok(text) = std::fs::read_to_string(path) else {
        return false;
    };
    let first = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'));
    first.is_some_and(|l| {
        l == "---"
            || l.split_once(": ").is_some_and(|(key, _)| {
                key.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            })
            || (l.ends_with(':') && !l.contains('='))
    })
}

/// Loads and layers the configuration without validating it.
pub fn load(files: &[impl AsRef<Path>]) -> Result<Config, ConfigError> {
    load_reading(files, None)
}

/// [`load`], with YAML files translated by `yaml` when given.
pub fn load_reading(
    files: &[impl AsRef<Path>],
    yaml: Option<YamlReader<'_>>,
) -> Result<Config, ConfigError> {
    let layers = layers(files, yaml)?;
    if let Some((config, _)) = arrays::load(&layers) {
        return Ok(config);
    }
    // Before figment's tree is made, so that the two never take memory at once.
    let every = every_error::every_error(&layers);
    let layered = figment_of(&layers);
    match (layered.extract(), every) {
        (Ok(config), None) => Ok(config),
        (Ok(_) | Err(_), Some(e)) | (Err(e), None) => Err(ConfigError::Parse(ParseErrors {
            parse: Box::new(with_values(e, &layered)),
            also: None,
        })),
    }
}

/// Loads, layers and validates: what `run` and `check-config` do. `kinds` parses the
/// `[sinks.*]` tables and the check kinds' keys.
pub fn load_plan(files: &[impl AsRef<Path>], kinds: &Kinds<'_>) -> Result<Plan, ConfigError> {
    load_plan_reading(files, None, kinds)
}

/// [`load_plan`], with YAML files translated by `yaml` when given.
pub fn load_plan_reading(
    files: &[impl AsRef<Path>],
    yaml: Option<YamlReader<'_>>,
    kinds: &Kinds<'_>,
) -> Result<Plan, ConfigError> {
    let layers = layers(files, yaml)?;
    if let Some((config, rest)) = arrays::load(&layers) {
        return validated(&config, kinds, &rest);
    }
    // An error in an element a later layer replaces is reported too: figment's path does
    // not see it, so it can succeed with such errors. Found before figment's tree is made,
    // so that the two never take memory at once.
    let every = every_error::every_error(&layers);
    let layered = figment_of(&layers);
    let (parse, also) = match (layered.extract::<Config>(), every) {
        (Ok(config), None) => return validated(&config, kinds, &layered),
        (Ok(config), Some(every)) => (
            every,
            validate(&config, kinds)
                .err()
                .map(|errors| InvalidConfig::locate(errors, &layered, &config)),
        ),
        (Err(first), every) => {
            let parse = every.unwrap_or_else(|| first.clone());
            let also = validate_without_bad_keys(&layered, &first, &parse, kinds);
            (parse, also)
        }
    };
    let also = also.filter(|_| parse.clone().into_iter().all(|e| can_leave_out(&e)));
    Err(ConfigError::Parse(ParseErrors {
        parse: Box::new(with_values(parse, &layered)),
        also,
    }))
}

/// The value at `path` in `layered` (table keys and array indices).
fn value_at(layered: &Figment, path: &[String]) -> Option<figment::value::Value> {
    let mut top = layered.find_value(path.first()?).ok()?;
    walk(&mut top, &path[1..]).cloned()
}

/// `error` with the value each message of a type's own parser refused (`api.listen:
/// "localhost": invalid socket address syntax`), found in `layered`: those messages do not
/// quote it, as serde's type errors do.
fn with_values(error: figment::Error, layered: &Figment) -> figment::Error {
    use figment::error::Kind;
    use figment::value::Value;
    let errors = error.into_iter().map(|mut e| {
        let refused = match &e.kind {
            Kind::Message(_) => value_at(layered, &e.path),
            _ => None,
        };
        let written = match refused {
            Some(Value::String(_, s)) => Some(format!("{s:?}")),
            Some(Value::Num(_, n)) => n.to_u128().map(|n| n.to_string()),
            _ => None,
        };
        if let (Some(written), Kind::Message(message)) = (written, &e.kind) {
            if !message.contains(&written) {
                e.kind = Kind::Message(format!("{written}: {message}"));
            }
        }
        e
    });
    let errors: Vec<figment::Error> = errors.collect();
    (errors.into_iter().rev())
        .reduce(|later, e| later.chain(e))
        .expect("an error holds one at least")
}

/// `config` validated, its errors located in `layered`, the figment it was extracted from.
fn validated(config: &Config, kinds: &Kinds<'_>, layered: &Figment) -> Result<Plan, ConfigError> {
    validate(config, kinds)
        .map_err(|errors| ConfigError::Invalid(InvalidConfig::locate(errors, layered, config)))
}

/// When every parse error is a key [`can_leave_out`]: the validation errors of the
/// configuration with those keys left out (`None` when it then validates, or other parse
/// errors remain), located in `layered`, after the parse errors that leaving them out
/// brought to light (serde stops at a table's first: an endpoint's `weight = "x"` beside its
/// bad `port`) that `said` does not hold. A value of the wrong type is reported as such,
/// its key's default standing in for it, so that an error elsewhere (an endpoint's address
/// beside a bad `defaults.check.rise`) is said in the same run; for a check's `kind`, what
/// validation says of the check's other keys is left out, since it would judge them by the
/// default kind.
fn validate_without_bad_keys(
    layered: &Figment,
    error: &figment::Error,
    said: &figment::Error,
    kinds: &Kinds<'_>,
) -> Option<InvalidConfig> {
    let mut value: figment::value::Value = layered.extract().ok()?;
    let mut error = error.clone();
    let mut mistyped: Vec<String> = Vec::new();
    let said: Vec<Vec<String>> = said.clone().into_iter().map(|e| e.path).collect();
    let mut found: Vec<FieldError> = Vec::new();
    // Serde reports one bad key per table at a time: a few rounds find them all.
    for round in 0..64 {
        let errors: Vec<figment::Error> = error.clone().into_iter().collect();
        if !errors.iter().all(can_leave_out) {
            return None;
        }
        for e in errors
            .iter()
            .filter(|e| round > 0 && !said.contains(&e.path))
        {
            found.push(FieldError {
                path: field_path(&e.path),
                reason: crate::explain::explain_at(&e.path, &e.kind),
            });
        }
        for e in &errors {
            if is_unknown_key(e) {
                remove_at(&mut value, &e.path, None);
                continue;
            }
            // An element of a list is left out with its list.
            let mut key = &e.path[..];
            while key.last().is_some_and(|k| is_index(k)) {
                key = &key[..key.len() - 1];
            }
            // The built-in default where there is one: a key every table of its kind
            // must have (`api.listen`) cannot just be left out.
            if !remove_at(&mut value, key, builtin_at(key)) {
                return None;
            }
            // A check's `kind` decides how its other keys read: with the default's in its
            // place, what validation says of them may be wrong.
            if key.last().is_some_and(|k| k == "kind") {
                mistyped.push(field_path(&key[..key.len() - 1]));
            }
        }
        match Figment::from(Serialized::defaults(&value)).extract::<Config>() {
            Ok(config) => {
                let mut errors = validate(&config, kinds).err().unwrap_or_default();
                errors
                    .0
                    .retain(|e| !mistyped.iter().any(|t| within(&e.path, t)));
                found.append(&mut errors.0);
                if found.is_empty() {
                    return None;
                }
                return Some(InvalidConfig::locate(
                    ValidationErrors(found),
                    layered,
                    &config,
                ));
            }
            Err(next) => error = next,
        }
    }
    None
}

/// The built-in layer's value at `path`, if it has one.
fn builtin_at(path: &[String]) -> Option<figment::value::Value> {
    let value = figment::value::Value::serialize(builtin()).ok()?;
    let dotted = path.join(".");
    value.find(&dotted)
}

/// Whether `path` is a key inside the table at `table` (a validation path, as
/// [`field_path`] writes one); the table itself is not, nor is anything inside the top level
/// (its keys are sections that do not judge one another: `state_dir` and `[api]`).
fn within(path: &str, table: &str) -> bool {
    !table.is_empty()
        && path
            .strip_prefix(table)
            .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
}

/// Whether `error` is a key the schema does not have.
fn is_unknown_key(error: &figment::Error) -> bool {
    matches!(error.kind, figment::error::Kind::UnknownField(..))
}

/// Whether validation can go on without the key `error` is about: one the schema does not
/// have, or a value of the wrong type, out of its type's range or that its type refused
/// (`listen = "localhost"`: its key has a default).
fn can_leave_out(error: &figment::Error) -> bool {
    use figment::error::Kind;
    match error.kind {
        Kind::UnknownField(..)
        | Kind::InvalidType(..)
        | Kind::InvalidValue(..)
        | Kind::UnknownVariant(..) => true,
        Kind::Message(_) => !error.path.is_empty(),
        _ => false,
    }
}

/// Removes the key at `path` (table keys and array indices) from `value`, or with
/// `instead` puts that in its place; whether there was one.
fn remove_at(
    value: &mut figment::value::Value,
    path: &[String],
    instead: Option<figment::value::Value>,
) -> bool {
    use figment::value::Value;
    let Some((last, parents)) = path.split_last() else {
        return false;
    };
    match (walk(value, parents), instead) {
        (Some(Value::Dict(_, dict)), None) => dict.remove(last).is_some(),
        (Some(Value::Dict(_, dict)), Some(v)) => dict.insert(last.clone(), v).is_some(),
        _ => false,
    }
}

/// The value at `path` below `value` (table keys and array indices).
fn walk<'a>(
    value: &'a mut figment::value::Value,
    path: &[String],
) -> Option<&'a mut figment::value::Value> {
    use figment::value::Value;
    path.iter().try_fold(value, |at, key| match at {
        Value::Dict(_, dict) => dict.get_mut(key),
        Value::Array(_, items) => key.parse::<usize>().ok().and_then(|i| items.get_mut(i)),
        _ => None,
    })
}
