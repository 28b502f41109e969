//! The engine's modules stand in layers and every `crate::` path in non-test code points to
//! the same layer or one below, as ARCHITECTURE.md's "Engine layers" lists them: a module
//! that reaches up (a helper living in the API, an error type of the facade) is found here,
//! not by the next reader. Tests inside a module may reach anywhere.

use std::collections::BTreeMap;
use std::path::Path;

use crate::harness::rust_files;
use crate::harness::use_paths::{code_of, listed_layers, paths_after};

/// The layers as ARCHITECTURE.md lists them, bottom first: `N. a, b, c`.
fn layers() -> BTreeMap<String, usize> {
    let out = listed_layers("Engine layers");
    assert!(
        out.len() > 25,
        "only {} engine modules in layers",
        out.len()
    );
    out
}

/// The unit a `crate::` path names: `a::b` when listed, else `a`.
fn unit_of<'a>(path: &'a str, layers: &BTreeMap<String, usize>) -> Option<&'a str> {
    let mut parts = path.split("::");
    let first = parts.next()?;
    if let Some(second) = parts.next() {
        let len = first.len() + 2 + second.len();
        if layers.contains_key(&path[..len]) {
            return Some(&path[..len]);
        }
    }
    layers.contains_key(first).then_some(first)
}

/// The unit a source file belongs to (`engine/src/multi_cluster/vote.rs`: `multi_cluster::vote`
/// when listed, else `multi_cluster`).
fn unit_of_file(rel: &str, layers: &BTreeMap<String, usize>) -> Option<String> {
    let path = rel
        .trim_end_matches(".rs")
        .trim_end_matches("/mod")
        .replace('/', "::");
    unit_of(&path, layers).map(str::to_owned)
}

#[test]
fn the_engines_layers_point_down() {
    let layers = layers();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("engine/src");
    let mut problems = Vec::new();
    let mut seen = 0;
    for path in rust_files(&src) {
        let rel = path
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let name = path.file_name().unwrap().to_string_lossy();
        if rel == "lib.rs" || name == "tests.rs" || name.ends_with("_tests.rs") {
            continue;
        }
        let Some(unit) = unit_of_file(&rel, &layers) else {
            problems.push(format!("{rel}: its module is in no layer"));
            continue;
        };
        seen += 1;
        let text = std::fs::read_to_string(&path).unwrap();
        for target in paths_after(&code_of(&text), "crate") {
            let Some(to) = unit_of(&target, &layers) else {
                continue;
            };
            if layers[to] > layers[&unit] {
                problems.push(format!(
                    "{rel} (layer {}) uses crate::{target} (layer {})",
                    layers[&unit], layers[to]
                ));
            }
        }
    }
    assert!(seen > 60, "only {seen} engine files read");
    problems.sort();
    problems.dedup();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
