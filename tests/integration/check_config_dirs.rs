//! `check-config` (and `run`, which checks the same way before it starts) refuses a
//! hosts_file sink whose `dir` could never be made, at that sink's field, instead of `run`
//! retrying `cannot create directory` for ever; a folder that exists or can be made passes.

use crate::harness::binary;

/// A config whose only sink is a hosts_file sink writing into `dir`.
fn config_with_dir(dir: &std::path::Path) -> String {
    format!(
        "[[endpoints]]\nname = \"a\"\naddress = \"192.0.2.1\"\n\
         [[tenants]]\nname = \"t\"\ndomains = [\"t.example\"]\nsinks = [\"local\"]\n\
         [sinks.local]\nkind = \"hosts_file\"\ndir = {:?}\n",
        dir.display().to_string()
    )
}

#[test]
fn a_hosts_file_dir_that_cannot_be_made_is_refused_at_its_field() {
    let scratch = tempfile::tempdir().unwrap();
    let file = scratch.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let config = scratch.path().join("config.toml");
    // (dir, whether it can be used): under /proc nothing can be made even by root; below a
    // file neither; an existing folder and one to be made below it can.
    let cases = [
        (std::path::PathBuf::from("/proc/ho-hosts"), false),
        (file.join("hosts"), false),
        (scratch.path().to_path_buf(), true),
        (scratch.path().join("new/deeper"), true),
    ];
    for (dir, usable) in cases {
        std::fs::write(&config, config_with_dir(&dir)).unwrap();
        for command in ["check-config", "run"] {
            if usable && command == "run" {
                continue;
            }
            let out = binary()
                .args([command, "--config"])
                .arg(&config)
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            if usable {
                assert_eq!(out.status.code(), Some(0), "{}: {stderr}", dir.display());
                continue;
            }
            assert_eq!(
                out.status.code(),
                Some(2),
                "{command} {}: {stderr}",
                dir.display()
            );
            let first = stderr.lines().next().unwrap_or_default();
            assert!(
                first.starts_with("sinks.local.dir: "),
                "{command}: {stderr}"
            );
        }
    }
    assert!(
        !scratch.path().join("new").exists(),
        "checking made nothing"
    );
}
