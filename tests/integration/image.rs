//! The container image: `deploy/image/build.sh` builds it with Debian's buildah, umoci
//! unpacks it, and its entrypoint runs as the image's own user in the unpacked root
//! filesystem, mounted read-only as `readOnlyRootFilesystem` does, with only the config
//! mounted in as deploy/kubernetes mounts its ConfigMap. This machine refuses to start
//! containers (crun cannot set RLIMIT_NPROC), so the process is started with `chroot` in a
//! private mount namespace (`unshare`), sharing the host's loopback network; that needs
//! root, as CI has. The image is built from the test's binary rather than a release build,
//! which CI does not compile: the image's contents follow from the binary (`ldd`), not from
//! its profile. `.ci/test` installs buildah and umoci; the test fails, never skips, without.

use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::harness::{api_get, gateways, ip, loopback_ip, try_api_get, Check, TestConfig};
use crate::services::dig::dig1;

/// How long the unpacked image may take to answer `/healthz`, publish and answer DNS.
const LIMIT: Duration = Duration::from_secs(30);

/// What the test reads of the runtime bundle umoci writes (`config.json`).
#[derive(Deserialize)]
struct Bundle {
    process: BundleProcess,
}

#[derive(Deserialize)]
struct BundleProcess {
    args: Vec<String>,
    env: Vec<String>,
    user: BundleUser,
}

#[derive(Deserialize)]
struct BundleUser {
    uid: u32,
    gid: u32,
}

/// Runs `cmd` to success; its stdout.
pub(crate) fn run(cmd: &mut Command, what: &str) -> String {
    let out = cmd.output().unwrap_or_else(|e| {
        panic!("{what}: {e} (run the test command, bash .ci/test, which installs it)")
    });
    assert!(
        out.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Builds the image from the test's binary and unpacks it into `dir/bundle`.
fn build_and_unpack(dir: &Path) -> Bundle {
    let archive = dir.join("image.oci.tar");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/image/build.sh");
    run(
        Command::new("bash")
            .arg(script)
            .arg("--binary")
            .arg(env!("CARGO_BIN_EXE_health-orchestrator"))
            .arg("--out")
            .arg(&archive)
            .args(["--name", "health-orchestrator:test"]),
        "deploy/image/build.sh",
    );
    let layout = dir.join("layout");
    std::fs::create_dir(&layout).unwrap();
    run(
        Command::new("tar")
            .arg("-C")
            .arg(&layout)
            .arg("-xf")
            .arg(&archive),
        "tar",
    );
    let image = format!("{}:health-orchestrator:test", layout.display());
    run(
        Command::new("umoci")
            .args(["unpack", "--image", &image])
            .arg(dir.join("bundle")),
        "umoci unpack",
    );
    serde_json::from_slice(&std::fs::read(dir.join("bundle/config.json")).unwrap()).unwrap()
}

/// The image's process in its own process group (so the test can end it whatever user it
/// switched to), on a read-only root with `/proc` and the config directory mounted.
/// The image's process with `config` mounted where the manifests mount the ConfigMap, its
/// environment the image's plus `env` (what a Deployment's `env` adds).
fn start(dir: &Path, bundle: &Bundle, config: &Path, env: &[String]) -> Group {
    let rootfs = dir.join("bundle/rootfs");
    std::fs::create_dir_all(rootfs.join("proc")).unwrap();
    let script = r#"
        set -e
        root="$1" config="$2"; shift 2
        mount --bind "$root" "$root"
        mount -o remount,bind,ro "$root"
        mount -t proc proc "$root/proc"
        mount --bind -o ro "$config" "$root/etc/health-orchestrator"
        exec env -i "$@"
    "#;
    let mut cmd = Command::new("unshare");
    cmd.args([
        "--mount",
        "--propagation",
        "private",
        "--",
        "sh",
        "-c",
        script,
        "sh",
    ])
    .arg(&rootfs)
    .arg(config)
    .args(&bundle.process.env)
    .arg("RUST_LOG=info")
    .args(env)
    .arg("chroot")
    .arg(format!(
        "--userspec={}:{}",
        bundle.process.user.uid, bundle.process.user.gid
    ))
    .arg(&rootfs)
    .args(&bundle.process.args)
    .process_group(0)
    .stdout(Stdio::null())
    .stderr(std::fs::File::create(dir.join("image.log")).unwrap());
    Group(cmd.spawn().expect("unshare (util-linux) is missing"))
}

/// A process group, killed whole when dropped.
struct Group(std::process::Child);

impl Drop for Group {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .args(["-c", &format!("kill -KILL -- -{}", self.0.id())])
            .status();
        let _ = self.0.wait();
    }
}

#[actix_rt::test]
async fn the_image_runs_non_root_on_a_read_only_root_and_serves() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = build_and_unpack(dir.path());
    assert_eq!(
        (bundle.process.user.uid, bundle.process.user.gid),
        (65532, 65532),
        "the image runs as the non-root user deploy/kubernetes names"
    );
    assert_eq!(
        bundle.process.args,
        [
            "/usr/local/bin/health-orchestrator",
            "run",
            "--config",
            "/etc/health-orchestrator"
        ],
        "the mounted ConfigMap: its config.toml, else its config.yaml"
    );

    let gws = gateways(1);
    let gw = &gws[0];
    // The ports the image exposes, on loopback addresses of the test's own.
    let api = SocketAddr::new(loopback_ip().into(), 8080);
    let dns = SocketAddr::new(loopback_ip().into(), 5353);
    let config_dir = dir.path().join("config");
    std::fs::create_dir(&config_dir).unwrap();
    let config = TestConfig::new(&Check::FAST, &[gw])
        .set("api.listen", api.to_string())
        .with(&format!(
            "[sinks.dns]\nkind = \"dns_server\"\nlisten = [\"{dns}\"]\nzones = [\"example.org\"]\n\n\
             [[tenants]]\nname = \"a\"\ndomains = [\"api.example.org\"]\nsinks = [\"dns\"]\n"
        ));
    std::fs::write(config_dir.join("config.toml"), config.render()).unwrap();
    let mut process = start(dir.path(), &bundle, &config_dir, &[]);

    let log = || std::fs::read_to_string(dir.path().join("image.log")).unwrap_or_default();
    let start = Instant::now();
    while try_api_get(api, "/healthz").await.is_none() {
        if let Some(status) = process.0.try_wait().unwrap() {
            panic!("the image's process exited ({status}):\n{}", log());
        }
        assert!(start.elapsed() < LIMIT, "no /healthz:\n{}", log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // It probes, decides and serves the verdict: sockets, clock and DNS work in the image.
    loop {
        let answer = dig1(dns, &["api.example.org", "A"]).await;
        if answer.status == "NOERROR" && answer.sorted() == [ip(gw)] {
            break;
        }
        assert!(start.elapsed() < LIMIT, "{answer:?}\n{}", log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(api_get(api, "/status").await.contains("gw-1"));
    assert!(
        !log().contains("ERROR"),
        "the image's process logged errors:\n{}",
        log()
    );
}

/// The OpenOva spec's own Deployment and ConfigMap start the image as they are: no arguments (the
/// image's), the ConfigMap's `config.yaml` in OpenOva's shape mounted where the Deployment
/// mounts it, read through the importer at load; the spec's liveness path answers and its
/// CoreDNS ConfigMap gets each tenant's hosts file. Two things differ, for the test's sake
/// only: the nodes' addresses are loopback gateways of the test's own (traffic never leaves
/// loopback), and the API listens on a loopback address of the test's (`HO_API__LISTEN`);
/// the Kubernetes API is the test server (no real one can run here), reached through
/// `KUBECONFIG` where the spec's pod would use its service account.
#[actix_rt::test]
async fn seed_000s_deployment_and_configmap_start_the_image() {
    use crate::fakes::kube_api::KubeApi;
    let dir = tempfile::tempdir().unwrap();
    let bundle = build_and_unpack(dir.path());
    let seed = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/seed-000");
    let manifests = std::fs::read_to_string(seed.join("manifests.yaml")).unwrap();
    let deployment: serde_yaml::Value = serde_yaml::Deserializer::from_str(&manifests)
        .map(|d| serde_yaml::Value::deserialize(d).unwrap())
        .find(|d| d["kind"] == "Deployment")
        .unwrap();
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert!(
        container.get("args").is_none() && container.get("command").is_none(),
        "the seed runs the image's own command"
    );
    assert_eq!(
        container["volumeMounts"][0]["mountPath"], "/etc/health-orchestrator",
        "start() mounts the config where the seed does"
    );
    let env: Vec<String> = container["env"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|e| {
            format!(
                "{}={}",
                e["name"].as_str().unwrap(),
                e["value"].as_str().unwrap()
            )
        })
        .collect();

    let gws = gateways(3);
    let mut config = std::fs::read_to_string(seed.join("config.yaml")).unwrap();
    for (i, gw) in gws.iter().enumerate() {
        config = config.replace(&format!("10.0.0.{}:15021", i + 1), &gw.addr().to_string());
        config = config.replace(&format!("10.0.0.{}", i + 1), &ip(gw));
    }
    assert!(!config.contains("10.0.0."), "{config}");
    let kube = KubeApi::default();
    kube.put(
        "kube-system",
        "coredns-custom",
        &[("Corefile", ".:53 {}\n")],
    );
    let kube_addr = kube.start().await;
    let config_dir = dir.path().join("config");
    std::fs::create_dir(&config_dir).unwrap();
    std::fs::write(config_dir.join("config.yaml"), &config).unwrap();
    KubeApi::kubeconfig(kube_addr, &config_dir);
    let api = SocketAddr::new(loopback_ip().into(), 8080);
    let mut env = env;
    env.push(format!("HO_API__LISTEN={api}"));
    env.push("KUBECONFIG=/etc/health-orchestrator/kubeconfig".into());
    let mut process = start(dir.path(), &bundle, &config_dir, &env);

    let log = || std::fs::read_to_string(dir.path().join("image.log")).unwrap_or_default();
    let start = Instant::now();
    // The spec's liveness and readiness path.
    while try_api_get(api, "/health").await.is_none() {
        if let Some(status) = process.0.try_wait().unwrap() {
            panic!("the image's process exited ({status}):\n{}", log());
        }
        assert!(start.elapsed() < LIMIT, "no /health:\n{}", log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut all: Vec<String> = gws.iter().map(ip).collect();
    all.sort();
    loop {
        let data = kube
            .data("kube-system", "coredns-custom")
            .unwrap_or_default();
        let published = |key: &str| {
            let mut got = crate::harness::addresses(data.get(key).map_or("", String::as_str));
            got.sort();
            got == all
        };
        if published("tenant-a.hosts") && published("tenant-b.hosts") {
            break;
        }
        assert!(start.elapsed() < LIMIT, "{data:?}\n{}", log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // What the import could not carry over is said at start.
    assert!(log().contains("config.yaml: TO DO"), "{}", log());
}

/// `deploy/release.sh` makes a release only from its tag: refused without the tag `vX.Y.Z`,
/// or for a version Cargo.toml does not carry; from the tagged checkout, the binary
/// tarball, the image archive and the rendered manifests naming that version's image, with
/// checksums that verify. Run on a clone of the repository (a release is made from what is
/// committed), with the test's binary standing for the optimised one.
#[test]
fn a_release_is_made_from_its_tag_with_tarball_image_and_manifests() {
    let dir = tempfile::tempdir().unwrap();
    let clone = dir.path().join("repo");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    run(
        Command::new("git")
            .args(["clone", "-q"])
            .arg(repo)
            .arg(&clone),
        "git clone",
    );
    let version = run(
        Command::new("bash").args(["-c", "sed -n '/^\\[workspace.package\\]/,/^\\[/ s/^version = \"\\(.*\\)\"/\\1/p' Cargo.toml"]).current_dir(&clone),
        "the version",
    )
    .trim()
    .to_owned();
    // A release's binary carries its dependency list (`cargo auditable`'s `.dep-v0`
    // section): the test's binary gets one, as `objcopy` adds a section; without it the
    // release is refused.
    let plain = Path::new(env!("CARGO_BIN_EXE_health-orchestrator"));
    let audited = dir.path().join("health-orchestrator");
    let deps = dir.path().join("deps.json");
    std::fs::write(&deps, "{\"packages\":[]}").unwrap();
    run(
        Command::new("objcopy")
            .arg(format!("--add-section=.dep-v0={}", deps.display()))
            .arg(plain)
            .arg(&audited),
        "objcopy",
    );
    let release_of = |v: &str, binary: &Path| {
        Command::new("bash")
            .arg(clone.join("deploy/release.sh"))
            .arg(v)
            .arg("--binary")
            .arg(binary)
            .arg("--out")
            .arg(dir.path().join("out"))
            .output()
            .unwrap()
    };
    let release = |v: &str| release_of(v, &audited);
    let refused = release(&version);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains(&format!("no git tag v{version}")));
    run(
        Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@example.org",
                "tag",
                "-a",
            ])
            .arg(format!("v{version}"))
            .args(["-m", "release"])
            .current_dir(&clone),
        "git tag",
    );
    let other = release("99.0.0");
    assert!(String::from_utf8_lossy(&other.stderr).contains("Cargo.toml's workspace version is"));

    let unaudited = release_of(&version, plain);
    assert!(
        String::from_utf8_lossy(&unaudited.stderr).contains("carries no dependency list"),
        "{}",
        String::from_utf8_lossy(&unaudited.stderr)
    );
    let made = release(&version);
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let out = dir.path().join("out");
    let name = format!("health-orchestrator-{version}");
    let listing = run(
        Command::new("tar")
            .arg("-tzf")
            .arg(out.join(format!("{name}-x86_64-linux.tar.gz"))),
        "tar",
    );
    for file in [
        "bin/health-orchestrator",
        "README.md",
        "CHANGELOG.md",
        "config/minimal.toml",
        "docs/kubernetes.md",
    ] {
        assert!(
            listing.contains(&format!("{name}/{file}")),
            "{file}:\n{listing}"
        );
    }
    let manifests = std::fs::read_to_string(out.join(format!("{name}-kubernetes.yaml"))).unwrap();
    assert!(manifests.contains(&format!(
        "image: ghcr.io/health-orchestrator/health-orchestrator:{version}"
    )));
    assert!(out.join(format!("{name}.oci.tar")).exists());
    run(
        Command::new("sha256sum")
            .args(["-c", "SHA256SUMS"])
            .current_dir(&out),
        "sha256sum -c",
    );
}
