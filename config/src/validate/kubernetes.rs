//! `[kubernetes]`: the allowances must name real namespaces, domains and sinks, once each.

use std::collections::HashSet;

use super::Errors;
use crate::model::Config;
use crate::names::{check_kube_name, normalize_domain};

/// A namespace listed twice would make its allowance depend on the order of the file; a
/// suffix that is not a domain or a sink that does not exist would silently allow nothing.
pub(super) fn check_kubernetes(config: &Config, errs: &mut Errors) {
    if config.kubernetes.kuadrant_default_policy && !config.kubernetes.kuadrant {
        errs.push(
            "kubernetes.kuadrant_default_policy",
            "makes Kuadrant's default DNSPolicy, which only kuadrant = true reads: set kuadrant = true too",
        );
    }
    if let Some(name) = &config.kubernetes.operator_state {
        if let Err(e) = check_kube_name(name, 253) {
            errs.push("kubernetes.operator_state", e);
        }
    }
    let mut seen = HashSet::new();
    for (i, allow) in config.kubernetes.allow.iter().enumerate() {
        let at = |field: &str| format!("kubernetes.allow[{i}].{field}");
        if let Err(e) = check_kube_name(&allow.namespace, 63) {
            errs.push(at("namespace"), e);
        }
        if !seen.insert(allow.namespace.as_str()) {
            errs.push(
                at("namespace"),
                format!(
                    "\"{}\" is listed more than once: give each namespace one allowance",
                    allow.namespace
                ),
            );
        }
        if allow.domains.is_empty() {
            errs.push(at("domains"), "must name at least one domain suffix");
        }
        for (j, domain) in allow.domains.iter().enumerate() {
            if let Err(e) = normalize_domain(domain) {
                errs.push(at(&format!("domains[{j}]")), e);
            }
        }
        for (j, sink) in allow.sinks.iter().enumerate() {
            if !config.sinks.contains_key(sink) {
                errs.push(
                    at(&format!("sinks[{j}]")),
                    format!("no sink named \"{sink}\" in [sinks]"),
                );
            }
        }
        if let Some(secrets) = &allow.header_secrets {
            check_header_secrets(secrets, &at("header_secrets"), errs);
        }
    }
}

/// `header_secrets` is pasted into a Role's `resourceNames` to grant `get` by name: an
/// empty list there grants `get` on every Secret of the namespace (RBAC reads no names as
/// any name), and a name that is no Secret's grants nothing while the config reads as if
/// it did.
fn check_header_secrets(secrets: &[String], at: &str, errs: &mut Errors) {
    if secrets.is_empty() {
        errs.push(
            at,
            "is empty, and as the Role's resourceNames an empty list grants get on every Secret of the namespace: list the Secrets its health checks may read; for none, leave header_secrets out and apply no header Secrets' Role (RBAC then forbids every read)",
        );
    }
    for (j, secret) in secrets.iter().enumerate() {
        if let Err(e) = check_kube_name(secret, 253) {
            errs.push(format!("{at}[{j}]"), e);
        }
    }
}
