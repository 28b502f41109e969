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

fn run(cmd: &mut Command, what: &str) -> String {
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
fn start(dir: &Path, bundle: &Bundle, config: &Path) -> Group {
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
            "/etc/health-orchestrator/config.toml"
        ],
        "entrypoint and arguments as deploy/kubernetes passes them"
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
    let mut process = start(dir.path(), &bundle, &config_dir);

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
