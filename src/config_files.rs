//! The config files named on the command line, loaded the same way by `run`, its reloads,
//! `check-config` and `cluster leave`: TOML layers, a directory meaning its `config.toml`
//! (else `config.yaml`), and a YAML file read as OpenOva's `config.yaml` through
//! `import --from openova` (the OpenOva spec's Deployment mounts exactly that), with what the
//! import could not carry over handed back as notes for the caller to log.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use ho_config::{Config, ConfigError, Plan};

/// What a load read, and what its YAML translations said.
pub struct Loaded<T> {
    pub result: Result<T, ConfigError>,
    /// `FILE: NOT CARRIED OVER: ...` and `FILE: TO DO: ...` lines of each YAML file.
    pub notes: Vec<String>,
}

/// The plan of `files`, validated.
pub fn plan(files: &[PathBuf]) -> Loaded<Plan> {
    reading(|yaml| ho_kinds::load_plan_reading(files, yaml))
}

/// The base config of `files`, unvalidated (admission merges resources into it).
pub fn config(files: &[PathBuf]) -> Loaded<Config> {
    reading(|yaml| ho_config::load_reading(files, Some(yaml)))
}

fn reading<T>(load: impl FnOnce(ho_config::YamlReader<'_>) -> Result<T, ConfigError>) -> Loaded<T> {
    let notes = RefCell::new(Vec::new());
    let translate = |path: &Path| {
        let imported = crate::import::openova_file(path).map_err(|e| format!("{e:#}"))?;
        let at = path.display();
        let mut notes = notes.borrow_mut();
        notes.extend(
            imported
                .not_carried
                .iter()
                .map(|n| format!("{at}: NOT CARRIED OVER: {n}")),
        );
        notes.extend(imported.to_do.iter().map(|n| format!("{at}: TO DO: {n}")));
        toml::to_string(&imported.config).map_err(|e| e.to_string())
    };
    let result = load(&translate);
    Loaded {
        result,
        notes: notes.into_inner(),
    }
}
