//! `import --from powerdns FILE`: a PowerDNS zone (the API's zone JSON, or `pdnsutil
//! list-zone` text) with LUA records, as our config. Each LUA A/AAAA record calling
//! `ifurlup` or `ifportup` becomes a tenant at its name: its addresses endpoints with the
//! check PowerDNS ran (the URL's scheme, port and path, its host as Host header and TLS
//! name; `stringmatch` a body match; `interval`, `timeout`, `minimumFailures` as they were,
//! PowerDNS's defaults 5 s, 2 s and 1 otherwise), its address groups failover tiers, its
//! selector the policy. `pickwhashed`/`pickwrandom`, `pickrandom`, `pickhashed` and
//! `pickclosest` without a check import with a TCP check on 443 and a TO DO. What has no
//! equivalent is named; the zone's ordinary records are listed for a `dns_server` sink's
//! `static_records` (the `powerdns` sink leaves them where they are). The sink adopts the
//! imported names, replacing their LUA records at its first write.

mod lua;
mod zone;

use std::collections::BTreeMap;

use anyhow::{bail, Context};
use toml::Table;

use self::lua::Value;
use self::zone::Record;

/// PowerDNS's defaults for `interval`, `timeout` and `minimumFailures`.
const PDNS_INTERVAL: f64 = 5.0;
const PDNS_TIMEOUT: f64 = 2.0;

/// One LUA record, understood.
struct Imported {
    policy: &'static str,
    /// What differs from PowerDNS's answer, for a `# NOT CARRIED OVER` line.
    differs: Option<String>,
    /// Per address: its tier (1 = first) and weight.
    endpoints: Vec<(String, u32, Option<u32>)>,
    check: Table,
}

/// The config equivalent to the zone in `text`, and what could not be carried over.
pub fn convert(text: &str) -> anyhow::Result<super::Imported> {
    let (named, records) = zone::read(text)?;
    let zone = named
        .or_else(|| zone::zone_of(&records))
        .context("no SOA record and no name shared by all records: cannot tell the zone")?;
    let mut notes = Vec::new();
    let mut to_do = Vec::new();
    let mut ordinary = Vec::new();
    // Per name: the records understood, in order (A then AAAA as they come).
    let mut by_name: BTreeMap<String, (Option<u32>, Vec<Imported>)> = BTreeMap::new();
    for r in &records {
        if r.rtype != "LUA" {
            let apex_only = r.name == zone && matches!(r.rtype.as_str(), "SOA" | "NS");
            let dnssec = matches!(
                r.rtype.as_str(),
                "RRSIG" | "NSEC" | "NSEC3" | "NSEC3PARAM" | "DNSKEY" | "CDS" | "CDNSKEY"
            );
            if !apex_only && !dnssec {
                ordinary.push(r);
            }
            continue;
        }
        match lua_record(r) {
            Ok(imported) => {
                if let Some(why) = &imported.differs {
                    notes.push(format!("{} LUA {}: {why}", r.name, one_line(&r.content)));
                }
                let entry = by_name.entry(r.name.clone()).or_default();
                entry.0 = entry.0.or(r.ttl);
                entry.1.push(imported);
            }
            Err(why) => notes.push(format!("{} LUA {}: {why}", r.name, one_line(&r.content))),
        }
    }
    if by_name.is_empty() {
        bail!("the zone {zone} has no LUA record calling ifurlup, ifportup or a pick function: nothing to import");
    }

    // The most common check becomes [defaults.check]; records that differ keep their own.
    let mut counts: Vec<(Table, usize)> = Vec::new();
    for imported in by_name.values().flat_map(|(_, v)| v) {
        match counts.iter_mut().find(|(c, _)| *c == imported.check) {
            Some((_, n)) => *n += 1,
            None => counts.push((imported.check.clone(), 1)),
        }
    }
    let common = counts
        .iter()
        .max_by_key(|(_, n)| *n)
        .map(|(c, _)| c.clone())
        .expect("at least one record");

    let mut endpoints = Vec::new();
    let mut tenants = Vec::new();
    let mut lua_sink = false;
    for (name, (ttl, parts)) in &by_name {
        let policy = parts[0].policy;
        if parts.iter().any(|p| p.policy != policy) {
            notes.push(format!(
                "{name}: its A and AAAA records pick differently; imported with the first record's policy ({policy})"
            ));
        }
        lua_sink |= matches!(policy, "weighted");
        let tenant = object_name(name);
        let mut names = Vec::new();
        for part in parts {
            for (address, tier, weight) in &part.endpoints {
                let ep_name = object_name(&format!("{tenant}-{}", names.len() + 1));
                let mut ep = Table::new();
                ep.insert("name".into(), ep_name.clone().into());
                ep.insert("address".into(), address.clone().into());
                if policy == "failover" {
                    ep.insert("priority".into(), i64::from(*tier).into());
                }
                if let Some(w) = weight {
                    ep.insert("weight".into(), i64::from(*w).into());
                }
                if part.check != common {
                    ep.insert("check".into(), part.check.clone().into());
                }
                endpoints.push(toml::Value::Table(ep));
                names.push(toml::Value::from(ep_name));
            }
        }
        let mut t = Table::new();
        t.insert("name".into(), tenant.into());
        t.insert(
            "domains".into(),
            vec![toml::Value::from(name.clone())].into(),
        );
        t.insert("endpoints".into(), names.into());
        t.insert("sinks".into(), vec![toml::Value::from("pdns")].into());
        if let Some(ttl) = ttl {
            t.insert("ttl".into(), format!("{ttl}s").into());
        }
        t.insert("policy".into(), policy.into());
        tenants.push(toml::Value::Table(t));
    }

    let mut sink = Table::new();
    sink.insert("kind".into(), "powerdns".into());
    sink.insert("url".into(), "http://127.0.0.1:8081".into());
    sink.insert("api_key_env".into(), "PDNS_API_KEY".into());
    sink.insert("zone".into(), zone.clone().into());
    sink.insert("adopt".into(), true.into());
    if lua_sink {
        sink.insert("lua".into(), true.into());
        to_do.push("weighted tenants are written as LUA pickwhashed records (lua = true): PowerDNS 5.1 and later refuse LUA changes through the API unless the server sets enable-lua-record-updates=yes".into());
    }
    to_do.push(
        "set sinks.pdns.url to your PowerDNS API and PDNS_API_KEY to its key (or use api_key_file)"
            .into(),
    );
    to_do.push(format!(
        "adopt = true: at its first write the sink replaces the LUA records at the {} imported names with its own records (PowerDNS 5.1 and later allow that through the API only with enable-lua-record-updates=yes; or delete them with pdnsutil first); the zone's other records stay as they are",
        by_name.len()
    ));
    if !ordinary.is_empty() {
        let lines: Vec<String> = ordinary
            .iter()
            .map(|r| {
                format!(
                    "{}.{} IN {} {}",
                    r.name,
                    r.ttl.map(|t| format!(" {t}")).unwrap_or_default(),
                    r.rtype,
                    r.content
                )
            })
            .collect();
        to_do.push(format!(
            "the zone's {} other records stay in PowerDNS; to serve the zone from a dns_server sink instead, put them in its static_records: {}",
            ordinary.len(),
            lines.join(" | ")
        ));
    }

    let mut defaults = Table::new();
    defaults.insert("check".into(), common.into());
    let mut sinks = Table::new();
    sinks.insert("pdns".into(), sink.into());
    let mut config = Table::new();
    config.insert("defaults".into(), defaults.into());
    config.insert("endpoints".into(), endpoints.into());
    config.insert("tenants".into(), tenants.into());
    config.insert("sinks".into(), sinks.into());
    Ok(super::Imported {
        config,
        not_carried: notes,
        to_do,
        by_record: BTreeMap::new(),
        unpublished: BTreeMap::new(),
        policies: BTreeMap::new(),
    })
}

/// Record data on one line, for a note.
fn one_line(content: &str) -> String {
    content.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A name as a tenant or endpoint name (at most 63 characters).
fn object_name(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    cleaned.chars().take(63).collect()
}

/// One LUA record's meaning, or why it has none here.
fn lua_record(r: &Record) -> Result<Imported, String> {
    let (qtype, code) = r
        .content
        .split_once(char::is_whitespace)
        .ok_or("no type and code")?;
    if !matches!(qtype.to_ascii_uppercase().as_str(), "A" | "AAAA") {
        return Err(format!(
            "a LUA {qtype} record (only A and AAAA answer addresses)"
        ));
    }
    let code = zone::unquote(code);
    let (function, args) = lua::parse_call(&code)?;
    let options = args.get(2).map(Value::fields).unwrap_or_default();
    match function.to_ascii_lowercase().as_str() {
        "ifurlup" => {
            let url = args
                .first()
                .and_then(Value::text)
                .ok_or("ifurlup without a URL")?;
            let parsed = super::openova::parse_url(&url)
                .ok_or_else(|| format!("{url:?} is not an http(s) URL"))?;
            let mut check = Table::new();
            check.insert("kind".into(), parsed.kind.clone().into());
            check.insert("port".into(), i64::from(parsed.port).into());
            check.insert("path".into(), parsed.path.clone().into());
            if parsed.host.parse::<std::net::IpAddr>().is_err() {
                check.insert("host".into(), parsed.host.clone().into());
            }
            let groups = tiers(args.get(1))?;
            checked(check, groups, &options, &r.name)
        }
        "ifportup" => {
            let port = args
                .first()
                .and_then(Value::number)
                .filter(|p| *p >= 1.0 && *p <= 65535.0 && p.fract() == 0.0)
                .ok_or("ifportup without a port")?;
            let mut check = Table::new();
            check.insert("kind".into(), "tcp".into());
            check.insert("port".into(), (port as i64).into());
            checked(check, tiers(args.get(1))?, &options, &r.name)
        }
        f @ ("pickwhashed" | "pickwrandom") => {
            let mut endpoints = Vec::new();
            for item in args
                .first()
                .and_then(Value::items)
                .ok_or("no weighted list")?
            {
                let pair = item
                    .items()
                    .ok_or("a weighted item that is not {weight, address}")?;
                let (Some(w), Some(a)) = (
                    pair.first().and_then(|v| v.number()),
                    pair.get(1).and_then(|v| v.text()),
                ) else {
                    return Err(format!("{f}: an item that is not {{weight, address}}"));
                };
                endpoints.push((address(&a)?, 1, Some(w.max(0.0) as u32)));
            }
            Ok(unchecked(f, "weighted", endpoints))
        }
        "pickrandom" | "pickhashed" | "pickclosest" | "pickfirst" | "pickrandomsample" => {
            let items = args
                .first()
                .and_then(Value::items)
                .ok_or("no address list")?;
            let endpoints = items
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    let a = v.text().ok_or("an address that is not text")?;
                    Ok((address(&a)?, i as u32 + 1, None))
                })
                .collect::<Result<Vec<_>, String>>()?;
            let policy = if function.eq_ignore_ascii_case("pickfirst") {
                "failover"
            } else {
                "all"
            };
            Ok(unchecked(&function, policy, endpoints))
        }
        other => Err(format!("{other}() has no equivalent")),
    }
}

fn address(text: &str) -> Result<String, String> {
    text.parse::<std::net::IpAddr>()
        .map(|a| a.to_string())
        .map_err(|_| format!("{text:?} is not an IP address"))
}

/// The address groups of an `if...up` call: a flat list is one group; a list of lists is
/// one group per list, the first with an address up answering.
fn tiers(list: Option<&Value>) -> Result<Vec<Vec<String>>, String> {
    let items = list.and_then(Value::items).ok_or("no address list")?;
    if items.iter().all(|v| matches!(v, Value::Table(_))) {
        items
            .iter()
            .map(|g| {
                g.items()
                    .unwrap_or_default()
                    .iter()
                    .map(|v| {
                        v.text()
                            .ok_or("an address that is not text".to_owned())
                            .and_then(|a| address(&a))
                    })
                    .collect()
            })
            .collect()
    } else {
        Ok(vec![items
            .iter()
            .map(|v| {
                v.text()
                    .ok_or("an address that is not text".to_owned())
                    .and_then(|a| address(&a))
            })
            .collect::<Result<_, _>>()?])
    }
}

/// A record without a check of its own: probed on TCP 443 until the operator says what.
fn unchecked(
    function: &str,
    policy: &'static str,
    endpoints: Vec<(String, u32, Option<u32>)>,
) -> Imported {
    let mut check = Table::new();
    check.insert("kind".into(), "tcp".into());
    check.insert("port".into(), 443.into());
    check.insert("interval".into(), "5s".into());
    check.insert("timeout".into(), "2s".into());
    check.insert("fall".into(), 1.into());
    check.insert("rise".into(), 1.into());
    let geo = if function.eq_ignore_ascii_case("pickclosest") {
        "; it answered the address closest to the client (GeoIP), imported as every address: label the endpoints with `geo` and use policy = \"geo\" for per-client answers"
    } else {
        ""
    };
    Imported {
        policy,
        differs: Some(format!(
            "{function}() checked nothing; imported with a TCP check on port 443: set the port the service listens on{geo}"
        )),
        endpoints,
        check,
    }
}

/// An `ifurlup`/`ifportup` record: its check with PowerDNS's timing, its tiers, its
/// selector as the policy.
fn checked(
    mut check: Table,
    groups: Vec<Vec<String>>,
    options: &[(&str, &Value)],
    name: &str,
) -> Result<Imported, String> {
    let mut interval = PDNS_INTERVAL;
    let mut timeout = PDNS_TIMEOUT;
    let mut fall = 1;
    let mut selector = "random".to_owned();
    for (key, value) in options {
        let number = || {
            value
                .number()
                .ok_or(format!("option {key} is not a number"))
        };
        match *key {
            "interval" => interval = number()?,
            "timeout" => timeout = number()?,
            "minimumFailures" => fall = number()?.max(1.0) as i64,
            "selector" => selector = value.text().unwrap_or_default(),
            "stringmatch" => {
                check.insert(
                    "body_contains".into(),
                    value.text().unwrap_or_default().into(),
                );
            }
            "useragent" => {
                let mut headers = Table::new();
                headers.insert("User-Agent".into(), value.text().unwrap_or_default().into());
                check.insert("headers".into(), headers.into());
            }
            "byteslimit" => {
                check.insert("body_limit".into(), (number()? as i64).into());
            }
            "source" => {
                check.insert(
                    "source_address".into(),
                    value.text().unwrap_or_default().into(),
                );
            }
            // PowerDNS answers SERVFAIL before every check ran; the orchestrator never
            // publishes before every endpoint has a verdict.
            "failOnIncompleteCheck" => {}
            // Used when every address is down: fail open, as on_all_unhealthy's default.
            "backupSelector" => {}
            other => return Err(format!("option {other} has no equivalent")),
        }
    }
    check.insert(
        "interval".into(),
        super::openova::duration_text(interval).into(),
    );
    check.insert(
        "timeout".into(),
        super::openova::duration_text(timeout.min(interval)).into(),
    );
    check.insert("fall".into(), fall.into());
    check.insert("rise".into(), 1.into());
    let several = groups.len() > 1;
    let (policy, endpoints) = match selector.as_str() {
        "pickfirst" => (
            "failover",
            groups
                .into_iter()
                .flatten()
                .enumerate()
                .map(|(i, a)| (a, i as u32 + 1, None))
                .collect(),
        ),
        "all" | "random" | "hashed" | "pickclosest" | "pickrandom" | "pickhashed" => (
            if several { "failover" } else { "all" },
            groups
                .into_iter()
                .enumerate()
                .flat_map(|(g, group)| group.into_iter().map(move |a| (a, g as u32 + 1, None)))
                .collect(),
        ),
        other => return Err(format!("{name}: selector {other:?} has no equivalent")),
    };
    let differs = match selector.as_str() {
        "random" | "hashed" | "pickrandom" | "pickhashed" => Some(format!(
            "selector {selector:?} answered one healthy address per query; imported as every healthy address (resolvers rotate)"
        )),
        "pickclosest" => Some("selector \"pickclosest\" answered the healthy address closest to the client (GeoIP); imported as every healthy address: label the endpoints with `geo` and use policy = \"geo\" for per-client answers".into()),
        _ => None,
    };
    Ok(Imported {
        policy,
        differs,
        endpoints,
        check,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(content: &str) -> Result<Imported, String> {
        lua_record(&Record {
            name: "api.acme.com".into(),
            ttl: Some(60),
            rtype: "LUA".into(),
            content: content.into(),
        })
    }

    #[test]
    fn ifurlup_becomes_the_check_powerdns_ran_with_its_groups_as_tiers() {
        let r = one("A \"ifurlup('https://www.lua.org:8443/up', {{'192.0.2.1', '192.0.2.2'}, {'198.51.100.1'}}, {selector='all', stringmatch='Lua', interval=10, timeout=3, minimumFailures=3})\"").unwrap();
        assert_eq!(r.policy, "failover");
        assert_eq!(
            r.endpoints,
            [
                ("192.0.2.1".to_string(), 1, None),
                ("192.0.2.2".to_string(), 1, None),
                ("198.51.100.1".to_string(), 2, None)
            ]
        );
        let text = toml::to_string(&r.check).unwrap();
        assert_eq!(
            text,
            "kind = \"https\"\nport = 8443\npath = \"/up\"\nhost = \"www.lua.org\"\nbody_contains = \"Lua\"\ninterval = \"10s\"\ntimeout = \"3s\"\nfall = 3\nrise = 1\n"
        );
        assert!(r.differs.is_none());
    }

    #[test]
    fn selectors_become_policies_and_what_differs_is_said() {
        let first =
            one("A \"ifportup(443, {'192.0.2.1', '192.0.2.2'}, {selector='pickfirst'})\"").unwrap();
        assert_eq!(first.policy, "failover");
        assert_eq!(
            first.endpoints[1].1, 2,
            "the second address is the second tier"
        );
        let random = one("A \"ifportup(443, {'192.0.2.1'})\"").unwrap();
        assert_eq!(random.policy, "all");
        assert!(random
            .differs
            .unwrap()
            .contains("one healthy address per query"));
        let weighted = one("A \"pickwhashed({{80, '192.0.2.1'}, {20, '192.0.2.2'}})\"").unwrap();
        assert_eq!(
            (weighted.policy, weighted.endpoints[0].2),
            ("weighted", Some(80))
        );
        assert!(weighted.differs.unwrap().contains("checked nothing"));
    }

    #[test]
    fn what_has_no_equivalent_is_refused_with_the_reason() {
        let no = |c: &str| one(c).err().unwrap();
        assert!(no("CNAME \"'a.example.'\"").contains("only A and AAAA"));
        assert!(no("A \"ifurlup('ftp://x/', {'192.0.2.1'})\"").contains("not an http(s) URL"));
        assert!(
            no("A \"ifportup(443, {'192.0.2.1'}, {selector='pickwrandom'})\"").contains("selector")
        );
        assert!(no("A \"ifportup(443, {'192.0.2.1'}, {follow=true})\"").contains("option follow"));
        assert!(no("A \"ifportup(443, {'not-an-address'})\"").contains("not an IP address"));
        assert!(no("A \"dblookup('x.example.', pdns.A)\"").contains("no equivalent"));
    }
}
