//! `check-config --resource` against seeded resources with planted problems: a valid
//! DNSFailover gets k distinct problems (k = 1..6) from a catalogue (wrong types, a missing
//! required field, unknown keys, values no enum lists, semantic errors, one field in both
//! spellings) in random fields; one run of the binary must say every planted problem at its
//! field path exactly once, and nothing else. The oracle is the catalogue's own paths.

use std::collections::BTreeMap;
use std::process::Command;

use serde_json::{json, Value};

/// Namespace `team-a` may claim `team-a.example.org` on sink `dns`; sink `other` exists
/// but is not allowed to it, and both sinks serve all of `example.org` (so a domain outside
/// the allowance is refused for that alone).
const BASE: &str =
    "[sinks.dns]\nkind = \"dns_server\"\nlisten = [\"127.0.0.1:0\"]\nzones = [\"example.org\"]\n\n\
    [sinks.other]\nkind = \"dns_server\"\nlisten = [\"127.0.0.2:0\"]\nzones = [\"example.org\"]\n\n\
    [kubernetes]\ntenants = true\n\n[[kubernetes.allow]]\nnamespace = \"team-a\"\n\
    domains = [\"team-a.example.org\"]\nsinks = [\"dns\"]\n";

/// A valid spec touching every field the catalogue plants in.
fn valid_spec() -> Value {
    json!({
        "domains": ["api.team-a.example.org", "www.team-a.example.org"],
        "sinks": ["dns"],
        "endpoints": [
            {"addresses": ["192.0.2.10"], "weight": 2},
            {"addresses": ["192.0.2.11"]},
        ],
        "ttl": "30s",
        "degradedTTL": "10s",
        "holdFailback": false,
        "policy": "all",
        "onAllUnhealthy": "publish_all",
        "minHealthy": 0.5,
        "check": {
            "kind": "http", "port": 8080, "path": "/healthz", "interval": "2s",
            "timeout": "500ms", "fastInterval": "200ms", "rise": 1,
        },
    })
}

/// One plantable problem: the field it occupies (two problems never share one), the path
/// it must be said at, and how it is planted in a spec.
struct Problem {
    slot: &'static str,
    path: &'static str,
    plant: fn(&mut Value),
}

/// A problem of the catalogue.
fn p(slot: &'static str, path: &'static str, plant: fn(&mut Value)) -> Problem {
    Problem { slot, path, plant }
}

/// Every kind of problem a resource can have, each at a known path.
fn catalogue() -> Vec<Problem> {
    vec![
        // Wrong types, a number out of range, a required field missing.
        p("holdFailback", "spec.holdFailback", |s| {
            s["holdFailback"] = json!("2m")
        }),
        p("ttl", "spec.ttl", |s| s["ttl"] = json!(30)),
        p("degradedTTL", "spec.degradedTTL", |s| {
            s["degradedTTL"] = json!(true)
        }),
        p("minHealthy", "spec.minHealthy", |s| {
            s["minHealthy"] = json!("half")
        }),
        p("domains", "spec.domains", |s| {
            s["domains"] = json!("api.team-a.example.org")
        }),
        p("check.port", "spec.check.port", |s| {
            s["check"]["port"] = json!("8080")
        }),
        p("check.path", "spec.check.path", |s| {
            s["check"]["path"] = json!(5)
        }),
        p("check.rise", "spec.check.rise", |s| {
            s["check"]["rise"] = json!(-1)
        }),
        p("ep0.weight", "spec.endpoints[0].weight", |s| {
            s["endpoints"][0]["weight"] = json!("heavy")
        }),
        p("sinks", "spec.sinks", |s| {
            s.as_object_mut().unwrap().remove("sinks");
        }),
        // Unknown keys.
        p("top.unknown", "spec.holdFailbak", |s| {
            s["holdFailbak"] = json!(true)
        }),
        p("check.unknown", "spec.check.fastIntervl", |s| {
            s["check"]["fastIntervl"] = json!("1s")
        }),
        p("ep1.unknown", "spec.endpoints[1].lables", |s| {
            s["endpoints"][1]["lables"] = json!({"geo": "eu"})
        }),
        // Values no enum lists.
        p("policy", "spec.policy", |s| s["policy"] = json!("fastest")),
        p("onAllUnhealthy", "spec.onAllUnhealthy", |s| {
            s["onAllUnhealthy"] = json!("publish_some")
        }),
        p("check.kind", "spec.check.kind", |s| {
            s["check"]["kind"] = json!("htp")
        }),
        // Semantic errors.
        p("domains", "spec.domains[1]", |s| {
            s["domains"][1] = json!("api.team-b.example.org")
        }),
        p("sinks", "spec.sinks[1]", |s| {
            s["sinks"] = json!(["dns", "other"])
        }),
        p("ep0.addresses", "spec.endpoints[0].addresses[0]", |s| {
            s["endpoints"][0]["addresses"][0] = json!("192.0.2.300")
        }),
        p("check.timeout", "spec.check.timeout", |s| {
            s["check"]["timeout"] = json!("5s")
        }),
        p("minHealthy", "spec.minHealthy", |s| {
            s["minHealthy"] = json!(-1)
        }),
        p("ttl", "spec.ttl", |s| s["ttl"] = json!("5x")),
        // One field in both spellings.
        p("degradedTTL", "spec.degradedTTL", |s| {
            s["degraded_ttl"] = json!("5s")
        }),
        p("holdFailback", "spec.holdFailback", |s| {
            s["hold_failback"] = json!(true)
        }),
        p("check.fastInterval", "spec.check.fastInterval", |s| {
            s["check"]["fast_interval"] = json!("100ms")
        }),
    ]
}

/// k problems of the catalogue, no two in one field.
fn pick(rng: &mut fastrand::Rng, k: usize) -> Vec<Problem> {
    let mut left = catalogue();
    let mut picked: Vec<Problem> = Vec::new();
    while picked.len() < k {
        let problem = left.swap_remove(rng.usize(..left.len()));
        if picked.iter().all(|p| p.slot != problem.slot) {
            picked.push(problem);
        }
    }
    picked
}

/// (exit code, stdout, stderr) of `check-config --resource` of `spec` as `team-a/api`.
fn check(dir: &std::path::Path, spec: &Value) -> (i32, String, String) {
    let config = dir.join("base.toml");
    std::fs::write(&config, BASE).unwrap();
    let resource = json!({
        "apiVersion": "healthorchestrator.io/v1alpha1",
        "kind": "DNSFailover",
        "metadata": {"name": "api", "namespace": "team-a"},
        "spec": spec,
    });
    let file = dir.join("api.yaml");
    std::fs::write(&file, serde_json::to_string_pretty(&resource).unwrap()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_health-orchestrator"))
        .args(["check-config", "--config"])
        .arg(&config)
        .arg("--resource")
        .arg(&file)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// How many times each field path leads a line of `stderr` (the refusal's first line
/// after its `team-a/api: refused (Reason): ` prefix).
fn said_paths(stderr: &str) -> BTreeMap<String, usize> {
    let mut said = BTreeMap::new();
    for line in stderr.lines() {
        let line = match line.split_once("team-a/api: refused (") {
            Some((_, rest)) => rest.split_once("): ").map_or(rest, |(_, l)| l),
            None => line,
        };
        let path = line.split_once(": ").map_or(line, |(p, _)| p);
        *said.entry(path.to_owned()).or_insert(0) += 1;
    }
    said
}

#[test]
fn every_planted_problem_is_said_once_at_its_path_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let (code, stdout, stderr) = check(dir.path(), &valid_spec());
    assert_eq!(code, 0, "the valid spec is accepted: {stdout}{stderr}");
    assert!(stdout.contains("team-a/api: accepted"), "{stdout}");
    for seed in 1..=60u64 {
        let mut rng = fastrand::Rng::with_seed(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let k = 1 + (seed as usize - 1) % 6;
        let planted = pick(&mut rng, k);
        let mut spec = valid_spec();
        for problem in &planted {
            (problem.plant)(&mut spec);
        }
        let (code, stdout, stderr) = check(dir.path(), &spec);
        let expected: BTreeMap<String, usize> =
            planted.iter().map(|p| (p.path.to_owned(), 1)).collect();
        let context = format!("seed {seed}, planted {:?}:\n{stderr}", expected.keys());
        assert_eq!(code, 2, "{context}{stdout}");
        assert_eq!(said_paths(&stderr), expected, "{context}");
    }
}
