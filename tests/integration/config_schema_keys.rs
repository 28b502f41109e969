//! The schema is the config: every TOML table the docs and examples show (each ```toml
//! block of README.md and docs/*.md, config/examples/, the shipped config) is judged twice,
//! by the loader (`check-config`: does it name an unknown key?) and by
//! docs/config.schema.json (does Python's `jsonschema` find a key it does not allow?), and
//! the two must agree, so a key the config takes cannot be missing from the schema (as the
//! sinks' `canary` was) nor a key the schema offers be refused by the config.

use std::process::Command;

use crate::cli::repo;
use crate::harness::{binary, python_tool};

/// Every ```toml block of `text`.
fn toml_blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        match (&mut current, line.trim_start()) {
            (None, l) if l.starts_with("```toml") => current = Some(String::new()),
            (Some(_), l) if l.starts_with("```") => blocks.extend(current.take()),
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

/// The configs to judge: (where from, text), only those that are TOML.
fn shown_configs() -> Vec<(String, String)> {
    let mut files = vec![repo("README.md"), repo("deploy/kubernetes/config.toml")];
    for dir in ["docs", "config/examples"] {
        for entry in std::fs::read_dir(repo(dir)).unwrap() {
            files.push(entry.unwrap().path());
        }
    }
    let mut configs = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let name = file.display().to_string();
        if name.ends_with(".toml") {
            configs.push((name, text));
        } else if name.ends_with(".md") {
            for (i, block) in toml_blocks(&text).into_iter().enumerate() {
                configs.push((format!("{name} block {}", i + 1), block));
            }
        }
    }
    // Both kinds of sink with a canary of their own: the key every sink table takes.
    configs.push((
        "a canary on two sinks".into(),
        "[sinks.dns]\nkind = \"dns_server\"\nlisten = [\"127.0.0.1:5353\"]\nzones = [\"example.org\"]\n\
         canary = { every = \"1s\", grace = \"2s\" }\n\n\
         [sinks.pdns]\nkind = \"powerdns\"\nurl = \"http://127.0.0.1:8081\"\napi_key_file = \"/k\"\nzone = \"example.org\"\n\
         canary = { address = \"127.0.0.1:53\", enabled = true }\n"
            .into(),
    ));
    configs.retain(|(_, text)| text.parse::<toml::Table>().is_ok());
    configs
}

#[test]
fn every_key_the_docs_show_is_in_the_schema_exactly_when_the_config_takes_it() {
    let configs = shown_configs();
    assert!(configs.len() > 10, "only {} configs found", configs.len());
    let dir = tempfile::tempdir().unwrap();
    let as_json: Vec<serde_json::Value> = (configs.iter())
        .map(|(_, text)| serde_json::to_value(text.parse::<toml::Table>().unwrap()).unwrap())
        .collect();
    let list = dir.path().join("configs.json");
    std::fs::write(&list, serde_json::to_string(&as_json).unwrap()).unwrap();
    let python = std::path::Path::new(&python_tool("KUBERNETES_VALIDATE", "kubernetes-validate"))
        .with_file_name("python");
    let out = Command::new(&python)
        .args([
            "-c",
            "import json, sys, jsonschema\n\
             v = jsonschema.Draft7Validator(json.load(open(sys.argv[1])))\n\
             def unknown(e):\n\
             \x20   return e.validator == 'additionalProperties' or any(unknown(c) for c in e.context or [])\n\
             print(json.dumps([[e.message for e in v.iter_errors(c) if unknown(e)] for c in json.load(open(sys.argv[2]))]))",
        ])
        .arg(repo("docs/config.schema.json"))
        .arg(&list)
        .output()
        .expect("python with jsonschema: run the test command (bash .ci/test)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let schema_says: Vec<Vec<String>> = serde_json::from_slice(&out.stdout).unwrap();
    let mut disagreements = Vec::new();
    for ((from, text), schema_unknown) in configs.iter().zip(schema_says) {
        let file = dir.path().join("config.toml");
        std::fs::write(&file, text).unwrap();
        let checked = binary()
            .args(["check-config", "--config"])
            .arg(&file)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&checked.stderr);
        let loader_unknown = said.contains("unknown key") || said.contains("unknown field");
        // A sink table of a kind this build lacks is refused before its keys are read.
        let schema_refuses = !schema_unknown.is_empty();
        if loader_unknown != schema_refuses && !said.contains("unknown sink kind") {
            disagreements.push(format!(
                "{from}: the loader {} unknown field ({said}); the schema {schema_unknown:?}",
                if loader_unknown {
                    "names an"
                } else {
                    "names no"
                }
            ));
        }
    }
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n\n"));
}
