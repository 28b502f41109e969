//! ARCHITECTURE.md's crate rules cannot drift: the crate table is read against
//! `cargo metadata` (each crate's workspace dependencies, normal edges, are exactly those the
//! table lists, and every workspace crate is in it), the service crates do not reach each
//! other even through dev-dependencies, `unsafe` code is allowed only where the table says,
//! wall-clock times become numbers in one place, and every kind the program knows is named
//! where a newcomer looks for it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use ho_config::CheckCatalog;

use crate::harness::use_paths::{code_of, paths_after};
use crate::harness::{rust_files, SOURCE_DIRS};

/// The crates that implement sink kinds and must know nothing of each other.
const SERVICE_CRATES: [&str; 3] = ["ho-dns", "ho-sinks", "ho-kube"];

/// The only places `unsafe` code may be allowed: the DNS server's AF_XDP path and the
/// binary's `malloc_trim`.
const UNSAFE_PLACES: [&str; 2] = ["dns/src/server/transport/xdp/", "src/heap.rs"];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Each workspace crate's workspace dependencies: (normal, dev).
type Graph = BTreeMap<String, (BTreeSet<String>, BTreeSet<String>)>;

fn workspace_graph() -> Graph {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root())
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages = meta["packages"].as_array().unwrap();
    let names: BTreeSet<String> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect();
    let mut graph = Graph::new();
    for p in packages {
        let entry = graph
            .entry(p["name"].as_str().unwrap().to_owned())
            .or_default();
        for d in p["dependencies"].as_array().unwrap() {
            let name = d["name"].as_str().unwrap();
            if !names.contains(name) {
                continue;
            }
            match d["kind"].as_str() {
                None => entry.0.insert(name.to_owned()),
                Some("dev") => entry.1.insert(name.to_owned()),
                Some(_) => false,
            };
        }
    }
    graph
}

/// The crate table of ARCHITECTURE.md: crate -> the workspace crates it depends on.
fn documented() -> BTreeMap<String, BTreeSet<String>> {
    let map = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let mut rows = BTreeMap::new();
    let mut in_table = false;
    for line in map.lines() {
        if line.starts_with("| crate | folder | depends on | invariant |") {
            in_table = true;
            continue;
        }
        if !in_table || line.starts_with("|---") {
            continue;
        }
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let name = cells[1].trim_matches('`').to_owned();
        let deps = cells[3]
            .split(',')
            .map(|d| d.trim().trim_matches('`').to_owned())
            .filter(|d| !d.is_empty())
            .collect();
        assert!(!cells[4].is_empty(), "{name} states no invariant");
        rows.insert(name, deps);
    }
    assert!(
        rows.len() >= 10,
        "the crate table has only {} rows",
        rows.len()
    );
    rows
}

/// Crates that speak DNS on the wire or to a Kubernetes API server: only `ho-dns` and
/// `ho-kube` (and what depends on them) build them.
const WIRE_CRATES: [&str; 6] = [
    "hickory-proto",
    "nix",
    "maxminddb",
    "siphasher",
    "kube",
    "k8s-openapi",
];

/// The crates `package` builds with, normal edges, as `cargo tree` lists them.
fn normal_tree(package: &str) -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args([
            "tree",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--offline",
            "-p",
        ])
        .arg(package)
        .current_dir(root())
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_engine_and_the_http_sinks_build_no_dns_or_kubernetes_wire_crates() {
    for package in ["ho-engine", "ho-sinks"] {
        let tree = normal_tree(package);
        assert!(tree.len() > 20, "{package}: cargo tree listed {tree:?}");
        let found: Vec<&str> = WIRE_CRATES
            .into_iter()
            .filter(|c| tree.contains(*c))
            .collect();
        assert!(found.is_empty(), "{package} builds {found:?}");
    }
    assert!(normal_tree("ho-dns").contains("hickory-proto"));
}

#[test]
fn the_crate_graph_is_as_architecture_md_draws_it() {
    let graph = workspace_graph();
    let table = documented();
    let mut problems = Vec::new();
    for (name, (normal, _)) in &graph {
        let Some(listed) = table.get(name.as_str()) else {
            if name != "ho-bench" {
                problems.push(format!("{name} is not in ARCHITECTURE.md's crate table"));
            }
            continue;
        };
        if normal != listed {
            problems.push(format!(
                "{name} depends on {normal:?}; ARCHITECTURE.md says {listed:?}"
            ));
        }
    }
    for name in table.keys() {
        if !graph.contains_key(name) {
            problems.push(format!("ARCHITECTURE.md lists {name}, which is no crate"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn service_crates_know_nothing_of_each_other() {
    let graph = workspace_graph();
    for a in SERVICE_CRATES {
        let (normal, dev) = &graph[a];
        for b in SERVICE_CRATES.iter().filter(|b| **b != a) {
            assert!(
                !normal.contains(*b) && !dev.contains(*b),
                "{a} depends on {b}: the service crates meet only in ho-kinds"
            );
        }
    }
}

/// The importers sit below ho-kube, which calls the Kuadrant translation: they reach no
/// crate above ho-config, not even for tests (a test of the live path is ho-kube's, or an
/// integration test's).
#[test]
fn the_importers_reach_nothing_above_the_config() {
    let graph = workspace_graph();
    let (normal, dev) = &graph["ho-import"];
    let reached: Vec<&String> = normal.union(dev).filter(|d| *d != "ho-config").collect();
    assert!(reached.is_empty(), "ho-import depends on {reached:?}");
    assert!(
        graph["ho-kube"].0.contains("ho-import"),
        "ho-kube calls the translation"
    );
}

#[test]
fn unsafe_code_is_allowed_only_where_architecture_md_says() {
    let mut found = Vec::new();
    for dir in SOURCE_DIRS {
        for file in rust_files(&root().join(dir)) {
            let text = std::fs::read_to_string(&file).unwrap();
            if text.contains("allow(unsafe_code)") {
                let rel = file
                    .strip_prefix(root())
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                if !UNSAFE_PLACES.iter().any(|p| rel.starts_with(p)) {
                    found.push(rel);
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "unsafe code allowed outside {UNSAFE_PLACES:?}: {found:?}"
    );
}

#[test]
fn every_kind_is_named_in_the_code_map_and_the_crate_docs() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let code_map = &readme[readme.find("## Code map").expect("README has a code map")..];
    let kinds_doc = std::fs::read_to_string(root().join("kinds/src/lib.rs")).unwrap();
    let sinks: Vec<&str> = ho_kinds::SINK_KINDS.0.iter().map(|k| k.name()).collect();
    assert!(sinks.len() >= 10, "only {} sink kinds", sinks.len());
    let mut missing = Vec::new();
    for kind in &sinks {
        let quoted = format!("`{kind}`");
        if !code_map.contains(&quoted) {
            missing.push(format!("sink kind {kind} is not in README's code map"));
        }
        if !kinds_doc.contains(&format!("//! | {quoted} |")) {
            missing.push(format!("sink kind {kind} is not in ho-kinds' crate doc"));
        }
    }
    let checks = ho_kinds::CHECK_KINDS.kinds();
    assert!(checks.len() >= 9, "only {} check kinds", checks.len());
    for kind in checks {
        if !code_map.contains(&format!("`{kind}`")) {
            missing.push(format!("check kind {kind} is not in README's code map"));
        }
        if !kinds_doc.contains(&format!("//! | `{kind}` |")) {
            missing.push(format!("check kind {kind} is not in ho-kinds' crate doc"));
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

#[test]
fn the_dns_server_and_the_update_sink_share_only_the_wire() {
    let mut found = Vec::new();
    for (dir, other) in [
        ("dns/src/server", "crate::update"),
        ("dns/src/update", "crate::server"),
    ] {
        let mut files = rust_files(&root().join(dir));
        files.extend(Some(root().join(format!("{dir}.rs"))).filter(|f| f.exists()));
        for file in files {
            if std::fs::read_to_string(&file).unwrap().contains(other) {
                found.push(file.strip_prefix(root()).unwrap().display().to_string());
            }
        }
    }
    assert!(
        found.is_empty(),
        "one DNS sink kind reaches into the other: {found:?}"
    );
}

/// Sink kind modules are private: a kind is reached through the settings type its crate
/// exports (registered in `ho-kinds`), so nothing outside depends on a kind's insides.
#[test]
fn sink_kind_modules_are_private() {
    let kinds = [
        (
            "sinks/src/lib.rs",
            &[
                "hosts_file",
                "powerdns",
                "webhook",
                "route53",
                "cloudflare",
                "google",
                "azure",
            ][..],
        ),
        ("dns/src/lib.rs", &["update"][..]),
        ("kube/src/lib.rs", &["coredns_configmap"][..]),
    ];
    let mut public = Vec::new();
    for (file, modules) in kinds {
        let text = std::fs::read_to_string(root().join(file)).unwrap();
        for module in modules {
            if text
                .lines()
                .any(|l| l.trim() == format!("pub mod {module};"))
            {
                public.push(format!("{file}: {module}"));
            }
            assert!(
                text.lines().any(|l| l.trim() == format!("mod {module};")),
                "{file} declares no module {module}"
            );
        }
    }
    assert!(public.is_empty(), "public sink kind modules: {public:?}");
}

#[test]
fn epoch_conversions_live_in_the_clock() {
    let mut found = Vec::new();
    // The test kit and the load test stand apart from the engine (they drive it from
    // outside) and keep their own clocks.
    for dir in SOURCE_DIRS
        .iter()
        .filter(|d| !matches!(**d, "testkit" | "loadtest"))
    {
        for file in rust_files(&root().join(dir)) {
            let rel = file
                .strip_prefix(root())
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let name = file.file_name().unwrap().to_string_lossy();
            if rel == "engine/src/clock.rs" || name == "tests.rs" || name.ends_with("_tests.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&file).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            if code.contains("UNIX_EPOCH") {
                found.push(rel);
            }
        }
    }
    assert!(
        found.is_empty(),
        "UNIX_EPOCH outside engine/src/clock.rs (use clock::since_epoch, after_epoch, unix_now): {found:?}"
    );
}

/// What `ho_kube` items the service's start and stop (`src/run.rs`, `src/run/`) may name:
/// the facade and the values the binary hands it.
const KUBE_FACADE: [&str; 5] = [
    "Cluster",
    "Tenants",
    "Joined",
    "shared_files::SharedFiles",
    "tenants::kuadrant::Kuadrant",
];

#[test]
fn the_service_reaches_kubernetes_through_one_facade() {
    let mut files = rust_files(&root().join("src/run"));
    files.push(root().join("src/run.rs"));
    let mut named = BTreeSet::new();
    for file in files {
        let code = code_of(&std::fs::read_to_string(&file).unwrap());
        named.extend(paths_after(&code, "ho_kube"));
    }
    assert!(named.contains("Cluster"), "run names {named:?}");
    let beside: Vec<&String> = (named.iter())
        .filter(|p| !KUBE_FACADE.contains(&p.as_str()))
        .collect();
    assert!(
        beside.is_empty(),
        "src/run*.rs reach ho_kube beside its facade (ho_kube::Cluster): {beside:?}"
    );
}
