//! The manifests in `deploy/kubernetes`: they render with `kubectl kustomize` (Debian's
//! `kubernetes-client`), every object validates strictly against the Kubernetes schemas
//! (`kubernetes-validate` from PyPI), and the config they ship passes `check-config`.
//! `.ci/test` installs both tools; the test fails (never skips) without them.

use std::path::Path;
use std::process::Command;

use serde::Deserialize;

use crate::harness::python_tool;

fn repo(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// `kubectl kustomize` of `dir`, validated strictly against the Kubernetes schemas
/// (`kubernetes-validate`); the rendered text.
pub(crate) fn render_and_validate(dir: &str) -> String {
    render_and_validate_at(&repo(dir))
}

/// [`render_and_validate`] of a kustomization anywhere.
pub(crate) fn render_and_validate_at(dir: &Path) -> String {
    let rendered = Command::new("kubectl")
        .arg("kustomize")
        .arg(dir)
        .output()
        .expect("kubectl is missing: run the test command (bash .ci/test), which installs kubernetes-client");
    assert!(
        rendered.status.success(),
        "kubectl kustomize failed: {}",
        String::from_utf8_lossy(&rendered.stderr)
    );
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("rendered.yaml");
    std::fs::write(&file, &rendered.stdout).unwrap();
    let validate = python_tool("KUBERNETES_VALIDATE", "kubernetes-validate");
    let checked = Command::new(&validate)
        .args(["--strict", "--quiet"])
        .arg(&file)
        .output()
        .unwrap_or_else(|e| panic!("{validate}: {e}; run the test command (bash .ci/test)"));
    assert!(
        checked.status.success(),
        "schema validation failed:\n{}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    String::from_utf8(rendered.stdout).unwrap()
}

/// `check-config` passes on deploy/kubernetes/config.toml with `env` as its environment layer.
fn check_shipped_config(env: &[(&str, &std::ffi::OsStr)]) {
    let config = Command::new(env!("CARGO_BIN_EXE_health-orchestrator"))
        .args(["check-config", "--config"])
        .arg(repo("deploy/kubernetes/config.toml"))
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(
        config.status.success(),
        "{}",
        String::from_utf8_lossy(&config.stderr)
    );
}

#[test]
fn kubernetes_manifests_render_validate_and_carry_a_valid_config() {
    let text = render_and_validate("deploy/kubernetes");
    for kind in [
        "Namespace",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "StatefulSet",
        "Service",
        "PodDisruptionBudget",
        "CustomResourceDefinition",
        "ClusterRole",
    ] {
        assert!(text.contains(&format!("kind: {kind}\n")), "no {kind}");
    }
    // The Role allows exactly what the ConfigMap sink does, on its one ConfigMap.
    assert!(
        text.contains("resourceNames:\n  - health-orchestrator-hosts"),
        "{text}"
    );
    assert!(text.contains("verbs:\n  - get\n  - patch\n"), "{text}");
    // Leader election: the one Lease by name, two replicas kept on different nodes.
    assert!(
        text.contains("resourceNames:\n  - health-orchestrator\n  resources:\n  - leases\n  verbs:\n  - get\n  - update\n"),
        "{text}"
    );
    assert!(text.contains("replicas: 2\n"), "{text}");
    // The non-root user can write its state volume (drains, the ledger): the pod's group
    // owns it from the mount on.
    assert!(
        text.contains("fsGroup: 65532\n") && text.contains("runAsGroup: 65532\n"),
        "{text}"
    );
    assert!(
        text.contains("topologyKey: kubernetes.io/hostname"),
        "{text}"
    );

    check_shipped_config(&[]);
    let shipped = std::fs::read_to_string(repo("deploy/kubernetes/config.toml")).unwrap();
    let first_line = shipped.lines().next().unwrap();
    assert!(
        text.contains(&format!("  config.toml: |\n    {first_line}")),
        "the rendered ConfigMap carries deploy/kubernetes/config.toml"
    );
}

/// The `[ring]` overlay (`deploy/ring`): renders over the base, validates
/// strictly, runs three replicas with the ring turned on through the environment layer and
/// the Secret mounted, and the base config with that layer passes `check-config`.
#[test]
fn the_ring_overlay_renders_validates_and_turns_the_ring_on() {
    let text = render_and_validate("deploy/ring");
    assert!(text.contains("replicas: 3\n"), "{text}");
    assert!(text.contains("kind: NetworkPolicy\n"), "{text}");
    assert!(
        text.contains("- name: HO_RING__ENABLED\n          value: \"true\"\n"),
        "{text}"
    );
    assert!(
        text.contains("secretName: health-orchestrator-ring\n"),
        "{text}"
    );
    assert!(
        text.contains("  - list\n  - watch\n  - update\n  - delete\n"),
        "the ring watches its Leases: {text}"
    );
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "not the real one").unwrap();
    check_shipped_config(&[
        ("HO_RING__ENABLED", "true".as_ref()),
        ("HO_RING__SECRET_FILE", secret.as_os_str()),
    ]);
}

/// deploy/kubernetes/crds.yaml is what `crds` generates from the types (regenerate it
/// with `health-orchestrator crds > deploy/kubernetes/crds.yaml`), and the example
/// resource validates against its schema (Python's `jsonschema`), parses as the type the
/// controller reads, and is accepted under the shipped config's allowance.
#[test]
fn the_crd_matches_the_types_and_the_example_is_accepted() {
    let out = Command::new(env!("CARGO_BIN_EXE_health-orchestrator"))
        .arg("crds")
        .output()
        .unwrap();
    assert!(out.status.success());
    let kept = std::fs::read_to_string(repo("deploy/kubernetes/crds.yaml")).unwrap();
    assert!(
        String::from_utf8(out.stdout).unwrap() == kept,
        "deploy/kubernetes/crds.yaml is stale: run `health-orchestrator crds > deploy/kubernetes/crds.yaml`"
    );
    let crd: serde_json::Value = serde_yaml::from_str(&kept).unwrap();
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];

    let example = std::fs::read_to_string(repo("deploy/kubernetes/examples/team-a.yaml")).unwrap();
    let resource: serde_json::Value = serde_yaml::Deserializer::from_str(&example)
        .map(|d| serde_json::Value::deserialize(d).unwrap())
        .find(|d| d["kind"] == "DNSFailover")
        .expect("the example holds a DNSFailover");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("schema.json"), schema.to_string()).unwrap();
    std::fs::write(dir.path().join("resource.json"), resource.to_string()).unwrap();
    let python = Path::new(&python_tool("KUBERNETES_VALIDATE", "kubernetes-validate"))
        .with_file_name("python");
    let checked = Command::new(&python)
        .args([
            "-c",
            // Unknown fields refused below `spec`, as kubectl's strict field validation does.
            "import json, sys, jsonschema\n\
             def strict(node):\n\
             \x20   if 'properties' in node:\n\
             \x20       node['additionalProperties'] = False\n\
             \x20       for child in node['properties'].values(): strict(child)\n\
             \x20   if 'items' in node: strict(node['items'])\n\
             schema = json.load(open(sys.argv[1]))\n\
             strict(schema['properties']['spec'])\n\
             jsonschema.Draft7Validator(schema).validate(json.load(open(sys.argv[2])))",
        ])
        .arg(dir.path().join("schema.json"))
        .arg(dir.path().join("resource.json"))
        .output()
        .unwrap();
    assert!(
        checked.status.success(),
        "the example does not validate against the CRD's schema:\n{}",
        String::from_utf8_lossy(&checked.stderr)
    );

    let mut resource: ho_kube::tenants::resource::DNSFailover =
        serde_json::from_value(resource).expect("the example parses as the controller reads it");
    resource.metadata.creation_timestamp = None;
    let base = ho_config::load(&[repo("deploy/kubernetes/config.toml")]).unwrap();
    let admission = ho_kube::tenants::admit::Admitter::default().admit(
        &base,
        &[&resource],
        &NoCluster,
        &ho_kinds::CATALOG,
    );
    let verdict = &admission.verdicts[&("team-a".to_string(), "api".to_string())];
    assert!(
        matches!(verdict, ho_kube::tenants::admit::Verdict::Accepted { .. }),
        "{verdict:?}"
    );
}

/// A cluster with no Node, Service or Gateway: the example's static addresses only.
struct NoCluster;

impl ho_kube::tenants::discover::Lookup for NoCluster {
    fn gateway(&self, _: &str, _: &str) -> Option<ho_kube::tenants::discover::FoundGateway> {
        None
    }
    fn ingress(&self, _: &str, _: &str) -> Option<Vec<ho_kube::tenants::discover::Target>> {
        None
    }
    fn service(&self, _: &str, _: &str) -> Option<Vec<ho_kube::tenants::discover::Target>> {
        None
    }
    fn nodes(
        &self,
        _: &std::collections::BTreeMap<String, String>,
        _: ho_kube::tenants::resource::NodeAddressType,
    ) -> Vec<(String, std::net::IpAddr)> {
        Vec::new()
    }
}

/// Every metric the alert rules and the dashboard use is one the binary exports, read from
/// a live `/metrics` in the classic format (sample names: counters with `_total`, histograms
/// with `_bucket`/`_sum`/`_count`).
#[actix_rt::test]
async fn alerts_and_dashboard_use_only_exported_metrics() {
    let rendered = Command::new("kubectl")
        .arg("kustomize")
        .arg(repo("deploy/kubernetes/monitoring"))
        .output()
        .expect("kubectl is missing: run the test command (bash .ci/test)");
    assert!(rendered.status.success());
    let text = String::from_utf8(rendered.stdout).unwrap();
    for kind in ["ServiceMonitor", "PrometheusRule", "ConfigMap"] {
        assert!(text.contains(&format!("kind: {kind}\n")), "no {kind}");
    }

    let dir = tempfile::tempdir().unwrap();
    let (_engine, addr, _gateway) = one_gateway_engine(dir.path()).await;
    let metrics = crate::harness::api_get(addr, "/metrics").await;
    let mut exported = std::collections::BTreeSet::new();
    for line in metrics.lines() {
        let mut parts = line.split_whitespace();
        if let (Some("#"), Some("TYPE"), Some(name), Some(kind)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        {
            match kind {
                // The classic format names a counter by its samples (`x_total`).
                "counter" => {
                    exported.insert(name.to_string());
                }
                "histogram" => {
                    for suffix in ["_bucket", "_sum", "_count"] {
                        exported.insert(format!("{name}{suffix}"));
                    }
                }
                _ => {
                    exported.insert(name.to_string());
                }
            }
        }
    }
    let mut used = std::collections::BTreeSet::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("health_orchestrator_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        used.insert(tail[..end].to_string());
        rest = &tail[end..];
    }
    assert!(used.len() >= 10, "{used:?}");
    let missing: Vec<&String> = used.iter().filter(|m| !exported.contains(*m)).collect();
    assert!(
        missing.is_empty(),
        "not exported: {missing:?}\nexported: {exported:?}"
    );
}

/// The alert rules load in Prometheus and behave: `promtool check rules` on the groups of the
/// PrometheusRule, then `promtool test rules` with `alerts.test.yaml`, which fires every alert
/// from synthetic series (each of them: checked here) and checks the cases that must stay
/// silent (one alert per outage across replicas, a replica's own network failing, a sink
/// with nothing pending, a standby's sink).
#[test]
fn alert_rules_fire_and_stay_silent() {
    let rule: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(repo("deploy/kubernetes/monitoring/prometheusrule.yaml")).unwrap(),
    )
    .unwrap();
    let tests: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(repo("deploy/kubernetes/monitoring/alerts.test.yaml")).unwrap(),
    )
    .unwrap();
    let fired: std::collections::BTreeSet<&str> = tests["tests"]
        .as_sequence()
        .unwrap()
        .iter()
        .flat_map(|t| t["alert_rule_test"].as_sequence().unwrap())
        .filter(|c| c["exp_alerts"].as_sequence().is_some_and(|a| !a.is_empty()))
        .filter_map(|c| c["alertname"].as_str())
        .collect();
    let alerts: Vec<&str> = rule["spec"]["groups"]
        .as_sequence()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_sequence().unwrap())
        .filter_map(|r| r["alert"].as_str())
        .collect();
    let untested: Vec<&&str> = alerts.iter().filter(|a| !fired.contains(**a)).collect();
    assert!(untested.is_empty(), "alerts no test fires: {untested:?}");
    assert_eq!(alerts.len(), 17);
    let mut rules = serde_yaml::Mapping::new();
    rules.insert("groups".into(), rule["spec"]["groups"].clone());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("rules.yaml"),
        serde_yaml::to_string(&rules).unwrap(),
    )
    .unwrap();
    std::fs::copy(
        repo("deploy/kubernetes/monitoring/alerts.test.yaml"),
        dir.path().join("alerts.test.yaml"),
    )
    .unwrap();
    for args in [
        ["check", "rules", "rules.yaml"],
        ["test", "rules", "alerts.test.yaml"],
    ] {
        let out = Command::new("promtool")
            .args(args)
            .current_dir(dir.path())
            .output()
            .expect("promtool is missing: run the test command (bash .ci/test)");
        assert!(
            out.status.success(),
            "promtool {args:?}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `/metrics` speaks both formats cleanly: the classic text format by default, which
/// `promtool check metrics` (Prometheus's own linter) accepts without a finding, and
/// OpenMetrics when the scraper asks for it, as Prometheus does.
#[actix_rt::test]
async fn metrics_are_lint_clean_in_the_format_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, addr, _gateway) = one_gateway_engine(dir.path()).await;
    crate::harness::wait_for_status(&engine, "a verdict", |s| {
        s.endpoints
            .iter()
            .all(|e| e.state == ho_engine::hysteresis::Health::Up)
    })
    .await;
    let (classic_type, classic) = scrape(addr, "*/*").await;
    assert_eq!(classic_type, "text/plain; version=0.0.4; charset=utf-8");
    let mut lint = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool is missing: run the test command (bash .ci/test)");
    use std::io::Write;
    lint.stdin
        .take()
        .unwrap()
        .write_all(classic.as_bytes())
        .unwrap();
    let out = lint.wait_with_output().unwrap();
    let findings = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && findings.trim().is_empty(),
        "{findings}\n{classic}"
    );
    assert!(!classic.contains("# EOF"));

    let (om_type, om) = scrape(
        addr,
        "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
    )
    .await;
    assert!(
        om_type.starts_with("application/openmetrics-text"),
        "{om_type}"
    );
    assert!(om.trim_end().ends_with("# EOF"), "{om}");
}

/// `GET /metrics` with `accept`: the content type and the body.
async fn scrape(addr: std::net::SocketAddr, accept: &str) -> (String, String) {
    let request = format!("GET /metrics HTTP/1.0\r\nAccept: {accept}\r\n\r\n");
    let (head, body) = crate::harness::raw_request(addr, &request).await;
    let content_type = head
        .lines()
        .find_map(|l| {
            l.split_once(':')
                .filter(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        })
        .map(|(_, v)| v.trim().to_owned())
        .unwrap_or_default();
    (content_type, body)
}

/// Every query of the shipped Grafana dashboard is valid PromQL: each becomes a recording
/// rule that `promtool check rules` parses (Grafana's interval variables stand in as 5m).
#[test]
fn dashboard_queries_parse() {
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo("deploy/kubernetes/monitoring/dashboard.json")).unwrap(),
    )
    .unwrap();
    let mut queries = Vec::new();
    collect_exprs(&dashboard, &mut queries);
    assert!(queries.len() >= 10, "{queries:?}");
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, query) in queries.iter().enumerate() {
        let query = ["$__rate_interval", "$__interval", "$__range"]
            .iter()
            .fold(query.clone(), |q, var| q.replace(var, "5m"));
        rules.push_str(&format!(
            "      - record: dashboard:query_{i}\n        expr: {}\n",
            serde_json::to_string(&query).unwrap()
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("dashboard.yaml"), &rules).unwrap();
    let out = Command::new("promtool")
        .args(["check", "rules", "dashboard.yaml"])
        .current_dir(dir.path())
        .output()
        .expect("promtool is missing: run the test command (bash .ci/test)");
    assert!(
        out.status.success(),
        "{}{}\n{rules}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every `expr` string anywhere in a Grafana dashboard.
fn collect_exprs(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            if let Some(serde_json::Value::String(expr)) = map.get("expr") {
                out.push(expr.clone());
            }
            map.values().for_each(|v| collect_exprs(v, out));
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| collect_exprs(v, out)),
        _ => {}
    }
}

/// The tenant CoreDNS listens where its Service sends queries: a server block of the
/// Corefile with its own port would win over the `-dns.port` the Deployment passes (the
/// container runs non-root without capabilities, so it cannot bind 53 either).
#[test]
fn the_tenant_corefile_listens_on_the_port_its_deployment_serves() {
    let deployment = std::fs::read_to_string(repo("deploy/kubernetes/coredns.yaml")).unwrap();
    let port = deployment
        .split("\"-dns.port\", \"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("coredns.yaml passes -dns.port");
    assert!(
        deployment.contains(&format!("containerPort: {port}")),
        "the container exposes {port}"
    );
    let corefile = std::fs::read_to_string(repo("deploy/kubernetes/Corefile")).unwrap();
    let keys: Vec<&str> = corefile
        .lines()
        .filter(|l| !l.starts_with([' ', '#', '}']) && l.trim_end().ends_with('{'))
        .map(|l| l.trim_end_matches('{').trim())
        .collect();
    assert!(keys.len() >= 2, "{keys:?}");
    for key in keys {
        let explicit = key.rsplit_once(':').map(|(_, p)| p);
        assert!(
            explicit.is_none_or(|p| p == port),
            "server block `{key}` listens on its own port, not -dns.port {port}"
        );
    }
}

/// The systemd unit and its DNS-server drop-ins are what systemd accepts, without a warning
/// (`systemd-analyze verify`; the binary's path is replaced by one that exists here), and they
/// serve what they say: the hosts-file set-up writes a state directory other services can
/// read (a DynamicUser's cannot be), only the drop-ins grant capabilities (the one to bind
/// port 53; with `xdp`, those of loading and attaching the program and its sockets).
#[test]
fn the_systemd_unit_verifies_and_serves_both_setups() {
    let unit = std::fs::read_to_string(repo("deploy/systemd/health-orchestrator.service")).unwrap();
    let drop_in = std::fs::read_to_string(repo("deploy/systemd/dns-server.conf")).unwrap();
    let xdp = std::fs::read_to_string(repo("deploy/systemd/dns-server-xdp.conf")).unwrap();
    assert!(!unit.contains("DynamicUser=yes") && unit.contains("StateDirectoryMode=0755"));
    assert!(unit.contains("CapabilityBoundingSet=\n"));
    assert!(drop_in.contains("AmbientCapabilities=CAP_NET_BIND_SERVICE\n"));
    assert!(xdp.contains("AmbientCapabilities=CAP_BPF CAP_NET_ADMIN CAP_NET_RAW\n"));
    let dir = tempfile::tempdir().unwrap();
    let here = unit.replace("/usr/local/bin/health-orchestrator", "/bin/true");
    for (name, text) in [
        ("health-orchestrator.service", here.clone()),
        ("with-dns.service", format!("{here}\n{drop_in}")),
        ("with-xdp.service", format!("{here}\n{drop_in}\n{xdp}")),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let out = Command::new("systemd-analyze")
            .arg("verify")
            .arg(&path)
            .output()
            .expect("systemd-analyze is missing: run the test command (bash .ci/test)");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stderr.trim().is_empty(),
            "{name}: {stderr}"
        );
    }
}

/// An engine probing one healthy gateway for tenant `t` (hosts files in `dir`), with its API
/// served; the gateway lives as long as the caller keeps it.
async fn one_gateway_engine(
    dir: &Path,
) -> (ho_engine::Engine, std::net::SocketAddr, ho_testkit::Gateway) {
    let gws = crate::harness::gateways(1);
    let tail = format!(
        "[[tenants]]\nname = \"t\"\ndomains = [\"t.example\"]\nsinks = [\"local\"]\n\n{}",
        crate::harness::hosts_sink(dir)
    );
    let engine = crate::harness::start_engine(
        dir,
        &crate::harness::config(
            &crate::harness::Check::FAST,
            &gws.iter().collect::<Vec<_>>(),
            &tail,
        ),
    )
    .await;
    let addr = crate::harness::serve_api(&engine, None, None).await;
    let gateway = gws.into_iter().next().expect("one gateway");
    (engine, addr, gateway)
}
