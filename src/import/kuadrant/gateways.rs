//! A Gateway's listeners as the DNSRecords Kuadrant makes for them: a DNSPolicy whose
//! `targetRef` names a Gateway publishes each listener's `hostname` (only
//! `sectionName`'s listener when given) at the addresses in the Gateway's
//! `status.addresses`, in a record named `GATEWAY-LISTENER` as Kuadrant names it. A record
//! of that name written by hand (or by Kuadrant) comes first. A wildcard hostname is
//! published as one (the embedded server answers it as RFC 4592 says); a listener without
//! a hostname is left out, said in a note.

use serde_yaml::Mapping;

use super::policy::Policy;
use super::*;

/// The records the policies' Gateways stand for, beside `records` (which come first).
pub(super) fn listener_records(
    gateways: &[&Value],
    policies: &[Policy],
    records: &[&Value],
    notes: &mut Vec<String>,
) -> Vec<Value> {
    let mut made = Vec::new();
    for policy in policies {
        let Some(gateway) = policy.gateway().and_then(|g| {
            gateways
                .iter()
                .find(|d| d.get("metadata").and_then(|m| text(m, "name")) == Some(g))
        }) else {
            continue;
        };
        let gw = policy.gateway().expect("found by its name");
        let addresses: Vec<(&str, &str)> = gateway
            .get("status")
            .and_then(|s| s.get("addresses"))
            .and_then(Value::as_sequence)
            .into_iter()
            .flatten()
            .filter(|a| text(a, "type").is_none_or(|t| t == "IPAddress"))
            .filter_map(|a| text(a, "value"))
            .filter_map(|v| {
                let ip: IpAddr = v.parse().ok()?;
                Some((v, if ip.is_ipv4() { "A" } else { "AAAA" }))
            })
            .collect();
        let listeners = gateway
            .get("spec")
            .and_then(|s| s.get("listeners"))
            .and_then(Value::as_sequence)
            .into_iter()
            .flatten();
        for listener in listeners {
            let Some(section) = text(listener, "name") else {
                continue;
            };
            if policy.section().is_some_and(|s| s != section) {
                continue;
            }
            let name = format!("{gw}-{section}");
            if records
                .iter()
                .any(|r| record_name(r).ok() == Some(name.as_str()))
            {
                continue;
            }
            let Some(host) = text(listener, "hostname") else {
                notes.push(format!(
                    "Gateway {gw} listener {section} has no hostname: nothing to publish for it"
                ));
                continue;
            };
            if addresses.is_empty() {
                notes.push(format!("Gateway {gw} has no IPAddress in its status yet: listener {section} ({host}) publishes nothing until it has"));
                continue;
            }
            made.push(record_of(&name, section, host, &addresses));
        }
    }
    made
}

/// A DNSRecord as Kuadrant's simple strategy writes it for one listener.
fn record_of(name: &str, listener: &str, host: &str, addresses: &[(&str, &str)]) -> Value {
    let map = |pairs: Vec<(&str, Value)>| {
        Value::Mapping(
            pairs
                .into_iter()
                .map(|(k, v)| (Value::from(k), v))
                .collect::<Mapping>(),
        )
    };
    let mut endpoints = Vec::new();
    for rtype in ["A", "AAAA"] {
        let targets: Vec<Value> = addresses
            .iter()
            .filter(|(_, t)| *t == rtype)
            .map(|(a, _)| Value::from(*a))
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
