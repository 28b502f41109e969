//! The hosted zone read back for the answer canary: every name's A and AAAA values and the
//! host its CNAME or alias names, from one listing of the zone (the rounds frame's, paced
//! with the sink's writes by the same limiter).

use std::collections::HashMap;
use std::net::IpAddr;

use ho_engine::sink::listing::Listed;

use super::records::RecordSet;

fn key(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// What each name answers: its A and AAAA values, every routed set together; an alias to a
/// name of this zone (a location's set pointing at its weighted sets) answers that name's
/// values of its family, an alias elsewhere (a load balancer) and a CNAME name a host.
pub(super) fn served(sets: impl IntoIterator<Item = RecordSet>) -> Listed {
    let sets: Vec<RecordSet> = sets
        .into_iter()
        .filter(|s| matches!(s.rtype.as_str(), "A" | "AAAA" | "CNAME"))
        .collect();
    let mut listed: Listed = HashMap::new();
    for s in sets.iter().filter(|s| s.alias.is_none()) {
        let entry = listed.entry(key(&s.name)).or_default();
        if s.rtype == "CNAME" {
            entry.host = s.values.first().map(|v| key(v));
        } else {
            entry
                .addresses
                .extend(s.values.iter().filter_map(|v| v.parse::<IpAddr>().ok()));
        }
    }
    let direct = listed.clone();
    for s in &sets {
        let Some(alias) = &s.alias else { continue };
        let entry = listed.entry(key(&s.name)).or_default();
        match direct
            .get(&key(&alias.name))
            .filter(|_| alias.zone.is_none())
        {
            Some(target) => entry.addresses.extend(
                (target.addresses.iter())
                    .filter(|a| a.is_ipv4() == (s.rtype == "A"))
                    .copied(),
            ),
            None => entry.host = Some(key(&alias.name)),
        }
    }
    crate::listing::sorted(listed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route53::records::{Alias, Routing};

    fn set(name: &str, rtype: &str, values: &[&str], alias: Option<Alias>) -> RecordSet {
        RecordSet {
            name: name.into(),
            rtype: rtype.into(),
            set_id: None,
            routing: Routing::Simple,
            ttl: 60,
            values: values.iter().map(|v| v.to_string()).collect(),
            alias,
        }
    }

    fn ips(list: &[&str]) -> Vec<IpAddr> {
        list.iter().map(|a| a.parse().unwrap()).collect()
    }

    #[test]
    fn every_routed_set_of_a_name_answers_together_and_aliases_follow_their_target() {
        let listed = served([
            set("api.example.com.", "A", &["192.0.2.2"], None),
            set("api.example.com.", "A", &["192.0.2.1"], None),
            set("api.example.com.", "AAAA", &["2001:db8::1"], None),
            set(
                "_health-orchestrator.api.example.com.",
                "TXT",
                &["\"x\""],
                None,
            ),
            set(
                "www.example.com.",
                "CNAME",
                &["LB-1.elb.amazonaws.com."],
                None,
            ),
            // A location's set aliasing its weighted sets in this zone.
            set(
                "geo.example.com.",
                "A",
                &[],
                Some(Alias::here("ie._weighted.geo.example.com.")),
            ),
            set("ie._weighted.geo.example.com.", "A", &["192.0.2.7"], None),
            // The apex aliasing a load balancer in its own hosted zone.
            set(
                "example.com.",
                "A",
                &[],
                Some(Alias {
                    name: "lb-1.elb.amazonaws.com.".into(),
                    zone: Some("Z35SXDOTRQ7X7K".into()),
                }),
            ),
        ]);
        let api = &listed["api.example.com"];
        assert_eq!(
            api.addresses,
            ips(&["192.0.2.1", "192.0.2.2", "2001:db8::1"])
        );
        assert_eq!(api.host, None);
        assert_eq!(
            listed["www.example.com"].host.as_deref(),
            Some("lb-1.elb.amazonaws.com")
        );
        assert_eq!(listed["geo.example.com"].addresses, ips(&["192.0.2.7"]));
        assert_eq!(
            listed["example.com"].host.as_deref(),
            Some("lb-1.elb.amazonaws.com")
        );
        assert!(!listed.contains_key("_health-orchestrator.api.example.com"));
    }
}
