//! A Gateway's listeners as the DNSRecords Kuadrant makes for them: a DNSPolicy whose
//! `targetRef` names a Gateway publishes each listener's `hostname` (only
//! `sectionName`'s listener when given) at the addresses in the Gateway's
//! `status.addresses` (a `Hostname` one, a cloud load balancer's, as a CNAME to it), in
//! a record named `GATEWAY-LISTENER` as Kuadrant names it. A record
//! of that name written by hand (or by Kuadrant) comes first. A wildcard hostname is
//! published as one (the embedded server answers it as RFC 4592 says); a listener without
//! a hostname is left out, said in a note.

use serde_yaml::Mapping;

use super::objects::{Gateway, GatewayAddress};
use super::policy::Policy;
use super::*;

/// The records the policies' Gateways stand for, beside the written records named
/// `written` (which come first).
pub(super) fn listener_records(
    gateways: &[&Gateway],
    policies: &[Policy],
    written: &[&str],
    notes: &mut Vec<String>,
) -> Vec<Value> {
    let mut made = Vec::new();
    for policy in policies {
        let Some((gw, gateway)) = policy.gateway().and_then(|g| {
            let named =
                |d: &&&Gateway| d.metadata.as_ref().and_then(|m| m.name.as_deref()) == Some(g);
            gateways.iter().find(named).map(|d| (g, *d))
        }) else {
            continue;
        };
        let status = gateway.status.as_ref().and_then(|s| s.addresses.as_ref());
        let mut addresses: Vec<(String, &str)> = status
            .into_iter()
            .flatten()
            .filter_map(status_address)
            .collect();
        // A name answers addresses or a CNAME, not both: a Gateway that reports an IP
        // address is published at its IP addresses, one reporting only host names (a cloud
        // load balancer's) as a CNAME to them.
        if addresses.iter().any(|(_, t)| *t != "CNAME") {
            addresses.retain(|(_, t)| *t != "CNAME");
        }
        let listeners = gateway.spec.as_ref().and_then(|s| s.listeners.as_ref());
        for listener in listeners.into_iter().flatten() {
            let Some(section) = listener.name.as_deref() else {
                continue;
            };
            if policy.section().is_some_and(|s| s != section) {
                continue;
            }
            let name = format!("{gw}-{section}");
            if written.contains(&name.as_str()) {
                continue;
            }
            let Some(host) = listener.hostname.as_deref() else {
                notes.push(format!(
                    "Gateway {gw} listener {section} has no hostname: nothing to publish for it"
                ));
                continue;
            };
            if addresses.is_empty() {
                notes.push(format!("Gateway {gw} has no IPAddress or Hostname in its status yet: listener {section} ({host}) publishes nothing until it has"));
                continue;
            }
            made.push(record_of(&name, section, host, &addresses));
        }
    }
    made
}

/// A Gateway's `status.addresses[]` entry as a record's target and type: an `IPAddress`
/// (the type when unset) as an A or AAAA target, a `Hostname` (a cloud load balancer's
/// name) as a CNAME's, as dns-operator writes them; other types are skipped.
fn status_address(a: &GatewayAddress) -> Option<(String, &'static str)> {
    let value = a.value.as_deref()?;
    match a.type_.as_deref() {
        None | Some("IPAddress") => {
            let ip: IpAddr = value.parse().ok()?;
            Some((ip.to_string(), if ip.is_ipv4() { "A" } else { "AAAA" }))
        }
        Some("Hostname") => super::probes::probe_address(value)
            .filter(|h| h.parse::<IpAddr>().is_err())
            .map(|h| (h, "CNAME")),
        Some(_) => None,
    }
}

/// A DNSRecord as Kuadrant's simple strategy writes it for one listener.
fn record_of(name: &str, listener: &str, host: &str, addresses: &[(String, &str)]) -> Value {
    let map = |pairs: Vec<(&str, Value)>| {
        Value::Mapping(
            pairs
                .into_iter()
                .map(|(k, v)| (Value::from(k), v))
                .collect::<Mapping>(),
        )
    };
    let mut endpoints = Vec::new();
    for rtype in ["A", "AAAA", "CNAME"] {
        let targets: Vec<Value> = addresses
            .iter()
            .filter(|(_, t)| *t == rtype)
            .map(|(a, _)| Value::from(a.as_str()))
            .collect();
        if !targets.is_empty() {
            endpoints.push(map(vec![
                ("dnsName", host.into()),
                ("recordType", rtype.into()),
                ("targets", Value::Sequence(targets)),
            ]));
        }
    }
    map(vec![
        ("kind", "DNSRecord".into()),
        (
            "metadata",
            map(vec![
                ("name", name.into()),
                (
                    "labels",
                    map(vec![("kuadrant.io/listener-name", listener.into())]),
                ),
            ]),
        ),
        (
            "spec",
            map(vec![
                ("rootHost", host.into()),
                ("endpoints", Value::Sequence(endpoints)),
            ]),
        ),
    ])
}
