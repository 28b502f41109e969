//! The module paths code uses, read as text, and the layers ARCHITECTURE.md lists: for the
//! tests that hold a crate's modules to their layers and its files to circles of at most
//! two (`engine_layers`, `dns_server_layers`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::rust_files;

/// The layers a section of ARCHITECTURE.md lists, bottom first, one line each:
/// `N. a, b, c: what they are`; each unit with its layer.
pub fn listed_layers(heading: &str) -> BTreeMap<String, usize> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let map = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let at = map
        .find(&format!("## {heading}\n"))
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has no \"## {heading}\""));
    let mut out = BTreeMap::new();
    for line in map[at..].lines().skip(1) {
        if line.starts_with("## ") {
            break;
        }
        let Some((number, units)) = line.split_once(". ") else {
            continue;
        };
        let Ok(layer) = number.trim().parse::<usize>() else {
            continue;
        };
        for unit in units.split(": ").next().unwrap().split(',') {
            out.insert(unit.trim().trim_matches('`').to_owned(), layer);
        }
    }
    out
}

/// A source's code: without comment lines, `pub(in …)` visibilities (a visibility is not
/// a use) and everything from its `#[cfg(test)]` on (tests may reach anywhere).
pub fn code_of(text: &str) -> String {
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
    let mut out = String::with_capacity(code.len());
    for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
        let mut rest = line;
        while let Some(at) = rest.find("pub(in ") {
            out.push_str(&rest[..at + 3]);
            rest = rest[at..].split_once(')').map_or("", |(_, after)| after);
        }
        out.push_str(rest);
        out.push('\n');
    }
    out
}

/// Every path of `code` that starts with `head` (`crate`, `super`, a child module's name),
/// with `head::` taken off and use groups expanded: `crate::a::{b, c::{d, e}}` gives
/// `a::b`, `a::c::d`, `a::c::e`. `super::super::x` is one path, `super::x`.
pub fn paths_after(code: &str, head: &str) -> Vec<String> {
    let prefix = format!("{head}::");
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    for (at, _) in code.match_indices(&prefix) {
        let before = at.checked_sub(1).map(|i| bytes[i]);
        if before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':') {
            continue;
        }
        expand("", &code[at + prefix.len()..], &mut out);
    }
    out
}

/// The paths of the use tree at the start of `rest`, each after `base`.
fn expand(base: &str, rest: &str, out: &mut Vec<String>) {
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(rest.len());
    let path = format!("{base}{}", &rest[..end]);
    if !rest[end..].starts_with('{') {
        let path = path.trim_end_matches(':').trim_end_matches("::self");
        out.push(path.to_owned());
        return;
    }
    let group = &rest[end + 1..];
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                member(&path, &group[start..i], out);
                return;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                member(&path, &group[start..i], out);
                start = i + 1;
            }
            _ => {}
        }
    }
}

/// One member of a use group (`b`, `c::{d, e}`, `f as g`, `self`).
fn member(base: &str, text: &str, out: &mut Vec<String>) {
    let text = text.trim();
    let text = text.split(" as ").next().unwrap_or(text).trim();
    if text.is_empty() || text == "*" || text == "self" {
        out.push(base.trim_end_matches(':').to_owned());
    } else {
        expand(base, text, out);
    }
}

/// A crate's files by module path (`server::answer` for `server/answer.rs` or
/// `server/answer/mod.rs`; the root `lib.rs` is the empty path), test files left out.
pub fn module_files(src: &Path) -> BTreeMap<Vec<String>, PathBuf> {
    let mut out = BTreeMap::new();
    for path in rust_files(src) {
        let name = path.file_name().unwrap().to_string_lossy();
        if name == "tests.rs" || name.ends_with("_tests.rs") {
            continue;
        }
        let rel = path.strip_prefix(src).unwrap().with_extension("");
        let mut module: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if matches!(
            module.last().map(String::as_str),
            Some("mod" | "lib" | "main")
        ) {
            module.pop();
        }
        out.insert(module, path);
    }
    out
}

/// Every module path a file's code uses (`crate::`, `super::`, `self::` and its child
/// modules' paths), made absolute from the file's own module path `at`; a `super` above
/// the crate root gives nothing.
pub fn used_paths(code: &str, at: &[String]) -> Vec<Vec<String>> {
    let children: BTreeSet<String> = code
        .lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let l = l
                .strip_prefix("pub ")
                .or(l.strip_prefix("pub(super) "))
                .unwrap_or(l);
            let l = l.strip_prefix("pub(crate) ").unwrap_or(l);
            l.strip_prefix("mod ")?.strip_suffix(';').map(str::to_owned)
        })
        .collect();
    let split = |p: &str| -> Vec<String> {
        p.split("::")
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let mut out: Vec<Vec<String>> = paths_after(code, "crate")
        .iter()
        .map(|p| split(p))
        .collect();
    for head in ["super", "self"] {
        for path in paths_after(code, head) {
            let mut base = at.to_vec();
            if head == "super" && base.pop().is_none() {
                continue;
            }
            let mut parts = split(&path).into_iter().peekable();
            let mut above_root = false;
            while parts.peek().is_some_and(|p| p == "super") {
                parts.next();
                above_root |= base.pop().is_none();
            }
            if !above_root {
                base.extend(parts);
                out.push(base);
            }
        }
    }
    for child in &children {
        for path in paths_after(code, child) {
            let mut full = at.to_vec();
            full.push(child.clone());
            full.extend(split(&path));
            out.push(full);
        }
    }
    out
}

/// The file holding what `path` names: the longest prefix of it that is a module file.
pub fn file_of<'a>(
    path: &[String],
    files: &'a BTreeMap<Vec<String>, PathBuf>,
) -> Option<&'a PathBuf> {
    (1..=path.len()).rev().find_map(|n| files.get(&path[..n]))
}
