//! ARCHITECTURE.md's map cannot drift: every file it names must exist, and every
//! `` `path` : `Function` `` pair must name something still defined in that file (a name
//! after `->` may live in another file, so it need only be defined somewhere in the tree).

use std::path::{Path, PathBuf};

use crate::harness::{rust_files, SOURCE_DIRS};

/// What a map entry may name: a function, a type, a constant or a trait impl.
const DEFINERS: [&str; 9] = [
    "fn ", "struct ", "enum ", "trait ", "type ", "const ", "static ", "mod ", "impl ",
];

#[test]
fn every_path_and_function_in_architecture_md_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let map = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let tree = rust_sources(root);
    let mut problems = Vec::new();
    let mut checked = 0;
    let mut last_dir = PathBuf::new();
    for line in map.lines() {
        let tokens = code_spans(line);
        let mut i = 0;
        while i < tokens.len() {
            let (token, after) = &tokens[i];
            i += 1;
            if !looks_like_path(token) {
                continue;
            }
            let files = match resolve(root, &last_dir, token) {
                Some(files) => files,
                None => {
                    problems.push(format!("{token}: no such file (line: {line})"));
                    continue;
                }
            };
            if token.ends_with('/') {
                last_dir = files[0].clone();
            } else if let Some(parent) = files[0].parent().filter(|_| token.contains('/')) {
                last_dir = parent.to_path_buf();
            }
            checked += 1;
            if after.trim() != ":" {
                continue;
            }
            // `path` : `a` / `b`, `c` -> `d`: a, b and c in the file, d anywhere.
            let text: Vec<String> = files
                .iter()
                .map(|f| std::fs::read_to_string(f).unwrap_or_default())
                .collect();
            let mut in_file = true;
            while i < tokens.len() && !looks_like_path(&tokens[i].0) {
                let (name, sep) = &tokens[i];
                let found = if in_file {
                    text.iter().all(|t| defines(t, name))
                } else {
                    tree.iter().any(|t| defines(t, name))
                };
                checked += 1;
                if !found {
                    let place = if in_file { token.as_str() } else { "the tree" };
                    problems.push(format!("{name}: not defined in {place} (line: {line})"));
                }
                let sep = sep.trim();
                if sep.starts_with("->") {
                    in_file = false;
                } else if !(sep.starts_with('/') || sep == ",") {
                    i += 1;
                    break;
                }
                i += 1;
            }
        }
    }
    assert!(checked > 50, "the map parser found only {checked} entries");
    assert!(
        problems.is_empty(),
        "ARCHITECTURE.md is stale:\n{}",
        problems.join("\n")
    );
}

/// Every backquoted span of `line`, with the text that follows it up to the next span.
fn code_spans(line: &str) -> Vec<(String, String)> {
    let parts: Vec<&str> = line.split('`').collect();
    (1..parts.len())
        .step_by(2)
        .map(|i| {
            let after = parts.get(i + 1).copied().unwrap_or("");
            (parts[i].to_owned(), after.to_owned())
        })
        .collect()
}

fn looks_like_path(token: &str) -> bool {
    let file = [".rs", ".md", ".toml", ".html", ".sh"]
        .iter()
        .any(|ext| token.ends_with(ext));
    (file || token.ends_with('/')) && !token.starts_with("../") && !token.contains(' ')
}

/// The files a map token names: from the repository root, else relative to the last
/// directory named (or one of its parents), with `{a,b}` and `<kind>` expanded.
fn resolve(root: &Path, last_dir: &Path, token: &str) -> Option<Vec<PathBuf>> {
    let mut bases: Vec<PathBuf> = vec![root.to_path_buf()];
    bases.extend(
        last_dir
            .ancestors()
            .filter(|a| a.starts_with(root))
            .map(Path::to_path_buf),
    );
    for base in bases {
        let files: Vec<PathBuf> = expand(token)
            .iter()
            .flat_map(|t| matching(&base, t))
            .collect();
        if !files.is_empty() && expand(token).iter().all(|t| !matching(&base, t).is_empty()) {
            return Some(files);
        }
    }
    None
}

/// `a/{b,c}.rs` -> `a/b.rs`, `a/c.rs`.
fn expand(token: &str) -> Vec<String> {
    let (Some(open), Some(close)) = (token.find('{'), token.find('}')) else {
        return vec![token.to_owned()];
    };
    token[open + 1..close]
        .split(',')
        .map(|alt| format!("{}{}{}", &token[..open], alt, &token[close + 1..]))
        .collect()
}

/// The existing paths `token` names under `base`; a `<placeholder>` component matches
/// every directory there.
fn matching(base: &Path, token: &str) -> Vec<PathBuf> {
    let mut paths = vec![base.to_path_buf()];
    for part in token.split('/').filter(|p| !p.is_empty()) {
        paths = paths
            .into_iter()
            .flat_map(|p| {
                if part.starts_with('<') {
                    std::fs::read_dir(&p)
                        .map(|d| {
                            d.flatten()
                                .map(|e| e.path())
                                .filter(|e| e.is_dir())
                                .collect()
                        })
                        .unwrap_or_default()
                } else {
                    vec![p.join(part)]
                }
            })
            .filter(|p| p.exists())
            .collect();
    }
    paths
}

/// Whether `text` defines `name` (`Type::item`: both; `Handler<X>`: an impl of it).
fn defines(text: &str, name: &str) -> bool {
    if name.contains('<') {
        return text.contains(&format!("impl {name}"));
    }
    name.split("::").all(|part| {
        DEFINERS.iter().any(|d| {
            text.match_indices(&format!("{d}{part}")).any(|(at, m)| {
                let next = text[at + m.len()..].chars().next().unwrap_or(' ');
                !(next.is_alphanumeric() || next == '_')
            }) || (*d == "impl " && text.contains(&format!(" for {part}")))
        })
    })
}

/// Every Rust source of the workspace, for names the map says live "somewhere".
fn rust_sources(root: &Path) -> Vec<String> {
    SOURCE_DIRS
        .iter()
        .flat_map(|d| rust_files(&root.join(d)))
        .map(|f| std::fs::read_to_string(f).unwrap_or_default())
        .collect()
}
