//! `check-config`: validate without running.

use std::path::PathBuf;
use std::process::ExitCode;

/// Exit 0 with a one-line summary, or 2 with every problem on its own line.
pub fn check_config(files: &[PathBuf]) -> ExitCode {
    match ho_sinks::load_plan(files) {
        Ok(plan) => {
            println!(
                "ok: {} endpoints ({} probe targets), {} tenants, {} sinks",
                plan.endpoints.len(),
                plan.targets.len(),
                plan.tenants.len(),
                plan.sinks.len()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(2)
        }
    }
}
