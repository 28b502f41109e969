//! A real resolver that reads hosts files: Debian's `dnsmasq` with `--addn-hosts`, on its
//! own loopback address, queried with `dig`. `.ci/test` installs `dnsmasq-base` and
//! `dnsutils`; a test fails (never skips) when they are missing.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tokio::time::Instant;

use crate::harness::LIMIT;

const PORT: u16 = 5354;

/// A running dnsmasq answering from one hosts file; killed on drop.
pub struct Dnsmasq {
    ip: Ipv4Addr,
    hosts: PathBuf,
    child: Child,
}

impl Dnsmasq {
    /// Serves `content` as a hosts file from a loopback address of its own.
    pub async fn start(dir: &Path, content: &str) -> Dnsmasq {
        for tool in ["/usr/sbin/dnsmasq", "/usr/bin/dig"] {
            assert!(
                Path::new(tool).exists(),
                "{tool} is missing: run the test command (bash .ci/test), which installs dnsmasq-base and dnsutils"
            );
        }
        let ip = crate::harness::loopback_ip();
        let hosts = dir.join("served.hosts");
        std::fs::write(&hosts, content).unwrap();
        let child = Command::new("/usr/sbin/dnsmasq")
            .args([
                "--keep-in-foreground",
                "--conf-file=/dev/null",
                "--no-resolv",
                "--no-hosts",
                "--bind-interfaces",
                "--user=root",
                "--pid-file=",
            ])
            .arg(format!("--listen-address={ip}"))
            .arg(format!("--port={PORT}"))
            .arg(format!("--addn-hosts={}", hosts.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting dnsmasq");
        let me = Dnsmasq { ip, hosts, child };
        let start = Instant::now();
        while me.try_query("localhost.invalid", "A").is_none() {
            assert!(
                start.elapsed() < LIMIT,
                "dnsmasq did not start on {ip}:{PORT}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        me
    }

    /// Where it answers (UDP and TCP).
    pub fn addr(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::new(self.ip.into(), PORT)
    }

    /// Replaces the hosts file and tells dnsmasq to read it again (SIGHUP).
    pub fn reload(&self, content: &str) {
        std::fs::write(&self.hosts, content).unwrap();
        let ok = Command::new("kill")
            .arg("-HUP")
            .arg(self.child.id().to_string())
            .status()
            .unwrap()
            .success();
        assert!(ok, "SIGHUP to dnsmasq failed");
    }

    /// The sorted answer to `name`/`qtype`.
    pub fn query(&self, name: &str, qtype: &str) -> Vec<String> {
        self.try_query(name, qtype).expect("dig failed")
    }

    fn try_query(&self, name: &str, qtype: &str) -> Option<Vec<String>> {
        let out = Command::new("dig")
            .args(["+short", "+time=1", "+tries=1", "-p", &PORT.to_string()])
            .arg(format!("@{}", self.ip))
            .args([name, qtype])
            .output()
            .ok()?;
        if !out.status.success() {
            return None;
        }
        let mut lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect();
        lines.sort();
        Some(lines)
    }
}

impl Drop for Dnsmasq {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
