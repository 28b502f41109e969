//! `check-config`: validate without running, and the same check before `run` starts.

use std::path::PathBuf;
use std::process::ExitCode;

use ho_config::Plan;

mod resources;
mod shape;
mod spelling;

pub use resources::check_resources;

/// Exit 0 with a one-line summary, or 2 with every problem on its own line.
pub fn check_config(files: &[PathBuf]) -> ExitCode {
    let (plan, notes) = load_checked(files);
    for note in notes {
        eprintln!("note: {note}");
    }
    match plan {
        Ok(plan) => {
            if let Some(Err(e)) = plan
                .state_dir
                .as_deref()
                .map(ho_engine::state_file::writable)
            {
                eprintln!(
                    "state_dir: {e}: `run` would start with the availability ledger degraded and any operator drain unsaved (make it writable by the user that runs the orchestrator: in Kubernetes, the pod's securityContext.fsGroup)"
                );
                return ExitCode::from(2);
            }
            outln!(
                "ok: {}, {}, {}",
                counted(plan.endpoints.len(), "endpoint")
                    + &format!(" ({})", counted(plan.targets.len(), "probe target")),
                counted(plan.tenants.len(), "tenant"),
                counted(plan.sinks.len(), "sink"),
            );
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}

/// `n` things, in the singular for one.
fn counted(n: usize, thing: &str) -> String {
    if n == 1 {
        format!("1 {thing}")
    } else {
        format!("{n} {thing}s")
    }
}

/// `plan` once every endpoint's host name resolves, as a start needs; a name that does not
/// is the error `run` stops on.
fn resolved(plan: Plan) -> Result<Plan, ExitCode> {
    if plan.hosts.is_empty() {
        return Ok(plan);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime for the lookups");
    match runtime.block_on(ho_engine::hosts::check(
        &plan,
        std::sync::Arc::new(ho_dns::Client),
    )) {
        Ok(()) => Ok(plan),
        Err(e) => {
            eprintln!("{e}");
            Err(ExitCode::from(2))
        }
    }
}

/// Loads, layers and validates `files`, then reads every secret, CA file, kubeconfig and
/// database the config names (`ho_kinds::preflight`), so a config `check-config` accepts is
/// one `run` starts. On any problem prints every one of them and returns exit code 2. The
/// notes: what a YAML file's import could not carry over, for the caller to say.
pub fn load_checked(files: &[PathBuf]) -> (Result<Plan, ExitCode>, Vec<String>) {
    let loaded = crate::config_files::plan(files);
    let checked = loaded
        .result
        .map_err(|e| {
            eprintln!("{e}");
            ExitCode::from(2)
        })
        .and_then(|plan| {
            let problems = ho_kinds::preflight(&plan);
            if problems.is_empty() {
                if let Err(e) = ho_engine::Engine::check_kept_state(&plan) {
                    eprintln!("{e}");
                    return Err(ExitCode::from(2));
                }
                return resolved(plan);
            }
            for problem in &problems {
                eprintln!("{problem}");
            }
            Err(ExitCode::from(2))
        });
    (checked, loaded.notes)
}
