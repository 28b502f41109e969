//! What a tenant's snapshot looks like as PowerDNS rrsets: plain `A`/`AAAA` records, or with
//! `lua = true` for `weighted`/`geo` tenants, one `LUA` rrset per domain that answers per
//! client over the current healthy set; an `answer = "cname"` tenant's names below the
//! zone's apex hold one `CNAME` (the apex cannot: it answers the addresses).

use std::collections::BTreeMap;
use std::net::IpAddr;

use ho_config::RoutingPolicy;
use ho_engine::snapshot::{PublishedAddress, TenantSnapshot};

/// The record contents wanted for each managed type at a domain of the tenant (`apex`: the
/// zone's own name), sorted; an empty list means the rrset must not exist. Only the types
/// listed are managed; the others of ours at the name are removed.
pub fn wanted(
    snapshot: &TenantSnapshot,
    lua: bool,
    apex: bool,
) -> Vec<(&'static str, Vec<String>)> {
    if let Some(host) = snapshot.cname().filter(|_| !apex) {
        let mut types = vec![
            ("A", Vec::new()),
            ("AAAA", Vec::new()),
            ("CNAME", vec![format!("{host}.")]),
        ];
        if lua {
            types.push(("LUA", Vec::new()));
        }
        return types;
    }
    let family = |v6: bool| -> Vec<&PublishedAddress> {
        snapshot
            .addresses
            .iter()
            .filter(|a| matches!(a.address, IpAddr::V6(_)) == v6)
            .collect()
    };
    let (v4, v6) = (family(false), family(true));
    let plain = |list: &[&PublishedAddress]| -> Vec<String> {
        let mut c: Vec<String> = list.iter().map(|a| a.address.to_string()).collect();
        c.sort();
        c
    };
    let per_client = lua
        && matches!(
            snapshot.policy,
            RoutingPolicy::Weighted | RoutingPolicy::Geo
        );
    if !per_client {
        let mut types = vec![("A", plain(&v4)), ("AAAA", plain(&v6))];
        if lua {
            types.push(("LUA", Vec::new()));
        }
        return types;
    }
    let mut records = Vec::new();
    for (qtype, list) in [("A", &v4), ("AAAA", &v6)] {
        if list.is_empty() {
            continue;
        }
        let expression = match snapshot.policy {
            RoutingPolicy::Geo => {
                geo_expression(list, snapshot.default_geo.as_deref(), &snapshot.geos)
            }
            _ => weighted_expression(list),
        };
        records.push(format!("{qtype} \"{expression}\""));
    }
    records.sort();
    vec![("A", Vec::new()), ("AAAA", Vec::new()), ("LUA", records)]
}

/// `pickwhashed({{w,'addr'},...})`: a stable pick per client, in proportion to the weights.
/// All-zero weights would answer nothing, so they count as equal.
fn weighted_expression(list: &[&PublishedAddress]) -> String {
    let all_zero = list.iter().all(|a| a.weight == 0);
    let mut entries: Vec<(IpAddr, u32)> = list
        .iter()
        .map(|a| (a.address, if all_zero { 1 } else { a.weight }))
        .collect();
    entries.sort();
    let items: Vec<String> = entries
        .iter()
        .map(|(a, w)| format!("{{{w},'{a}'}}"))
        .collect();
    format!("pickwhashed({{{}}})", items.join(","))
}

/// Answers the addresses of the client's country (`country()`, PowerDNS's GeoIP lookup of
/// the client or its EDNS subnet); for a location of the tenant whose addresses are all
/// down, those of the nearest location up; else those of `default_geo`, else all.
fn geo_expression(
    list: &[&PublishedAddress],
    default_geo: Option<&str>,
    geos: &[String],
) -> String {
    let mut by_geo: BTreeMap<&str, Vec<&PublishedAddress>> = BTreeMap::new();
    for a in list {
        let geo = a.endpoint.labels.get("geo").map_or("", String::as_str);
        by_geo.entry(geo).or_default().push(a);
    }
    // A location's addresses alike, or picked by weight when their weights differ (weights
    // inside a geo, as Kuadrant does it).
    let answer = |group: &[&PublishedAddress]| -> String {
        if group.windows(2).any(|w| w[0].weight != w[1].weight) {
            return weighted_expression(group);
        }
        let mut addrs: Vec<String> = group.iter().map(|a| format!("'{}'", a.address)).collect();
        addrs.sort();
        format!("{{{}}}", addrs.join(","))
    };
    let fallback = default_geo
        .and_then(|g| by_geo.get(g))
        .map_or_else(|| answer(list), |group| answer(group));
    let mut code = String::from(";");
    // Countries first, then continents (`GEO-EU`: PowerDNS's `continent()`), so a
    // country's own location wins over its continent's.
    let (continents, countries): (Vec<_>, Vec<_>) = by_geo
        .iter()
        .filter(|(geo, _)| !geo.is_empty())
        .partition(|(geo, _)| ho_engine::sink::geo::continent_of_label(geo).is_some());
    for (geo, group) in countries {
        code.push_str(&format!(
            "if country('{geo}') then return {} end ",
            answer(group)
        ));
    }
    for (geo, group) in continents {
        let continent = ho_engine::sink::geo::continent_of_label(geo).unwrap_or_default();
        code.push_str(&format!(
            "if continent('{continent}') then return {} end ",
            answer(group)
        ));
    }
    // Locations whose addresses are all down answer the nearest location that is up.
    for geo in geos.iter().filter(|g| !by_geo.contains_key(g.as_str())) {
        let up = by_geo.keys().copied().filter(|g| !g.is_empty());
        if let Some(near) = ho_engine::sink::geo::stand_in(geo, up) {
            code.push_str(&format!(
                "if country('{geo}') then return {} end ",
                answer(&by_geo[near])
            ));
        }
    }
    code.push_str(&nearest_by_coordinates(&by_geo, answer));
    code.push_str(&format!("return {fallback}"));
    code
}

/// Lua answering a client whose coordinates PowerDNS knows (`latlon()`, from a GeoIP City
/// database; `0 0` when unknown) with the location nearest to it that has addresses up, by
/// great-circle distance to each country location's centre (`keshvar`): the client of a
/// country without a location of its own and outside every continent location. Empty
/// when no location has coordinates. Comparing the haversine term alone orders the
/// distances. Unlike PowerDNS's own `pickclosest`, which places the candidate addresses
/// by the GeoIP database (private addresses have no place), this places them by their
/// `geo` label.
fn nearest_by_coordinates(
    by_geo: &BTreeMap<&str, Vec<&PublishedAddress>>,
    answer: impl Fn(&[&PublishedAddress]) -> String,
) -> String {
    let places: Vec<String> = by_geo
        .iter()
        .filter_map(|(geo, group)| {
            let (lat, lon) = ho_engine::sink::geo::coordinates(geo)?;
            Some(format!(
                "{{{lat:.4},{lon:.4},function() return {} end}}",
                answer(group)
            ))
        })
        .collect();
    if places.is_empty() {
        return String::new();
    }
    format!(
        "local y,x=latlon():match('^(%S+) (%S+)$') y,x=tonumber(y),tonumber(x) \
         if y and (y~=0 or x~=0) then local r,best,far=math.rad,nil,2 \
         for _,l in ipairs({{{}}}) do \
         local h=math.sin(r(l[1]-y)/2)^2+math.cos(r(y))*math.cos(r(l[1]))*math.sin(r(l[2]-x)/2)^2 \
         if h<far then best,far=l[3],h end end return best() end ",
        places.join(",")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Lua answering clients by their coordinates, over `places` (`{lat,lon,answer}`).
    fn nearest(places: &str) -> String {
        format!(" local y,x=latlon():match('^(%S+) (%S+)$') y,x=tonumber(y),tonumber(x) if y and (y~=0 or x~=0) then local r,best,far=math.rad,nil,2 for _,l in ipairs({{{places}}}) do local h=math.sin(r(l[1]-y)/2)^2+math.cos(r(y))*math.cos(r(l[1]))*math.sin(r(l[2]-x)/2)^2 if h<far then best,far=l[3],h end end return best() end")
    }

    fn snapshot(policy: RoutingPolicy, addrs: &[(&str, u32, &str)]) -> TenantSnapshot {
        let addresses = addrs
            .iter()
            .map(|(a, w, geo)| {
                let labels = [("geo".to_string(), geo.to_string())].into();
                PublishedAddress::of(a, a.parse().unwrap(), *w, labels)
            })
            .collect();
        TenantSnapshot {
            default_geo: Some("IE".into()),
            ..TenantSnapshot::healthy("t", &["api.example.org"], policy, addresses)
        }
    }

    /// A CNAME below the apex, with the address rrsets removed; the apex keeps addresses.
    #[test]
    fn a_cname_tenant_writes_one_cname_below_the_apex() {
        let of_host = |host: &str, ip: &str, priority| {
            PublishedAddress::of_host(host, ip.parse().unwrap(), priority, 1)
        };
        let s = TenantSnapshot {
            answer: ho_engine::snapshot::Answer::Cname,
            ..TenantSnapshot::healthy(
                "t",
                &["api.example.org"],
                RoutingPolicy::Failover,
                vec![
                    of_host("b.lb.example.net", "10.0.0.2", 0),
                    of_host("a.lb.example.net", "10.0.0.1", 0),
                ],
            )
        };
        assert_eq!(
            wanted(&s, true, false),
            vec![
                ("A", vec![]),
                ("AAAA", vec![]),
                ("CNAME", vec!["a.lb.example.net.".to_string()]),
                ("LUA", vec![]),
            ]
        );
        assert_eq!(
            wanted(&s, false, true),
            vec![
                ("A", vec!["10.0.0.1".to_string(), "10.0.0.2".to_string()]),
                ("AAAA", vec![])
            ]
        );
    }

    #[test]
    fn plain_records_without_lua() {
        let s = snapshot(
            RoutingPolicy::Weighted,
            &[
                ("10.0.0.2", 1, "IE"),
                ("10.0.0.1", 1, "IE"),
                ("2001:db8::1", 1, "DE"),
            ],
        );
        assert_eq!(
            wanted(&s, false, false),
            vec![
                ("A", vec!["10.0.0.1".to_string(), "10.0.0.2".to_string()]),
                ("AAAA", vec!["2001:db8::1".to_string()])
            ]
        );
    }

    #[test]
    fn weighted_lua_records_carry_the_weights() {
        let s = snapshot(
            RoutingPolicy::Weighted,
            &[("10.0.0.2", 10, "IE"), ("10.0.0.1", 30, "IE")],
        );
        assert_eq!(
            wanted(&s, true, false),
            vec![
                ("A", vec![]),
                ("AAAA", vec![]),
                (
                    "LUA",
                    vec!["A \"pickwhashed({{30,'10.0.0.1'},{10,'10.0.0.2'}})\"".to_string()]
                )
            ]
        );
    }

    #[test]
    fn geo_lua_records_fall_back_to_the_default_geo() {
        let s = snapshot(
            RoutingPolicy::Geo,
            &[("10.0.0.1", 1, "IE"), ("10.0.0.2", 1, "DE")],
        );
        assert_eq!(
            wanted(&s, true, false)[2].1,
            vec![format!("A \";if country('DE') then return {{'10.0.0.2'}} end if country('IE') then return {{'10.0.0.1'}} end{} return {{'10.0.0.1'}}\"", nearest("{51.1657,10.4515,function() return {'10.0.0.2'} end},{53.1424,-7.6921,function() return {'10.0.0.1'} end}"))]
        );
    }

    /// A continent location (`GEO-EU`) answers with PowerDNS's `continent()`, after every
    /// country, so a country's own location wins over its continent's.
    #[test]
    fn continents_are_asked_after_countries() {
        let s = snapshot(
            RoutingPolicy::Geo,
            &[
                ("10.0.0.1", 1, "IE"),
                ("10.0.0.2", 1, "GEO-EU"),
                ("10.0.0.3", 1, "US"),
            ],
        );
        assert_eq!(
            wanted(&s, true, false)[2].1,
            vec![format!("A \";if country('IE') then return {{'10.0.0.1'}} end if country('US') then return {{'10.0.0.3'}} end if continent('EU') then return {{'10.0.0.2'}} end{} return {{'10.0.0.1'}}\"", nearest("{53.1424,-7.6921,function() return {'10.0.0.1'} end},{37.0902,-95.7129,function() return {'10.0.0.3'} end}"))]
        );
    }

    #[test]
    fn weights_inside_a_geo_pick_by_weight_within_the_location() {
        let s = snapshot(
            RoutingPolicy::Geo,
            &[
                ("10.0.0.1", 30, "IE"),
                ("10.0.0.2", 10, "IE"),
                ("10.0.0.3", 1, "DE"),
            ],
        );
        assert_eq!(
            wanted(&s, true, false)[2].1,
            vec![format!("A \";if country('DE') then return {{'10.0.0.3'}} end if country('IE') then return pickwhashed({{{{30,'10.0.0.1'}},{{10,'10.0.0.2'}}}}) end{} return pickwhashed({{{{30,'10.0.0.1'}},{{10,'10.0.0.2'}}}})\"", nearest("{51.1657,10.4515,function() return {'10.0.0.3'} end},{53.1424,-7.6921,function() return pickwhashed({{30,'10.0.0.1'},{10,'10.0.0.2'}}) end}"))]
        );
    }

    #[test]
    fn a_location_that_is_down_answers_the_nearest_location_up() {
        let s = TenantSnapshot {
            geos: vec!["DE".into(), "GB".into(), "IE".into()],
            votes: None,
            ..snapshot(
                RoutingPolicy::Geo,
                &[("10.0.0.2", 1, "DE"), ("10.0.0.3", 1, "GB")],
            )
        };
        assert_eq!(
            wanted(&s, true, false)[2].1,
            vec![format!("A \";if country('DE') then return {{'10.0.0.2'}} end if country('GB') then return {{'10.0.0.3'}} end if country('IE') then return {{'10.0.0.3'}} end{} return {{'10.0.0.2','10.0.0.3'}}\"", nearest("{51.1657,10.4515,function() return {'10.0.0.2'} end},{55.3781,-3.4360,function() return {'10.0.0.3'} end}"))]
        );
    }

    #[test]
    fn a_lua_sink_with_a_plain_policy_removes_stale_lua_records() {
        let s = snapshot(RoutingPolicy::All, &[("10.0.0.1", 1, "IE")]);
        assert_eq!(wanted(&s, true, false)[2], ("LUA", vec![]));
    }
}
