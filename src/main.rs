//! `health-orchestrator`: command-line wiring only. Each subcommand lives in its own module.

mod check_config;
mod cluster_leave;
mod demo;
mod heap;
mod import;
mod logging;
mod probe_cmd;
mod reload;
mod run;
mod telemetry;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// DNS-based failover without a load balancer: probes gateways and publishes each tenant's
/// healthy set to its DNS back ends.
#[derive(Parser)]
#[command(name = "health-orchestrator", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log lines as `text` or `json`; overrides `[telemetry] log_format`.
    #[arg(long, global = true, value_name = "FORMAT", value_parser = parse_log_format)]
    log_format: Option<ho_config::LogFormat>,
}

fn parse_log_format(s: &str) -> Result<ho_config::LogFormat, String> {
    match s {
        "text" | "pretty" => Ok(ho_config::LogFormat::Pretty),
        "json" => Ok(ho_config::LogFormat::Json),
        other => Err(format!("{other:?}: use text or json")),
    }
}

#[derive(Subcommand)]
enum Command {
    /// Probe the configured endpoints and publish healthy sets until SIGINT/SIGTERM.
    Run {
        /// TOML config file; repeat to layer files (later wins). `HO_*` environment overrides all.
        #[arg(long = "config", short = 'c', required = true, value_name = "FILE")]
        config: Vec<PathBuf>,
    },
    /// Validate a configuration and print every problem; exit 0 only if it is valid.
    CheckConfig {
        /// TOML config file; repeat to layer files.
        #[arg(long = "config", short = 'c', required = true, value_name = "FILE")]
        config: Vec<PathBuf>,
    },
    /// Probe one target once and print the verdict, the reason and the latency.
    Probe(probe_cmd::ProbeArgs),
    /// Watch DNS failover on this machine: three local gateways, one goes down and comes back.
    Demo(demo::DemoArgs),
    /// Print the configuration's JSON Schema (draft-07), for editors that check TOML as
    /// you type (taplo / Even Better TOML); the same as docs/config.schema.json.
    ConfigSchema,
    /// This instance among several clusters (`[multi_cluster]`).
    Cluster {
        #[command(subcommand)]
        action: ClusterAction,
    },
    /// Print the equivalent config of another system's config (stdout), with a comment for
    /// everything that could not be carried over.
    Import {
        /// The system the file comes from.
        #[arg(long = "from", value_enum)]
        from: import::Source,
        /// Its config files (Kuadrant: any number, several YAML documents each).
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

#[derive(Subcommand)]
enum ClusterAction {
    /// Remove this cluster's reports and addresses from the shared zones (stop its
    /// orchestrator first).
    Leave {
        /// TOML config file; repeat to layer files.
        #[arg(long = "config", short = 'c', required = true, value_name = "FILE")]
        config: Vec<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // `run` starts logging once its config (which picks the format) is loaded.
    if !matches!(cli.command, Command::Run { .. }) {
        logging::init(
            matches!(cli.command, Command::Demo(_)),
            cli.log_format.unwrap_or_default(),
        );
    }
    let result = match cli.command {
        Command::Run { config } => run::run(&config, cli.log_format),
        Command::CheckConfig { config } => Ok(check_config::check_config(&config)),
        Command::Probe(args) => probe_cmd::probe(args),
        Command::Demo(args) => demo::demo(args),
        Command::Cluster {
            action: ClusterAction::Leave { config },
        } => cluster_leave::leave(&config),
        Command::Import { from, files } => import::import(from, &files),
        Command::ConfigSchema => {
            let schema = ho_sinks::schema::config_schema();
            println!(
                "{}",
                serde_json::to_string_pretty(&schema).expect("a schema serializes")
            );
            Ok(ExitCode::SUCCESS)
        }
    };
    result.unwrap_or_else(|e| {
        eprintln!("error: {e:#}");
        ExitCode::FAILURE
    })
}
