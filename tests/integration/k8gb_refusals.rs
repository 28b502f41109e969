//! `import --from k8gb` of an export where some Gslbs cannot be imported: every refused
//! Gslb is said on stderr in one run, each with its reason, the others' resources are
//! printed, and the exit code is 1. Exports are generated from a seed; which Gslbs are
//! refused, and why, is decided here by the generator, not read off the import.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use crate::cli::repo;

/// A Gslb the generator can write: good ones of each strategy, and broken ones with the
/// phrase their refusal must carry.
#[derive(Clone, Copy)]
enum Kind {
    RoundRobin,
    Weighted,
    Failover,
    NoPrimary,
    UnknownStrategy,
    NoTarget,
    ExposedHostnames,
}

const KINDS: [Kind; 7] = [
    Kind::RoundRobin,
    Kind::Weighted,
    Kind::Failover,
    Kind::NoPrimary,
    Kind::UnknownStrategy,
    Kind::NoTarget,
    Kind::ExposedHostnames,
];

impl Kind {
    /// The Gslb `name` of this kind in namespace `t`, exported from cluster `eu`.
    fn document(self, name: &str) -> String {
        let target = "resourceRef: {apiVersion: networking.k8s.io/v1, kind: Ingress, name: web}";
        let (annotations, target, strategy) = match self {
            Kind::RoundRobin => ("{}", target, "type: roundRobin"),
            Kind::Weighted => ("{}", target, "type: roundRobin, weight: {eu: 3, us: 1}"),
            Kind::Failover => ("{}", target, "type: failover, primaryGeoTag: eu"),
            Kind::NoPrimary => ("{}", target, "type: failover"),
            Kind::UnknownStrategy => ("{}", target, "type: random"),
            Kind::NoTarget => ("{}", "", "type: roundRobin"),
            Kind::ExposedHostnames => (
                "{k8gb.io/exposed-hostnames: lb.example.net}",
                target,
                "type: roundRobin",
            ),
        };
        let target = if target.is_empty() {
            String::new()
        } else {
            format!("{target}, ")
        };
        format!(
            "apiVersion: k8gb.io/v1beta1\nkind: Gslb\nmetadata: {{name: {name}, namespace: t, annotations: {annotations}}}\n\
             spec: {{{target}strategy: {{{strategy}}}}}\nstatus: {{geoTag: eu, hosts: {name}.cloud.example.com}}\n"
        )
    }

    /// What the refusal of a broken Gslb says; `None` for one that imports.
    fn refusal(self) -> Option<&'static str> {
        match self {
            Kind::NoPrimary => Some("the failover strategy requires strategy.primaryGeoTag"),
            Kind::UnknownStrategy => Some("k8gb's strategies are roundRobin, failover and geoip"),
            Kind::NoTarget => Some("has neither spec.ingress nor spec.resourceRef"),
            Kind::ExposedHostnames => Some("k8gb.io/exposed-hostnames publishes host names"),
            _ => None,
        }
    }

    /// How k8gb's clusters answer for a Gslb that imports, as the import's step says it.
    fn answer(self) -> &'static str {
        match self {
            Kind::Weighted => "weighted roundRobin: every cluster's healthy addresses, shared out by weight",
            Kind::Failover => "failover: the primaryGeoTag cluster's healthy addresses, the other clusters' only while it has none",
            _ => "roundRobin: every cluster's healthy addresses",
        }
    }
}

/// `import --from k8gb ARGS FILE...`: (exit code, stdout, stderr).
fn import(args: &[&str], files: &[&Path]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_health-orchestrator"))
        .args(["import", "--from", "k8gb"])
        .args(args)
        .args(files)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The names of the resources printed on `stdout`.
fn printed(stdout: &str) -> BTreeSet<String> {
    stdout
        .split("---\n")
        .skip(1)
        .map(|doc| {
            let value: serde_yaml::Value = serde_yaml::from_str(doc).unwrap();
            value["metadata"]["name"].as_str().unwrap().to_owned()
        })
        .collect()
}

/// Seeded exports of good and broken Gslbs: one run names every broken one on stderr with
/// its reason, prints exactly the good ones, says how k8gb answered for exactly the good
/// ones' strategies, and exits 1 when any was refused.
#[test]
fn k8gb_every_refused_gslb_is_said_and_the_others_printed() {
    let dir = tempfile::tempdir().unwrap();
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    for seed in 0..12 {
        let count = 1 + seed % 6;
        let mut text = String::new();
        let mut good = BTreeSet::new();
        let mut answers = BTreeSet::new();
        let mut broken = Vec::new();
        for i in 0..count {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let kind = KINDS[(state >> 33) as usize % KINDS.len()];
            let name = format!("g{seed}-{i}");
            text += &format!("---\n{}", kind.document(&name));
            match kind.refusal() {
                Some(why) => broken.push((name, why)),
                None => {
                    good.insert(name);
                    answers.insert(kind.answer());
                }
            }
        }
        let file = dir.path().join(format!("export-{seed}.yaml"));
        std::fs::write(&file, &text).unwrap();
        let (code, stdout, stderr) = import(&["--sink", "dns"], &[&file]);
        assert_eq!(code, i32::from(!broken.is_empty()), "{text}\n{stderr}");
        assert_eq!(printed(&stdout), good, "{text}\n{stdout}");
        let refusals: Vec<&str> = stderr
            .lines()
            .filter_map(|l| l.strip_prefix("refused: "))
            .collect();
        assert_eq!(refusals.len(), broken.len(), "{text}\n{stderr}");
        for (name, why) in &broken {
            let said = refusals
                .iter()
                .any(|r| r.starts_with(&format!("Gslb t/{name}")) && r.contains(why));
            assert!(said, "{name}: {why}\n{stderr}");
        }
        if good.is_empty() {
            assert!(stdout.is_empty(), "{stdout}");
            continue;
        }
        let step = stdout
            .lines()
            .find_map(|l| l.strip_prefix("# TO DO: k8gb's clusters answer together ("))
            .unwrap();
        let said = step.split_once("): ").unwrap().0;
        let expected: Vec<&str> = answers.into_iter().collect();
        assert_eq!(said, expected.join("; "), "{text}");
    }
}

/// A mixed export (a weighted Gslb and a failover one) for an external-dns sink, given the
/// config: `--sink` applies to every Gslb of the run, so the failover Gslb is printed and
/// the weighted one refused, saying to import it in a run of its own.
#[test]
fn k8gb_mixed_export_for_an_external_dns_sink_prints_what_it_carries() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        "[sinks.edns]\nkind = \"external_dns_webhook\"\nurl = \"http://127.0.0.1:8888\"\n\n\
         [kubernetes]\ntenants = true\n\n[[kubernetes.allow]]\nnamespace = \"t\"\n\
         domains = [\"cloud.example.com\"]\nsinks = [\"edns\"]\n",
    )
    .unwrap();
    let file = dir.path().join("export.yaml");
    let text = Kind::Weighted.document("weighted") + "---\n" + &Kind::Failover.document("failover");
    std::fs::write(&file, text).unwrap();
    let config = config.display().to_string();
    let (code, stdout, stderr) = import(&["--sink", "edns", "--config", &config], &[&file]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(printed(&stdout), BTreeSet::from(["failover".to_owned()]));
    let refusal = stderr
        .lines()
        .find(|l| l.starts_with("refused: Gslb t/weighted"))
        .unwrap();
    assert!(
        refusal.contains("--sink applies to every Gslb of a run"),
        "{refusal}"
    );
    assert!(
        refusal.contains("which sink \"edns\" (external_dns_webhook) cannot carry"),
        "{refusal}"
    );
}

/// A file of k8gb's examples refused alone, beside ones that import: the others are printed.
#[test]
fn k8gb_example_refused_beside_others_leaves_them_printed() {
    let fixture = |name: &str| repo(&format!("tests/fixtures/k8gb/{name}"));
    let files = [
        fixture("k8gb.absa.oss_v1beta1_gslb_cr_failover_ingress.yaml"),
        fixture("k8gb.absa.oss_v1beta1_gslb_cr_roundrobin_istio.yaml"),
    ];
    let files: Vec<&Path> = files.iter().map(|f| f.as_path()).collect();
    let (code, stdout, stderr) = import(&["--geo-tag", "eu"], &files);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        printed(&stdout),
        BTreeSet::from(["failover-ingress".to_owned()])
    );
    let refusal = stderr.lines().find(|l| l.starts_with("refused: ")).unwrap();
    assert!(
        refusal.contains("Gslb test-gslb-istio/roundrobin-istio"),
        "{refusal}"
    );
    assert!(
        refusal.contains("status.loadBalancer.exposedIps"),
        "{refusal}"
    );
}
