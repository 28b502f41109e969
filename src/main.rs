//! `health-orchestrator`: command-line wiring only. Each subcommand lives in its own module.

#[macro_use]
mod stdout;

mod check_config;
mod cluster_leave;
mod config_files;
mod demo;
mod dnssec_cmd;
mod documents;
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
        /// DNSFailover resources (YAML, any number of documents) to judge as admission
        /// would against this config, before applying them.
        #[arg(long = "resource", value_name = "FILE")]
        resource: Vec<PathBuf>,
    },
    /// Probe one target once and print the verdict, the reason and the latency.
    Probe(Box<probe_cmd::ProbeArgs>),
    /// Watch DNS failover on this machine: three local gateways, one goes down and comes back.
    Demo(demo::DemoArgs),
    /// Print the configuration's JSON Schema (draft-07), for editors that check TOML as
    /// you type (taplo / Even Better TOML); the same as docs/config.schema.json.
    ConfigSchema,
    /// Print the CustomResourceDefinition of `DNSFailover` (`[kubernetes] tenants`), generated
    /// from the types the controller reads; the same as deploy/kubernetes/crds.yaml.
    Crds,
    /// This instance among several clusters (`[multi_cluster]`).
    Cluster {
        #[command(subcommand)]
        action: ClusterAction,
    },
    /// DNSSEC keys of a signing `dns_server` sink (`dnssec = { keys = "DIR" }`).
    Dnssec {
        #[command(subcommand)]
        action: dnssec_cmd::DnssecAction,
    },
    /// Print the equivalent config of another system's config (stdout), with a comment for
    /// everything that could not be carried over.
    Import {
        /// The system the file comes from.
        #[arg(long = "from", value_enum)]
        from: import::Source,
        /// Its config files (Kuadrant, k8gb: any number, several YAML documents each).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// k8gb: this cluster's geo tag (k8gb's `clusterGeoTag`), for Gslbs exported
        /// without their status.
        #[arg(long = "geo-tag")]
        geo_tag: Option<String>,
        /// k8gb: a sink the DNSFailover resources publish to (repeat; default `dns`).
        #[arg(long = "sink", value_name = "NAME")]
        sinks: Vec<String>,
        /// k8gb: the namespace of documents that name none (kubectl's `-n` when they were
        /// applied).
        #[arg(long)]
        namespace: Option<String>,
        /// k8gb: the operator's TOML config (repeat to layer files): the sinks named are
        /// checked to carry each Gslb's strategy, which is refused here if they cannot.
        #[arg(long = "config", short = 'c', value_name = "FILE")]
        config: Vec<PathBuf>,
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
    // Before any thread starts: a thread that has its own arena keeps it.
    heap::cap_arenas();
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
        Command::CheckConfig { config, resource } if !resource.is_empty() => {
            check_config::check_resources(&config, &resource)
        }
        Command::CheckConfig { config, .. } => Ok(check_config::check_config(&config)),
        Command::Probe(args) => probe_cmd::probe(*args),
        Command::Demo(args) => demo::demo(args),
        Command::Cluster {
            action: ClusterAction::Leave { config },
        } => cluster_leave::leave(&config),
        Command::Dnssec { action } => dnssec_cmd::dnssec(action),
        Command::Import {
            from,
            files,
            geo_tag,
            sinks,
            namespace,
            config,
        } => import::import(
            from,
            &files,
            import::Options {
                geo_tag,
                sinks,
                namespace,
                config,
            },
        ),
        Command::Crds => print_crds(),
        Command::ConfigSchema => print_config_schema(),
    };
    result.unwrap_or_else(|e| {
        eprintln!("error: {e:#}");
        ExitCode::FAILURE
    })
}

/// `crds`: the CRD as deploy/kubernetes/crds.yaml holds it.
fn print_crds() -> anyhow::Result<ExitCode> {
    let crd = ho_kube::tenants::crd::crd(&ho_kinds::CHECK_KINDS);
    stdout::write(format_args!(
        "# Generated by `health-orchestrator crds`; a test fails when it drifts from the types.\n{}",
        serde_yaml::to_string(&crd).expect("a CRD serializes")
    ))?;
    Ok(ExitCode::SUCCESS)
}

/// `config-schema`: the schema as docs/config.schema.json holds it.
fn print_config_schema() -> anyhow::Result<ExitCode> {
    let schema = ho_kinds::schema::config_schema();
    stdout::write(format_args!(
        "{}\n",
        serde_json::to_string_pretty(&schema).expect("a schema serializes")
    ))?;
    Ok(ExitCode::SUCCESS)
}
