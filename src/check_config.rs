//! `check-config`: validate without running, and the same check before `run` starts.

use std::path::PathBuf;
use std::process::ExitCode;

use ho_config::Plan;

/// Exit 0 with a one-line summary, or 2 with every problem on its own line.
pub fn check_config(files: &[PathBuf]) -> ExitCode {
    let (plan, notes) = load_checked(files);
    for note in notes {
        eprintln!("note: {note}");
    }
    match plan {
        Ok(plan) => {
            println!(
                "ok: {}, {}, {}",
                counted(plan.endpoints.len(), "endpoint")
                    + &format!(" ({})", counted(plan.targets.len(), "probe target")),
                counted(plan.tenants.len(), "tenant"),
                counted(plan.sinks.len(), "sink"),
            );
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}

/// `n` things, in the singular for one.
fn counted(n: usize, thing: &str) -> String {
    if n == 1 {
        format!("1 {thing}")
    } else {
        format!("{n} {thing}s")
    }
}

/// `plan` once every endpoint's host name resolves, as a start needs; a name that does not
/// is the error `run` stops on.
fn resolved(plan: Plan) -> Result<Plan, ExitCode> {
    if plan.hosts.is_empty() {
        return Ok(plan);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime for the lookups");
    match runtime.block_on(ho_engine::hosts::check(
        &plan,
        std::sync::Arc::new(ho_dns::Client),
    )) {
        Ok(()) => Ok(plan),
        Err(e) => {
            eprintln!("{e}");
            Err(ExitCode::from(2))
        }
    }
}

/// Loads, layers and validates `files`, then reads every secret, CA file, kubeconfig and
/// database the config names (`ho_kinds::preflight`), so a config `check-config` accepts is
/// one `run` starts. On any problem prints every one of them and returns exit code 2. The
/// notes: what a YAML file's import could not carry over, for the caller to say.
pub fn load_checked(files: &[PathBuf]) -> (Result<Plan, ExitCode>, Vec<String>) {
    let loaded = crate::config_files::plan(files);
    let checked = loaded
        .result
        .map_err(|e| {
            eprintln!("{e}");
            ExitCode::from(2)
        })
        .and_then(|plan| {
            let problems = ho_kinds::preflight(&plan);
            if problems.is_empty() {
                if let Err(e) = ho_engine::Engine::check_kept_state(&plan) {
                    eprintln!("{e}");
                    return Err(ExitCode::from(2));
                }
                return resolved(plan);
            }
            for problem in &problems {
                eprintln!("{problem}");
            }
            Err(ExitCode::from(2))
        });
    (checked, loaded.notes)
}

/// `check-config --resource FILE`: each DNSFailover in `resources` judged as admission
/// judges it against the config `files` (allowance, claims, the spec as `check-config`
/// validates it), one line each; exit 2 when any is refused. Sources a cluster resolves
/// (`gateway`, `ingress`, `service`, `nodes`) cannot be looked up offline: they are said, and
/// judged as if they yielded [`STAND_IN`] (a shared Gateway as if it took routes from every
/// namespace), so the rest of the resource is judged as admission would.
pub fn check_resources(files: &[PathBuf], resources: &[PathBuf]) -> anyhow::Result<ExitCode> {
    use ho_kube::tenants::admit::{Admitter, Verdict};
    use ho_kube::tenants::resource::DNSFailover;
    let base = match crate::config_files::config(files).result {
        Ok(base) => base,
        Err(e) => {
            eprintln!("{e}");
            return Ok(ExitCode::from(2));
        }
    };
    let mut parsed = Vec::new();
    for crate::documents::Document { file, value } in crate::documents::read(resources)? {
        {
            if value.get("kind").and_then(|k| k.as_str()) != Some("DNSFailover") {
                continue;
            }
            let mut resource: DNSFailover = serde_yaml::from_value(value)
                .map_err(|e| anyhow::anyhow!("{}: not a DNSFailover: {e}", file.display()))?;
            let name = resource.metadata.name.clone().unwrap_or_default();
            if resource.metadata.namespace.is_none() {
                anyhow::bail!("{}: DNSFailover {name} names no metadata.namespace (admission judges it in its namespace)", file.display());
            }
            for (i, source) in resource.spec.endpoints.iter().enumerate() {
                let offline = [
                    source.gateway.as_ref().map(|g| format!("gateway {g}")),
                    source.ingress.as_ref().map(|i| format!("ingress {i}")),
                    source.service.as_ref().map(|s| format!("service {s}")),
                    source.nodes.as_ref().map(|_| "nodes".to_owned()),
                ];
                for what in offline.into_iter().flatten() {
                    println!("{name}: spec.endpoints[{i}]: {what} is looked up in the cluster, not here; judged with the stand-in address {STAND_IN}");
                }
                if source.gateway.as_ref().is_some_and(|g| g.contains('/')) {
                    println!("{name}: spec.endpoints[{i}]: whether that Gateway takes routes from every namespace is checked in the cluster");
                }
            }
            resource.metadata.creation_timestamp = None;
            parsed.push(resource);
        }
    }
    let refs: Vec<&DNSFailover> = parsed.iter().collect();
    let admission = Admitter::default().admit(&base, &refs, &Offline, &ho_kinds::CATALOG);
    let mut refused = false;
    for (key, verdict) in &admission.verdicts {
        match verdict {
            Verdict::Accepted { .. } => println!("{}/{}: accepted", key.0, key.1),
            Verdict::Waiting { message } => println!(
                "{}/{}: accepted, nothing to publish yet: {message}",
                key.0, key.1
            ),
            Verdict::Refused { reason, message }
            | Verdict::KeptLast {
                reason, message, ..
            } => {
                refused = true;
                eprintln!("{}/{}: refused ({reason}): {message}", key.0, key.1);
            }
        }
    }
    Ok(if refused {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

/// The address sources a cluster resolves stand for offline (TEST-NET-2, RFC 5737: never a
/// real gateway).
const STAND_IN: std::net::IpAddr = std::net::IpAddr::V4(std::net::Ipv4Addr::new(198, 51, 100, 1));

/// No cluster: every source a cluster resolves yields [`STAND_IN`].
struct Offline;

use ho_kube::tenants::discover::Target;

impl ho_kube::tenants::discover::Lookup for Offline {
    fn gateway(&self, _: &str, _: &str) -> Option<ho_kube::tenants::discover::FoundGateway> {
        Some(ho_kube::tenants::discover::FoundGateway {
            addresses: vec![Target::Address(STAND_IN)],
            open_to_all_namespaces: true,
        })
    }
    fn ingress(&self, _: &str, _: &str) -> Option<Vec<Target>> {
        Some(vec![Target::Address(STAND_IN)])
    }
    fn service(&self, _: &str, _: &str) -> Option<Vec<Target>> {
        Some(vec![Target::Address(STAND_IN)])
    }
    fn nodes(
        &self,
        _: &std::collections::BTreeMap<String, String>,
        _: ho_kube::tenants::resource::NodeAddressType,
    ) -> Vec<(String, std::net::IpAddr)> {
        vec![("stand-in".into(), STAND_IN)]
    }
}
