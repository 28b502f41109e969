//! Real primary DNS servers that take RFC 2136 updates signed with TSIG: Debian's BIND 9
//! (`named`) and Knot DNS (`knotd`), each with the zone `tenant-a.io` holding one foreign
//! name (`foreign.tenant-a.io A 192.0.2.99`, written by "someone else"), a key made by
//! `tsig-keygen`, and a folder of its own. `.ci/test` installs `bind9`, `knot` and
//! `dnsutils`; a test fails (never skips) when they are missing.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tokio::time::Instant;

use crate::harness::{free_port_pair, loopback_ip, LIMIT};
use crate::services::dig::dig;

/// The zone every primary serves.
pub const ZONE: &str = "tenant-a.io";
/// The key's name.
pub const KEY: &str = "ho-key";

/// Which server.
#[derive(Clone, Copy, Debug)]
pub enum Flavor {
    /// BIND 9 `named`.
    Bind,
    /// Knot DNS `knotd`.
    Knot,
}

/// A running primary; killed on drop.
pub struct Primary {
    flavor: Flavor,
    /// Where it answers (UDP and TCP).
    pub addr: SocketAddr,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

const ZONE_FILE: &str = "$TTL 60
@ IN SOA ns1.tenant-a.io. hostmaster.tenant-a.io. 1 3600 600 86400 5
@ IN NS ns1.tenant-a.io.
ns1 IN A 127.0.0.1
foreign IN A 192.0.2.99
";

impl Primary {
    /// Starts `flavor` with the zone and the key.
    pub async fn start(flavor: Flavor) -> Primary {
        let binary = match flavor {
            Flavor::Bind => "/usr/sbin/named",
            Flavor::Knot => "/usr/sbin/knotd",
        };
        for tool in [
            binary,
            "/usr/sbin/tsig-keygen",
            "/usr/bin/nsupdate",
            "/usr/bin/dig",
        ] {
            assert!(
                Path::new(tool).exists(),
                "{tool} is missing: run the test command (bash .ci/test), which installs bind9, knot and dnsutils"
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let key = Command::new("/usr/sbin/tsig-keygen")
            .args(["-a", "hmac-sha256", KEY])
            .output()
            .unwrap();
        assert!(key.status.success());
        std::fs::write(dir.path().join("key.conf"), &key.stdout).unwrap();
        std::fs::write(dir.path().join("tenant-a.io.zone"), ZONE_FILE).unwrap();
        let addr = match flavor {
            Flavor::Bind => SocketAddr::new(Ipv4Addr::LOCALHOST.into(), free_port_pair()),
            Flavor::Knot => SocketAddr::new(loopback_ip().into(), 5353),
        };
        let mut me = Primary {
            flavor,
            addr,
            dir,
            child: None,
        };
        me.write_config();
        me.launch().await;
        me
    }

    /// The `tsig-keygen` output: what `tsig.secret_file` points at.
    pub fn key_file(&self) -> PathBuf {
        self.dir.path().join("key.conf")
    }

    fn secret(&self) -> String {
        let text = std::fs::read_to_string(self.key_file()).unwrap();
        text.split('"').nth(3).unwrap().to_owned()
    }

    fn write_config(&self) {
        let dir = self.dir.path().display();
        let (ip, port, secret) = (self.addr.ip(), self.addr.port(), self.secret());
        let (name, text) = match self.flavor {
            Flavor::Bind => (
                "named.conf",
                format!(
                    "options {{\n  directory \"{dir}\";\n  listen-on port {port} {{ {ip}; }};\n  listen-on-v6 {{ none; }};\n  pid-file \"{dir}/named.pid\";\n  session-keyfile \"{dir}/session.key\";\n  managed-keys-directory \"{dir}\";\n  recursion no;\n  dnssec-validation no;\n  allow-query {{ any; }};\n}};\ncontrols {{ }};\nkey \"{KEY}\" {{ algorithm hmac-sha256; secret \"{secret}\"; }};\nzone \"{ZONE}\" {{ type primary; file \"{dir}/tenant-a.io.zone\"; update-policy {{ grant {KEY} zonesub ANY; }}; }};\n"
                ),
            ),
            Flavor::Knot => (
                "knot.conf",
                format!(
                    "server:\n    listen: {ip}@{port}\n    rundir: {dir}\ndatabase:\n    storage: {dir}/db\nkey:\n  - id: {KEY}\n    algorithm: hmac-sha256\n    secret: {secret}\nacl:\n  - id: update\n    key: {KEY}\n    action: update\ntemplate:\n  - id: default\n    storage: {dir}\nzone:\n  - domain: {ZONE}\n    file: tenant-a.io.zone\n    acl: update\n    zonefile-sync: -1\nlog:\n  - target: stderr\n    any: info\n"
                ),
            ),
        };
        std::fs::create_dir_all(self.dir.path().join("db")).unwrap();
        std::fs::write(self.dir.path().join(name), text).unwrap();
    }

    /// Starts the process (again) and waits until it answers for the zone; updates made
    /// before a stop survive in the server's journal.
    pub async fn launch(&mut self) {
        let dir = self.dir.path();
        let log = std::fs::File::create(dir.join("server.log")).unwrap();
        let mut cmd = match self.flavor {
            Flavor::Bind => {
                let mut c = Command::new("/usr/sbin/named");
                c.arg("-g").arg("-c").arg(dir.join("named.conf"));
                c
            }
            Flavor::Knot => {
                let mut c = Command::new("/usr/sbin/knotd");
                c.arg("-c").arg(dir.join("knot.conf"));
                c
            }
        };
        self.child = Some(cmd.stdout(Stdio::null()).stderr(log).spawn().unwrap());
        let start = Instant::now();
        loop {
            let answers = dig(self.addr, &[ZONE, "SOA"]).await;
            if answers.first().is_some_and(|a| a.status == "NOERROR") {
                return;
            }
            assert!(
                start.elapsed() < LIMIT,
                "{:?} did not answer on {}: {}",
                self.flavor,
                self.addr,
                std::fs::read_to_string(dir.join("server.log")).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Kills the process.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends `commands` (nsupdate syntax, e.g. `update delete x.tenant-a.io A`) as one
    /// update signed with the key, as another tool editing the zone would.
    pub fn nsupdate(&self, commands: &str) {
        let script = format!(
            "server {} {}\nzone {ZONE}\n{commands}\nsend\n",
            self.addr.ip(),
            self.addr.port()
        );
        let mut child = Command::new("/usr/bin/nsupdate")
            .arg("-k")
            .arg(self.key_file())
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(script.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "nsupdate: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Primary {
    fn drop(&mut self) {
        self.stop();
    }
}
