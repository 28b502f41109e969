//! `run`: the service.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use ho_engine::Engine;
use tracing::info;

/// Loads the config (exit 2 with every error if invalid), starts the engine and the API,
/// and runs until SIGINT or SIGTERM. Shutdown leaves published records in place.
pub fn run(files: &[PathBuf]) -> anyhow::Result<ExitCode> {
    let plan = match ho_config::load_plan(files) {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("{e}");
            return Ok(ExitCode::from(2));
        }
    };
    actix_rt::System::new().block_on(async move {
        let sinks = ho_sinks::build_all(&plan)
            .await
            .map_err(anyhow::Error::msg)?;
        let listener = tokio::net::TcpListener::bind(plan.api_listen)
            .await
            .with_context(|| format!("api.listen {}", plan.api_listen))?;
        info!(
            api = %listener.local_addr()?,
            endpoints = plan.endpoints.len(),
            targets = plan.targets.len(),
            tenants = plan.tenants.len(),
            "starting"
        );
        let engine = Engine::start(plan, sinks)?;
        let api = actix::spawn(ho_engine::api::serve(listener, engine.api_state()));
        shutdown_signal().await?;
        info!("shutting down; published records stay as they are");
        api.abort();
        drop(engine);
        Ok(ExitCode::SUCCESS)
    })
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.context("waiting for SIGINT")?,
        _ = term.recv() => {}
    }
    Ok(())
}
