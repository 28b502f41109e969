//! `loadtest`: the test operators run before rollout. Starts N gateways on distinct
//! loopback addresses (127.16.0.0/12, never anything else), runs the real engine binary on
//! them as its own process with a recording webhook sink, injects the faults of a scenario,
//! and reports probe rate, lateness, CPU, memory and detection latency.

use clap::Parser;
use ho_loadtest::run::{run, Args};

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let (json, svg) = (args.json.clone(), args.svg.clone());
    // Two threads for the farm and the recorder, so the harness keeps up with the engine's
    // probe rate (its own CPU is not counted: the engine is measured as its own process).
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let report = runtime.block_on(run(args))?;
    print!("{}", report.table());
    if let Some(path) = json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
    }
    if let Some(path) = svg {
        std::fs::write(path, report.svg())?;
    }
    Ok(())
}
