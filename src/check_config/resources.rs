//! `check-config --resource FILE`: each DNSFailover in the files judged as admission judges
//! it against the config (allowance, claims, the spec as `check-config` validates it), and
//! its keys as the API server would keep them; every problem of every resource in one run.
//! Sources a cluster resolves (`gateway`, `ingress`, `service`, `nodes`) cannot be looked
//! up offline: they are said, and judged as if they yielded [`STAND_IN`] (a shared Gateway
//! as if it took routes from every namespace), so the rest of the resource is judged as
//! admission would.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::ExitCode;

use ho_kube::tenants::admit::{Admitter, Key, Verdict};
use ho_kube::tenants::discover::Target;
use ho_kube::tenants::resource::DNSFailover;

use super::shape;
use super::spelling::{respell, spec_schema, Spelling};
use crate::documents::{self, Document};
use ho_kube::tenants::admit::field_of;

/// What the files held: the resources to admit, and each one's problems before admission.
#[derive(Default)]
struct Read {
    resources: Vec<DNSFailover>,
    /// Problems by resource, those of its keys and values, with the reason they refuse it
    /// for when admission would accept the rest.
    keys: BTreeMap<Key, (&'static str, Vec<String>)>,
    /// Documents that could not become a resource at all.
    unreadable: Vec<String>,
    /// How many DNSFailover documents there were.
    count: usize,
}

/// Exit 0 when every resource is accepted as written; 2 when any is refused, has a key the
/// API server would not keep, or a file holds no DNSFailover.
pub fn check_resources(files: &[PathBuf], resources: &[PathBuf]) -> anyhow::Result<ExitCode> {
    let base = match crate::config_files::config(files).result {
        Ok(base) => base,
        Err(e) => {
            eprintln!("{e}");
            return Ok(ExitCode::from(2));
        }
    };
    let documents = documents::read(resources)?;
    let read = read(&documents);
    let empty = without_failovers(resources, &documents);
    for line in &empty {
        eprintln!("{line}");
    }
    if read.count == 0 {
        return Ok(ExitCode::from(2));
    }
    for problem in &read.unreadable {
        eprintln!("{problem}");
    }
    let refs: Vec<&DNSFailover> = read.resources.iter().collect();
    let admission = Admitter::default().admit(&base, &refs, &Offline, &ho_kinds::CATALOG);
    let mut failed = !read.unreadable.is_empty() || !empty.is_empty();
    for (key, verdict) in &admission.verdicts {
        let keys = read.keys.get(key);
        failed |= report(
            key,
            verdict,
            keys.map_or("", |k| k.0),
            keys.map(|k| k.1.as_slice()).unwrap_or_default(),
        );
    }
    Ok(if failed {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

/// A line for each file holding no DNSFailover (a Gslb export given by mistake, an
/// empty file), naming the kinds it holds.
fn without_failovers(files: &[PathBuf], documents: &[Document]) -> Vec<String> {
    let mut lines = Vec::new();
    for file in files {
        let kinds: BTreeSet<&str> = documents
            .iter()
            .filter(|d| d.file == *file)
            .filter_map(|d| d.value.get("kind")?.as_str())
            .collect();
        if !kinds.contains("DNSFailover") {
            let kinds: Vec<&str> = kinds.into_iter().collect();
            lines.push(format!(
                "{}: no DNSFailover among its documents (kinds found: {}): nothing to judge",
                file.display(),
                if kinds.is_empty() {
                    "none".to_owned()
                } else {
                    kinds.join(", ")
                }
            ));
        }
    }
    lines
}

/// Prints one resource's verdict with the problems of its keys and values (refused for
/// `keys_reason` when admission accepts the rest); whether it failed. What admission says
/// at or under a field already said (the empty value that stood in for it) is left out:
/// each problem is said once.
fn report(key: &Key, verdict: &Verdict, keys_reason: &'static str, keys: &[String]) -> bool {
    let at = format!("{}/{}", key.0, key.1);
    let said: Vec<String> = keys.iter().filter_map(|l| field_of(l)).collect();
    let fresh =
        |line: &&str| field_of(line).is_none_or(|f| !said.iter().any(|s| f == *s || under(&f, s)));
    let (reason, mut lines) = match verdict {
        Verdict::Refused { reason, message }
        | Verdict::KeptLast {
            reason, message, ..
        } => {
            let lines: Vec<String> = message.lines().filter(fresh).map(str::to_owned).collect();
            match lines.is_empty() {
                true => (keys_reason, lines),
                false => (*reason, lines),
            }
        }
        Verdict::Accepted { .. } | Verdict::Waiting { .. } if !keys.is_empty() => {
            (keys_reason, Vec::new())
        }
        Verdict::Accepted { .. } => {
            outln!("{at}: accepted");
            return false;
        }
        Verdict::Waiting { message } => {
            outln!("{at}: accepted, nothing to publish yet: {message}");
            return false;
        }
    };
    lines.extend(keys.iter().cloned());
    eprintln!("{at}: refused ({reason}): {}", lines.join("\n"));
    true
}

/// Whether field path `path` lies below `field` (`spec.check.port` below `spec.check`).
fn under(path: &str, field: &str) -> bool {
    path.strip_prefix(field)
        .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
}

/// Every DNSFailover among `documents`, its keys respelled and its values that do not fit
/// the schema taken out; what stops one from being read.
fn read(documents: &[Document]) -> Read {
    let schema = spec_schema();
    let mut read = Read::default();
    for Document { file, value } in documents {
        if value.get("kind").and_then(|k| k.as_str()) != Some("DNSFailover") {
            continue;
        }
        read.count += 1;
        let mut json: serde_json::Value = match serde_json::to_value(value) {
            Ok(json) => json,
            Err(e) => {
                read.unreadable
                    .push(format!("{}: not a DNSFailover: {e}", file.display()));
                continue;
            }
        };
        let mut spelling = Spelling::default();
        let mut misfits = Vec::new();
        if let Some(spec) = json.get_mut("spec") {
            respell(spec, &schema, "spec", &mut spelling);
            shape::check(spec, &schema, "spec", &mut misfits);
        }
        let reason = match misfits.is_empty() {
            true => "UnknownField",
            false => "Invalid",
        };
        spelling.problems.append(&mut misfits);
        let name = json["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let Some(namespace) = json["metadata"]["namespace"].as_str().map(str::to_owned) else {
            read.unreadable.push(format!("{}: DNSFailover {name} names no metadata.namespace (admission judges it in its namespace)", file.display()));
            continue;
        };
        for note in &spelling.deprecated {
            eprintln!("note: {namespace}/{name}: {note}");
        }
        match serde_json::from_value::<DNSFailover>(json) {
            Ok(mut resource) => {
                say_offline(&resource);
                resource.metadata.creation_timestamp = None;
                read.resources.push(resource);
                read.keys
                    .insert((namespace, name), (reason, spelling.problems));
            }
            Err(e) => {
                spelling.problems.push(e.to_string());
                read.unreadable.push(format!(
                    "{}: DNSFailover {namespace}/{name} is not one: {}",
                    file.display(),
                    spelling.problems.join("\n")
                ));
            }
        }
    }
    read
}

/// Says which of the resource's sources are looked up in the cluster, not here.
fn say_offline(resource: &DNSFailover) {
    let name = resource.metadata.name.clone().unwrap_or_default();
    for (i, source) in resource.spec.endpoints.iter().enumerate() {
        let offline = [
            source.gateway.as_ref().map(|g| format!("gateway {g}")),
            source.ingress.as_ref().map(|i| format!("ingress {i}")),
            source.service.as_ref().map(|s| format!("service {s}")),
            source.nodes.as_ref().map(|_| "nodes".to_owned()),
        ];
        for what in offline.into_iter().flatten() {
            outln!("{name}: spec.endpoints[{i}]: {what} is looked up in the cluster, not here; judged with the stand-in address {STAND_IN}");
        }
        if source.gateway.as_ref().is_some_and(|g| g.contains('/')) {
            outln!("{name}: spec.endpoints[{i}]: whether that Gateway takes routes from every namespace is checked in the cluster");
        }
    }
}

/// The address sources a cluster resolves stand for offline (TEST-NET-2, RFC 5737: never a
/// real gateway).
const STAND_IN: std::net::IpAddr = std::net::IpAddr::V4(std::net::Ipv4Addr::new(198, 51, 100, 1));

/// No cluster: every source a cluster resolves yields [`STAND_IN`].
struct Offline;

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
        _: &BTreeMap<String, String>,
        _: ho_kube::tenants::resource::NodeAddressType,
    ) -> Vec<(String, std::net::IpAddr)> {
        vec![("stand-in".into(), STAND_IN)]
    }
}
