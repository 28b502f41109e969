//! What one write of a tenant changes in a Cloud DNS zone, decided from a listing: for each
//! of its names, the ownership mark first (a name is ours only with our TXT mark at
//! `_health-orchestrator.<name>`; one without it holding records, or with another owner's
//! mark, is left alone and reported), then the A and AAAA sets that differ, each replaced
//! (the set as listed deleted, the new one added) in the tenant's one change.

use ho_config::RoutingPolicy;
use ho_engine::snapshot::TenantSnapshot;
use serde_json::Value;

use super::api::{rrset, Change, Listed, Routing};
use ho_engine::sink::ownership::{mark_text, owner_in, OWNER_PREFIX, OWNER_TTL};

/// A tenant's write.
#[derive(Debug, Default)]
pub struct Planned {
    /// The sets to delete and add.
    pub change: Change,
    /// Names left alone because they are someone else's.
    pub foreign: Vec<String>,
}

/// The change that makes `zone` (a listing) publish `snapshot`, as owner `owner`.
pub fn for_tenant(zone: &[Listed], snapshot: &TenantSnapshot, owner: &str) -> Planned {
    let mut planned = Planned::default();

    for name in &snapshot.domains {
        let at = |rtype: &str, n: &str| {
            zone.iter()
                .find(|s| s.rtype == rtype && s.name.eq_ignore_ascii_case(n))
        };
        let mark_name = format!("{OWNER_PREFIX}{name}");
        let mark = at("TXT", &mark_name);
        let owners: Vec<&str> = mark
            .into_iter()
            .flat_map(|s| s.data.iter())
            .filter_map(|d| owner_in(d))
            .collect();
        let mine = owners.contains(&owner);
        let held = ["A", "AAAA", "CNAME"].iter().any(|t| at(t, name).is_some());
        if !mine && (held || !owners.is_empty()) {
            planned.foreign.push(name.clone());
            continue;
        }
        if !mine {
            let text = format!("\"{}\"", mark_text(owner));
            let ttl = u64::from(OWNER_TTL);
            planned
                .change
                .additions
                .push(rrset(&mark_name, "TXT", ttl, &[text], Routing::Plain));
        }
        for (rtype, v6) in [("A", false), ("AAAA", true)] {
            let new = wanted(snapshot, name, rtype, v6);
            let old = at(rtype, name);
            let same = match (&new, old) {
                (Some(new), Some(old)) => {
                    Listed::of(new.clone()).is_some_and(|n| n.ttl == old.ttl && n.data == old.data)
                }
                (None, None) => true,
                _ => false,
            };
            if same {
                continue;
            }
            planned.change.deletions.extend(old.map(|o| o.raw.clone()));
            planned.change.additions.extend(new);
        }
    }
    planned
}

/// The `rtype` set (IPv6 or not) that publishes `snapshot`'s addresses at `name` under its
/// policy, if it has any.
fn wanted(snapshot: &TenantSnapshot, name: &str, rtype: &str, v6: bool) -> Option<Value> {
    let mut wanted: Vec<(String, f64, String)> = (snapshot.addresses.iter())
        .filter(|a| a.address.is_ipv6() == v6)
        .map(|a| {
            let geo = a.endpoint.labels.get("geo").cloned().unwrap_or_default();
            (a.address.to_string(), f64::from(a.weight), geo)
        })
        .collect();
    wanted.sort_by(|a, b| a.0.cmp(&b.0));
    let data: Vec<String> = wanted.iter().map(|(d, _, _)| d.clone()).collect();
    let weights: Vec<f64> = wanted.iter().map(|(_, w, _)| *w).collect();
    let locations: Vec<String> = wanted.iter().map(|(_, _, g)| g.clone()).collect();
    let routing = match snapshot.policy {
        RoutingPolicy::Weighted => Routing::Weighted(&weights),
        RoutingPolicy::Geo => Routing::Geo(&locations),
        _ => Routing::Plain,
    };
    let ttl = snapshot.ttl.as_secs();
    (!data.is_empty()).then(|| rrset(name, rtype, ttl, &data, routing))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ho_engine::snapshot::PublishedAddress;
    use serde_json::json;
    use std::time::Duration;

    fn snapshot(policy: RoutingPolicy, addresses: &[(&str, u32)]) -> TenantSnapshot {
        let addresses = addresses
            .iter()
            .map(|(a, w)| PublishedAddress::of(a, a.parse().unwrap(), *w, Default::default()))
            .collect();
        let mut s = TenantSnapshot::healthy("t", &["api.example.com"], policy, addresses);
        s.ttl = Duration::from_secs(60);
        s
    }

    fn listed(v: serde_json::Value) -> Listed {
        Listed::of(v).unwrap()
    }

    fn mark(owner: &str) -> Listed {
        listed(
            json!({"name": "_health-orchestrator.api.example.com.", "type": "TXT", "ttl": 300,
            "rrdatas": [format!("\"heritage=health-orchestrator,owner={owner}\"")]}),
        )
    }

    #[test]
    fn a_new_name_is_claimed_and_filled_in_one_change() {
        let s = snapshot(RoutingPolicy::All, &[("192.0.2.1", 1), ("2001:db8::1", 1)]);
        let p = for_tenant(&[], &s, "eu-1");
        assert!(p.foreign.is_empty() && p.change.deletions.is_empty());
        let added: Vec<(&str, &serde_json::Value)> = p
            .change
            .additions
            .iter()
            .map(|a| (a["type"].as_str().unwrap(), &a["rrdatas"]))
            .collect();
        assert_eq!(
            added,
            [
                (
                    "TXT",
                    &json!(["\"heritage=health-orchestrator,owner=eu-1\""])
                ),
                ("A", &json!(["192.0.2.1"])),
                ("AAAA", &json!(["2001:db8::1"]))
            ]
        );
    }

    #[test]
    fn a_set_that_differs_is_replaced_as_listed_and_an_equal_one_is_left() {
        let old = json!({"name": "api.example.com.", "type": "A", "ttl": 60,
            "rrdatas": ["192.0.2.1", "192.0.2.2"], "signatureRrdatas": []});
        let zone = [mark("eu-1"), listed(old.clone())];
        let p = for_tenant(
            &zone,
            &snapshot(RoutingPolicy::All, &[("192.0.2.1", 1)]),
            "eu-1",
        );
        assert_eq!(p.change.deletions, [old], "deleted exactly as listed");
        assert_eq!(p.change.additions[0]["rrdatas"], json!(["192.0.2.1"]));
        let same = snapshot(RoutingPolicy::All, &[("192.0.2.2", 1), ("192.0.2.1", 1)]);
        assert!(for_tenant(&zone, &same, "eu-1").change.is_empty());
        let weighted = snapshot(
            RoutingPolicy::Weighted,
            &[("192.0.2.2", 1), ("192.0.2.1", 3)],
        );
        let p = for_tenant(&zone, &weighted, "eu-1");
        assert_eq!(
            p.change.additions[0]["routingPolicy"]["wrr"]["items"],
            json!([{"weight": 3.0, "rrdatas": ["192.0.2.1"]}, {"weight": 1.0, "rrdatas": ["192.0.2.2"]}])
        );
    }

    #[test]
    fn names_without_our_mark_are_left_alone() {
        let held = [listed(
            json!({"name": "api.example.com.", "type": "A", "ttl": 300,
            "rrdatas": ["192.0.2.9"]}),
        )];
        let s = snapshot(RoutingPolicy::All, &[("192.0.2.1", 1)]);
        let p = for_tenant(&held, &s, "eu-1");
        assert_eq!(p.foreign, ["api.example.com"]);
        assert!(p.change.is_empty());
        let theirs = for_tenant(&[mark("us-1")], &s, "eu-1");
        assert_eq!(theirs.foreign, ["api.example.com"], "another owner's mark");
    }

    /// Seeded sets of addresses in regions: each region's item holds exactly its
    /// addresses (an oracle grouping them here), and the zone holding the result plans no
    /// change.
    #[test]
    fn geo_names_become_one_item_per_region_with_its_addresses() {
        const REGIONS: [&str; 3] = ["europe-west1", "us-east1", "asia-south2"];
        let mut state: u64 = 0x9e37_79b9;
        let mut next = |n: u64| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            (state >> 33) % n
        };
        for _ in 0..50 {
            let mut chosen: Vec<(String, &str)> = Vec::new();
            for i in 1..=6u8 {
                if next(3) > 0 {
                    chosen.push((format!("192.0.2.{i}"), REGIONS[next(3) as usize]));
                }
            }
            let addresses = chosen
                .iter()
                .map(|(a, region)| {
                    let labels = [("geo".to_string(), region.to_string())].into();
                    PublishedAddress::of(a, a.parse().unwrap(), 1, labels)
                })
                .collect();
            let mut s =
                TenantSnapshot::healthy("t", &["api.example.com"], RoutingPolicy::Geo, addresses);
            s.ttl = Duration::from_secs(60);
            let mut expected: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
            for (a, region) in &chosen {
                expected.entry(region).or_default().push(a);
            }
            let items: Vec<serde_json::Value> = (expected.iter())
                .map(|(region, a)| json!({"location": region, "rrdatas": a}))
                .collect();
            let p = for_tenant(&[mark("eu-1")], &s, "eu-1");
            let a = p.change.additions.iter().find(|a| a["type"] == "A");
            assert_eq!(
                a.map(|a| a["routingPolicy"]["geo"]["items"].clone()),
                (!chosen.is_empty()).then(|| json!(items)),
                "{chosen:?}"
            );
            let mut zone = vec![mark("eu-1")];
            zone.extend(p.change.additions.iter().cloned().map(listed));
            assert!(
                for_tenant(&zone, &s, "eu-1").change.is_empty(),
                "{chosen:?}"
            );
        }
    }
}
