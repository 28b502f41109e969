//! The external-dns overlay (`deploy/external-dns`): it renders over the base and validates
//! strictly, runs the webhook provider beside the orchestrator as external-dns runs it (on
//! localhost, the port the sink names, its credentials and domain filter from a Secret, no
//! port shared with the orchestrator's), and the config the pod loads, read back from the
//! rendered ConfigMap with the container's own arguments, passes `check-config`; so does
//! `config/examples/external-dns.toml`, whose sink has the answer canary on.

use std::collections::BTreeMap;
use std::process::Command;

use serde::Deserialize;
use serde_yaml::Value;

use crate::cli::repo;
use crate::deploy::render_and_validate;

/// Where the pod mounts its ConfigMap (deploy/kubernetes/orchestrator.yaml).
const CONFIG_DIR: &str = "/etc/health-orchestrator/";

fn documents(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|d| Value::deserialize(d).unwrap())
        .collect()
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| {
            d["kind"] == kind
                && d["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with(name))
        })
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

/// A container's `env` as name -> the literal value or `secret:NAME/KEY`.
fn env_of(container: &Value) -> BTreeMap<String, String> {
    container["env"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|e| {
            let value = match e["value"].as_str() {
                Some(v) => v.to_owned(),
                None => {
                    let r = &e["valueFrom"]["secretKeyRef"];
                    format!(
                        "secret:{}/{}",
                        r["name"].as_str().unwrap(),
                        r["key"].as_str().unwrap()
                    )
                }
            };
            (e["name"].as_str().unwrap().to_owned(), value)
        })
        .collect()
}

/// `check-config` with `args` (the container's, after `run`); panics with its stderr.
fn check_config(args: &[String]) {
    let out = Command::new(env!("CARGO_BIN_EXE_health-orchestrator"))
        .arg("check-config")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "check-config {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_external_dns_overlay_runs_the_provider_beside_the_orchestrator() {
    let docs = documents(&render_and_validate("deploy/external-dns"));
    let pod = &find(&docs, "StatefulSet", "health-orchestrator")["spec"]["template"]["spec"];
    let containers = pod["containers"].as_sequence().unwrap();
    assert_eq!(containers.len(), 2, "{containers:?}");
    let orchestrator = containers
        .iter()
        .find(|c| c["name"] == "health-orchestrator")
        .unwrap();
    let webhook = containers.iter().find(|c| c["name"] == "webhook").unwrap();
    no_port_claimed_twice(containers);
    let dir = tempfile::tempdir().unwrap();
    let layer = the_pod_loads_its_config_map(&docs, orchestrator, dir.path());

    // The sink reaches the provider where the provider listens, on localhost only.
    let url = layer["sinks"]["provider"]["url"].as_str().unwrap();
    let env = env_of(webhook);
    assert_eq!(env["WEBHOOK_HOST"], "localhost");
    assert_eq!(url, format!("http://localhost:{}", env["WEBHOOK_PORT"]));
    let webhook_ports: Vec<String> = webhook["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|p| p["containerPort"].as_i64().unwrap().to_string())
        .collect();
    assert!(
        webhook_ports.contains(&env["METRICS_PORT"]),
        "{webhook_ports:?}"
    );
    for probe in ["livenessProbe", "readinessProbe"] {
        assert_eq!(
            webhook[probe]["httpGet"]["port"], "http-wh-metrics",
            "{probe}"
        );
    }
    // Credentials and the domain filter come from the one Secret, never from the manifests.
    assert_eq!(
        env["HETZNER_API_KEY"],
        "secret:external-dns-provider/api-key"
    );
    assert_eq!(
        env["DOMAIN_FILTER"],
        "secret:external-dns-provider/domain-filter"
    );
    assert!(
        !docs.iter().any(|d| d["kind"] == "Secret"),
        "the overlay ships no Secret"
    );
}

/// No port of the pod's one network namespace is declared by two containers.
fn no_port_claimed_twice(containers: &[Value]) {
    let mut ports: Vec<(i64, &str)> = containers
        .iter()
        .flat_map(|c| c["ports"].as_sequence().unwrap())
        .map(|p| {
            (
                p["containerPort"].as_i64().unwrap(),
                p["protocol"].as_str().unwrap_or("TCP"),
            )
        })
        .collect();
    let declared = ports.len();
    ports.sort();
    ports.dedup();
    assert_eq!(ports.len(), declared, "a port declared twice: {ports:?}");
}

/// Writes the rendered ConfigMap's files into `dir` and runs `check-config` with the
/// orchestrator container's own arguments on them; the external-dns layer as parsed.
fn the_pod_loads_its_config_map(
    docs: &[Value],
    orchestrator: &Value,
    dir: &std::path::Path,
) -> toml::Table {
    let config_map = find(docs, "ConfigMap", "health-orchestrator-config");
    for (file, text) in config_map["data"].as_mapping().unwrap() {
        std::fs::write(dir.join(file.as_str().unwrap()), text.as_str().unwrap()).unwrap();
    }
    let args: Vec<String> = orchestrator["args"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|a| {
            a.as_str()
                .unwrap()
                .replace(CONFIG_DIR, &format!("{}/", dir.display()))
        })
        .collect();
    assert_eq!(args[0], "run");
    assert!(
        args.iter().any(|a| a.ends_with("/external-dns.toml")),
        "{args:?}"
    );
    check_config(&args[1..]);
    std::fs::read_to_string(dir.join("external-dns.toml"))
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn the_external_dns_example_passes_check_config_with_the_canary_on() {
    let file = repo("config/examples/external-dns.toml");
    check_config(&["--config".to_owned(), file.display().to_string()]);
    let config: toml::Table = std::fs::read_to_string(&file).unwrap().parse().unwrap();
    let sinks: Vec<&toml::Value> = config["sinks"]
        .as_table()
        .unwrap()
        .values()
        .filter(|s| s["kind"].as_str() == Some("external_dns_webhook"))
        .collect();
    assert_eq!(sinks.len(), 1, "{config:?}");
    let canary = sinks[0]["canary"]
        .as_table()
        .expect("the sink has a canary table");
    assert!(
        canary
            .get("enabled")
            .is_none_or(|e| e.as_bool() == Some(true)),
        "{canary:?}"
    );
    assert!(canary["address"]
        .as_str()
        .unwrap()
        .parse::<std::net::SocketAddr>()
        .is_ok());
}
