//! `import --from k8gb` on what users export from a cluster running k8gb: the `kind: List`
//! that `kubectl get gslb,ingress -o yaml` prints (also split into documents and nested),
//! Gslbs selecting their Ingress by labels as k8gb's tutorials write them, the Ingress
//! k8gb owns for an embedded-ingress Gslb, and strategies an external-dns sink cannot
//! carry. Expected resources are read off the fixtures here, not computed by the import.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_yaml::Value;

use crate::cli::repo;

fn fixture(name: &str) -> PathBuf {
    repo(&format!("tests/fixtures/k8gb/{name}"))
}

/// (exit code, stdout, stderr) of the binary run with `args`.
fn run(args: &[&std::ffi::OsStr]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_health-orchestrator"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `import --from k8gb ARGS FILES`.
fn import(args: &[&str], files: &[&Path]) -> (i32, String, String) {
    let mut all: Vec<&std::ffi::OsStr> = ["import", "--from", "k8gb"]
        .iter()
        .chain(args)
        .map(std::ffi::OsStr::new)
        .collect();
    all.extend(files.iter().map(|f| f.as_os_str()));
    run(&all)
}

/// An operator config allowing namespace `test-gslb` `cloud.example.com` on sink `dns`
/// (the embedded server), `edns` (an external-dns webhook provider) and `crd` (external-dns
/// DNSEndpoint objects).
fn base(dir: &Path) -> PathBuf {
    let file = dir.join("base.toml");
    std::fs::write(
        &file,
        "[sinks.dns]\nkind = \"dns_server\"\nlisten = [\"127.0.0.1:0\"]\nzones = [\"cloud.example.com\"]\n\n\
         [sinks.edns]\nkind = \"external_dns_webhook\"\nurl = \"http://127.0.0.1:8888\"\n\n\
         [sinks.crd]\nkind = \"dns_endpoint\"\nnamespace = \"external-dns\"\n\n\
         [kubernetes]\ntenants = true\n\n[[kubernetes.allow]]\nnamespace = \"test-gslb\"\n\
         domains = [\"cloud.example.com\"]\nsinks = [\"dns\", \"edns\", \"crd\"]\n",
    )
    .unwrap();
    file
}

/// `check-config --resource` of `yaml` against [`base`]: (exit code, stdout, stderr).
fn check(yaml: &str) -> (i32, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let resources = dir.path().join("resources.yaml");
    std::fs::write(&resources, yaml).unwrap();
    let config = base(dir.path());
    run(&[
        "check-config".as_ref(),
        "--config".as_ref(),
        config.as_os_str(),
        "--resource".as_ref(),
        resources.as_os_str(),
    ])
}

/// The DNSFailovers of an import's output, by name.
fn resources(yaml: &str) -> BTreeMap<String, Value> {
    serde_yaml::Deserializer::from_str(yaml)
        .map(|doc| {
            let value: Value = serde::Deserialize::deserialize(doc).unwrap();
            let name = value["metadata"]["name"].as_str().unwrap().to_owned();
            (name, value)
        })
        .collect()
}

/// The items of a `kind: List` fixture.
fn items(name: &str) -> Vec<Value> {
    let list: Value =
        serde_yaml::from_str(&std::fs::read_to_string(fixture(name)).unwrap()).unwrap();
    assert_eq!(list["kind"], "List");
    list["items"].as_sequence().unwrap().clone()
}

fn of_kind<'a>(items: &'a [Value], kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    items.iter().filter(move |i| i["kind"] == kind)
}

/// The hosts of an Ingress's rules, in order.
fn hosts(ingress_spec: &Value) -> Vec<String> {
    ingress_spec["rules"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|r| r["host"].as_str().unwrap().to_owned())
        .collect()
}

/// The Ingress the fixture's Gslb reads, by name, and its hosts: the embedded one (named
/// like the Gslb), else the one Ingress whose labels hold all of `matchLabels`.
fn expected_source(gslb: &Value, items: &[Value]) -> (String, Vec<String>) {
    let name = gslb["metadata"]["name"].as_str().unwrap();
    if let Some(embedded) = gslb["spec"].get("ingress") {
        return (name.to_owned(), hosts(embedded));
    }
    let labels = gslb["spec"]["resourceRef"]["matchLabels"]
        .as_mapping()
        .unwrap();
    let selected: Vec<&Value> = of_kind(items, "Ingress")
        .filter(|i| {
            labels
                .iter()
                .all(|(k, v)| i["metadata"]["labels"].get(k.as_str().unwrap()) == Some(v))
        })
        .collect();
    assert_eq!(selected.len(), 1, "the fixture selects one Ingress");
    let ingress = selected[0];
    let n = ingress["metadata"]["name"].as_str().unwrap().to_owned();
    (n, hosts(&ingress["spec"]))
}

/// What `kubectl get gslb,ingress -n test-gslb -o yaml` prints: one `kind: List`. Every
/// Gslb in it becomes a DNSFailover named like it, whose source is the Ingress k8gb reads
/// (the embedded one's, named like the Gslb; the one its `matchLabels` select) with that
/// Ingress's hosts, and `check-config --resource` accepts them all.
#[test]
fn k8gb_kubectl_list_export_imports_and_is_accepted() {
    let items = items("exported-list-eu.yaml");
    let (code, yaml, stderr) = import(&["--sink", "dns"], &[&fixture("exported-list-eu.yaml")]);
    assert_eq!(code, 0, "{stderr}");
    let got = resources(&yaml);
    let gslbs: Vec<&Value> = of_kind(&items, "Gslb").collect();
    assert_eq!(got.len(), gslbs.len(), "{yaml}");
    for gslb in gslbs {
        let name = gslb["metadata"]["name"].as_str().unwrap();
        let spec = &got[name]["spec"];
        let (ingress, rules) = expected_source(gslb, &items);
        assert_eq!(
            spec["endpoints"][0]["ingress"].as_str(),
            Some(ingress.as_str()),
            "{name}"
        );
        assert_eq!(
            spec["endpoints"][0]["labels"]["geo"],
            gslb["status"]["geoTag"]
        );
        let domains: Vec<String> = serde_yaml::from_value(spec["domains"].clone()).unwrap();
        assert_eq!(domains, rules, "{name}");
        let ttl = gslb["spec"]["strategy"]["dnsTtlSeconds"].as_u64().unwrap();
        assert_eq!(spec["ttl"].as_str(), Some(format!("{ttl}s").as_str()));
    }
    let (code, stdout, stderr) = check(&yaml);
    assert_eq!(code, 0, "{stdout}{stderr}");
    for name in got.keys() {
        assert!(
            stdout.contains(&format!("test-gslb/{name}: accepted")),
            "{stdout}"
        );
    }
}

/// The same objects as documents of one file, the Ingresses nested in a list inside a
/// list, import as the one `kind: List` does.
#[test]
fn k8gb_documents_and_nested_lists_import_as_the_list_does() {
    let items = items("exported-list-eu.yaml");
    let (code, yaml, stderr) = import(&["--sink", "dns"], &[&fixture("exported-list-eu.yaml")]);
    assert_eq!(code, 0, "{stderr}");
    let got = resources(&yaml);
    let dir = tempfile::tempdir().unwrap();
    let split = dir.path().join("split.yaml");
    let mut text = String::new();
    for gslb in of_kind(&items, "Gslb") {
        text += &format!("---\n{}", serde_yaml::to_string(gslb).unwrap());
    }
    let ingresses: Vec<Value> = of_kind(&items, "Ingress").cloned().collect();
    let nested = serde_yaml::to_string(
        &serde_yaml::from_str::<Value>(&format!(
            "{{apiVersion: v1, kind: List, items: [{{apiVersion: v1, kind: List, items: {}}}]}}",
            serde_json::to_string(&ingresses).unwrap()
        ))
        .unwrap(),
    )
    .unwrap();
    text += &format!("---\n{nested}");
    std::fs::write(&split, text).unwrap();
    let (code, split_yaml, stderr) = import(&["--sink", "dns"], &[&split]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(resources(&split_yaml), got);
}

/// `resourceRef.matchLabels` and `matchExpressions`, as k8gb's tutorials write them: the
/// one Ingress of the Gslb's namespace they select is the source, said as chosen now; none
/// or several are refused naming the selector and the Ingresses given.
#[test]
fn k8gb_match_labels_select_the_one_ingress_or_say_which() {
    let file = fixture("matchlabels-tutorial.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    let docs: Vec<Value> = serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    let gslb = docs.iter().find(|d| d["kind"] == "Gslb").unwrap();
    let wanted_tier = gslb["spec"]["resourceRef"]["matchExpressions"][0]["values"][0].clone();
    let selected = docs
        .iter()
        .find(|d| d["kind"] == "Ingress" && d["metadata"]["labels"]["tier"] == wanted_tier)
        .unwrap();
    let (code, yaml, stderr) = import(&["--geo-tag", "eu", "--sink", "dns"], &[&file]);
    assert_eq!(code, 0, "{stderr}");
    let got = resources(&yaml);
    let spec = &got[gslb["metadata"]["name"].as_str().unwrap()]["spec"];
    assert_eq!(
        spec["endpoints"][0]["ingress"],
        selected["metadata"]["name"]
    );
    let domains: Vec<String> = serde_yaml::from_value(spec["domains"].clone()).unwrap();
    assert_eq!(domains, hosts(&selected["spec"]));
    assert!(yaml.contains("# NOT CARRIED OVER: Gslb test-gslb/podinfo: resourceRef's label selector: the DNSFailover names the Ingress it selects now, podinfo,"), "{yaml}");
    let (code, stdout, stderr) = check(&yaml);
    assert_eq!(code, 0, "{stdout}{stderr}");

    // Without the expression both Ingresses match; with a label neither carries, none does.
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            text.replace("    matchExpressions:\n      - key: tier\n        operator: In\n        values: [frontend]\n", ""),
            "resourceRef selects its Ingress by labels (app=podinfo), which 2 Ingress objects carry (podinfo [app=podinfo,tier=frontend], podinfo-canary [app=podinfo,tier=canary]); k8gb refuses that too",
        ),
        (
            text.replace("values: [frontend]", "values: [backend]"),
            "no Ingress given in namespace test-gslb carries them (given: podinfo [app=podinfo,tier=frontend], podinfo-canary [app=podinfo,tier=canary]): pass the Ingress it selects (kubectl get ingress -n test-gslb -l 'app=podinfo,tier in (backend)' -o yaml)",
        ),
        (
            text.replace("operator: In", "operator: Exists"),
            "resourceRef.matchExpressions[0]: Exists and DoesNotExist take no values",
        ),
    ];
    for (variant, expected) in cases {
        let file = dir.path().join("variant.yaml");
        std::fs::write(&file, variant).unwrap();
        let (code, _, stderr) = import(&["--geo-tag", "eu"], &[&file]);
        assert_eq!(code, 1, "{expected}");
        assert!(stderr.contains(expected), "{stderr}");
    }
}

/// k8gb owns the Ingress it makes of an embedded `spec.ingress`: the import says, before
/// any other step, that deleting the Gslb deletes that Ingress and prints the `kubectl
/// patch` to run first, which (applied here to the exported Ingress) removes the Gslb's
/// reference and nothing else. An Ingress no Gslb owns gets no such step; an embedded-ingress
/// Gslb exported without its Ingress gets one all the same.
#[test]
fn k8gb_owned_ingress_is_released_before_the_gslb_goes() {
    let items = items("exported-list-eu.yaml");
    let (code, yaml, stderr) = import(&["--sink", "dns"], &[&fixture("exported-list-eu.yaml")]);
    assert_eq!(code, 0, "{stderr}");
    let to_do: Vec<&str> = yaml
        .lines()
        .filter_map(|l| l.strip_prefix("# TO DO: "))
        .collect();
    let owned: Vec<&Value> = of_kind(&items, "Ingress")
        .filter(|i| i["metadata"].get("ownerReferences").is_some())
        .collect();
    assert_eq!(owned.len(), 1, "the fixture has one Ingress k8gb owns");
    let ingress = owned[0];
    let (name, ns) = (
        ingress["metadata"]["name"].as_str().unwrap(),
        ingress["metadata"]["namespace"].as_str().unwrap(),
    );
    let owner = &ingress["metadata"]["ownerReferences"][0];
    let gslb = owner["name"].as_str().unwrap();
    let steps: Vec<&&str> = to_do
        .iter()
        .filter(|s| s.starts_with("before deleting Gslb"))
        .collect();
    assert_eq!(steps.len(), 1, "{yaml}");
    let step = steps[0];
    assert!(
        step.starts_with(&format!(
            "before deleting Gslb {gslb}: Ingress {name} -n {ns} names it as its owner"
        )),
        "{step}"
    );
    assert!(
        step.contains("garbage collector delete the Ingress"),
        "{step}"
    );
    assert!(
        step.contains(&format!(
            "DNSFailover {gslb} keeps publishing the addresses"
        )),
        "{step}"
    );
    assert!(
        step.contains(&format!(
            "kubectl delete gslb {gslb} -n {ns} --cascade=orphan"
        )),
        "{step}"
    );
    let apply = to_do
        .iter()
        .position(|s| s.starts_with("apply in this cluster"))
        .unwrap();
    assert!(
        to_do.iter().position(|s| s == step).unwrap() < apply,
        "{yaml}"
    );
}

/// k8gb's weighted roundRobin example, and it as a geoip Gslb (its weights taken out), in
/// `dir`.
fn weighted_and_geoip(dir: &Path) -> (PathBuf, PathBuf) {
    let weighted = fixture("roundrobin-weight1.yaml");
    let text = std::fs::read_to_string(&weighted).unwrap();
    assert!(text.contains("weight:"), "k8gb's example is weighted");
    let geoip = dir.join("geoip.yaml");
    let geo = text
        .replace("type: roundRobin", "type: geoip")
        .replace("    weight:\n      eu: 5\n      us: 5\n", "");
    assert!(!geo.contains("weight:"));
    std::fs::write(&geoip, geo).unwrap();
    (weighted, geoip)
}

/// `import --from k8gb` of `file` as cluster `eu` for `sink`, given the config `config`.
fn import_for(sink: &str, config: &Path, file: &Path) -> (i32, String, String) {
    let config = config.display().to_string();
    let args = [
        "--geo-tag",
        "eu",
        "--namespace",
        "test-gslb",
        "--sink",
        sink,
    ];
    let args: Vec<&str> = args.into_iter().chain(["--config", &config]).collect();
    import(&args, &[file])
}

/// A weighted roundRobin Gslb (k8gb's own example) and a geoip one become `weighted` and
/// `geo` resources, which an external-dns sink cannot carry: given the config, the import
/// refuses them for `edns` (external_dns_webhook) and `crd` (dns_endpoint) saying what to
/// do; a failover Gslb goes to either as it is, and `check-config --resource` accepts it.
#[test]
fn k8gb_weighted_and_geoip_for_an_external_dns_sink_are_refused_at_import() {
    let dir = tempfile::tempdir().unwrap();
    let config = base(dir.path());
    let (weighted, geoip) = weighted_and_geoip(dir.path());
    let failover = fixture("k8gb.absa.oss_v1beta1_gslb_cr_failover_ingress.yaml");
    for (sink, kind) in [("edns", "external_dns_webhook"), ("crd", "dns_endpoint")] {
        let (code, _, stderr) = import_for(sink, &config, &weighted);
        assert_eq!(code, 1, "{stderr}");
        let refused = format!("strategy roundRobin becomes policy weighted, which sink \"{sink}\" ({kind}) cannot carry");
        assert!(stderr.contains(&refused), "{stderr}");
        assert!(
            stderr.contains("drop strategy.weight from the Gslb"),
            "{stderr}"
        );
        let (code, _, stderr) = import_for(sink, &config, &geoip);
        assert_eq!(code, 1, "{stderr}");
        let refused = format!(
            "strategy geoip becomes policy geo, which sink \"{sink}\" ({kind}) cannot carry"
        );
        assert!(stderr.contains(&refused), "{stderr}");
        let instead = "--sink NAME: dns_server, route53, or powerdns with lua = true";
        assert!(stderr.contains(instead), "{stderr}");
        let (code, yaml, stderr) = import_for(sink, &config, &failover);
        assert_eq!(code, 0, "{stderr}");
        let (code, stdout, stderr) = check(&yaml);
        assert_eq!(code, 0, "{stdout}{stderr}");
    }
}

/// The same Gslbs for the embedded server (`dns`) import, the geoip one with this cluster
/// as its default geo, and `check-config --resource` accepts them.
#[test]
fn k8gb_weighted_and_geoip_for_the_embedded_server_are_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let config = base(dir.path());
    let (weighted, geoip) = weighted_and_geoip(dir.path());
    for file in [&weighted, &geoip] {
        let (code, yaml, stderr) = import_for("dns", &config, file);
        assert_eq!(code, 0, "{stderr}");
        assert!(!yaml.contains("pass --config"), "{yaml}");
        if file == &geoip {
            // Clients k8gb's GeoIP database does not place get this cluster's addresses.
            assert!(yaml.contains("  defaultGeo: eu\n"), "{yaml}");
        }
        let (code, stdout, stderr) = check(&yaml);
        assert_eq!(code, 0, "{stdout}{stderr}");
    }
}

/// Without the config the import cannot know the sink's kind: a step says to check, and
/// `check-config --resource` refuses what it printed for an external-dns sink.
#[test]
fn k8gb_weighted_without_the_config_says_to_check_the_sinks() {
    let args = [
        "--geo-tag",
        "eu",
        "--namespace",
        "test-gslb",
        "--sink",
        "edns",
    ];
    let (code, yaml, stderr) = import(&args, &[&fixture("roundrobin-weight1.yaml")]);
    assert_eq!(code, 0, "{stderr}");
    let step =
        "an external-dns sink (external_dns_webhook, dns_endpoint) refuses them; pass --config";
    assert!(yaml.contains(step), "{yaml}");
    let (code, _, stderr) = check(&yaml);
    assert_eq!(code, 2, "{stderr}");
    let refused = "cannot express policy \"weighted\"";
    assert!(stderr.contains(refused), "{stderr}");
}

/// k8gb's repository holds templates (chainsaw's `($namespace)`, `__GSLB_DOMAIN__`): the
/// import refuses them saying to import what the cluster has, rather than printing
/// resources `check-config --resource` would refuse.
#[test]
fn k8gb_templates_are_refused_at_import() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixture(
        "k8gb.absa.oss_v1beta1_gslb_cr_failover_ingress.yaml",
    ))
    .unwrap();
    let cases = [
        (
            text.replace("namespace: test-gslb", "namespace: ($namespace)"),
            "Gslb ($namespace)/failover-ingress: metadata.namespace \"($namespace)\" is not a Kubernetes name",
        ),
        (
            text.replace("failover.cloud.example.com", "failover.__GSLB_DOMAIN__"),
            "host \"failover.__GSLB_DOMAIN__\" is not a valid domain name",
        ),
    ];
    for (variant, expected) in cases {
        assert_ne!(variant, text);
        let file = dir.path().join("template.yaml");
        std::fs::write(&file, variant).unwrap();
        let (code, _, stderr) = import(&["--geo-tag", "eu"], &[&file]);
        assert_eq!(code, 1, "{stderr}");
        assert!(stderr.contains(expected), "{stderr}");
        assert!(
            stderr.contains("a template's placeholder? Import"),
            "{stderr}"
        );
    }
}

/// The Ingress k8gb owns in the export, with `before` other owners listed ahead of the
/// Gslb (an operator's, a GitOps tool's), and the import's step for it.
fn owned_ingress_step(before: usize) -> (Value, String) {
    let mut items = items("exported-list-eu.yaml");
    let owned: Vec<usize> = (0..items.len())
        .filter(|&i| items[i]["kind"] == "Ingress")
        .filter(|&i| items[i]["metadata"].get("ownerReferences").is_some())
        .collect();
    assert_eq!(owned.len(), 1, "the fixture has one Ingress k8gb owns");
    let references = items[owned[0]]["metadata"]["ownerReferences"]
        .as_sequence_mut()
        .unwrap();
    for n in 0..before {
        let other: Value = serde_yaml::from_str(&format!(
            "{{apiVersion: example.io/v1, kind: Release, name: r{n}, uid: 00000000-0000-0000-0000-00000000000{n}}}"
        ))
        .unwrap();
        references.insert(0, other);
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("export.yaml");
    let list: Value = serde_yaml::from_str("{apiVersion: v1, kind: List}").unwrap();
    let mut list = list.as_mapping().unwrap().clone();
    list.insert("items".into(), Value::Sequence(items.clone()));
    std::fs::write(&file, serde_yaml::to_string(&list).unwrap()).unwrap();
    let (code, yaml, stderr) = import(&["--sink", "dns"], &[&file]);
    assert_eq!(code, 0, "{stderr}");
    let steps: Vec<&str> = yaml
        .lines()
        .filter_map(|l| l.strip_prefix("# TO DO: before deleting Gslb"))
        .collect();
    assert_eq!(steps.len(), 1, "{yaml}");
    (items[owned[0]].clone(), steps[0].to_owned())
}

/// The `kubectl patch` printed in `step` for Ingress `name` in `ns`, as JSON.
fn printed_patch(step: &str, name: &str, ns: &str) -> json_patch::Patch {
    let prefix = format!("kubectl patch ingress {name} -n {ns} --type=json -p '");
    let patch = step
        .split_once(&prefix)
        .unwrap()
        .1
        .split_once('\'')
        .unwrap()
        .0;
    serde_json::from_str(patch).unwrap()
}

/// The `kubectl patch` the import prints, applied (by an RFC 6902 implementation) to the
/// exported Ingress wherever the Gslb stands among its owners: its test passes on the
/// Gslb's uid and only that entry goes, every other owner kept in order; applied to the
/// Ingress after its owners changed (the Gslb's entry moved), the test fails and nothing
/// changes.
#[test]
fn k8gb_owned_ingress_patch_removes_only_the_reference() {
    for before in 0..3 {
        let (ingress, step) = owned_ingress_step(before);
        let (name, ns) = (
            ingress["metadata"]["name"].as_str().unwrap(),
            ingress["metadata"]["namespace"].as_str().unwrap(),
        );
        let patch = printed_patch(&step, name, ns);
        let exported: serde_json::Value = serde_json::to_value(&ingress).unwrap();
        let mut object = exported.clone();
        json_patch::patch(&mut object, &patch).unwrap();
        // The expected object: the Ingress as exported, less the reference to a Gslb.
        let mut expected = exported.clone();
        let owners = expected["metadata"]["ownerReferences"]
            .as_array_mut()
            .unwrap();
        owners.retain(|r| r["kind"] != "Gslb");
        assert_eq!(owners.len(), before);
        assert_eq!(object, expected, "with {before} owners before the Gslb");

        // Another owner added ahead of the Gslb since the export: the patch refuses.
        let mut moved = exported.clone();
        let owners = moved["metadata"]["ownerReferences"].as_array_mut().unwrap();
        owners.insert(
            0,
            serde_json::json!({"kind": "Release", "name": "late", "uid": "1"}),
        );
        let unchanged = moved.clone();
        assert!(json_patch::patch(&mut moved, &patch).is_err(), "{step}");
        assert_eq!(moved, unchanged);
    }
}

/// An embedded-ingress Gslb from k8gb's own examples, exported without its Ingress: the
/// step is said all the same, without a uid to test.
#[test]
fn k8gb_embedded_gslb_without_its_ingress_is_said_owned() {
    let file = fixture("k8gb.absa.oss_v1beta1_gslb_cr_failover_ingress.yaml");
    let gslb: Value = serde_yaml::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let gslb = gslb["metadata"]["name"].as_str().unwrap();
    let (code, yaml, stderr) = import(&["--geo-tag", "eu", "--namespace", "test-gslb"], &[&file]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        yaml.contains(&format!(
            "# TO DO: before deleting Gslb {gslb}: Ingress {gslb} -n test-gslb is owned by it"
        )),
        "{yaml}"
    );
    // Applied to the Ingress k8gb makes (the Gslb its only owner, uid unknown here): the
    // patch tests the entry's kind and name and removes that entry alone.
    let step = yaml
        .lines()
        .find_map(|l| l.strip_prefix("# TO DO: before deleting Gslb"))
        .unwrap();
    let patch = printed_patch(step, gslb, "test-gslb");
    let owner = serde_json::json!({"apiVersion": "k8gb.absa.oss/v1beta1", "kind": "Gslb", "name": gslb, "uid": "u", "controller": true});
    let other = serde_json::json!({"apiVersion": "example.io/v1", "kind": "Release", "name": "r", "uid": "r"});
    let ingress = |owners: Vec<serde_json::Value>| serde_json::json!({"kind": "Ingress", "metadata": {"name": gslb, "namespace": "test-gslb", "ownerReferences": owners}});
    let mut object = ingress(vec![owner.clone(), other.clone()]);
    json_patch::patch(&mut object, &patch).unwrap();
    assert_eq!(object, ingress(vec![other.clone()]));
    let mut object = ingress(vec![other.clone(), owner]);
    assert!(
        json_patch::patch(&mut object, &patch).is_err(),
        "another owner first"
    );
}
