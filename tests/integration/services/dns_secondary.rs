//! Real secondary DNS servers of `example.org` transferring it from the embedded server:
//! Debian's BIND 9 (`named`), Knot DNS (`knotd`) and NSD (`nsd`), each with a TSIG key
//! made by `tsig-keygen`, taking NOTIFY from the primary, in a folder of its own.
//! `.ci/test` installs `bind9`, `knot` and `nsd`; a test fails (never skips) when they are
//! missing.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The zone every secondary transfers.
pub const ZONE: &str = "example.org";
/// The key's name.
pub const KEY: &str = "ho-xfr";

/// Which server.
#[derive(Clone, Copy, Debug)]
pub enum Flavor {
    /// BIND 9 `named`.
    Bind,
    /// Knot DNS `knotd`.
    Knot,
    /// NLnet Labs' NSD.
    Nsd,
}

/// A running secondary; killed on drop.
pub struct Secondary {
    /// Where it answers (UDP and TCP).
    pub addr: SocketAddr,
    dir: tempfile::TempDir,
    child: Child,
}

impl Secondary {
    /// Starts `flavor` on 127.0.0.1:`port` as a secondary of `example.org` transferring
    /// from `primary`, with the key in `key_file` (a `tsig-keygen` key statement); it
    /// takes NOTIFY from any loopback address signed with the key.
    pub fn start_on(flavor: Flavor, port: u16, primary: SocketAddr, key_file: &Path) -> Secondary {
        let binary = match flavor {
            Flavor::Bind => "/usr/sbin/named",
            Flavor::Knot => "/usr/sbin/knotd",
            Flavor::Nsd => "/usr/sbin/nsd",
        };
        assert!(
            Path::new(binary).exists(),
            "{binary} is missing: run the test command (bash .ci/test), which installs bind9, knot and nsd"
        );
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        let addr = SocketAddr::new(Ipv4Addr::LOCALHOST.into(), port);
        let (port, ip) = (addr.port(), addr.ip());
        let (pip, pport) = (primary.ip(), primary.port());
        let secret = secret_of(key_file);
        let (file, text, mut cmd) = match flavor {
            Flavor::Bind => (
                "named.conf",
                format!(
                    "options {{\n  directory \"{d}\";\n  listen-on port {port} {{ {ip}; }};\n  listen-on-v6 {{ none; }};\n  pid-file \"{d}/named.pid\";\n  session-keyfile \"{d}/session.key\";\n  managed-keys-directory \"{d}\";\n  recursion no;\n  dnssec-validation no;\n  allow-query {{ any; }};\n  notify no;\n}};\ncontrols {{ }};\nkey \"{KEY}\" {{ algorithm hmac-sha256; secret \"{secret}\"; }};\nserver {pip} {{ keys {{ \"{KEY}\"; }}; }};\nzone \"{ZONE}\" {{ type secondary; primaries {{ {pip} port {pport} key \"{KEY}\"; }}; file \"{d}/{ZONE}.db\"; allow-notify {{ 127.0.0.0/8; }}; }};\n"
                ),
                {
                    let mut c = Command::new(binary);
                    c.arg("-g").arg("-c").arg(dir.path().join("named.conf"));
                    c
                },
            ),
            Flavor::Knot => (
                "knot.conf",
                format!(
                    "server:\n    listen: {ip}@{port}\n    rundir: {d}\ndatabase:\n    storage: {d}/db\nkey:\n  - id: {KEY}\n    algorithm: hmac-sha256\n    secret: {secret}\nremote:\n  - id: primary\n    address: {pip}@{pport}\n    key: {KEY}\nacl:\n  - id: notify\n    address: 127.0.0.0/8\n    key: {KEY}\n    action: notify\nzone:\n  - domain: {ZONE}\n    storage: {d}\n    file: {ZONE}.zone\n    master: primary\n    acl: notify\n    zonefile-sync: -1\nlog:\n  - target: stderr\n    any: info\n"
                ),
                {
                    let mut c = Command::new(binary);
                    c.arg("-c").arg(dir.path().join("knot.conf"));
                    c
                },
            ),
            Flavor::Nsd => (
                "nsd.conf",
                format!(
                    "server:\n  port: {port}\n  ip-address: {ip}\n  zonesdir: \"{d}\"\n  database: \"\"\n  pidfile: \"{d}/nsd.pid\"\n  xfrdfile: \"{d}/xfrd.state\"\n  zonelistfile: \"{d}/zone.list\"\n  username: \"\"\n  chroot: \"\"\n  verbosity: 2\n  logfile: \"{d}/server.log\"\nremote-control:\n  control-enable: no\nkey:\n  name: {KEY}\n  algorithm: hmac-sha256\n  secret: \"{secret}\"\nzone:\n  name: {ZONE}\n  zonefile: \"{ZONE}.zone\"\n  allow-notify: 127.0.0.0/8 {KEY}\n  request-xfr: {pip}@{pport} {KEY}\n"
                ),
                {
                    let mut c = Command::new(binary);
                    c.arg("-d").arg("-c").arg(dir.path().join("nsd.conf"));
                    c
                },
            ),
        };
        std::fs::create_dir_all(dir.path().join("db")).unwrap();
        std::fs::write(dir.path().join(file), text).unwrap();
        let log = std::fs::File::create(dir.path().join("server.log")).unwrap();
        let child = cmd.stdout(Stdio::null()).stderr(log).spawn().unwrap();
        Secondary { addr, dir, child }
    }

    /// What the server logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }
}

/// The base64 secret of a `tsig-keygen` key statement.
fn secret_of(key_file: &Path) -> String {
    let text = std::fs::read_to_string(key_file).unwrap();
    text.split('"').nth(3).unwrap().to_owned()
}

/// A `tsig-keygen` key named [`KEY`] written to `dir/key.conf`.
pub fn make_key(dir: &Path) -> PathBuf {
    let out = Command::new("/usr/sbin/tsig-keygen")
        .args(["-a", "hmac-sha256", KEY])
        .output()
        .expect(
            "tsig-keygen is missing: run the test command (bash .ci/test), which installs bind9",
        );
    assert!(out.status.success());
    let path = dir.join("key.conf");
    std::fs::write(&path, &out.stdout).unwrap();
    path
}

impl Drop for Secondary {
    /// SIGTERM first (NSD then stops the processes it forked), SIGKILL after 2 s.
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        for _ in 0..100 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
