//! `import --from SYSTEM FILE...`: reads the files, hands their documents to the importer
//! (`ho-import`) and prints the equivalent TOML config (for k8gb, DNSFailover resources),
//! with a `# NOT CARRIED OVER` comment for everything without an equivalent and a
//! `# TO DO` for what is left to the operator. The output passes `check-config`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use ho_import::k8gb::sinks::{SinkError, Sinks};
use ho_import::{k8gb, kuadrant, openova, powerdns, Imported};
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
                files => Some(carried(files, &sinks)?),
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
            return print_k8gb(from, files, &imported);
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
    crate::stdout::write(format_args!("\n{}", toml::to_string(&imported.config)?))?;
    Ok(ExitCode::SUCCESS)
}

/// The resources of the Gslbs imported on stdout, and every refused Gslb on stderr with
/// exit code 1: a platform team migrating gets the good ones to review and apply, while a
/// script piping the output to `kubectl apply` stops rather than applying part of the
/// export unnoticed.
fn print_k8gb(
    from: Source,
    files: &[PathBuf],
    imported: &k8gb::Imported,
) -> anyhow::Result<ExitCode> {
    if !imported.resources.is_empty() {
        print_header(from, files, &imported.not_carried, &imported.to_do);
        for resource in &imported.resources {
            crate::stdout::write(format_args!("---\n{}", serde_yaml::to_string(resource)?))?;
        }
    }
    if imported.refused.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    for refusal in &imported.refused {
        eprintln!("refused: {refusal}");
    }
    eprintln!(
        "{} Gslb(s) refused, {} resource(s) printed for the others: fix the refused Gslbs and import them again",
        imported.refused.len(),
        imported.resources.len()
    );
    Ok(ExitCode::FAILURE)
}

/// The comment lines every import starts with: the source, what was not carried over, what
/// is left to do.
fn print_header(from: Source, files: &[PathBuf], not_carried: &[String], to_do: &[String]) {
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    outln!(
        "# Imported from {} ({from:?}) by `health-orchestrator import`.",
        names.join(", ")
    );
    for note in not_carried {
        outln!("# NOT CARRIED OVER: {note}");
    }
    for step in to_do {
        outln!("# TO DO: {step}");
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

/// The sinks `names` of the operator's config `files`, as its kinds parse them.
fn carried(files: &[PathBuf], names: &[String]) -> Result<Sinks, SinkError> {
    let config = crate::config_files::config(files)
        .result
        .map_err(|e| SinkError::Config(e.to_string()))?;
    Sinks::of(&config, names, ho_kinds::CATALOG.sinks)
}
