//! `loadtest`: the test operators run before rollout. Starts N gateways on distinct
//! loopback addresses (127.16.0.0/12, never anything else), runs the real engine binary on
//! them as its own process with a recording webhook sink, injects the faults of a scenario,
//! and reports probe rate, lateness, CPU, memory and detection latency.

use clap::Parser;
use ho_loadtest::run::{run, Args};

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let (json, svg) = (args.json.clone(), args.svg.clone());
    // The farm and the recorder (`--threads`); their CPU is not counted: the engine is
    // measured as its own process.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads.max(1))
        .enable_all()
        .build()?;
    let report = runtime.block_on(run(args))?;
    print!("{}", report.table());
    if let Some(path) = json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
    }
    if let Some(path) = svg {
        std::fs::write(path, ho_loadtest::plots::run_svg(&report)?)?;
    }
    Ok(())
}
