//! `deploy/release.sh --snapshot` with the test's binary given (CI compiles no dist build):
//! the artifacts it makes, checked against what deploy/README.md says a bare-metal and a
//! Kubernetes install need, against the repository's own files, and the SBOM against
//! `Cargo.lock`; and the glibc floor README.md states against the symbol versions the
//! binary asks for and the C library its image carries. Needs kubectl, buildah (the image)
//! and `cyclonedx-python-lib` in the test tools' virtualenv, which `.ci/test` installs; the
//! test fails, never skips, without them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cli::repo;
use crate::harness::python_tool;
use crate::image::run;

const IMAGE_REPO: &str = "ghcr.io/health-orchestrator/health-orchestrator";

fn git(args: &[&str]) -> String {
    run(
        Command::new("git").arg("-C").arg(repo(".")).args(args),
        "git",
    )
    .trim()
    .to_owned()
}

/// The snapshot's version as the script should name it: Cargo.toml's, the short commit, and
/// `.dirty` while the work tree has changes.
fn snapshot_version() -> String {
    let dirty = if git(&["status", "--porcelain"]).is_empty() {
        ""
    } else {
        ".dirty"
    };
    format!(
        "{}-snapshot.{}{dirty}",
        env!("CARGO_PKG_VERSION"),
        git(&["rev-parse", "--short", "HEAD"])
    )
}

/// The paths listed under deploy/README.md's "... install needs:" lines.
fn needed_by_installs() -> Vec<String> {
    let readme = std::fs::read_to_string(repo("deploy/README.md")).unwrap();
    let mut needed = Vec::new();
    let mut listing = false;
    for line in readme.lines() {
        if line.starts_with("A ") && line.ends_with("install needs:") {
            listing = true;
        } else if let Some(item) = line.strip_prefix("- `").filter(|_| listing) {
            needed.push(item.trim_end_matches('`').to_owned());
        } else {
            listing = false;
        }
    }
    needed
}

/// Every file under `dir`, relative to it.
fn files_under(dir: &Path) -> BTreeSet<String> {
    let mut files = BTreeSet::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(next) = todo.pop() {
        for entry in std::fs::read_dir(&next).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else {
                files.insert(path.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    files
}

/// The repository's files an install reads (tracked or new, not ignored): what the tarball
/// must carry unchanged, at the same paths.
fn shipped_from_the_repository() -> Vec<String> {
    let listed = git(&[
        "ls-files",
        "--cached",
        "--others",
        "--exclude-standard",
        "--",
        "docs",
        "config/examples",
        "deploy",
    ]);
    listed
        .lines()
        .filter(|f| repo(f).is_file())
        .filter(|f| {
            !(f.starts_with("deploy/image/") || *f == "deploy/release.sh" || *f == "deploy/sbom.py")
        })
        .map(|f| {
            f.strip_prefix("config/examples/")
                .map_or(f.to_owned(), |c| format!("config/{c}"))
        })
        .collect()
}

#[test]
fn a_snapshot_release_carries_what_installs_need() {
    let out = tempfile::tempdir().unwrap();
    run(
        Command::new("bash")
            .arg(repo("deploy/release.sh"))
            .args([
                "--snapshot",
                "--binary",
                env!("CARGO_BIN_EXE_health-orchestrator"),
                "--out",
            ])
            .arg(out.path()),
        "deploy/release.sh --snapshot",
    );
    let version = snapshot_version();
    let name = format!("health-orchestrator-{version}");
    let sums = run(
        Command::new("sha256sum")
            .args(["-c", "SHA256SUMS"])
            .current_dir(out.path()),
        "sha256sum -c",
    );
    for artifact in [
        format!("{name}-x86_64-linux.tar.gz"),
        format!("{name}.oci.tar"),
        format!("{name}-kubernetes.yaml"),
        format!("{name}.cdx.json"),
    ] {
        assert!(sums.contains(&format!("{artifact}: OK")), "{sums}");
    }
    let oci = run(
        Command::new("tar")
            .arg("-tf")
            .arg(out.path().join(format!("{name}.oci.tar"))),
        "tar -t",
    );
    assert!(oci.lines().any(|l| l == "index.json"), "{oci}");

    let unpacked = tempfile::tempdir().unwrap();
    run(
        Command::new("tar")
            .arg("-C")
            .arg(unpacked.path())
            .arg("-xzf")
            .arg(out.path().join(format!("{name}-x86_64-linux.tar.gz"))),
        "tar -x",
    );
    let root = unpacked.path().join(&name);
    let files = files_under(&root);
    eprintln!("the tarball holds {} files", files.len());
    the_tarball_holds_what_installs_need(&root, &files, &version);
    the_tarball_renders_and_runs(&root, out.path(), &name, &version);
    let sbom = std::fs::read_to_string(out.path().join(format!("{name}.cdx.json"))).unwrap();
    assert_eq!(
        sbom,
        std::fs::read_to_string(root.join("sbom.cdx.json")).unwrap()
    );
    the_sbom_lists_every_locked_package(&sbom, out.path());
}

fn the_tarball_holds_what_installs_need(root: &Path, files: &BTreeSet<String>, version: &str) {
    let needed = needed_by_installs();
    assert!(
        needed.len() >= 20,
        "deploy/README.md lists what installs need: {needed:?}"
    );
    let missing: Vec<&String> = needed.iter().filter(|f| !files.contains(*f)).collect();
    assert!(missing.is_empty(), "not in the tarball: {missing:?}");
    for file in shipped_from_the_repository() {
        let source = match file.strip_prefix("config/") {
            Some(example) => repo(&format!("config/examples/{example}")),
            None => repo(&file),
        };
        let kept = std::fs::read(&source).unwrap();
        let shipped = std::fs::read(root.join(&file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        if file == "deploy/kubernetes/kustomization.yaml" {
            // The one change: the manifests name this version's image.
            let tail = format!("images:\n  - name: {IMAGE_REPO}\n    newTag: \"{version}\"\n");
            assert_eq!(shipped, [kept, tail.into_bytes()].concat(), "{file}");
        } else {
            assert!(shipped == kept, "{file} differs from the repository's");
        }
    }
    for file in [
        "bin/health-orchestrator",
        "README.md",
        "CHANGELOG.md",
        "sbom.cdx.json",
    ] {
        assert!(files.contains(file), "no {file}");
    }
}

/// Every kustomization in the tarball renders on its own files, naming this version's image;
/// the rendered manifests are the tarball's base; the tarball's binary checks its examples.
fn the_tarball_renders_and_runs(root: &Path, out: &Path, name: &str, version: &str) {
    let image = format!("image: {IMAGE_REPO}:{version}\n");
    for dir in [
        "deploy/kubernetes",
        "deploy/external-dns",
        "deploy/ring",
        "deploy/kubernetes/monitoring",
    ] {
        let rendered = run(
            Command::new("kubectl").arg("kustomize").arg(root.join(dir)),
            "kubectl kustomize",
        );
        if dir != "deploy/kubernetes/monitoring" {
            assert!(rendered.contains(&image), "{dir} does not name {image}");
        }
        if dir == "deploy/kubernetes" {
            let kept =
                std::fs::read_to_string(out.join(format!("{name}-kubernetes.yaml"))).unwrap();
            assert!(
                kept == rendered,
                "{name}-kubernetes.yaml is not the tarball's deploy/kubernetes"
            );
        }
    }
    let binary = root.join("bin/health-orchestrator");
    for config in ["config/minimal.toml", "config/external-dns.toml"] {
        run(
            Command::new(&binary)
                .args(["check-config", "--config"])
                .arg(root.join(config)),
            "the tarball's check-config",
        );
    }
}

/// Every package of Cargo.lock (read here with `toml`, not by the script) is the SBOM's root
/// or one of its components, once; the document is CycloneDX 1.5 by the schema
/// `cyclonedx-python-lib` ships.
fn the_sbom_lists_every_locked_package(sbom: &str, dir: &Path) {
    let lock: toml::Table = std::fs::read_to_string(repo("Cargo.lock"))
        .unwrap()
        .parse()
        .unwrap();
    let mut locked: Vec<(String, String)> = lock["package"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_owned(),
                p["version"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    locked.sort();
    let bom: serde_json::Value = serde_json::from_str(sbom).unwrap();
    let entry = |c: &serde_json::Value| {
        (
            c["name"].as_str().unwrap().to_owned(),
            c["version"].as_str().unwrap().to_owned(),
        )
    };
    let mut listed: Vec<(String, String)> = bom["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(entry)
        .collect();
    listed.push(entry(&bom["metadata"]["component"]));
    listed.sort();
    eprintln!(
        "the SBOM lists {} components and the root; Cargo.lock holds {} packages",
        listed.len() - 1,
        locked.len()
    );
    assert!(listed == locked, "the SBOM and Cargo.lock differ");
    assert_eq!(
        bom["metadata"]["properties"][0]["value"],
        git(&["rev-parse", "HEAD"])
    );
    valid_cyclonedx_1_5(sbom, dir);
}

/// `sbom` validates against the CycloneDX 1.5 schema `cyclonedx-python-lib` ships.
fn valid_cyclonedx_1_5(sbom: &str, dir: &Path) {
    let file = dir.join("checked.cdx.json");
    std::fs::write(&file, sbom).unwrap();
    let python = PathBuf::from(python_tool("KUBERNETES_VALIDATE", "kubernetes-validate"))
        .with_file_name("python");
    run(
        Command::new(&python)
            .args([
                "-c",
                "import sys\n\
                 from cyclonedx.schema import SchemaVersion\n\
                 from cyclonedx.validation.json import JsonStrictValidator\n\
                 error = JsonStrictValidator(SchemaVersion.V1_5).validate_str(open(sys.argv[1]).read())\n\
                 sys.exit(str(error) if error else 0)",
            ])
            .arg(&file),
        "the SBOM's CycloneDX 1.5 validation",
    );
}

/// The highest `GLIBC_x.y` among `versions` (objdump's text).
fn highest_glibc(text: &str) -> (u32, u32) {
    text.split("GLIBC_")
        .skip(1)
        .filter_map(|rest| {
            let version: String = rest
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            let mut parts = version.split('.').map(|p| p.parse::<u32>());
            match (parts.next(), parts.next()) {
                (Some(Ok(major)), Some(Ok(minor))) => Some((major, minor)),
                _ => None,
            }
        })
        .max()
        .expect("GLIBC_ versions")
}

/// README.md's "glibc X.Y or newer", the floor it states.
fn stated_floor() -> (u32, u32) {
    let readme = std::fs::read_to_string(repo("README.md")).unwrap();
    let at = readme
        .find(" or newer")
        .and_then(|end| readme[..end].rfind("glibc ").map(|start| (start, end)));
    let (start, end) = at.expect("README.md states the floor as \"glibc X.Y or newer\"");
    highest_glibc(&format!("GLIBC_{}", &readme[start + 6..end]))
}

/// The image has no base image: it carries the C library of the machine that built it
/// (`deploy/image/build.sh` copies what `ldd` names), so that is the one checked.
#[test]
fn the_glibc_floor_is_the_one_readme_states() {
    let binary = env!("CARGO_BIN_EXE_health-orchestrator");
    let needed = highest_glibc(&run(
        Command::new("objdump").args(["-T", binary]),
        "objdump -T",
    ));
    assert_eq!(
        needed,
        stated_floor(),
        "the binary needs glibc {needed:?}: state it in README.md"
    );
    let ldd = run(Command::new("ldd").arg(binary), "ldd");
    let libc = ldd
        .lines()
        .find_map(|l| l.trim().strip_prefix("libc.so.6 => "))
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the binary links libc.so.6");
    let defined = highest_glibc(&run(
        Command::new("objdump").args(["-p", libc]),
        "objdump -p",
    ));
    assert!(
        defined >= needed,
        "the image's C library ({libc}, glibc {defined:?}) is older than {needed:?}"
    );
}
