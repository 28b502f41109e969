//! `kubeload`: `DNSFailover` resources under load (see `ho_loadtest::kube_load`).

use clap::Parser;
use ho_loadtest::kube_load::{run, table, Args};

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let json = args.json.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let report = runtime.block_on(run(args))?;
    print!("{}", table(&report));
    if let Some(path) = json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
    }
    Ok(())
}
