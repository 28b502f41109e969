//! What a Gslb points at (its embedded `spec.ingress` or its `resourceRef`), as a
//! DNSFailover source: where the addresses come from, the names, and how to check them.
//!
//! k8gb reads the referenced object's status in its own cluster; so does a DNSFailover
//! source (`ingress`, `service`, `gateway`), so the imported resource follows address
//! changes as k8gb does. Where no source can name the object (an Istio VirtualService,
//! whose ingress gateway Service lives in Istio's namespace), the addresses k8gb last saw
//! are copied, and the note says they no longer follow.

use anyhow::{bail, Context};
use serde_json::{json, Value as Json};
use serde_yaml::Value;

use super::super::text;

/// What a Gslb's target becomes.
pub(super) struct Target {
    /// The source (an `endpoints[]` entry without labels, weight or priority).
    pub source: Json,
    /// The names it serves, each with its check when one can be said (else the operator's
    /// `[defaults.check]`): k8gb judges each host by its own Services.
    pub hosts: Vec<(String, Option<Json>)>,
}

impl Target {
    /// Every host checked alike.
    fn alike(source: Json, hosts: Vec<String>, check: impl Fn(&str) -> Option<Json>) -> Target {
        let hosts = hosts
            .into_iter()
            .map(|h| {
                let c = check(&h);
                (h, c)
            })
            .collect();
        Target { source, hosts }
    }
}

/// The documents an import was given, to find what a Gslb references.
pub(super) struct Documents<'a>(pub &'a [Value]);

impl<'a> Documents<'a> {
    fn find(&self, kinds: &[&str], namespace: &str, name: &str) -> Option<&'a Value> {
        kinds
            .iter()
            .flat_map(|kind| self.of_kind(kind, namespace))
            .find(|d| d.get("metadata").and_then(|m| text(m, "name")) == Some(name))
    }

    /// The documents of `kind` in `namespace` (those naming none are taken to be in it).
    pub(super) fn of_kind<'k>(
        &self,
        kind: &'k str,
        namespace: &'k str,
    ) -> impl Iterator<Item = &'a Value> + 'k
    where
        'a: 'k,
    {
        self.0.iter().filter(move |d| {
            text(d, "kind") == Some(kind)
                && d.get("metadata")
                    .and_then(|m| text(m, "namespace"))
                    .unwrap_or(namespace)
                    == namespace
        })
    }
}

/// The target of Gslb `gslb` (in `namespace`), from the documents given.
pub(super) fn resolve(
    gslb: &Value,
    name: &str,
    namespace: &str,
    docs: &Documents,
    notes: &mut Vec<String>,
) -> anyhow::Result<Target> {
    let spec = gslb.get("spec");
    let embedded = spec
        .and_then(|s| s.get("ingress"))
        .filter(|i| i.get("rules").is_some());
    if let Some(ingress) = embedded {
        // k8gb makes an Ingress named like the Gslb from the embedded spec.
        return ingress_target(
            name,
            ingress,
            &format!("Gslb {namespace}/{name}"),
            gslb,
            notes,
        );
    }
    let Some(reference) = spec
        .and_then(|s| s.get("resourceRef"))
        .filter(|r| r.is_mapping())
    else {
        bail!("Gslb {namespace}/{name} has neither spec.ingress nor spec.resourceRef: k8gb would not know its addresses either");
    };
    let kind = text(reference, "kind").unwrap_or_default();
    let (ref_ns, ref_name) = referenced(reference, name, namespace, docs, notes)?;
    let (ref_ns, ref_name) = (ref_ns.as_str(), ref_name.as_str());
    if ref_ns != namespace && kind != "VirtualService" {
        bail!("Gslb {namespace}/{name}: resourceRef names {kind} {ref_ns}/{ref_name} in another namespace; a DNSFailover reads sources in its own namespace");
    }
    let at = format!("Gslb {namespace}/{name}.spec.resourceRef ({kind} {ref_name})");
    match kind {
        "Ingress" => match docs.find(&["Ingress"], namespace, ref_name) {
            Some(ingress) => ingress_target(ref_name, ingress.get("spec").unwrap_or(ingress), &at, gslb, notes),
            None => {
                let hosts = status_hosts(gslb).with_context(|| format!("{at}: pass the Ingress document (kubectl get ingress {ref_name} -o yaml) or the Gslb with its status"))?;
                Ok(Target::alike(json!({"ingress": ref_name}), hosts, |h| Some(http_check(h, "/", false))))
            }
        },
        "Service" => {
            let hosts = status_hosts(gslb).with_context(|| format!("{at}: a Service names no host; k8gb takes it from the Gslb's status (export the Gslb with it) or its k8gb.io/hostname annotation"))?;
            let port = docs
                .find(&["Service"], namespace, ref_name)
                .and_then(|s| s.get("spec")?.get("ports")?.get(0)?.get("port")?.as_u64());
            if port.is_none() {
                notes.push(format!("{at}: its port is unknown without the Service document; its addresses get the operator's [defaults.check]"));
            }
            Ok(Target::alike(json!({"service": ref_name}), hosts, |_| {
                port.map(|p| json!({"kind": "tcp", "port": p}))
            }))
        }
        "HTTPRoute" | "GRPCRoute" | "TLSRoute" | "TCPRoute" | "UDPRoute" => {
            match docs.find(&[kind], namespace, ref_name) {
                Some(route) => route_target(kind, route, namespace, docs, gslb, &at, notes),
                None => copied_addresses(gslb, &at, notes, "the route's Gateway is unknown without the route document", None),
            }
        }
        "VirtualService" => {
            let hosts = docs
                .find(&["VirtualService"], ref_ns, ref_name)
                .map(|v| strings(v.get("spec").and_then(|s| s.get("hosts"))));
            copied_addresses(gslb, &at, notes, "an Istio VirtualService's addresses are its ingress gateway Service's, in Istio's namespace, which a DNSFailover source cannot name", hosts)
        }
        other => bail!("{at}: k8gb resolves Ingress, Service, HTTPRoute, GRPCRoute, TLSRoute, TCPRoute, UDPRoute and VirtualService references, not {other:?}"),
    }
}

/// The namespace and name of the object `reference` names, or the one object its label
/// selector matches: k8gb lists the kind in the Gslb's own namespace by the selector.
fn referenced(
    reference: &Value,
    name: &str,
    namespace: &str,
    docs: &Documents,
    notes: &mut Vec<String>,
) -> anyhow::Result<(String, String)> {
    if let Some(ref_name) = text(reference, "name") {
        let ref_ns = text(reference, "namespace").unwrap_or(namespace);
        return Ok((ref_ns.to_owned(), ref_name.to_owned()));
    }
    let kind = text(reference, "kind").unwrap_or_default();
    let at = format!("Gslb {namespace}/{name}");
    let selected = super::selector::select(reference, kind, namespace, docs, &at)?;
    notes.push(format!("{at}: resourceRef's label selector: the DNSFailover names the {kind} it selects now, {selected}, and does not follow the labels to another"));
    Ok((namespace.to_owned(), selected))
}

/// An Ingress (embedded in the Gslb or referenced): each rule's host, checked by a request
/// for it on its first path.
fn ingress_target(
    name: &str,
    spec: &Value,
    at: &str,
    gslb: &Value,
    notes: &mut Vec<String>,
) -> anyhow::Result<Target> {
    let rules = spec
        .get("rules")
        .and_then(Value::as_sequence)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let tls_hosts: Vec<&str> = spec
        .get("tls")
        .and_then(Value::as_sequence)
        .into_iter()
        .flatten()
        .filter_map(|t| t.get("hosts").and_then(Value::as_sequence))
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut hosts: Vec<(String, Option<Json>)> = Vec::new();
    for rule in rules {
        let Some(host) = text(rule, "host") else {
            continue;
        };
        if hosts.iter().any(|(h, _)| h == host) {
            continue;
        }
        let paths = rule
            .get("http")
            .and_then(|h| h.get("paths")?.as_sequence())
            .map(Vec::as_slice)
            .unwrap_or_default();
        let path = paths
            .first()
            .filter(|p| matches!(text(p, "pathType"), Some("Prefix" | "Exact")))
            .and_then(|p| text(p, "path"))
            .unwrap_or("/");
        if paths.len() > 1 {
            let policy = gslb
                .get("spec")
                .and_then(|s| text(s, "serviceHealthPolicy"))
                .unwrap_or("Any");
            notes.push(format!("{at}: host {host} routes {} paths to their own Services, and k8gb's serviceHealthPolicy {policy} judges them together; the check requests the first path ({path}) only", paths.len()));
        }
        let check = http_check(host, path, tls_hosts.contains(&host));
        hosts.push((host.to_owned(), Some(check)));
    }
    let source = json!({"ingress": name});
    if hosts.is_empty() {
        let names = status_hosts(gslb).with_context(|| {
            format!("{at}: the Ingress has no rule with a host, so it has no name to publish")
        })?;
        return Ok(Target::alike(source, names, |h| {
            Some(http_check(h, "/", false))
        }));
    }
    Ok(Target { source, hosts })
}

/// A Gateway API route: its parent Gateway as the source, its hostnames (or the Gslb's
/// `k8gb.io/hostname`, as k8gb takes them for TCP and UDP routes).
fn route_target(
    kind: &str,
    route: &Value,
    namespace: &str,
    docs: &Documents,
    gslb: &Value,
    at: &str,
    notes: &mut Vec<String>,
) -> anyhow::Result<Target> {
    let spec = route.get("spec");
    let Some(parent) = spec
        .and_then(|s| s.get("parentRefs"))
        .and_then(|p| p.get(0))
    else {
        bail!("{at}: the route has no parentRefs, so no Gateway serves it");
    };
    let gateway = text(parent, "name").context("the route's parentRefs[0] has no name")?;
    let gateway_ns = text(parent, "namespace").unwrap_or(namespace);
    let reference = if gateway_ns == namespace {
        gateway.to_owned()
    } else {
        format!("{gateway_ns}/{gateway}")
    };
    let mut hosts = strings(spec.and_then(|s| s.get("hostnames")));
    if hosts.is_empty() {
        hosts = annotation(gslb, "k8gb.io/hostname")
            .map(|h| vec![h.to_owned()])
            .map_or_else(|| status_hosts(gslb), Ok)
            .with_context(|| format!("{at}: a {kind} has no hostnames; k8gb takes its name from the Gslb's k8gb.io/hostname annotation"))?;
    }
    // The listener's port: the parentRef's, else the Gateway's listener it names.
    let port = parent.get("port").and_then(Value::as_u64).or_else(|| {
        let listeners = docs
            .find(&["Gateway"], gateway_ns, gateway)?
            .get("spec")?
            .get("listeners")?
            .as_sequence()?;
        let section = text(parent, "sectionName");
        listeners
            .iter()
            .find(|l| section.is_none_or(|s| text(l, "name") == Some(s)))?
            .get("port")?
            .as_u64()
    });
    match (kind, port) {
        ("UDPRoute", _) => notes.push(format!("{at}: no check kind here speaks the UDP service; its addresses get the operator's [defaults.check]")),
        ("HTTPRoute", _) | (_, Some(_)) => {}
        (_, None) => notes.push(format!("{at}: its listener's port is unknown (no parentRefs[0].port and no Gateway document); its addresses get the operator's [defaults.check]")),
    }
    Ok(Target::alike(
        json!({"gateway": reference}),
        hosts,
        |host| match (kind, port) {
            ("UDPRoute", _) => None,
            ("HTTPRoute", port) => {
                let mut check = http_check(host, "/", false);
                if let Some(p) = port {
                    check["port"] = p.into();
                }
                Some(check)
            }
            (_, port) => port.map(|p| json!({"kind": "tcp", "port": p})),
        },
    ))
}

/// The addresses k8gb last exposed (its status), copied, for targets no source can name.
fn copied_addresses(
    gslb: &Value,
    at: &str,
    notes: &mut Vec<String>,
    why: &str,
    hosts: Option<Vec<String>>,
) -> anyhow::Result<Target> {
    let addresses = exposed_ips(gslb)
        .with_context(|| format!("{at}: {why}; pass the Gslb with its status.loadBalancer.exposedIps (kubectl get gslb -o yaml) or set its k8gb.io/exposed-ip-addresses annotation"))?;
    notes.push(format!("{at}: {why}: its addresses are copied from the Gslb ({}) and no longer follow the gateway's", addresses.join(", ")));
    let hosts = match hosts {
        Some(hosts) if !hosts.is_empty() => hosts,
        _ => status_hosts(gslb)
            .with_context(|| format!("{at}: no host names in the Gslb's status"))?,
    };
    Ok(Target::alike(json!({"addresses": addresses}), hosts, |h| {
        Some(http_check(h, "/", false))
    }))
}

/// A request for `host` through the gateway. k8gb counts a cluster healthy while the
/// Services behind the host have ready endpoints; through an ingress, that is any answer
/// the application gives: a controller answers 502/503/504 when no endpoint is ready, so a
/// status up to 499 is healthy. A wildcard host is asked as one name under it.
fn http_check(host: &str, path: &str, tls: bool) -> Json {
    let host = host
        .strip_prefix("*.")
        .map_or_else(|| host.to_owned(), |rest| format!("k8gb-health.{rest}"));
    json!({
        "kind": if tls { "https" } else { "http" },
        "port": if tls { 443 } else { 80 },
        "host": host,
        "path": path,
        "expectStatus": ["200-499"],
    })
}

/// The host names k8gb recorded in the Gslb's status (`servers[].host`, else `hosts`).
fn status_hosts(gslb: &Value) -> anyhow::Result<Vec<String>> {
    let status = gslb.get("status");
    let mut hosts: Vec<String> = status
        .and_then(|s| s.get("servers"))
        .and_then(Value::as_sequence)
        .into_iter()
        .flatten()
        .filter_map(|s| text(s, "host"))
        .map(str::to_owned)
        .collect();
    if hosts.is_empty() {
        hosts = status
            .and_then(|s| text(s, "hosts"))
            .map(comma_list)
            .unwrap_or_default();
    }
    if hosts.is_empty() {
        bail!("no host names");
    }
    Ok(hosts)
}

/// The Gslb's `k8gb.io/exposed-ip-addresses` annotation, which k8gb prefers to what the
/// target reports.
pub(super) fn exposed_ips_annotation(gslb: &Value) -> Option<Vec<String>> {
    annotation(gslb, "k8gb.io/exposed-ip-addresses").map(comma_list)
}

/// A comma-separated list, as k8gb's annotations and `status.hosts` write them.
fn comma_list(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The strings of a YAML sequence (none when it is absent).
fn strings(list: Option<&Value>) -> Vec<String> {
    list.and_then(Value::as_sequence)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

/// The addresses k8gb exposes for the Gslb: its annotation, else its
/// `status.loadBalancer.exposedIps`.
fn exposed_ips(gslb: &Value) -> anyhow::Result<Vec<String>> {
    if let Some(ips) = exposed_ips_annotation(gslb) {
        return Ok(ips);
    }
    let ips = strings(
        gslb.get("status")
            .and_then(|s| s.get("loadBalancer"))
            .and_then(|l| l.get("exposedIps")),
    );
    if ips.is_empty() {
        bail!("no exposed IPs");
    }
    Ok(ips)
}

/// Annotation `key` of a document.
pub(super) fn annotation<'v>(doc: &'v Value, key: &str) -> Option<&'v str> {
    doc.get("metadata")?.get("annotations")?.get(key)?.as_str()
}
