//! `import --from SYSTEM FILE...`: prints the equivalent TOML config of another system's
//! configuration, with a `# NOT CARRIED OVER` comment for everything without an
//! equivalent. The output passes `check-config`.
//!
//! - [`openova`]: the OpenOva DNS failover `config.yaml`.
//! - [`kuadrant`]: Kuadrant's DNSPolicy, DNSHealthCheckProbe and DNSRecord documents.
//! - [`powerdns`]: a PowerDNS zone with LUA records (`ifurlup`, `ifportup`, `pick...`).
//! - [`k8gb`]: k8gb's Gslb resources, as DNSFailover resources (YAML, not TOML: each
//!   names a Kubernetes object as its source, which only a resource can).

mod k8gb;
pub mod kuadrant;
mod openova;
mod powerdns;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use serde_yaml::Value;

/// The systems `import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Source {
    /// The OpenOva DNS failover spec's `config.yaml` (one file).
    Openova,
    /// Kuadrant resources: DNSPolicy, DNSHealthCheckProbe and DNSRecord documents, in any
    /// number of files and YAML documents.
    Kuadrant,
    /// A PowerDNS zone with LUA records: the API's zone JSON or `pdnsutil list-zone` text
    /// (one file).
    Powerdns,
    /// k8gb's Gslb resources (or Ingresses annotated `k8gb.io/strategy`) with the objects
    /// they reference, from one cluster; prints DNSFailover resources.
    K8gb,
}

/// What `import` is told besides the files.
pub struct Options {
    /// k8gb: this cluster's geo tag, for Gslbs exported without their status.
    pub geo_tag: Option<String>,
    /// k8gb: the sinks the resources publish to.
    pub sinks: Vec<String>,
    /// k8gb: the namespace of documents that name none.
    pub namespace: Option<String>,
    /// k8gb: the operator's config, whose sinks are checked to carry each policy.
    pub config: Vec<PathBuf>,
}

/// What an import produced: the config, what it could not carry over, and what the
/// operator must still do for it to work as the source did.
pub struct Imported {
    /// The equivalent configuration.
    pub config: toml::Table,
    /// Keys without an equivalent (printed as `# NOT CARRIED OVER:`).
    pub not_carried: Vec<String>,
    /// Steps left to the operator (printed as `# TO DO:`).
    pub to_do: Vec<String>,
    /// Per source resource that became several tenants (a Kuadrant DNSRecord whose names
    /// answer differently), the tenants it became, its own first.
    pub by_record: BTreeMap<String, Vec<String>>,
    /// Per source resource that publishes nothing, why (the others are imported).
    pub unpublished: BTreeMap<String, String>,
    /// Per Kuadrant DNSPolicy: the records it governs, or why it cannot be applied.
    pub policies: BTreeMap<String, ho_kube::tenants::kuadrant::PolicyOutcome>,
}

/// Prints the imported config, or every problem that stops the import.
pub fn import(from: Source, files: &[PathBuf], options: Options) -> anyhow::Result<ExitCode> {
    let k8gb_only = options.geo_tag.is_some()
        || !options.sinks.is_empty()
        || options.namespace.is_some()
        || !options.config.is_empty();
    if from != Source::K8gb && k8gb_only {
        bail!("--geo-tag, --sink, --namespace and --config are for --from k8gb (the other imports print a config with its own sinks)");
    }
    let imported = match from {
        Source::K8gb => {
            let defaulted = options.sinks.is_empty();
            let sinks = if defaulted {
                vec!["dns".into()]
            } else {
                options.sinks
            };
            let carried = match options.config.as_slice() {
                [] => None,
                files => Some(k8gb::sinks::Sinks::load(files, &sinks)?),
            };
            let options = k8gb::Options {
                geo_tag: options.geo_tag,
                namespace: options.namespace,
                sinks,
                carried,
            };
            let mut imported = k8gb::convert(&read_documents(files)?, &options)?;
            if defaulted {
                imported.to_do.insert(0, "the resources publish to the sink named \"dns\": name the operator's sinks with --sink".into());
            }
            print_header(from, files, &imported.not_carried, &imported.to_do);
            for resource in &imported.resources {
                print!("---\n{}", serde_yaml::to_string(resource)?);
            }
            return Ok(ExitCode::SUCCESS);
        }
        Source::Powerdns => match files {
            [one] => powerdns::convert(
                &std::fs::read_to_string(one)
                    .with_context(|| format!("reading {}", one.display()))?,
            )?,
            _ => bail!(
                "a PowerDNS zone is one file (the API's zone JSON or pdnsutil list-zone output)"
            ),
        },
        Source::Openova => match read_documents(files)?.as_slice() {
            [one] => openova::convert(one)?,
            _ => bail!("an OpenOva config is one YAML document in one file"),
        },
        Source::Kuadrant => kuadrant::convert(&read_documents(files)?, kuadrant::Mode::Import)?,
    };
    print_header(from, files, &imported.not_carried, &imported.to_do);
    println!();
    print!("{}", toml::to_string(&imported.config)?);
    Ok(ExitCode::SUCCESS)
}

/// The comment lines every import starts with: the source, what was not carried over, what
/// is left to do.
fn print_header(from: Source, files: &[PathBuf], not_carried: &[String], to_do: &[String]) {
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    println!(
        "# Imported from {} ({from:?}) by `health-orchestrator import`.",
        names.join(", ")
    );
    for note in not_carried {
        println!("# NOT CARRIED OVER: {note}");
    }
    for step in to_do {
        println!("# TO DO: {step}");
    }
}

/// A YAML config file in OpenOva's shape, imported (a config named on the command line:
/// `run --config config.yaml`).
pub fn openova_file(path: &std::path::Path) -> anyhow::Result<Imported> {
    match read_documents(&[path.to_owned()])?.as_slice() {
        [one] => openova::convert(one),
        _ => bail!("an OpenOva config is one YAML document"),
    }
}

/// Every object of `files` (a `kind: List`, as `kubectl get -o yaml` prints, stands for its
/// items), empty documents left out.
fn read_documents(files: &[PathBuf]) -> anyhow::Result<Vec<Value>> {
    Ok(crate::documents::read(files)?
        .into_iter()
        .map(|d| d.value)
        .collect())
}

fn text<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// Keys of `v` outside `known`, as notes at `path`.
fn unknown_keys(v: &Value, known: &[&str], path: &str, notes: &mut Vec<String>) {
    if let Some(map) = v.as_mapping() {
        for key in map.keys().filter_map(Value::as_str) {
            if !known.contains(&key) {
                let at = if path.is_empty() {
                    key.to_owned()
                } else {
                    format!("{path}.{key}")
                };
                notes.push(format!("{at} (no equivalent)"));
            }
        }
    }
}
