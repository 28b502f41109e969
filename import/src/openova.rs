//! `import --from openova FILE.yaml`: the OpenOva DNS failover config (the OpenOva spec's
//! `nodes`, `tenants`, `health_check`, `coredns`) as ours.

use std::collections::BTreeMap;

use anyhow::{bail, Context};
use serde_yaml::Value;
use toml::Table;

use super::{text, unknown_keys};

/// One node's `health_endpoint`, split into what a check needs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct HealthUrl {
    pub(super) kind: String,
    pub(super) port: u16,
    pub(super) path: String,
    pub(super) host: String,
}

/// An `http(s)://host[:port]/path` URL, split into what a check needs.
pub(super) fn parse_url(url: &str) -> Option<HealthUrl> {
    let (scheme, rest) = url.split_once("://")?;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let default_port = match scheme {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || authority.starts_with('[') => {
            (h.trim_matches(['[', ']']).to_owned(), p.parse().ok()?)
        }
        _ => (authority.trim_matches(['[', ']']).to_owned(), default_port),
    };
    Some(HealthUrl {
        kind: scheme.to_owned(),
        port,
        path: if path.is_empty() {
            "/".into()
        } else {
            path.into()
        },
        host,
    })
}

/// The config equivalent to an OpenOva `config.yaml`, and what could not be carried over.
pub fn convert(yaml: &Value) -> anyhow::Result<super::Imported> {
    let mut notes = Vec::new();
    unknown_keys(
        yaml,
        &["nodes", "tenants", "health_check", "coredns"],
        "",
        &mut notes,
    );
    let nodes = yaml
        .get("nodes")
        .and_then(Value::as_sequence)
        .context("no `nodes` list: not an OpenOva DNS failover config")?;
    let tenants = yaml
        .get("tenants")
        .and_then(Value::as_sequence)
        .context("no `tenants` list: not an OpenOva DNS failover config")?;
    // The most common health URL shape becomes [defaults.check]; nodes that differ keep
    // their own check.
    let mut urls = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        unknown_keys(
            node,
            &["name", "ip", "health_endpoint"],
            &format!("nodes[{i}]"),
            &mut notes,
        );
        let url = text(node, "health_endpoint")
            .with_context(|| format!("nodes[{i}] has no health_endpoint"))?;
        let parsed = parse_url(url)
            .with_context(|| format!("nodes[{i}].health_endpoint {url:?} is not an http(s) URL"))?;
        urls.push(parsed);
    }
    let mut counts: BTreeMap<(String, u16, String), usize> = BTreeMap::new();
    for u in &urls {
        *counts
            .entry((u.kind.clone(), u.port, u.path.clone()))
            .or_default() += 1;
    }
    let common = counts
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(k, _)| k.clone())
        .context("no nodes")?;

    let mut check = Table::new();
    check.insert("kind".into(), common.0.clone().into());
    check.insert("port".into(), i64::from(common.1).into());
    check.insert("path".into(), common.2.clone().into());
    let hc = yaml.get("health_check");
    if let Some(hc) = hc {
        unknown_keys(
            hc,
            &[
                "interval_seconds",
                "timeout_seconds",
                "failure_threshold",
                "success_threshold",
            ],
            "health_check",
            &mut notes,
        );
    }
    let number = |key: &str| hc.and_then(|h| h.get(key)).and_then(Value::as_f64);
    if let Some(s) = number("interval_seconds") {
        check.insert("interval".into(), duration_text(s).into());
    }
    if let Some(s) = number("timeout_seconds") {
        check.insert("timeout".into(), duration_text(s).into());
    }
    if let Some(n) = number("failure_threshold") {
        check.insert("fall".into(), (n as i64).into());
    }
    if let Some(n) = number("success_threshold") {
        check.insert("rise".into(), (n as i64).into());
    }
    let mut defaults = Table::new();
    defaults.insert("check".into(), check.into());

    let mut endpoints = Vec::new();
    for (i, (node, url)) in nodes.iter().zip(&urls).enumerate() {
        let name = text(node, "name").with_context(|| format!("nodes[{i}] has no name"))?;
        let ip = text(node, "ip").unwrap_or(&url.host);
        if ip.parse::<std::net::IpAddr>().is_err() {
            bail!("nodes[{i}].ip {ip:?} is not an IP address (the address probed is the address published)");
        }
        let mut ep = Table::new();
        ep.insert("name".into(), name.into());
        ep.insert("address".into(), ip.into());
        let mut own = Table::new();
        if (url.kind.clone(), url.port, url.path.clone()) != common {
            own.insert("kind".into(), url.kind.clone().into());
            own.insert("port".into(), i64::from(url.port).into());
            own.insert("path".into(), url.path.clone().into());
        }
        if url.host != ip {
            // Probed at the node's address, with the URL's host name as Host header.
            own.insert("host".into(), url.host.clone().into());
        }
        if !own.is_empty() {
            ep.insert("check".into(), own.into());
        }
        endpoints.push(toml::Value::Table(ep));
    }

    let coredns = yaml.get("coredns");
    if let Some(c) = coredns {
        unknown_keys(
            c,
            &["configmap_name", "configmap_namespace"],
            "coredns",
            &mut notes,
        );
    }
    let namespace = coredns.and_then(|c| text(c, "configmap_namespace"));
    let name = coredns.and_then(|c| text(c, "configmap_name"));
    // Unnamed, it is the ConfigMap the shipped manifests create and their RBAC lets the
    // orchestrator patch; a named one needs the same grant in its own namespace.
    let (namespace, name) = (
        namespace.unwrap_or(SHIPPED_NAMESPACE),
        name.unwrap_or(SHIPPED_CONFIGMAP),
    );
    let mut to_do = Vec::new();
    if (namespace, name) != (SHIPPED_NAMESPACE, SHIPPED_CONFIGMAP) {
        to_do.push(format!(
            "deploy/kubernetes/rbac.yaml lets the orchestrator get and patch only {SHIPPED_NAMESPACE}/{SHIPPED_CONFIGMAP}: grant get and patch on ConfigMap {name} in namespace {namespace} (a Role and RoleBinding there), or point sinks.coredns at the shipped ConfigMap"
        ));
    }
    let mut sink = Table::new();
    sink.insert("kind".into(), "coredns_configmap".into());
    sink.insert("namespace".into(), namespace.into());
    sink.insert("name".into(), name.into());
    let mut sinks = Table::new();
    sinks.insert("coredns".into(), sink.into());

    let mut out_tenants = Vec::new();
    for (i, t) in tenants.iter().enumerate() {
        unknown_keys(
            t,
            &["name", "domains", "hosts_key"],
            &format!("tenants[{i}]"),
            &mut notes,
        );
        let name = text(t, "name").with_context(|| format!("tenants[{i}] has no name"))?;
        let domains: Vec<toml::Value> = t
            .get("domains")
            .and_then(Value::as_sequence)
            .with_context(|| format!("tenants[{i}] has no domains"))?
            .iter()
            .filter_map(Value::as_str)
            .map(toml::Value::from)
            .collect();
        let mut tenant = Table::new();
        tenant.insert("name".into(), name.into());
        tenant.insert("domains".into(), domains.into());
        if let Some(key) = text(t, "hosts_key") {
            tenant.insert("hosts_key".into(), key.into());
        }
        tenant.insert("sinks".into(), vec![toml::Value::from("coredns")].into());
        out_tenants.push(toml::Value::Table(tenant));
    }

    let mut config = Table::new();
    config.insert("defaults".into(), defaults.into());
    config.insert("endpoints".into(), endpoints.into());
    config.insert("tenants".into(), out_tenants.into());
    config.insert("sinks".into(), sinks.into());
    Ok(super::Imported {
        config,
        not_carried: notes,
        by_record: Default::default(),
        unpublished: Default::default(),
        policies: Default::default(),
        to_do,
    })
}

/// The namespace and ConfigMap of deploy/kubernetes (hosts-configmap.yaml, rbac.yaml).
const SHIPPED_NAMESPACE: &str = "dns-failover";
const SHIPPED_CONFIGMAP: &str = "health-orchestrator-hosts";

/// Seconds as a duration a person writes: "5s", "500ms".
pub(super) fn duration_text(seconds: f64) -> String {
    let ms = (seconds * 1000.0).round() as u64;
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_urls_split_into_checks() {
        let u = parse_url("http://10.0.0.1:15021/healthz/ready").unwrap();
        assert_eq!(
            (u.kind.as_str(), u.port, u.path.as_str(), u.host.as_str()),
            ("http", 15021, "/healthz/ready", "10.0.0.1")
        );
        let u = parse_url("https://gw.example").unwrap();
        assert_eq!((u.port, u.path.as_str()), (443, "/"));
        let u = parse_url("http://[2001:db8::1]:8080/h").unwrap();
        assert_eq!((u.host.as_str(), u.port), ("2001:db8::1", 8080));
        assert!(parse_url("ftp://x/").is_none());
    }
}
