//! A real PowerDNS Authoritative server (Debian's `pdns-server` with the gsqlite3 backend, and
//! the geoip backend when a test gives it a City database)
//! on its own loopback address, for the PowerDNS sink tests, queried through DNS with `dig`.
//! `.ci/test` installs the packages; a test fails (never skips) when they are missing.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tokio::time::Instant;

use crate::harness::{loopback_ip, LIMIT};

const SCHEMA: &str = "/usr/share/doc/pdns-backend-sqlite3/schema.sqlite3.sql";
pub const DNS_PORT: u16 = 5300;
/// The HTTP API's port.
pub const API_PORT: u16 = 8081;

/// A running `pdns_server`; killed on drop.
pub struct PdnsServer {
    /// Its loopback address (DNS and API).
    pub ip: Ipv4Addr,
    /// The API key.
    pub api_key: String,
    /// Folder with the database, the key file and the log.
    pub dir: tempfile::TempDir,
    /// A GeoIP City database for the geoip backend (LUA records' `country()`, `latlon()`).
    geoip: Option<PathBuf>,
    child: Option<Child>,
}

impl PdnsServer {
    /// Starts a server on a loopback address of its own with `zone` created.
    pub fn start(zone: &str) -> PdnsServer {
        PdnsServer::start_with(zone, None)
    }

    /// [`PdnsServer::start`] with the geoip backend reading the City database `geoip`, so
    /// LUA records locate clients (by their EDNS subnet) as in production.
    pub fn start_with_geoip(zone: &str, geoip: &std::path::Path) -> PdnsServer {
        PdnsServer::start_with(zone, Some(geoip.to_owned()))
    }

    fn start_with(zone: &str, geoip: Option<PathBuf>) -> PdnsServer {
        if geoip.is_some() {
            let module = std::fs::read_dir("/usr/lib")
                .into_iter()
                .flatten()
                .flatten()
                .any(|arch| arch.path().join("pdns/libgeoipbackend.so").exists());
            assert!(
                module,
                "PowerDNS's geoip backend is missing: run the test command (bash .ci/test), which installs pdns-backend-geoip"
            );
        }
        for tool in [
            "/usr/sbin/pdns_server",
            "/usr/bin/dig",
            "/usr/bin/sqlite3",
            SCHEMA,
        ] {
            assert!(
                std::path::Path::new(tool).exists(),
                "{tool} is missing: run the test command (bash .ci/test), which installs pdns-server, pdns-backend-sqlite3, sqlite3 and dnsutils"
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("pdns.sqlite3");
        let schema = std::fs::File::open(SCHEMA).unwrap();
        let status = Command::new("sqlite3")
            .arg(&db)
            .stdin(schema)
            .status()
            .unwrap();
        assert!(status.success(), "creating the pdns database failed");
        std::fs::write(dir.path().join("api.key"), "test-key-1\n").unwrap();
        let mut server = PdnsServer {
            ip: loopback_ip(),
            api_key: "test-key-1".into(),
            dir,
            geoip,
            child: None,
        };
        server.launch();
        let (code, body) = server.api(
            "POST",
            "/api/v1/servers/localhost/zones",
            &format!(r#"{{"name":"{zone}","kind":"Native","nameservers":["ns1.{zone}"]}}"#),
        );
        assert_eq!(code, 201, "creating zone {zone}: {body}");
        server
    }

    /// The API key file, for `api_key_file`.
    pub fn key_file(&self) -> PathBuf {
        self.dir.path().join("api.key")
    }

    /// The API base URL.
    pub fn url(&self) -> String {
        format!("http://{}:{API_PORT}", self.ip)
    }

    /// Starts the process and waits until the API answers.
    pub fn launch(&mut self) {
        let d = self.dir.path();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(d.join("pdns.log"))
            .unwrap();
        let backends = match &self.geoip {
            None => vec!["--launch=gsqlite3".to_owned()],
            Some(db) => {
                // The backend serves no zone of its own: only its lookups are used.
                let zones = d.join("geoip-zones.yaml");
                std::fs::write(&zones, "domains: []\n").unwrap();
                vec![
                    "--launch=gsqlite3,geoip".to_owned(),
                    format!("--geoip-database-files=mmdb:{}", db.display()),
                    format!("--geoip-zones-file={}", zones.display()),
                ]
            }
        };
        let child = Command::new("/usr/sbin/pdns_server")
            .args(backends)
            .args([
                "--no-config",
                "--daemon=no",
                "--guardian=no",
                "--disable-syslog",
                "--write-pid=no",
                "--loglevel=4",
                "--cache-ttl=0",
                "--query-cache-ttl=0",
                "--negquery-cache-ttl=0",
                "--api=yes",
                "--webserver=yes",
                "--webserver-allow-from=127.0.0.0/8",
                "--enable-lua-records=yes",
                "--edns-subnet-processing=yes",
            ])
            .arg(format!("--socket-dir={}", d.display()))
            .arg(format!(
                "--gsqlite3-database={}",
                d.join("pdns.sqlite3").display()
            ))
            .arg(format!("--local-address={}", self.ip))
            .arg(format!("--local-port={DNS_PORT}"))
            .arg(format!("--webserver-address={}", self.ip))
            .arg(format!("--webserver-port={API_PORT}"))
            .arg(format!("--api-key={}", self.api_key))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("starting pdns_server");
        self.child = Some(child);
        let start = std::time::Instant::now();
        while self
            .try_api("GET", "/api/v1/servers/localhost", "")
            .is_none()
        {
            assert!(
                start.elapsed() < LIMIT,
                "pdns_server did not start; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the process (the database stays).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The server's log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("pdns.log")).unwrap_or_default()
    }

    fn try_api(&self, method: &str, path: &str, body: &str) -> Option<(u16, String)> {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect((self.ip, API_PORT)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        let request = format!(
            "{method} {path} HTTP/1.0\r\nHost: {}\r\nX-API-Key: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.ip,
            self.api_key,
            body.len()
        );
        s.write_all(request.as_bytes()).ok()?;
        let mut raw = String::new();
        s.read_to_string(&mut raw).ok()?;
        let (head, body) = raw.split_once("\r\n\r\n")?;
        Some((
            head.split_whitespace().nth(1)?.parse().ok()?,
            body.to_owned(),
        ))
    }

    /// Calls the API (HTTP/1.0, so the answer ends with the connection).
    pub fn api(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        self.try_api(method, path, body)
            .unwrap_or_else(|| panic!("pdns API unreachable; log:\n{}", self.log()))
    }

    /// Changes `zone` behind the orchestrator's back (as an operator would), expecting 204.
    /// A 500 while orchestrators write the same zone (SQLite busy) is tried again.
    pub fn patch_zone(&self, zone: &str, body: &str) {
        let path = format!("/api/v1/servers/localhost/zones/{zone}");
        let start = std::time::Instant::now();
        loop {
            let (code, answer) = self.api("PATCH", &path, body);
            if code != 500 || start.elapsed() > LIMIT {
                assert_eq!(code, 204, "{answer}");
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The comments of every rrset of `zone` (no trailing dot), by `"name. TYPE"`: the
    /// orchestrator's ownership marks, which an operator's edit keeps.
    pub fn marks(&self, zone: &str) -> Marks {
        let (code, body) = self.api(
            "GET",
            &format!("/api/v1/servers/localhost/zones/{zone}."),
            "",
        );
        assert_eq!(code, 200, "{body}");
        let zone: serde_json::Value = serde_json::from_str(&body).unwrap();
        let rrsets = zone["rrsets"].as_array().cloned().unwrap_or_default();
        Marks(
            rrsets
                .into_iter()
                .map(|r| {
                    (
                        format!(
                            "{} {}",
                            r["name"].as_str().unwrap(),
                            r["type"].as_str().unwrap()
                        ),
                        r["comments"].clone(),
                    )
                })
                .collect(),
        )
    }

    /// Edits `zone` (no trailing dot) behind the orchestrator's back, in one call, as an
    /// operator in PowerDNS-Admin would: each `(name, rtype, contents)` rrset is replaced
    /// with `contents`, its comments from `marks` kept, or deleted when `contents` is empty.
    pub fn edit_by_hand(&self, zone: &str, marks: &Marks, edits: &[(&str, &str, Vec<String>)]) {
        let rrsets: Vec<serde_json::Value> = edits
            .iter()
            .map(|(name, rtype, contents)| {
                let name = format!("{name}.");
                if contents.is_empty() {
                    return serde_json::json!({ "name": name, "type": rtype, "changetype": "DELETE" });
                }
                let records: Vec<serde_json::Value> = contents
                    .iter()
                    .map(|a| serde_json::json!({ "content": a, "disabled": false }))
                    .collect();
                let comments = marks.0.get(&format!("{name} {rtype}")).cloned().unwrap_or_else(|| panic!("no rrset {name} {rtype} to edit"));
                serde_json::json!({
                    "name": name, "type": rtype, "ttl": 5, "changetype": "REPLACE",
                    "records": records, "comments": comments,
                })
            })
            .collect();
        self.patch_zone(
            &format!("{zone}."),
            &serde_json::json!({ "rrsets": rrsets }).to_string(),
        );
    }

    /// Points `name` (in `zone`, both without the trailing dot) at one address, TTL 1 s: a
    /// cloud's DNS answering for its load balancer's name.
    pub fn point(&self, zone: &str, name: &str, address: &str) {
        self.patch_zone(
            &format!("{zone}."),
            &format!(
                "{{\"rrsets\": [{{\"name\": \"{name}.\", \"type\": \"A\", \"ttl\": 1, \"changetype\": \"REPLACE\", \"records\": [{{\"content\": \"{address}\", \"disabled\": false}}]}}]}}"
            ),
        );
    }

    /// Asks the server through DNS: the sorted answers of `name` `rtype`.
    pub async fn dig(&self, name: &str, rtype: &str) -> Vec<String> {
        self.dig_with(name, rtype, None).await
    }

    /// Like [`dig`](Self::dig), as a client in `subnet` (EDNS client subnet).
    pub async fn dig_from(&self, name: &str, rtype: &str, subnet: &str) -> Vec<String> {
        self.dig_with(name, rtype, Some(subnet)).await
    }

    async fn dig_with(&self, name: &str, rtype: &str, subnet: Option<&str>) -> Vec<String> {
        let server = std::net::SocketAddr::new(self.ip.into(), DNS_PORT);
        let subnet = subnet.map(|s| format!("+subnet={s}"));
        let mut query = vec![name, rtype];
        query.extend(subnet.as_deref());
        // No answer at all (the server stopped) reads as no records.
        crate::services::dig::dig(server, &query)
            .await
            .first()
            .map(crate::services::dig::Answer::sorted)
            .unwrap_or_default()
    }

    /// Polls DNS until the answer equals `want` (sorted); returns the time it took.
    pub async fn wait_for_answer(&self, name: &str, rtype: &str, want: &[String]) -> Duration {
        let start = Instant::now();
        let mut want = want.to_vec();
        want.sort();
        loop {
            let got = self.dig(name, rtype).await;
            if got == want {
                return start.elapsed();
            }
            assert!(
                start.elapsed() < LIMIT,
                "{name} {rtype}: wanted {want:?}, DNS says {got:?}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// The comments of a zone's rrsets, read by [`PdnsServer::marks`].
pub struct Marks(std::collections::BTreeMap<String, serde_json::Value>);

impl Drop for PdnsServer {
    fn drop(&mut self) {
        self.stop();
    }
}
