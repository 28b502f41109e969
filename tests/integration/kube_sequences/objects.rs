//! The manifests a step writes, as a team would `kubectl apply` them.

use serde_json::{json, Value};

use super::steps::{Addresses, Mask, Object, Step};

/// The load balancer's host name a Gateway may report (a static record of the embedded
/// server, resolving to gateway 2).
pub const LB_HOST: &str = "lb.team-a.io";

/// The gateways' addresses and their shared port.
pub struct Gateways {
    pub ips: Vec<String>,
    pub port: u16,
}

impl Gateways {
    /// The addresses of `mask`'s gateways.
    pub fn of(&self, mask: Mask) -> Vec<String> {
        (0..self.ips.len())
            .filter(|i| mask & (1 << i) != 0)
            .map(|i| self.ips[i].clone())
            .collect()
    }
}

/// (plural, namespace, name) of `object`.
pub fn locate(object: Object) -> (&'static str, &'static str, String) {
    match object {
        Object::Failover(n) => ("dnsfailovers", "team-a", format!("fo-{n}")),
        Object::Record(n) => ("dnsrecords", "team-a", format!("rec-{n}")),
        Object::Outsider => ("dnsrecords", "team-c", "rec-x".into()),
        Object::Gateway => ("gateways", "team-a", "gw-0".into()),
        Object::Policy => ("dnspolicies", "team-a", "gw-0-dns".into()),
        Object::Probe => ("dnshealthcheckprobes", "team-a", "probe-0".into()),
    }
}

/// The object `step` writes (`None` for deletions and faults).
pub fn manifest(step: &Step, gws: &Gateways) -> Option<Value> {
    Some(match *step {
        Step::Failover { slot, addrs, valid } => {
            let mut addresses = gws.of(addrs);
            if !valid {
                addresses.push("gw.example".into());
            }
            json!({
                "apiVersion": "healthorchestrator.io/v1alpha1", "kind": "DNSFailover",
                "metadata": {"name": format!("fo-{slot}"), "namespace": "team-a"},
                "spec": {"domains": [format!("fo-{slot}.team-a.io")], "sinks": ["dns"],
                         "endpoints": [{"addresses": addresses}]},
            })
        }
        Step::Record { slot, addrs, valid } => record("team-a", &format!("rec-{slot}"), {
            let host = format!("rec-{slot}.team-a.io");
            if valid {
                json!([{"dnsName": host, "recordType": "A", "recordTTL": 30, "targets": gws.of(addrs)}])
            } else {
                json!("broken")
            }
        }),
        Step::Outsider => record(
            "team-c",
            "rec-x",
            json!([{"dnsName": "rec-x.team-c.io", "recordType": "A", "recordTTL": 30, "targets": gws.of(1)}]),
        ),
        Step::Gateway {
            listeners,
            addresses,
        } => gateway(listeners, addresses, gws),
        Step::Policy { v1alpha1, valid } => policy(v1alpha1, valid, gws.port),
        Step::Probe { at, valid } => {
            let address = if valid {
                gws.ips[usize::from(at)].clone()
            } else {
                "not an address!".into()
            };
            json!({
                "apiVersion": "kuadrant.io/v1alpha1", "kind": "DNSHealthCheckProbe",
                "metadata": {"name": "probe-0", "namespace": "team-a"},
                "spec": {"port": gws.port, "hostname": "probe.team-a.io", "address": address,
                         "path": "/healthz", "protocol": "HTTP", "interval": "1s"},
            })
        }
        _ => return None,
    })
}

fn record(ns: &str, name: &str, endpoints: Value) -> Value {
    let root = endpoints[0]["dnsName"].clone();
    json!({
        "apiVersion": "kuadrant.io/v1alpha1", "kind": "DNSRecord",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"rootHost": if root.is_null() { json!(format!("{name}.{ns}.io")) } else { root },
                 "endpoints": endpoints},
    })
}

fn gateway(listeners: u8, addresses: Addresses, gws: &Gateways) -> Value {
    let listeners: Vec<Value> = (0..2)
        .filter(|i| listeners & (1 << i) != 0)
        .map(|i| json!({"name": format!("l{i}"), "hostname": format!("l{i}.team-a.io"), "port": 443, "protocol": "HTTPS"}))
        .collect();
    let addresses: Vec<Value> = match addresses {
        Addresses::Ips(mask) => gws
            .of(mask)
            .into_iter()
            .map(|a| json!({"type": "IPAddress", "value": a}))
            .collect(),
        Addresses::Hostname => vec![json!({"type": "Hostname", "value": LB_HOST})],
        Addresses::Empty => vec![],
    };
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "gw-0", "namespace": "team-a"},
        "spec": {"gatewayClassName": "test", "listeners": listeners},
        "status": {"addresses": addresses},
    })
}

/// The policy as `v1` (`healthCheck.path`) or `v1alpha1` (`healthCheck.endpoint`) writes
/// it. The test server serves DNSPolicies at `v1` only, as a CRD serving both versions
/// with conversion `None` does: the fields stay as written.
fn policy(v1alpha1: bool, valid: bool, port: u16) -> Value {
    let protocol = if valid { "HTTP" } else { "UDP" };
    let (version, path_key) = if v1alpha1 {
        ("v1alpha1", "endpoint")
    } else {
        ("v1", "path")
    };
    json!({
        "apiVersion": format!("kuadrant.io/{version}"), "kind": "DNSPolicy",
        "metadata": {"name": "gw-0-dns", "namespace": "team-a"},
        "spec": {
            "targetRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw-0"},
            "healthCheck": {path_key: "/healthz", "port": port, "protocol": protocol, "interval": "1s"},
        },
    })
}
