//! Every DNSRecord example Kuadrant publishes (`tests/fixtures/kuadrant/upstream/`, sources
//! named in its README), imported and compared name by name with the record itself: each
//! name the translation publishes answers exactly the addresses its chain of CNAMEs in the
//! record leads to (wildcards included: the embedded server answers them as RFC 4592
//! says), names with different answers never share a tenant, and a name that cannot be
//! published (a CNAME out of the record) is named in a `# NOT CARRIED OVER` line rather
//! than answered wrong.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use serde::Deserialize;
use serde_yaml::Value;

use crate::cli::{import_and_check, repo};

/// What a record's name answers, walked here independently of the import: the addresses
/// its CNAMEs lead to, or why there is no answer to compare with.
#[derive(Debug, PartialEq)]
enum Expected {
    Addresses(BTreeSet<IpAddr>),
    /// A CNAME (somewhere on the chain) to a name the record does not hold.
    Outside,
}

/// (name, type, targets) of each endpoint of the record.
fn endpoints(record: &Value) -> Vec<(String, String, Vec<String>)> {
    let name = |s: &str| s.trim_end_matches('.').to_ascii_lowercase();
    record["spec"]["endpoints"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|e| {
            (
                name(e["dnsName"].as_str().unwrap()),
                e["recordType"].as_str().unwrap_or("A").to_owned(),
                e["targets"]
                    .as_sequence()
                    .unwrap()
                    .iter()
                    .map(|t| name(t.as_str().unwrap()))
                    .collect(),
            )
        })
        .collect()
}

fn expected(recs: &[(String, String, Vec<String>)], name: &str, depth: usize) -> Expected {
    assert!(depth < 10, "a loop at {name}");
    let mut addresses = BTreeSet::new();
    for (_, rtype, targets) in recs.iter().filter(|(n, _, _)| n == name) {
        match rtype.as_str() {
            "A" | "AAAA" => addresses.extend(targets.iter().map(|t| t.parse::<IpAddr>().unwrap())),
            "CNAME" => {
                for t in targets {
                    if !recs.iter().any(|(n, _, _)| n == t) {
                        return Expected::Outside;
                    }
                    match expected(recs, t, depth + 1) {
                        Expected::Addresses(a) => addresses.extend(a),
                        other => return other,
                    }
                }
            }
            other => panic!("{name}: a {other} record in an example"),
        }
    }
    Expected::Addresses(addresses)
}

#[test]
fn every_name_of_kuadrants_examples_answers_what_its_chain_leads_to() {
    let dir = repo("tests/fixtures/kuadrant/upstream");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let (mut compared, mut wrong, mut records) = (0, Vec::new(), 0);
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let docs: Vec<Value> = serde_yaml::Deserializer::from_str(&text)
            .map(|d| Value::deserialize(d).unwrap())
            .collect();
        let Some(record) = docs.iter().find(|d| d["kind"] == "DNSRecord") else {
            continue;
        };
        records += 1;
        let recs = endpoints(record);
        let root = record["spec"]["rootHost"].as_str().unwrap().to_owned();
        let plumbing =
            |name: &str| name == format!("klb.{root}") || name.ends_with(&format!(".klb.{root}"));
        let answerable = recs.iter().any(|(n, _, _)| {
            !plumbing(n) && matches!(expected(&recs, n, 0), Expected::Addresses(_))
        });
        if !answerable {
            // Nothing to publish (dns-operator's scale template points its root at a klb
            // name it never writes): refused, and the reason named, never an empty tenant.
            let out = crate::harness::binary()
                .args(["import", "--from", "kuadrant"])
                .arg(&file)
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{stderr}");
            assert!(
                stderr.contains("publishes no name") && stderr.contains(&root),
                "{stderr}"
            );
            continue;
        }
        let (toml, plan, _) =
            import_and_check(&["--from", "kuadrant"], std::slice::from_ref(&file));
        let lost: Vec<&str> = toml
            .lines()
            .filter(|l| l.starts_with("# NOT CARRIED OVER"))
            .collect();
        let served: BTreeMap<&str, BTreeSet<IpAddr>> = plan
            .tenants
            .iter()
            .flat_map(|t| {
                let addresses: BTreeSet<IpAddr> = t
                    .endpoints
                    .iter()
                    .map(|&i| plan.endpoints[i].address)
                    .collect();
                t.domains
                    .iter()
                    .map(move |d| (d.as_str(), addresses.clone()))
            })
            .collect();
        let names: BTreeSet<&str> = recs.iter().map(|(n, _, _)| n.as_str()).collect();
        for name in names {
            let plumbing = plumbing(name);
            let at = format!("{}: {name}", file.file_name().unwrap().to_string_lossy());
            match (expected(&recs, name, 0), served.get(name)) {
                (Expected::Addresses(want), Some(got)) => {
                    compared += 1;
                    if *got != want {
                        wrong.push(format!("{at} answers {got:?}, its chain leads to {want:?}"));
                    }
                }
                // dns-operator's klb names are reached only through the root's CNAME,
                // answered flattened.
                (Expected::Addresses(_), None) if plumbing => {}
                (Expected::Addresses(want), None) => {
                    wrong.push(format!("{at} ({want:?}) is not published"))
                }
                (Expected::Outside, Some(got)) => {
                    wrong.push(format!("{at} cannot be answered here but answers {got:?}"))
                }
                (Expected::Outside, None) => {
                    if !plumbing && !lost.iter().any(|l| l.contains(name)) {
                        wrong.push(format!("{at} is left out without a NOT CARRIED OVER line"));
                    }
                }
            }
        }
        // Names with different answers never share a tenant.
        for t in &plan.tenants {
            let answers: BTreeSet<_> = t
                .domains
                .iter()
                .map(|d| match expected(&recs, d, 0) {
                    Expected::Addresses(a) => a,
                    other => panic!("{d}: {other:?} published"),
                })
                .collect();
            assert_eq!(answers.len(), 1, "tenant {} mixes answers: {toml}", t.name);
        }
    }
    // Every example is read, and every name that has an answer compared: 13 records, 18
    // names (2 of them wildcards; the others are klb plumbing, or in the one record with
    // no answer).
    assert_eq!((records, compared), (13, 18));
    assert!(
        wrong.is_empty(),
        "{} of {compared} names:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// Kuadrant's own `kuadrant.io/v1` DNSPolicies (the operator's sample and its health-check
/// example, `tests/fixtures/kuadrant/upstream/operator-*`) translate beside a record and
/// give a config `check-config` accepts: v1's `healthCheck` (`path`, HTTPS on 443 by
/// default) is the record's check, `loadBalancing {weight, geo, defaultGeo}` its geo.
#[test]
fn kuadrants_v1_policies_translate() {
    let dir = repo("tests/fixtures/kuadrant/upstream");
    for (policy, probe) in [
        // `protocol: HTTP` with the CRD's default port, 443, as Kuadrant probes it.
        (
            "operator-dnspolicy-sample.yaml",
            "http://52.30.101.221:443/",
        ),
        (
            "operator-dnspolicy-healthchecks.yaml",
            "https://52.30.101.221:443/healthz",
        ),
    ] {
        let (toml, plan, _) = import_and_check(
            &["--from", "kuadrant"],
            &[dir.join(policy), dir.join("samples-dnsrecord.yaml")],
        );
        let e = &plan.endpoints[0];
        assert_eq!(plan.targets[e.target()].key(), probe, "{policy}: {toml}");
        if policy.contains("healthchecks") {
            assert_eq!(e.labels()["geo"], "EU", "{toml}");
            assert_eq!(plan.tenants[0].default_geo.as_deref(), Some("EU"));
        }
    }
}

/// The load balancers a name's chain of CNAMEs leads to (lower case, no trailing dot),
/// walked here independently of the import; `None` where it leads to an address.
fn outside_hosts(recs: &[(String, String, Vec<String>)], name: &str) -> Option<BTreeSet<String>> {
    let mut hosts = BTreeSet::new();
    let mut stack = vec![(name.to_owned(), 0)];
    while let Some((at, depth)) = stack.pop() {
        assert!(depth < 10, "a loop at {at}");
        for (_, rtype, targets) in recs.iter().filter(|(n, _, _)| *n == at) {
            if rtype != "CNAME" {
                return None;
            }
            for t in targets {
                match recs.iter().any(|(n, _, _)| n == t) {
                    true => stack.push((t.clone(), depth + 1)),
                    false => {
                        hosts.insert(t.clone());
                    }
                }
            }
        }
    }
    Some(hosts)
}

/// Host-name variants of Kuadrant's layouts (`tests/fixtures/kuadrant/hostnames/`: EKS's
/// load balancers, known only by name, in the simple and the load-balanced strategy, and a
/// Gateway reporting only a `Hostname`): every name is published as a CNAME to exactly the
/// load balancers its chain leads to (a listener's: its Gateway's `Hostname`s), and each
/// load balancer is an endpoint given by that name, so it is probed at the addresses it
/// resolves to. The plan is loaded as `run` loads it, without resolving the names (they
/// are the cloud's, not this machine's).
#[test]
fn host_name_variants_answer_a_cname_to_their_chains_load_balancers() {
    let dir = repo("tests/fixtures/kuadrant/hostnames");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let (mut compared, mut wrong) = (0, Vec::new());
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let docs: Vec<Value> = serde_yaml::Deserializer::from_str(&text)
            .map(|d| Value::deserialize(d).unwrap())
            .collect();
        let mut want: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for record in docs.iter().filter(|d| d["kind"] == "DNSRecord") {
            let recs = endpoints(record);
            let root = record["spec"]["rootHost"].as_str().unwrap();
            for (name, _, _) in &recs {
                let plumbing = name.contains(&format!("klb.{root}"));
                if let (false, Some(hosts)) = (plumbing, outside_hosts(&recs, name)) {
                    want.insert(name.clone(), hosts);
                }
            }
        }
        for gateway in docs.iter().filter(|d| d["kind"] == "Gateway") {
            let hosts: BTreeSet<String> = gateway["status"]["addresses"]
                .as_sequence()
                .unwrap()
                .iter()
                .map(|a| a["value"].as_str().unwrap().to_ascii_lowercase())
                .collect();
            for l in gateway["spec"]["listeners"].as_sequence().unwrap() {
                want.insert(l["hostname"].as_str().unwrap().to_owned(), hosts.clone());
            }
        }
        let out = crate::harness::binary()
            .args(["import", "--from", "kuadrant"])
            .arg(file)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{}: {stderr}", file.display());
        let tmp = tempfile::tempdir().unwrap();
        let imported = tmp.path().join("imported.toml");
        std::fs::write(&imported, &out.stdout).unwrap();
        let plan = ho_kinds::load_plan(&[&imported]).unwrap();
        let at = file.file_name().unwrap().to_string_lossy().into_owned();
        for (name, hosts) in &want {
            compared += 1;
            let Some((ti, t)) = plan
                .tenants
                .iter()
                .enumerate()
                .find(|(_, t)| t.domains.contains(name))
            else {
                wrong.push(format!("{at}: {name} is not published"));
                continue;
            };
            let served: BTreeSet<String> = plan
                .hosts
                .iter()
                .filter(|h| h.tenants.contains(&ti))
                .map(|h| h.host.clone())
                .collect();
            let addresses = t
                .endpoints
                .iter()
                .filter(|&&e| plan.endpoints[e].host().is_none());
            if t.answer != ho_config::Answer::Cname || served != *hosts || addresses.count() > 0 {
                wrong.push(format!(
                    "{at}: {name} answers {:?} to {served:?}, its chain leads to {hosts:?}",
                    t.answer
                ));
            }
        }
    }
    // 3 files: 1 + 1 names of records (the rest klb plumbing), 2 listeners.
    assert_eq!((files.len(), compared), (3, 4));
    assert!(
        wrong.is_empty(),
        "{} of {compared} names:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}
