//! Per-endpoint health on a `DNSRecord`, as dns-operator reports it: the `Healthy`
//! condition (`AllChecksPassed`; `SomeChecksPassed` or `HealthChecksFailed` naming the
//! addresses that are not healthy; "Probes are creating" before any verdict) and
//! `status.healthCheck.probes[]`, one entry per address the record publishes (a load
//! balancer's host name judged on every address it resolves to), each with its own
//! `Healthy` condition.

use std::collections::{BTreeMap, HashMap};

use ho_engine::hysteresis::Health;
use ho_engine::status::EndpointStatus;
use serde_json::{json, Value};

use super::super::resource::Condition;
use super::super::status::{condition, Observed};

/// One address a record publishes: the engine's endpoint name (a host name's stands for
/// each of its addresses' endpoints) and the address or host name as the record writes it.
pub type Leaf = (String, String);

/// An address's verdict from its endpoints' (every address of a host name): down when any
/// is down, up when all are up, else unknown; and the first failure's reason.
fn verdict(endpoints: &[EndpointStatus]) -> (Health, String) {
    let failure = endpoints
        .iter()
        .find_map(|e| e.last.as_ref().filter(|l| !l.ok))
        .map(|l| l.reason.clone())
        .unwrap_or_default();
    let state = if endpoints.iter().any(|e| e.state == Health::Down) {
        Health::Down
    } else if !endpoints.is_empty() && endpoints.iter().all(|e| e.state == Health::Up) {
        Health::Up
    } else {
        Health::Unknown
    };
    (state, failure)
}

/// The record's `Healthy` condition and its `healthCheck` status, from the engine's view of
/// its `leaves` (`seen`: the endpoints by name); `previous` and `before`: the conditions and
/// `healthCheck` it has now, whose transition times are kept while a status stays.
pub fn record_health(
    leaves: &[Leaf],
    seen: &HashMap<String, Vec<EndpointStatus>>,
    root: &str,
    previous: &[Condition],
    before: &Value,
    at: Observed,
) -> (Condition, Value) {
    let mut probes = Vec::new();
    let (mut up, mut judged, mut not_healthy) = (0, 0, Vec::new());
    for (endpoint, address) in leaves {
        let (state, failure) = verdict(seen.get(endpoint).map_or(&[][..], Vec::as_slice));
        judged += usize::from(state != Health::Unknown);
        match state {
            Health::Up => up += 1,
            _ => not_healthy.push(address.clone()),
        }
        let old: Vec<Condition> = before["probes"]
            .as_array()
            .and_then(|p| p.iter().find(|p| p["id"] == endpoint.as_str()))
            .and_then(|p| serde_json::from_value(p["conditions"].clone()).ok())
            .unwrap_or_default();
        let (reason, message) = match state {
            Health::Up => ("Healthy", "the address answers its health check".to_owned()),
            Health::Down => ("Unhealthy", failure),
            Health::Unknown => ("Unknown", "not probed yet".to_owned()),
        };
        let c = condition(&old, at, "Healthy", state == Health::Up, reason, message);
        probes.push(json!({
            "id": endpoint, "ipAddress": address, "host": root,
            "synced": state != Health::Unknown, "conditions": [c],
        }));
    }
    let list = format!("Not healthy addresses: {not_healthy:?}");
    let (ok, reason, message) = match (judged, up) {
        (0, _) => (
            false,
            "HealthChecksFailed",
            "Probes are creating".to_owned(),
        ),
        (_, u) if u == leaves.len() => (
            true,
            "AllChecksPassed",
            "All healthchecks succeeded".to_owned(),
        ),
        (_, 0) => (false, "HealthChecksFailed", list),
        _ => (false, "SomeChecksPassed", list),
    };
    let healthy = condition(previous, at, "Healthy", ok, reason, message);
    (healthy, json!({ "probes": probes }))
}

/// Each written record's leaves, by (namespace, record): from its stand-ins' sources.
pub fn leaves_of(records: &super::Records) -> BTreeMap<(String, String), Vec<Leaf>> {
    let mut out = BTreeMap::new();
    for ((ns, name), record) in records {
        let Ok(stand_ins) = &record.stand_ins else {
            continue;
        };
        if record.listener.is_some() {
            continue;
        }
        let mut leaves = Vec::new();
        for s in stand_ins {
            let tenant =
                super::super::admit::tenant_name(&(ns.clone(), kube::ResourceExt::name_any(s)));
            for source in &s.spec.endpoints {
                for a in source.addresses.iter().chain(&source.hosts) {
                    let written = super::probes::ProbeTarget::of(a).to_string();
                    let endpoint = super::super::admit::endpoint_name(&tenant, &written);
                    if !leaves.iter().any(|(e, _): &Leaf| *e == endpoint) {
                        leaves.push((endpoint, written));
                    }
                }
            }
        }
        out.insert((ns.clone(), name.clone()), leaves);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(name: &str, state: Health, failing: bool) -> EndpointStatus {
        let last = (state != Health::Unknown).then(|| ho_engine::status::LastProbe {
            ok: !failing,
            reason: if failing {
                format!("{name} refused")
            } else {
                "ok".into()
            },
            latency_ms: 1.0,
            at: ho_engine::clock::Timestamp(std::time::UNIX_EPOCH),
        });
        EndpointStatus {
            name: name.to_owned(),
            address: "192.0.2.1".parse().unwrap(),
            target: String::new(),
            state,
            since: None,
            consecutive_successes: 0,
            consecutive_failures: 0,
            failed_in_a_row: u32::from(failing),
            probes: 1,
            failures: 0,
            rise: 1,
            fall: 1,
            transitions: 0,
            downtime_seconds: 0.0,
            drained: false,
            forced: None,
            last,
            damping: None,
            reported_weight: None,
            composite: None,
            unowned_seconds: Default::default(),
        }
    }

    /// Seeded records of up to four addresses, each judged on up to three endpoints (a host
    /// name's addresses): the `Healthy` condition and each probe entry read as dns-operator's
    /// rules say, computed here from the script: an address is healthy when every one of its
    /// endpoints is up, unhealthy when one is down; the record passes when every address is
    /// healthy, partly when some are, and "Probes are creating" while none is judged.
    #[test]
    fn record_health_follows_dns_operators_rules_over_generated_records() {
        let states = [Health::Up, Health::Down, Health::Unknown];
        for seed in 1..=500u64 {
            let mut rng = fastrand::Rng::with_seed(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let mut leaves = Vec::new();
            let mut seen = HashMap::new();
            let mut want: Vec<Option<bool>> = Vec::new();
            for i in 0..=rng.u64(..4) {
                let name = format!("t_192.0.2.{i}");
                let n = rng.u64(..4);
                let picked: Vec<Health> = (0..n).map(|_| states[rng.u64(..3) as usize]).collect();
                want.push(if picked.contains(&Health::Down) {
                    Some(false)
                } else if !picked.is_empty() && picked.iter().all(|s| *s == Health::Up) {
                    Some(true)
                } else {
                    None
                });
                let statuses = picked
                    .iter()
                    .map(|s| endpoint(&name, *s, *s == Health::Down));
                seen.insert(name.clone(), statuses.collect::<Vec<_>>());
                leaves.push((name, format!("192.0.2.{i}")));
            }
            let at = Observed {
                generation: Some(1),
                now: 0.0,
            };
            let (healthy, status) =
                record_health(&leaves, &seen, "api.example.com", &[], &Value::Null, at);
            let up = want.iter().filter(|w| **w == Some(true)).count();
            let judged = want.iter().filter(|w| w.is_some()).count();
            let expected = match (judged, up) {
                (0, _) => ("False", "HealthChecksFailed"),
                (_, u) if u == leaves.len() => ("True", "AllChecksPassed"),
                (_, 0) => ("False", "HealthChecksFailed"),
                _ => ("False", "SomeChecksPassed"),
            };
            let at_seed = format!("seed {seed}: {want:?}");
            assert_eq!(
                (healthy.status.as_str(), healthy.reason.as_str()),
                expected,
                "{at_seed}"
            );
            for ((w, (_, address)), probe) in want
                .iter()
                .zip(&leaves)
                .zip(status["probes"].as_array().unwrap())
            {
                assert_eq!(probe["ipAddress"], address.as_str(), "{at_seed}");
                assert_eq!(probe["synced"], w.is_some(), "{at_seed}");
                let named = healthy.message.contains(&format!("\"{address}\""));
                assert_eq!(
                    named,
                    judged > 0 && *w != Some(true),
                    "{at_seed}: {}",
                    healthy.message
                );
            }
        }
    }
}
