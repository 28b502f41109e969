//! The binary itself: `check-config`, `run` (as a separate process against local gateways),
//! `probe`, `demo`.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use ho_testkit::Behaviour;
use tokio::time::Instant;

use crate::harness::*;

fn bin() -> Command {
    binary()
}

pub(crate) fn repo(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// `check-config` prints exactly the expected errors of every broken config and exits 2.
#[test]
fn check_config_reports_every_error_with_its_field_path() {
    let folder = repo("config/tests/bad");
    let mut files: Vec<_> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty());
    for file in files {
        let expected: Vec<String> = std::fs::read_to_string(&file)
            .unwrap()
            .lines()
            .filter_map(|l| {
                l.strip_prefix("# expect: ")
                    .or_else(|| l.strip_prefix("# expect at start: "))
                    .map(str::to_owned)
            })
            .collect();
        let out = bin()
            .current_dir(&folder)
            .arg("check-config")
            .arg("--config")
            .arg(&file)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", file.display());
        let stderr = String::from_utf8(out.stderr)
            .unwrap()
            .replace(&format!("{}/", folder.display()), "");
        assert_eq!(
            stderr.lines().collect::<Vec<_>>(),
            expected,
            "{}",
            file.display()
        );
    }
}

/// `check-config` and `run` judge every broken config alike: the same exit code (2) and
/// the same first error, including what only a start finds (a host name that does not
/// resolve). `run` never gets as far as starting.
#[test]
fn check_config_and_run_agree_on_every_bad_config() {
    let folder = repo("config/tests/bad");
    let mut files: Vec<_> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for file in files {
        let judge = |command: &str| {
            let mut child = bin()
                .current_dir(&folder)
                .args([command, "--config"])
                .arg(&file)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let start = std::time::Instant::now();
            while child.try_wait().unwrap().is_none() {
                if start.elapsed() > Duration::from_secs(20) {
                    let _ = child.kill();
                    panic!("{command} {} did not stop", file.display());
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let out = child.wait_with_output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            (out.status.code(), stderr.lines().next().map(str::to_owned))
        };
        let checked = judge("check-config");
        assert_eq!(checked.0, Some(2), "{}", file.display());
        assert_eq!(judge("run"), checked, "{}", file.display());
    }
}

#[test]
fn check_config_accepts_the_examples_and_layers_files() {
    let out = bin()
        .args(["check-config", "--config"])
        .arg(repo("config/examples/minimal.toml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "ok: 3 endpoints (3 probe targets), 1 tenant, 1 sink\n"
    );

    let dir = tempfile::tempdir().unwrap();
    let overlay = dir.path().join("overlay.toml");
    std::fs::write(&overlay, "[defaults.check]\ntimeout = \"5s\"\n").unwrap();
    let out = bin()
        .args(["check-config", "--config"])
        .arg(repo("config/examples/minimal.toml"))
        .arg("--config")
        .arg(&overlay)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.starts_with(&format!(
            "{}: defaults.check.timeout: timeout (5s) must be shorter than interval (1s)",
            overlay.display()
        )),
        "{err}"
    );

    let out = bin()
        .args(["check-config", "--config"])
        .arg(repo("config/examples/minimal.toml"))
        .env("HO_DEFAULTS__CHECK__INTERVAL", "10s")
        .env("HO_DEFAULTS__CHECK__TIMEOUT", "5s")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "environment overrides the file");
}

/// `run` as its own process: a killed server leaves the hosts file well under a second
/// after the kill; SIGTERM exits 0 and leaves the published file in place.
#[tokio::test]
async fn run_drops_a_killed_server_and_shuts_down_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(3);
    let tail = format!(
        "[[tenants]]\nname = \"web\"\ndomains = [\"web.example\"]\nsinks = [\"local\"]\n\n{}",
        hosts_sink(dir.path())
    );
    let mut child = run_command(dir.path(), &gws, &tail).spawn().unwrap();
    let hosts = dir.path().join("web.hosts");
    let all: Vec<String> = gws.iter().map(ip).collect();
    wait_for_file(&hosts, "all three", |c| addresses(c) == all).await;

    tokio::time::sleep(Duration::from_millis(fastrand::u64(100..400))).await;
    gws[2].set(Behaviour::Refuse).unwrap();
    let took = wait_for_file(&hosts, "the killed server to leave", |c| {
        addresses(c) == all[..2]
    })
    .await;
    println!(
        "killed server withdrawn {} ms after the kill",
        took.as_millis()
    );
    assert!(
        took < Duration::from_secs(2),
        "took {took:?}; the bound is 200 + 50 + 100 ms plus scheduling"
    );

    terminate(&mut child).await;
    assert_eq!(
        addresses(&std::fs::read_to_string(&hosts).unwrap()),
        all[..2],
        "shutdown leaves records in place"
    );
}

/// What runs without TLS verification is named in one warning at start, not per probe.
#[tokio::test]
async fn unverified_tls_is_logged_once() {
    let dir = tempfile::tempdir().unwrap();
    let gws = gateways(2);
    // Nothing listens for the hook: its writes fail, which is beside the point.
    let hook = std::net::SocketAddr::new(loopback_ip().into(), 1);
    let tail = format!(
        "[[tenants]]\nname = \"web\"\ndomains = [\"web.example\"]\nsinks = [\"local\", \"hook\"]\n\n{}\n\
         [sinks.hook]\nkind = \"webhook\"\nurl = \"https://{hook}/\"\nsecret_env = \"HOOK_SECRET_118\"\ninsecure = true\n",
        hosts_sink(dir.path())
    );
    // gw-2 is checked over https without verification (nothing answers TLS there: the
    // probe fails, which is beside the point).
    let config = TestConfig::new(&Check::FAST, &gws.iter().collect::<Vec<_>>())
        .with(&tail)
        .set("endpoints.1.check.kind", "https")
        .set("endpoints.1.check.insecure", true);
    let mut cmd = run_config(dir.path(), &config);
    let log = dir.path().join("stderr.log");
    let mut child = cmd
        .env("HOOK_SECRET_118", "s3cret")
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let hosts = dir.path().join("web.hosts");
    wait_for_file(&hosts, "a publish", |c| !c.is_empty()).await;
    // Several probe rounds later (gw-1, probed on the same schedule, counts them):
    let probed = gws[0].requests();
    eventually("three more probe rounds", || {
        gws[0].requests() >= probed + 3
    })
    .await;
    terminate(&mut child).await;
    let stderr = std::fs::read_to_string(&log).unwrap();
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("NOT verified"))
        .collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(
        warnings[0].contains(r#"endpoint \"gw-2\""#) && warnings[0].contains(r#"sink \"hook\""#),
        "{}",
        warnings[0]
    );
    assert!(!warnings[0].contains("gw-1"), "{}", warnings[0]);
}

#[tokio::test]
async fn run_refuses_an_invalid_config() {
    let out = bin()
        .args(["run", "--config"])
        .arg(repo("config/tests/bad/unknown-sink.toml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8(out.stderr)
        .unwrap()
        .contains("tenants[1].sinks[0]: no sink named \"pdns\""));
}

#[tokio::test]
async fn probe_prints_verdict_reason_and_latency() {
    let gws = gateways(1);
    let url = format!("http://{}/healthz", gws[0].addr());
    let out = tokio::task::spawn_blocking(move || bin().args(["probe", &url]).output().unwrap())
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with(&format!("healthy {} ok ", gws[0].addr())),
        "{text}"
    );
    assert!(text.trim_end().ends_with("ms"), "{text}");

    // Nothing listens on a fresh loopback address.
    let nowhere = std::net::SocketAddr::new(loopback_ip().into(), 9).to_string();
    let arg = nowhere.clone();
    let out = tokio::task::spawn_blocking(move || bin().args(["probe", &arg]).output().unwrap())
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .starts_with(&format!("unhealthy {nowhere} refused ")));
}

/// `run` as its own process with a Route53 sink finds its credentials the standard AWS way
/// (here the environment; the metadata service is disabled so nothing leaves loopback).
#[tokio::test]
async fn run_publishes_to_route53_with_credentials_from_the_environment() {
    let moto = crate::fakes::route53::Moto::start().await;
    let zone = moto.create_zone("env.example.com").await;
    let dir = tempfile::tempdir().unwrap();
    let gws = gateways(1);
    let tail = format!(
        "[[tenants]]\nname = \"web\"\ndomains = [\"web.env.example.com\"]\nsinks = [\"r53\"]\n\n\
         [sinks.r53]\nkind = \"route53\"\nhosted_zone_id = \"{zone}\"\nzone = \"env.example.com\"\n\
         region = \"us-east-1\"\nendpoint_url = \"{}\"\nrecord_style = \"simple\"\n",
        moto.url
    );
    let mut child = run_command(dir.path(), &gws, &tail)
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_CONFIG_FILE", dir.path().join("none"))
        .env("AWS_SHARED_CREDENTIALS_FILE", dir.path().join("none"))
        .spawn()
        .unwrap();
    let want = vec![
        "_health-orchestrator.web.env.example.com. TXT \"heritage=health-orchestrator,owner=health-orchestrator\"".to_string(),
        format!("web.env.example.com. A {}", ip(&gws[0])),
    ];
    let start = Instant::now();
    while moto.records(&zone).await != want {
        assert!(
            start.elapsed() < LIMIT,
            "not published: {:?}",
            moto.records(&zone).await
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Logs written to a file carry no colour codes and no empty fields (no `trace_id=` with
/// traces off); `--log-format json` gives one JSON object per line, over the config's
/// `log_format`.
#[tokio::test]
async fn logs_to_a_file_are_plain_and_json_on_request() {
    for json in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let mut gws = gateways(2);
        let tail = format!(
            "[[tenants]]\nname = \"web\"\ndomains = [\"web.example\"]\nsinks = [\"local\"]\n\n{}",
            hosts_sink(dir.path())
        );
        let config = TestConfig::new(&Check::FAST, &gws.iter().collect::<Vec<_>>()).with(&tail);
        let mut cmd = run_config(dir.path(), &config);
        if json {
            cmd.args(["--log-format", "json"]);
        }
        let log = dir.path().join("stderr.log");
        let mut child = cmd
            .env("RUST_LOG", "info")
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let hosts = dir.path().join("web.hosts");
        wait_for_file(&hosts, "a publish", |c| addresses(c).len() == 2).await;
        gws[0].set(Behaviour::Refuse).unwrap();
        wait_for_file(&hosts, "gw-1 to leave", |c| addresses(c).len() == 1).await;
        terminate(&mut child).await;
        let stderr = std::fs::read_to_string(&log).unwrap();
        assert!(
            !stderr.contains('\x1b'),
            "colour codes in a file:\n{stderr}"
        );
        assert!(stderr.contains("up -> down"), "{stderr}");
        assert!(
            !stderr.contains("trace_id"),
            "empty trace_id field:\n{stderr}"
        );
        if json {
            for line in stderr.lines() {
                let v: serde_json::Value =
                    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
                assert!(
                    v["timestamp"].is_string() && v["message"].is_string(),
                    "{line}"
                );
            }
        }
    }
}

/// `import --from openova` on the OpenOva spec's own example config: the printed TOML passes
/// `check-config` and carries nodes, health check, tenants with their `hosts_key`, and the
/// ConfigMap; keys it cannot carry are listed as comments.
#[test]
fn import_from_openova_prints_a_config_that_checks() {
    let (toml, plan, summary) = import_and_check(
        &["--from", "openova"],
        &[repo("tests/fixtures/seed-000/config.yaml")],
    );
    assert_eq!(
        summary,
        "ok: 3 endpoints (3 probe targets), 2 tenants, 1 sink\n"
    );
    let check = &plan.targets[0].check;
    assert_eq!(check.port, 15021);
    assert_eq!(check.timing.interval, Duration::from_secs(5));
    assert_eq!(check.timing.timeout, Duration::from_secs(2));
    assert_eq!((check.timing.fall, check.timing.rise), (2, 1));
    assert_eq!(plan.tenants[1].hosts_key, "tenant-b.hosts");
    assert!(toml.contains("namespace = \"kube-system\""), "{toml}");
    assert!(toml.contains("name = \"coredns-custom\""), "{toml}");
    assert!(!toml.contains("NOT CARRIED OVER"), "{toml}");
    // Written as a person would, in the order a reader expects, and what the shipped RBAC
    // does not allow is said.
    assert!(
        toml.contains("interval = \"5s\"\ntimeout = \"2s\""),
        "{toml}"
    );
    assert!(
        toml.find("[defaults.check]") < toml.find("[[endpoints]]")
            && toml.find("[[endpoints]]") < toml.find("[[tenants]]")
            && toml.find("kind = \"http\"") < toml.find("port = 15021"),
        "{toml}"
    );
    assert!(
        toml.contains("# TO DO: deploy/kubernetes/rbac.yaml lets the orchestrator get and patch only dns-failover/health-orchestrator-hosts"),
        "{toml}"
    );

    // A key without an equivalent is named in a comment, and the rest still imports.
    let dir = tempfile::tempdir().unwrap();
    let extra = dir.path().join("extra.yaml");
    let seed = std::fs::read_to_string(repo("tests/fixtures/seed-000/config.yaml")).unwrap();
    std::fs::write(
        &extra,
        format!("{seed}\nslack_webhook: \"https://hooks.example\"\n"),
    )
    .unwrap();
    let out = bin()
        .args(["import", "--from", "openova"])
        .arg(&extra)
        .output()
        .unwrap();
    let toml = String::from_utf8(out.stdout).unwrap();
    assert!(
        toml.contains("# NOT CARRIED OVER: slack_webhook (no equivalent)"),
        "{toml}"
    );
}

/// `config-schema` prints the schema kept in docs/config.schema.json (regenerate it with
/// `health-orchestrator config-schema > docs/config.schema.json`), and that schema accepts
/// every shipped config and rejects a misspelt sink key and a sink table of the wrong kind
/// (checked with Python's `jsonschema`, which the test command installs with
/// kubernetes-validate).
#[test]
fn config_schema_matches_the_docs_copy_and_checks_the_examples() {
    let out = bin().arg("config-schema").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let printed = String::from_utf8(out.stdout).unwrap();
    let kept = std::fs::read_to_string(repo("docs/config.schema.json")).unwrap();
    assert!(
        printed == kept,
        "docs/config.schema.json is stale: run `health-orchestrator config-schema > docs/config.schema.json`"
    );

    let dir = tempfile::tempdir().unwrap();
    let mut configs: Vec<(String, bool)> = std::fs::read_dir(repo("config/examples"))
        .unwrap()
        .map(|e| (e.unwrap().path().display().to_string(), true))
        .filter(|(p, _)| p.ends_with(".toml"))
        .collect();
    configs.push((
        repo("deploy/kubernetes/config.toml").display().to_string(),
        true,
    ));
    let bad = [
        "[sinks.local]\nkind = \"hosts_file\"\ndirr = \"/tmp/x\"\n",
        "[sinks.local]\nkind = \"hosts_file\"\nurl = \"http://x/\"\n",
    ];
    for (i, text) in bad.iter().enumerate() {
        let file = dir.path().join(format!("bad-{i}.toml"));
        std::fs::write(&file, text).unwrap();
        configs.push((file.display().to_string(), false));
    }
    let python = std::path::Path::new(&python_tool("KUBERNETES_VALIDATE", "kubernetes-validate"))
        .with_file_name("python");
    for (file, valid) in configs {
        let toml: toml::Table = std::fs::read_to_string(&file).unwrap().parse().unwrap();
        let json = dir.path().join("config.json");
        std::fs::write(&json, serde_json::to_string(&toml).unwrap()).unwrap();
        let checked = Command::new(&python)
            .args([
                "-c",
                "import json, sys, jsonschema\n\
                 schema = json.load(open(sys.argv[1]))\n\
                 jsonschema.Draft7Validator(schema).validate(json.load(open(sys.argv[2])))",
            ])
            .arg(repo("docs/config.schema.json"))
            .arg(&json)
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "{}: {e}; run the test command (bash .ci/test)",
                    python.display()
                )
            });
        assert_eq!(
            checked.status.success(),
            valid,
            "{file}: {}",
            String::from_utf8_lossy(&checked.stderr)
        );
    }
}

/// `demo` (the README's first command) runs its script to the end and shows both the
/// hosts file and the embedded DNS server's answer leaving the failed gateway.
#[test]
fn the_demo_runs_and_shows_the_dns_answer_follow_failures() {
    let dir = tempfile::tempdir().unwrap();
    let out = bin()
        .arg("demo")
        .arg("--dir")
        .arg(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.matches("DNS answer after").count(), 4, "{stdout}");
    assert!(
        stdout.contains("dig api.demo.test -> 127.0.0.11 127.0.0.13"),
        "{stdout}"
    );
}

/// Runs `import` with `args` on `files`, then `check-config` on what it printed; the
/// printed TOML, the plan it loads to and `check-config`'s summary line.
pub(crate) fn import_and_check(
    args: &[&str],
    files: &[std::path::PathBuf],
) -> (String, ho_config::Plan, String) {
    import_and_check_with(args, files, &[])
}

/// [`import_and_check`] with `env` set for `check-config` (a secret the import names).
fn import_and_check_with(
    args: &[&str],
    files: &[std::path::PathBuf],
    env: &[(&str, &str)],
) -> (String, ho_config::Plan, String) {
    let mut cmd = bin();
    cmd.arg("import").args(args).args(files);
    let out = cmd.output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let toml = String::from_utf8(out.stdout).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("imported.toml");
    std::fs::write(&file, &toml).unwrap();
    let checked = bin()
        .args(["check-config", "--config"])
        .arg(&file)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert_eq!(
        checked.status.code(),
        Some(0),
        "{}\n{toml}",
        String::from_utf8_lossy(&checked.stderr)
    );
    let plan = ho_kinds::load_plan(&[&file]).unwrap();
    (toml, plan, String::from_utf8(checked.stdout).unwrap())
}

/// `import --from powerdns` on the OpenOva spec's lua-record cookbook (its multi-region document) and on
/// PowerDNS's own documentation examples: every `ifurlup`/`ifportup`/`pick...` record
/// becomes a tenant with the check and policy PowerDNS applied, what differs or has no
/// equivalent is named, the zone's other records are listed, and the result passes
/// `check-config`.
#[test]
fn import_from_powerdns_carries_lua_records_over() {
    let env = [("PDNS_API_KEY", "k")];
    let (toml, plan, summary) = import_and_check_with(
        &["--from", "powerdns"],
        &[repo("tests/fixtures/powerdns/seed-002.zone")],
        &env,
    );
    assert_eq!(
        summary,
        "ok: 12 endpoints (6 probe targets), 6 tenants, 1 sink\n"
    );
    let tenant = |n: &str| plan.tenants.iter().find(|t| t.name == n).unwrap();
    assert_eq!(
        tenant("api.acme.com").policy,
        ho_config::RoutingPolicy::Failover
    );
    assert_eq!(tenant("foo.acme.com").policy, ho_config::RoutingPolicy::All);
    assert_eq!(
        tenant("canary.acme.com").policy,
        ho_config::RoutingPolicy::Weighted
    );
    let mail = plan
        .targets
        .iter()
        .find(|t| t.check.port == 587)
        .expect("ifportup(587, ...) is a TCP check on 587");
    assert_eq!(mail.check.timing.interval, Duration::from_secs(5));
    assert!(toml.contains("host = \"primary.example.com\""), "{toml}");
    assert!(toml.contains("adopt = true"), "{toml}");
    assert!(
        toml.contains("# TO DO: the zone's 4 other records stay in PowerDNS")
            && toml.contains("shop.acme.com. 300 IN CNAME shop-lb.eu-central.example.net."),
        "{toml}"
    );
    assert!(
        toml.contains("# NOT CARRIED OVER: geo.acme.com LUA A"),
        "{toml}"
    );

    let (toml, _, summary) = import_and_check_with(
        &["--from", "powerdns"],
        &[repo("tests/fixtures/powerdns/lua-docs.zone")],
        &env,
    );
    assert_eq!(
        summary,
        "ok: 10 endpoints (7 probe targets), 4 tenants, 1 sink\n"
    );
    assert!(
        toml.contains("www3.example.com LUA CNAME") && toml.contains("www6.example.com LUA A"),
        "code PowerDNS runs as Lua is named: {toml}"
    );
    assert!(
        toml.contains("body_contains = \"Programming in Lua\""),
        "{toml}"
    );
}

/// `import --from kuadrant` on the RFC's "GEO with Custom Weights" DNSPolicy and a
/// DNSRecord: geo tenant with IE as default, Kuadrant's weights inside each geo, every
/// record's address an endpoint with its geo-code, the CNAME to the root host answering as
/// the root host does; what has no equivalent is named.
#[test]
fn import_from_kuadrant_policy_and_record() {
    let (toml, plan, _) = import_and_check(
        &["--from", "kuadrant"],
        &[
            repo("tests/fixtures/kuadrant/dnspolicy-geo-custom-weights.yaml"),
            repo("tests/fixtures/kuadrant/dnsrecord-geo.yaml"),
        ],
    );
    let t = &plan.tenants[0];
    assert_eq!(t.policy, ho_config::RoutingPolicy::Geo);
    assert_eq!(t.default_geo.as_deref(), Some("IE"));
    assert_eq!((t.default_weight, t.weighs), (10, true));
    assert_eq!(t.weights[0].label, "cloud");
    assert_eq!(
        (t.weights[0].value.as_str(), t.weights[0].weight),
        ("Azure", 30)
    );
    assert_eq!(t.domains, vec!["api.example.com", "www.example.com"]);
    assert_eq!(plan.tenants.len(), 1);
    assert_eq!(t.ttl, Duration::from_secs(60));
    let geos: Vec<&str> = plan
        .endpoints
        .iter()
        .map(|e| e.labels()["geo"].as_str())
        .collect();
    assert_eq!(geos, vec!["IE", "IE", "US"]);
    assert_eq!(plan.endpoints[2].weight, Some(120));
    for note in [
        "GEODNSAndSendMoreToAzure targetRef",
        "no healthCheck",
        "DNS provider",
    ] {
        assert!(toml.contains(note), "{note}: {toml}");
    }
    // No endpoint carries the label the custom weight matches: said, not silent.
    assert!(
        toml.contains("# TO DO: tenant prod-web-api: the weight rule cloud = \"Azure\" (weight 30) matches none of its endpoints"),
        "{toml}"
    );
}

/// `import --from kuadrant` on a DNSRecord in dns-operator's load-balanced layout: the
/// root host is the name published (not the `*.klb` names), each address takes the geo and
/// weight of the CNAMEs leading to it, the `*` geo is the default, and the layout's CNAMEs
/// are not reported as lost; without a health check anywhere, the record's addresses get
/// TCP 443, and that is said.
#[test]
fn import_from_kuadrant_follows_the_klb_layout_to_the_root_host() {
    let (toml, plan, _) = import_and_check(
        &["--from", "kuadrant"],
        &[repo("tests/fixtures/kuadrant/dnsrecord-klb.yaml")],
    );
    let t = &plan.tenants[0];
    assert_eq!(t.domains, vec!["api.tenant-a.io"]);
    assert_eq!(t.policy, ho_config::RoutingPolicy::Geo);
    assert_eq!(t.default_geo.as_deref(), Some("IE"));
    let endpoints: Vec<(&str, Option<u32>)> = plan
        .endpoints
        .iter()
        .map(|e| (e.labels()["geo"].as_str(), e.weight))
        .collect();
    assert_eq!(
        endpoints,
        [("IE", Some(120)), ("IE", Some(60)), ("US", Some(100))]
    );
    let lost: Vec<&str> = toml
        .lines()
        .filter(|l| l.starts_with("# NOT CARRIED OVER"))
        .collect();
    assert_eq!(lost.len(), 1, "{toml}");
    assert!(lost[0].contains("TCP check on port 443"), "{toml}");
}

/// `import --from kuadrant` on two `kuadrant.io/v1` DNSPolicies, one per Gateway, in one
/// namespace: each governs the records Kuadrant made for its own Gateway (and only the
/// listener its `sectionName` names); a record's own `healthCheck` comes first (HTTPS on
/// 443 with the root host, dns-operator's defaults); v1's `geo`/`defaultGeo` locate the
/// policy's gateways and make the name geo.
#[test]
fn import_from_kuadrant_attaches_each_policy_to_its_gateways_records() {
    let (toml, plan, _) = import_and_check(
        &["--from", "kuadrant"],
        &[repo("tests/fixtures/kuadrant/two-gateways.yaml")],
    );
    let check_of = |domain: &str| {
        let t = plan
            .tenants
            .iter()
            .find(|t| t.domains == [domain])
            .unwrap_or_else(|| panic!("{domain}: {toml}"));
        let e = &plan.endpoints[t.endpoints[0]];
        (t, e, plan.targets[e.target()].key())
    };
    let (eu, eu_endpoint, probe) = check_of("api.example.com");
    assert_eq!(probe, "https://172.31.0.10:443/eu-health");
    assert_eq!(eu.policy, ho_config::RoutingPolicy::Geo);
    assert_eq!(eu.default_geo.as_deref(), Some("GEO-EU"));
    assert_eq!(eu_endpoint.labels()["geo"], "GEO-EU");
    let (web, _, probe) = check_of("web.example.com");
    assert_eq!(probe, "https://172.31.1.10:8443/us-health");
    assert_eq!(web.policy, ho_config::RoutingPolicy::All);
    // us-web targets the `web` listener only; `admin` has its own check.
    let (_, _, probe) = check_of("admin.example.com");
    assert_eq!(probe, "https://172.31.1.20:443/admin-health");
    let ungoverned: Vec<&str> = toml
        .lines()
        .filter(|l| l.contains("none of the DNSPolicies targets its Gateway"))
        .collect();
    assert_eq!(ungoverned.len(), 1, "{toml}");
    assert!(ungoverned[0].contains("us-gw-admin"), "{toml}");
}

/// `import --from kuadrant` on a Gateway and its DNSPolicy, without DNSRecords: each
/// listener's hostname is published at the Gateway's status addresses (IPv4 and IPv6; a
/// Hostname-type address beside them is left to them: a name answers addresses or a CNAME),
/// as the record Kuadrant would make
/// (`GATEWAY-LISTENER`); a wildcard listener publishes its wildcard.
#[test]
fn import_from_kuadrant_publishes_a_targeted_gateways_listeners() {
    let (toml, plan, _) = import_and_check(
        &["--from", "kuadrant"],
        &[repo("tests/fixtures/kuadrant/gateway-listeners.yaml")],
    );
    let tenants: Vec<(&str, Vec<&str>)> = plan
        .tenants
        .iter()
        .map(|t| {
            (
                t.name.as_str(),
                t.domains.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    assert_eq!(
        tenants,
        [
            ("prod-web-api", vec!["api.example.com"]),
            ("prod-web-web", vec!["web.example.com"]),
            ("prod-web-apps", vec!["*.apps.example.com"])
        ]
    );
    let addresses: Vec<String> = plan.tenants[0]
        .endpoints
        .iter()
        .map(|&i| plan.endpoints[i].address.to_string())
        .collect();
    assert_eq!(addresses, ["172.31.0.10", "2001:db8::10"]);
    assert_eq!(
        plan.targets[plan.endpoints[0].target()].key(),
        "https://172.31.0.10:443/healthz"
    );
    assert!(!toml.contains("NOT CARRIED OVER: Gateway"), "{toml}");
}

/// `import --from kuadrant` on the health-check RFC's DNSPolicy and DNSHealthCheckProbes:
/// the policy's check is the default, each probe an endpoint with its own, the probes'
/// host the domain; a policy alone is refused (it names no address).
#[test]
fn import_from_kuadrant_policy_and_probes() {
    let (toml, plan, _) = import_and_check(
        &["--from", "kuadrant"],
        &[
            repo("tests/fixtures/kuadrant/dnspolicy-health-check.yaml"),
            repo("tests/fixtures/kuadrant/dnshealthcheckprobes.yaml"),
        ],
    );
    assert_eq!(plan.tenants[0].domains, vec!["web.example.com"]);
    let check = &plan.targets[0].check;
    assert_eq!((check.port, check.timing.fall), (443, 5));
    assert_eq!(check.timing.interval, Duration::from_secs(5));
    assert!(toml.contains("additionalHeaders (a Secret"), "{toml}");
    assert!(
        toml.contains("expect_status = [200, 301, 302, 407]"),
        "{toml}"
    );

    let alone = bin()
        .args(["import", "--from", "kuadrant"])
        .arg(repo("tests/fixtures/kuadrant/dnspolicy-health-check.yaml"))
        .output()
        .unwrap();
    assert_eq!(alone.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&alone.stderr).contains("no addresses"));
}

/// The cluster id in `/status` of a running process: configured, or derived from the
/// `kube-system` namespace's UID (read through the Kubernetes API test server; two
/// replicas of one cluster derive the same id), or from the machine.
#[actix_rt::test]
async fn the_cluster_id_is_configured_or_derived_the_same_by_every_replica() {
    use crate::fakes::kube_api::KubeApi;
    let kube = KubeApi::default();
    let kube_addr = kube.start().await;
    let gws = gateways(1);
    let mut seen = Vec::new();
    for cluster in [
        "[cluster]\nid = \"eu1\"\n".to_string(),
        format!("[cluster]\nkubeconfig = {:?}\n", "KUBECONFIG"),
        format!("[cluster]\nkubeconfig = {:?}\n", "KUBECONFIG"),
        String::new(),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = KubeApi::kubeconfig(kube_addr, dir.path());
        let cluster = cluster.replace("KUBECONFIG", &kubeconfig.display().to_string());
        let api = std::net::SocketAddr::new(loopback_ip().into(), 8080);
        let tail = format!(
            "{cluster}\n[[tenants]]\nname = \"t\"\ndomains = [\"t.example\"]\nsinks = [\"local\"]\n\n{}",
            hosts_sink(dir.path())
        );
        let config = TestConfig::new(&Check::FAST, &gws.iter().collect::<Vec<_>>())
            .with(&tail)
            .set("api.listen", api.to_string());
        let _child = spawn_logged(
            &mut run_config(dir.path(), &config),
            &dir.path().join("log"),
        );
        let start = Instant::now();
        let status = loop {
            if let Some(body) = try_api_get(api, "/status").await {
                break serde_json::from_str::<serde_json::Value>(&body).unwrap();
            }
            assert!(start.elapsed() < LIMIT, "no /status");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        seen.push((
            status["cluster"]["id"].as_str().unwrap().to_owned(),
            status["cluster"]["source"].as_str().unwrap().to_owned(),
        ));
    }
    assert_eq!(seen[0], ("eu1".into(), "config".into()));
    assert_eq!(seen[1].1, "kube-system");
    assert_eq!(
        seen[1], seen[2],
        "every replica of the cluster derives the same id"
    );
    assert_eq!(seen[1].0.len(), 8);
    assert!(
        ["machine-id", "hostname"].contains(&seen[3].1.as_str()),
        "{seen:?}"
    );
    assert_ne!(seen[3].0, seen[1].0);
}

/// A valid config that names what cannot be used — an unset secret variable, a missing API
/// key file, a missing CA file of an https check, a missing API token file, a DNS cookie
/// secret that is not 32 hex digits — is refused by `check-config` and by `run` alike,
/// exit 2, every problem at once with its path (and never a secret's content).
#[test]
fn check_config_and_run_refuse_what_run_could_not_use() {
    let dir = tempfile::tempdir().unwrap();
    let missing = |name: &str| dir.path().join(name).display().to_string();
    let config = dir.path().join("config.toml");
    let cookie = dir.path().join("cookie");
    std::fs::write(&cookie, "not-a-secret\n").unwrap();
    std::fs::write(
        &config,
        format!(
            "[api]\nlisten = \"127.0.0.1:0\"\ntoken_file = {:?}\n\
             [defaults.check]\nkind = \"https\"\nport = 443\ninterval = \"1s\"\nrise = 1\nfall = 2\nca_file = {:?}\n\
             [[endpoints]]\nname = \"a\"\naddress = \"192.0.2.1\"\n\
             [[tenants]]\nname = \"t\"\ndomains = [\"t.example\"]\nsinks = [\"pdns\", \"hook\", \"dns\"]\n\
             [sinks.dns]\nkind = \"dns_server\"\nlisten = [\"127.0.0.1:1\"]\nzones = [\"t.example\"]\ncookies = {{ secret_file = {:?} }}\n\
             [sinks.pdns]\nkind = \"powerdns\"\nurl = \"http://127.0.0.1:1\"\nzone = \"example.\"\napi_key_file = {:?}\n\
             [sinks.hook]\nkind = \"webhook\"\nurl = \"http://127.0.0.1:1/\"\nsecret_env = \"HO_TEST_UNSET_SECRET_4711\"\n",
            missing("token"),
            missing("ca.pem"),
            cookie.display().to_string(),
            missing("pdns-key"),
        ),
    )
    .unwrap();
    for command in ["check-config", "run"] {
        let out = bin()
            .args([command, "--config"])
            .arg(&config)
            .env_remove("HO_TEST_UNSET_SECRET_4711")
            .output()
            .unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{command}: {stderr}");
        let paths: Vec<&str> = stderr
            .lines()
            .filter_map(|l| l.split_once(": ").map(|(path, _)| path))
            .collect();
        assert_eq!(
            paths,
            [
                "sinks.dns.cookies.secret_file",
                "sinks.hook.secret_env",
                "sinks.pdns.api_key_file",
                "api.token_file",
                "endpoints[0].check",
            ],
            "{command}: {stderr}"
        );
        assert!(
            stderr.contains("HO_TEST_UNSET_SECRET_4711 is not set"),
            "{stderr}"
        );
        assert!(stderr.contains("ca.pem"), "{stderr}");
        assert!(!stderr.contains("not-a-secret"), "{stderr}");
    }
}

/// `check-config --resource FILE` judges DNSFailover resources as admission would against
/// the shipped config: accepted, refused with admission's reason and message at the
/// resource's own field (a domain outside the namespace's allowance, an invalid check), a
/// Gateway source said as looked up in the cluster; exit 2 when any is refused.
#[test]
fn check_config_judges_resources_as_admission_would() {
    let dir = tempfile::tempdir().unwrap();
    let resources = dir.path().join("resources.yaml");
    std::fs::write(
        &resources,
        "apiVersion: healthorchestrator.io/v1alpha1\nkind: DNSFailover\nmetadata: {name: api, namespace: team-a}\n\
         spec:\n  domains: [api.team-a.io]\n  sinks: [dns]\n  endpoints:\n    - addresses: [192.0.2.10]\n    - gateway: prod-gw\n---\n\
         apiVersion: healthorchestrator.io/v1alpha1\nkind: DNSFailover\nmetadata: {name: other, namespace: team-a}\n\
         spec:\n  domains: [api.team-b.io]\n  sinks: [dns]\n  endpoints:\n    - addresses: [192.0.2.11]\n---\n\
         apiVersion: healthorchestrator.io/v1alpha1\nkind: DNSFailover\nmetadata: {name: rise, namespace: team-a}\n\
         spec:\n  domains: [rise.team-a.io]\n  sinks: [dns]\n  check: {rise: 0}\n  endpoints:\n    - addresses: [192.0.2.12]\n",
    )
    .unwrap();
    let out = bin()
        .args(["check-config", "--config"])
        .arg(repo("deploy/kubernetes/config.toml"))
        .arg("--resource")
        .arg(&resources)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(2), "{stdout}{stderr}");
    assert!(stdout.contains("team-a/api: accepted"), "{stdout}");
    assert!(
        stdout.contains("spec.endpoints[1]: gateway prod-gw is looked up in the cluster"),
        "{stdout}"
    );
    assert!(
        stderr.contains(
            "team-a/other: refused (DomainNotAllowed): spec.domains[0]: \"api.team-b.io\""
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("team-a/rise: refused (Invalid): spec.check.rise"),
        "{stderr}"
    );
}
