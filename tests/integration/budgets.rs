//! The size budgets, across every crate: a source file holds at most 600 lines and a
//! function at most 60 (from its `fn` line to its closing brace), so each can be read
//! whole. Test code is outside the budget (files named `tests.rs` or `*_tests.rs`, files
//! under `tests/`, and everything after a file's `#[cfg(test)]`). What was over the budget
//! when the budget became a test is listed in `tests/budget-exceptions.txt` with its size
//! then: an entry may shrink or leave the list (the test says when it should), never grow,
//! and nothing new may join it.

use std::collections::BTreeMap;
use std::path::Path;

use crate::harness::{rust_files, SOURCE_DIRS};

const FILE_LINES: usize = 600;
const FN_LINES: usize = 60;

/// Every file and function over its budget, keyed `file PATH` / `fn PATH NAME` (the
/// n-th function of that name in the file gets `#n` from the second on), with its lines.
fn over_budget(root: &Path) -> BTreeMap<String, usize> {
    let mut over = BTreeMap::new();
    for dir in SOURCE_DIRS {
        for path in rust_files(&root.join(dir)) {
            let rel = path.strip_prefix(root).unwrap().display().to_string();
            let name = path.file_name().unwrap().to_string_lossy();
            if name == "tests.rs" || name.ends_with("_tests.rs") || rel.contains("/tests/") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            let end = (lines.iter())
                .position(|l| l.trim() == "#[cfg(test)]")
                .unwrap_or(lines.len());
            if end > FILE_LINES {
                over.insert(format!("file {rel}"), end);
            }
            let mut seen: BTreeMap<String, usize> = BTreeMap::new();
            for (name, length) in functions(&lines[..end]) {
                let n = seen.entry(name.clone()).or_default();
                *n += 1;
                if length > FN_LINES {
                    let suffix = if *n > 1 {
                        format!("#{n}")
                    } else {
                        String::new()
                    };
                    over.insert(format!("fn {rel} {name}{suffix}"), length);
                }
            }
        }
    }
    over
}

/// Each function with a body in `lines` (as rustfmt lays them out: the closing brace at
/// the `fn` line's indent): its name and its lines.
fn functions(lines: &[&str]) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(name) = fn_name(line) else { continue };
        let indent = line.len() - line.trim_start().len();
        let close = format!("{}}}", " ".repeat(indent));
        // A declaration without a body ends with `;` before any `{` opens.
        let mut body = false;
        for l in &lines[i..] {
            if l.trim_end().ends_with(';') && !l.contains('{') && !body {
                break;
            }
            if l.contains('{') {
                body = true;
                break;
            }
        }
        if !body {
            continue;
        }
        if line.contains('{') && line.trim_end().ends_with('}') {
            out.push((name, 1));
            continue;
        }
        if let Some(end) = (lines[i..].iter())
            .position(|l| l.trim_end() == close || l.trim_end().starts_with(&format!("{close} ")))
        {
            out.push((name, end + 1));
        }
    }
    out
}

/// The name of the function a line starts, if it starts one.
fn fn_name(line: &str) -> Option<String> {
    let mut rest = line.trim_start();
    if rest.starts_with("//") {
        return None;
    }
    for prefix in [
        "pub(crate) ",
        "pub(super) ",
        "pub(in crate::tracker) ",
        "pub ",
    ] {
        if let Some(r) = rest.strip_prefix(prefix) {
            rest = r;
            break;
        }
    }
    if rest.starts_with("pub(") {
        rest = rest.split_once(") ")?.1;
    }
    for qualifier in ["const ", "async ", "unsafe ", "extern \"C\" "] {
        rest = rest.strip_prefix(qualifier).unwrap_or(rest);
    }
    let name = rest.strip_prefix("fn ")?;
    let end = name.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    Some(name[..end].to_owned())
}

#[test]
fn files_and_functions_keep_their_budgets_and_exceptions_only_shrink() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let listed_text = std::fs::read_to_string(root.join("tests/budget-exceptions.txt")).unwrap();
    let listed: BTreeMap<String, usize> = (listed_text.lines())
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (key, n) = l.rsplit_once(' ').unwrap();
            (key.to_owned(), n.parse().unwrap())
        })
        .collect();
    let over = over_budget(root);
    let mut problems = Vec::new();
    for (key, &lines) in &over {
        match listed.get(key) {
            None => problems.push(format!("{key}: {lines} lines, over the budget")),
            Some(&was) if lines > was => {
                problems.push(format!("{key}: grew from {was} to {lines} lines"))
            }
            Some(_) => {}
        }
    }
    for (key, was) in &listed {
        if !over.contains_key(key) {
            problems.push(format!(
                "{key} (was {was}) is within the budget now: take it off the list"
            ));
        }
    }
    let list: String = over.iter().map(|(k, n)| format!("{k} {n}\n")).collect();
    assert!(
        problems.is_empty(),
        "{}\n\nfiles over {FILE_LINES} lines and functions over {FN_LINES} now:\n{list}",
        problems.join("\n")
    );
}

#[test]
fn the_scanner_finds_functions_and_their_lengths() {
    let text = "pub(crate) fn short() {\n    1\n}\n\n    async fn inner(\n        a: u8,\n    ) -> u8 {\n        a\n    }\n    fn declared(&self);\nconst fn c() -> u8 { 1 }\n";
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        functions(&lines),
        [
            ("short".to_owned(), 3),
            ("inner".to_owned(), 5),
            ("c".to_owned(), 1)
        ]
    );
}
