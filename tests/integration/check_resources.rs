//! `check-config --resource FILE` as a team runs it before `kubectl apply`: every problem
//! of every resource in one run, keys said in the resource's camelCase spelling, a file
//! with no DNSFailover a failure, and `kubectl get dnsfailover -o yaml`'s `kind: List` read
//! as its items.

use std::path::Path;
use std::process::Command;

/// Namespace `team-a` may claim `team-a.example.org` on sink `dns`.
const BASE: &str = "[sinks.dns]\nkind = \"dns_server\"\nlisten = [\"127.0.0.1:0\"]\nzones = [\"team-a.example.org\"]\n\n\
    [kubernetes]\ntenants = true\n\n[[kubernetes.allow]]\nnamespace = \"team-a\"\n\
    domains = [\"team-a.example.org\"]\nsinks = [\"dns\"]\n";

/// (exit code, stdout, stderr) of `check-config --resource` of `resources` against [`BASE`].
fn check(dir: &Path, resources: &str) -> (i32, String, String) {
    check_files(dir, &[resources])
}

/// [`check`] of several files, one `--resource` each.
fn check_files(dir: &Path, files: &[&str]) -> (i32, String, String) {
    let config = dir.join("base.toml");
    std::fs::write(&config, BASE).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_health-orchestrator"));
    command.args(["check-config", "--config"]).arg(&config);
    for (i, text) in files.iter().enumerate() {
        let file = dir.join(format!("resources{i}.yaml"));
        std::fs::write(&file, text).unwrap();
        command.arg("--resource").arg(file);
    }
    let out = command.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn resource(name: &str, spec: &str) -> String {
    format!("apiVersion: healthorchestrator.io/v1alpha1\nkind: DNSFailover\nmetadata: {{name: {name}, namespace: team-a}}\nspec:\n{spec}")
}

/// One resource with four problems (a domain and a sink the namespace may not use, a TTL
/// that is no duration, a misspelt check key) and two old spellings still read (a field
/// 0.2.0 renamed, a check key in the config file's spelling), and a second, valid one: one
/// run says all six, in the resource's spelling, accepts the other, and exits 2.
#[test]
fn check_config_resource_reports_every_problem_in_one_run() {
    let (domain, sink, ttl) = ("api.team-b.example.org", "edns", "5x");
    let broken = resource(
        "broken",
        &format!("  domains: [{domain}]\n  sinks: [{sink}]\n  ttl: {ttl}\n  hold_failback: true\n  \
                  endpoints: [{{addresses: [192.0.2.10]}}]\n  check: {{kind: http, fastIntervl: 1s, expect_status: [200]}}\n"),
    );
    let fine = resource(
        "fine",
        "  domains: [fine.team-a.example.org]\n  sinks: [dns]\n  endpoints: [{addresses: [192.0.2.11]}]\n",
    );
    let dir = tempfile::tempdir().unwrap();
    let (code, stdout, stderr) = check(dir.path(), &format!("{broken}---\n{fine}"));
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(stdout.contains("team-a/fine: accepted"), "{stdout}");
    let refused = stderr
        .split_once("team-a/broken: refused (DomainNotAllowed): ")
        .unwrap_or_else(|| panic!("{stderr}"))
        .1;
    for expected in [
        format!("spec.domains[0]: \"{domain}\" is not under a suffix"),
        format!("spec.sinks[0]: namespace \"team-a\" may not publish to sink \"{sink}\""),
        format!("spec.ttl: \"{ttl}\" is not a duration"),
        "spec.check.fastIntervl: unknown key `fastIntervl`; did you mean `fastInterval`?"
            .to_owned(),
    ] {
        assert!(refused.contains(&expected), "{expected}\n{stderr}");
    }
    assert!(
        stderr.contains("note: team-a/broken: spec.check.expect_status: a deprecated spelling; write `expectStatus`"),
        "{stderr}"
    );
    // A field 0.2.0 renamed is still read in its old spelling, and said.
    assert!(
        stderr.contains(
            "note: team-a/broken: spec.hold_failback: a deprecated spelling; write `holdFailback`"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("did you mean `fast_interval`"), "{stderr}");
}

/// A check key admission refuses is said as the resource spells it: the key written and
/// the keys it could be, camelCase.
#[test]
fn check_config_resource_says_refused_check_keys_camel_case() {
    let dir = tempfile::tempdir().unwrap();
    let spec = "  domains: [api.team-a.example.org]\n  sinks: [dns]\n  endpoints: [{addresses: [192.0.2.10]}]\n  check: {kind: http, rise: 0, fastInterval: 1s}\n";
    let (code, _, stderr) = check(dir.path(), &resource("api", spec));
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("team-a/api: refused (Invalid): spec.check.rise"),
        "{stderr}"
    );
    assert!(!stderr.contains("fast_interval"), "{stderr}");
}

/// A file without a DNSFailover (k8gb's export given by mistake, or nothing) is a failure
/// naming what it held, also beside a file whose resources are accepted.
#[test]
fn check_config_resource_fails_on_a_file_without_a_dnsfailover() {
    let dir = tempfile::tempdir().unwrap();
    let export = std::fs::read_to_string(crate::cli::repo(
        "tests/fixtures/k8gb/exported-list-eu.yaml",
    ))
    .unwrap();
    let (code, _, stderr) = check(dir.path(), &export);
    assert_eq!(code, 2, "{stderr}");
    let said = "resources0.yaml: no DNSFailover among its documents (kinds found: Gslb, Ingress)";
    assert!(stderr.contains(said), "{stderr}");
    let (code, _, stderr) = check(dir.path(), "");
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("(kinds found: none)"), "{stderr}");

    let (code, stdout, stderr) = check_files(dir.path(), &[&api(), &export]);
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(stdout.contains("team-a/api: accepted"), "{stdout}");
    let said = "resources1.yaml: no DNSFailover among its documents (kinds found: Gslb, Ingress)";
    assert!(stderr.contains(said), "{stderr}");
}

/// A valid DNSFailover `team-a/api`.
fn api() -> String {
    resource(
        "api",
        "  domains: [api.team-a.example.org]\n  sinks: [dns]\n  endpoints: [{addresses: [192.0.2.10]}]\n",
    )
}

/// DNSFailovers inside `kind: List` (`kubectl get dnsfailover -o yaml`) are read.
#[test]
fn check_config_resource_reads_a_kubectl_list() {
    let dir = tempfile::tempdir().unwrap();
    let item: serde_yaml::Value = serde_yaml::from_str(&api()).unwrap();
    let list = serde_yaml::to_string(&serde_yaml::Value::Mapping(
        [
            ("apiVersion".into(), "v1".into()),
            ("kind".into(), "List".into()),
            ("items".into(), serde_yaml::Value::Sequence(vec![item])),
        ]
        .into_iter()
        .collect(),
    ))
    .unwrap();
    let (code, stdout, stderr) = check(dir.path(), &list);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("team-a/api: accepted"), "{stdout}");
}

/// A DNSFailover's `slo` and `sloWindow`: an objective is accepted, one of 100 % or more
/// and a window that is neither a duration of a day or more nor `month` are refused,
/// each named in the resource's spelling.
#[test]
fn check_config_resource_judges_the_objective() {
    let dir = tempfile::tempdir().unwrap();
    let spec = |slo: &str, window: &str| {
        format!("  domains: [shop.team-a.example.org]\n  sinks: [dns]\n  endpoints: [{{addresses: [192.0.2.12]}}]\n  slo: \"{slo}\"\n  sloWindow: {window}\n")
    };
    let (code, stdout, stderr) = check(dir.path(), &resource("shop", &spec("99.9%", "month")));
    assert_eq!(code, 0, "{stdout}{stderr}");
    let (code, stdout, stderr) = check(dir.path(), &resource("shop", &spec("100%", "2h")));
    assert_eq!(code, 2, "{stdout}{stderr}");
    let said = format!("{stdout}{stderr}");
    assert!(
        said.contains("spec.slo:") && said.contains("\"100%\" is not an objective"),
        "{said}"
    );
    assert!(
        said.contains("spec.sloWindow") && said.contains("\"2h\""),
        "{said}"
    );
}
