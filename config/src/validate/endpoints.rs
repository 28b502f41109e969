//! Endpoints: names, addresses, checks, and the shared probe targets they resolve to.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

use crate::model::{CheckOverrides, Config};
use crate::names::check_object_name;
use crate::plan::{CheckSpec, Endpoint, Target};

use super::check_kinds::CheckCatalog;
use super::checks::resolve_check;
use super::Errors;

/// Resolves each endpoint; `None` marks one with errors so later indices stay aligned
/// with the config for error paths. Equal checks are shared: every target holds an `Arc` of
/// one copy per distinct check (`default_check` for endpoints that override nothing).
pub(super) fn resolve_endpoints(
    config: &Config,
    base: &CheckOverrides,
    default_check: Option<CheckSpec>,
    checks: &dyn CheckCatalog,
    errs: &mut Errors,
) -> (Vec<Option<Endpoint>>, Vec<Target>) {
    // With `[kubernetes] tenants`, resources bring the endpoints.
    if config.endpoints.is_empty() && !config.kubernetes.tenants {
        errs.push("endpoints", "none configured: there is nothing to probe");
    }
    let default_check = default_check.map(Arc::new);
    let mut distinct_checks: HashSet<Arc<CheckSpec>> = default_check.iter().cloned().collect();
    let mut seen = HashMap::new();
    let mut targets: Vec<Target> = Vec::new();
    let mut target_ids: HashMap<Target, usize> = HashMap::new();
    let mut out = Vec::with_capacity(config.endpoints.len());
    for (i, ep) in config.endpoints.iter().enumerate() {
        let path = format!("endpoints[{i}]");
        let mut ok = true;
        if let Err(e) = check_object_name(&ep.name) {
            errs.push(format!("{path}.name"), e);
            ok = false;
        } else if let Some(first) = seen.insert(ep.name.as_str(), i) {
            errs.push(
                format!("{path}.name"),
                format!(
                    "duplicate endpoint name \"{}\" (first at endpoints[{first}])",
                    ep.name
                ),
            );
            ok = false;
        }
        let address = match ep.address.parse::<IpAddr>() {
            Ok(a) => Some(a),
            Err(_) => {
                errs.push(
                    format!("{path}.address"),
                    format!("\"{}\" is not an IP address", ep.address),
                );
                None
            }
        };
        let check = if ep.check == CheckOverrides::default() {
            default_check.clone()
        } else {
            resolve_check(
                &ep.check.over(base),
                Some(&ep.check),
                &format!("{path}.check"),
                checks,
                errs,
            )
            .map(|check| match distinct_checks.get(&check) {
                Some(shared) => shared.clone(),
                None => {
                    let shared = Arc::new(check);
                    distinct_checks.insert(shared.clone());
                    shared
                }
            })
        };
        let source = check.as_ref().and_then(|c| c.source_address);
        if let (Some(a), Some(src)) = (address, source) {
            if a.is_ipv4() != src.is_ipv4() {
                errs.push(
                    format!("{path}.check.source_address"),
                    format!("{src} and the endpoint's address {a} are of different IP families"),
                );
                ok = false;
            }
        }
        if let Some(cluster) = &ep.cluster {
            if let Err(e) = super::check_cluster_id(cluster) {
                errs.push(format!("{path}.cluster"), e);
                ok = false;
            }
        }
        match (address, check, ok) {
            (Some(address), Some(check), true) => {
                let target = Target { address, check };
                let next = targets.len();
                let id = *target_ids.entry(target.clone()).or_insert(next);
                if id == next {
                    targets.push(target);
                }
                out.push(Some(Endpoint {
                    name: ep.name.clone(),
                    address,
                    labels: ep.labels.clone(),
                    weight: ep.weight,
                    priority: ep.priority.unwrap_or(0),
                    cluster: ep.cluster.clone(),
                    hold_failback: ep.hold_failback,
                    target: id,
                }));
            }
            _ => out.push(None),
        }
    }
    (out, targets)
}
