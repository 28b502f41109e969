//! Hostile input for the loader: mangled versions of every example and bad config, and
//! arbitrary bytes, go through the real file loader and validation. Whatever comes in, the
//! answer is a plan or a list of located errors: never a panic, never an empty message.
//! (A coverage-guided `cargo fuzz` target needs a nightly toolchain, which the build machines
//! do not have; this property test runs in the normal test command instead.)

use std::path::{Path, PathBuf};

use proptest::prelude::*;

fn corpus() -> Vec<String> {
    let mut texts = Vec::new();
    for folder in ["examples", "tests/bad"] {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../config")
            .join(folder);
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .collect();
        files.sort();
        texts.extend(files.iter().map(|f| std::fs::read_to_string(f).unwrap()));
    }
    texts
}

/// How a config gets mangled: (line index, kind, replacement text).
fn mangle(text: &str, edits: &[(usize, u8, String)]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    for (at, kind, noise) in edits {
        if lines.is_empty() {
            lines.push(noise.clone());
            continue;
        }
        let i = at % lines.len();
        match kind % 5 {
            0 => {
                lines.remove(i);
            }
            1 => {
                let copy = lines[i].clone();
                lines.insert(i, copy);
            }
            2 => lines[i].push_str(noise),
            3 => {
                // Swap a value for noise: keeps the key, breaks the type or the range.
                if let Some((key, _)) = lines[i].split_once('=') {
                    lines[i] = format!("{key}= {noise}");
                }
            }
            _ => lines.insert(i, noise.clone()),
        }
    }
    lines.join("\n")
}

fn check(text: &str) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fuzz.toml");
    std::fs::write(&file, text).unwrap();
    if let Err(e) = ho_kinds::load_plan(&[&file]) {
        let shown = e.to_string();
        assert!(!shown.trim().is_empty(), "an empty error for:\n{text}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn mangled_configs_get_errors_not_panics(
        which in 0usize..64,
        edits in proptest::collection::vec(
            (0usize..200, 0u8..5, prop_oneof![
                Just("0".to_string()), Just("-1".to_string()), Just("\"\"".to_string()),
                Just("1e400".to_string()), Just("[[endpoints]]".to_string()),
                Just("\"0s\"".to_string()), Just("{}".to_string()), Just("\"*\"".to_string()),
                Just("\"255.255.255.256\"".to_string()), Just("18446744073709551616".to_string()),
                "[ -~]{0,24}",
            ]),
            1..6,
        ),
    ) {
        let corpus = corpus();
        let text = mangle(&corpus[which % corpus.len()], &edits);
        check(&text);
    }

    #[test]
    fn arbitrary_bytes_get_errors_not_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        check(&String::from_utf8_lossy(&bytes));
    }
}
