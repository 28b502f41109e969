//! The workspace's Rust sources, for the tests that read the code as text (the architecture
//! map, the crate rules, the engine's layers).

use std::path::{Path, PathBuf};

/// The folders holding the workspace's production crates and the binary.
pub const SOURCE_DIRS: [&str; 10] = [
    "src", "config", "engine", "dns", "sinks", "kube", "import", "kinds", "testkit", "loadtest",
];

/// Every `.rs` file below `dir`.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out
}
