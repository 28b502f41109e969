//! `peerplot RESULTS.jsonl... --svg OUT.svg`: the peer comparison of `bench/peers/probe-cost.sh` runs as bars
//! (CPU per 1,000 probes and peak RSS, per farm size, one bar per peer, medians over the
//! runs given), for bench/README.md.

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use ho_loadtest::plots::{peers_svg, PeerResult};

/// Peer comparison bars from `bench/peers/probe-cost.sh` results.
#[derive(Parser)]
#[command(name = "peerplot")]
struct Args {
    /// Result files of `bench/peers/probe-cost.sh` (`probe-cost.jsonl`, one JSON object per line).
    #[arg(required = true)]
    results: Vec<PathBuf>,
    /// Where to write the SVG.
    #[arg(long)]
    svg: PathBuf,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut results = Vec::new();
    for file in &args.results {
        let text =
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        for (i, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let result: PeerResult = serde_json::from_str(line)
                .with_context(|| format!("{}:{}: not a peer result line", file.display(), i + 1))?;
            results.push(result);
        }
    }
    std::fs::write(&args.svg, peers_svg(&results)?)?;
    Ok(())
}
