//! The DNS server's modules stand in layers as ARCHITECTURE.md's "DNS server layers" lists
//! them: every `crate::server::` and `super::` path of non-test code under `dns/src/server/`
//! points to its own layer or one below, so the answer never learns how a transport fails
//! and a feature never reaches into the answer. Beside it: no use-path circle in `dns/src/`
//! runs through more than two files, the AF_XDP path takes nothing from the socket
//! transport, and the fuzz target answers through the transports' one `respond`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::harness::use_paths::{code_of, file_of, listed_layers, module_files, used_paths};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The unit a module path under the server names: its first module below `server` when
/// listed, else the server's top module (`mod`: the root file and what it declares).
fn unit_of(path: &[String], layers: &BTreeMap<String, usize>) -> String {
    match path.get(1) {
        Some(first) if layers.contains_key(first) => first.clone(),
        _ => "mod".to_owned(),
    }
}

fn rel(path: &Path) -> String {
    path.strip_prefix(root()).unwrap().display().to_string()
}

#[test]
fn the_dns_servers_layers_point_down() {
    let layers = listed_layers("DNS server layers");
    assert!(
        layers.len() > 15,
        "only {} server units in layers",
        layers.len()
    );
    let files = module_files(&root().join("dns/src"));
    let mut problems = Vec::new();
    let mut seen = 0;
    for (module, path) in files
        .iter()
        .filter(|(m, _)| m.first().is_some_and(|f| f == "server"))
    {
        let unit = match module.get(1) {
            None => "mod".to_owned(),
            Some(first) if layers.contains_key(first) => first.clone(),
            Some(_) => {
                problems.push(format!("{}: its module is in no layer", rel(path)));
                continue;
            }
        };
        seen += 1;
        let code = code_of(&std::fs::read_to_string(path).unwrap());
        for used in used_paths(&code, module) {
            if used.first().is_none_or(|f| f != "server") {
                continue;
            }
            let to = unit_of(&used, &layers);
            if layers[&to] > layers[&unit] {
                problems.push(format!(
                    "{} (layer {}) uses crate::{} (layer {})",
                    rel(path),
                    layers[&unit],
                    used.join("::"),
                    layers[&to]
                ));
            }
        }
    }
    assert!(seen > 30, "only {seen} server files read");
    problems.sort();
    problems.dedup();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Each file of `dns/src` and the files its code's paths lead to.
fn use_graph() -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let files = module_files(&root().join("dns/src"));
    let mut graph = BTreeMap::new();
    for (module, path) in &files {
        let code = code_of(&std::fs::read_to_string(path).unwrap());
        let to: BTreeSet<PathBuf> = (used_paths(&code, module).iter())
            .filter_map(|used| file_of(used, &files))
            .filter(|to| *to != path)
            .cloned()
            .collect();
        graph.insert(path.clone(), to);
    }
    graph
}

/// Every file `from` reaches along the graph's edges.
fn reach(from: &Path, graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> BTreeSet<PathBuf> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![from.to_path_buf()];
    while let Some(next) = todo.pop() {
        for to in &graph[&next] {
            if seen.insert(to.clone()) {
                todo.push(to.clone());
            }
        }
    }
    seen
}

/// A circle through two files (a module and its child using each other) is how Rust
/// splits a type's impl; one through three or more is a knot no file can be read without
/// the others. A set of files that reach each other holds only two-file circles exactly
/// when every use between them goes both ways and, taken as pairs, they form a tree.
#[test]
fn no_use_path_circle_in_dns_runs_through_more_than_two_files() {
    let graph = use_graph();
    assert!(graph.len() > 40, "only {} files in dns/src", graph.len());
    let reaches: BTreeMap<&PathBuf, BTreeSet<PathBuf>> =
        graph.keys().map(|f| (f, reach(f, &graph))).collect();
    let mut knots = BTreeSet::new();
    for (file, reached) in &reaches {
        let mut circle: BTreeSet<&PathBuf> = (reached.iter())
            .filter(|other| reaches[other].contains(*file))
            .collect();
        circle.insert(file);
        if circle.len() < 3 {
            continue;
        }
        let mut pairs = 0;
        let mut one_way = Vec::new();
        for a in &circle {
            for b in graph[*a].iter().filter(|b| circle.contains(b)) {
                if graph[b].contains(*a) {
                    pairs += 1;
                } else {
                    one_way.push(format!("{} -> {}", rel(a), rel(b)));
                }
            }
        }
        if !one_way.is_empty() || pairs / 2 != circle.len() - 1 {
            let files: Vec<String> = circle.iter().map(|f| rel(f)).collect();
            knots.insert(format!(
                "{} files: {}; one way: {}",
                files.len(),
                files.join(", "),
                one_way.join(", ")
            ));
        }
    }
    let knots: Vec<String> = knots.into_iter().collect();
    assert!(
        knots.is_empty(),
        "use-path circles through more than two files:\n{}",
        knots.join("\n")
    );
}

#[test]
fn the_xdp_path_takes_nothing_from_the_socket_transport() {
    let src = root().join("dns/src");
    let files = module_files(&src);
    let sockets = src.join("server/transport/sockets.rs");
    let text = std::fs::read_to_string(&sockets).unwrap();
    // What the socket transport defines, by name, so a re-export cannot hide it.
    let defined: BTreeSet<String> = (code_of(&text).lines())
        .filter_map(|l| {
            let l = l
                .strip_prefix("pub ")
                .or(l.strip_prefix("pub(super) "))
                .unwrap_or(l);
            let rest = [
                "struct ", "enum ", "fn ", "const ", "static ", "type ", "trait ",
            ]
            .iter()
            .find_map(|k| l.strip_prefix(k))?;
            rest.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .next()
                .map(str::to_owned)
        })
        .collect();
    assert!(
        defined.contains("Listener"),
        "read {defined:?} from sockets.rs"
    );
    let mut found = Vec::new();
    let xdp = ["server", "transport", "xdp"].map(str::to_owned);
    for (module, path) in files.iter().filter(|(m, _)| m.starts_with(&xdp)) {
        let code = code_of(&std::fs::read_to_string(path).unwrap());
        for used in used_paths(&code, module) {
            let into_sockets = file_of(&used, &files) == Some(&sockets);
            let named = used.last().is_some_and(|last| defined.contains(last));
            if into_sockets || named {
                found.push(format!("{}: crate::{}", rel(path), used.join("::")));
            }
        }
    }
    assert!(
        found.is_empty(),
        "the XDP path uses the socket transport:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_fuzz_target_answers_through_the_transports_respond() {
    let target = std::fs::read_to_string(root().join("fuzz/fuzz_targets/dns_respond.rs")).unwrap();
    assert!(
        code_of(&target).contains("ho_dns::server::fuzzing::{Responder"),
        "fuzz/fuzz_targets/dns_respond.rs drives the server through fuzzing::Responder"
    );
    let src = root().join("dns/src");
    let module = ["server", "fuzzing"].map(str::to_owned);
    let code = code_of(&std::fs::read_to_string(src.join("server/fuzzing.rs")).unwrap());
    let respond = ["server", "transport", "respond"].map(str::to_owned);
    assert!(
        used_paths(&code, &module).contains(&respond.to_vec()),
        "dns/src/server/fuzzing.rs answers through crate::server::transport::respond"
    );
    assert!(
        code.contains("respond(&self.authority"),
        "Responder::respond calls respond"
    );
}
