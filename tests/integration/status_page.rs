//! The status page (`GET /`) in a real browser: Debian's `chromium` driven by Playwright
//! for Python (`tests/browser/status_page.py`; `.ci/test` installs both), against the real
//! binary and real gateways. The script asks this test to act or check (kill a gateway,
//! look at the hosts file) over stdin/stdout. Screenshots go to
//! `target/test-screenshots/`.

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};

use ho_testkit::Behaviour;

use crate::harness::*;

const READ: &str = "read-token-1";
const ADMIN: &str = "admin-token-1";

#[actix_rt::test]
async fn the_status_page_shows_failures_live_and_drains_from_the_page() {
    let chromium = Path::new("/usr/bin/chromium");
    assert!(
        chromium.exists(),
        "chromium is missing: run the test command (bash .ci/test), which installs it"
    );
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(3);
    let ips: Vec<String> = gws.iter().map(ip).collect();
    std::fs::write(dir.path().join("read"), READ).unwrap();
    std::fs::write(dir.path().join("admin"), ADMIN).unwrap();
    let path = |n: &str| dir.path().join(n).display().to_string();
    let api = SocketAddr::new(loopback_ip().into(), 8080);
    let tail = format!(
        "state_dir = {:?}\n\n[[tenants]]\nname = \"web\"\ndomains = [\"web.example\"]\nsinks = [\"local\"]\n\n{}",
        path("state"),
        hosts_sink(dir.path())
    );
    let config = TestConfig::new(&Check::FAST, &gws.iter().collect::<Vec<_>>())
        .with(&tail)
        .set("api.listen", api.to_string())
        .set("api.token_file", path("read"))
        .set("api.admin_token_file", path("admin"))
        .set("endpoints.2.checks", checks_of(&gws[2]));
    let _orchestrator = spawn_logged(
        &mut run_config(dir.path(), &config),
        &dir.path().join("log"),
    );
    let hosts = dir.path().join("web.hosts");
    wait_for_file(&hosts, "all three", |c| addresses(c) == ips).await;

    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/status_page.py");
    let python = python_tool("PY_TOOLS_PYTHON", "python");
    let mut browser = Command::new(&python)
        .arg(&script)
        .arg(format!("http://{api}/"))
        .args([READ, ADMIN])
        .arg(&shots)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("{python}: {e}; run the test command (bash .ci/test), which installs playwright")
        });
    let mut to_browser = browser.stdin.take().unwrap();
    let (tx, mut lines) = tokio::sync::mpsc::unbounded_channel();
    let stdout = browser.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line.unwrap_or_default()).is_err() {
                return;
            }
        }
    });
    let mut done = false;
    while let Some(line) = tokio::time::timeout(LIMIT * 3, lines.recv()).await.unwrap() {
        match line.as_str() {
            "KILL gw-2" => gws[1].set(Behaviour::Refuse).unwrap(),
            // gw-2 is down and gw-1 drained: gw-3 alone.
            "DRAINED gw-1" => {
                wait_for_file(&hosts, "gw-1 drained", |c| addresses(c) == ips[2..]).await;
            }
            "UNDRAINED gw-1" | "RELEASED gw-3" => {
                let back = [ips[0].clone(), ips[2].clone()];
                wait_for_file(&hosts, "gw-1 and gw-3", |c| addresses(c) == back).await;
            }
            // gw-2 is down and gw-3 forced down: gw-1 alone.
            "FORCED DOWN gw-3" => {
                wait_for_file(&hosts, "gw-3 forced out", |c| addresses(c) == ips[..1]).await;
            }
            "DONE" => {
                done = true;
                break;
            }
            other => {
                println!("browser: {other}");
                continue;
            }
        }
        writeln!(to_browser, "OK").unwrap();
    }
    let out = browser.wait_with_output().unwrap();
    assert!(
        done && out.status.success(),
        "the browser script failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(shots.join("status-page.png").exists());
}

/// A read-only API's page (`tests/browser/read_only.py`) shows no admin token field.
#[actix_rt::test]
async fn a_read_only_api_shows_no_admin_field() {
    let dir = tempfile::tempdir().unwrap();
    let gws = gateways(1);
    let api = SocketAddr::new(loopback_ip().into(), 8080);
    let tail = format!(
        "[[tenants]]\nname = \"web\"\ndomains = [\"web.example\"]\nsinks = [\"local\"]\n\n{}",
        hosts_sink(dir.path())
    );
    let config = TestConfig::new(&Check::FAST, &gws.iter().collect::<Vec<_>>())
        .with(&tail)
        .set("api.listen", api.to_string());
    let _orchestrator = spawn_logged(
        &mut run_config(dir.path(), &config),
        &dir.path().join("log"),
    );
    wait_for_file(&dir.path().join("web.hosts"), "the gateway", |c| {
        !c.is_empty()
    })
    .await;
    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/read_only.py");
    let python = python_tool("PY_TOOLS_PYTHON", "python");
    let out = Command::new(&python)
        .arg(&script)
        .arg(format!("http://{api}/"))
        .arg(&shots)
        .output()
        .unwrap_or_else(|e| {
            panic!("{python}: {e}; run the test command (bash .ci/test), which installs playwright")
        });
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `checks` for gateway `g`: a TCP connect to its port beside the HTTP check.
fn checks_of(g: &ho_testkit::Gateway) -> toml::Value {
    format!(
        "checks = [{{ kind = \"tcp\", port = {} }}]",
        g.addr().port()
    )
    .parse::<toml::Table>()
    .unwrap()
    .remove("checks")
    .unwrap()
}
