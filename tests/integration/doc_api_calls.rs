//! The calls to the orchestrator's HTTP API that README.md and docs/*.md show (`curl
//! .../status`, `/v1/availability?...`, `/badge/...`, `/events`, `POST /v1/endpoints/...`,
//! `/v1/brake/release`, `/v1/heartbeat/...`), made as shown against the real binary, so a
//! renamed path or query parameter fails the build. Each runs with the real `curl`, the
//! document's own flags and headers, only its host replaced by the running engine's and its
//! placeholders by what the config set up for them: `$TOKEN` the read token (unset here: the
//! read paths are open, as in the docs' examples without one), `$ADMIN` the admin token,
//! `$T` the heartbeat token, `NAME` the tenant's name. The engine has the endpoints the
//! examples name (`gw-1`, `gw-2` with `geo = "IE"`, the heartbeat endpoint `batch-1`) and
//! a tenant serving `shop.example.com`. Calls to other servers (PowerDNS's API, a gateway)
//! are left out.

use std::process::Command;

use crate::doc_commands::{documents, shown_in, Shown};
use crate::harness::{
    eventually_async, gateways, hosts_sink, loopback_ip, spawn_logged, try_api_get, Check,
    TestConfig,
};

const ADMIN: &str = "admin-secret";
const PUSH: &str = "push-secret";
/// The port the docs' examples use; the engine gets a loopback address of its own.
const PORT: u16 = 8080;

/// Every shown `curl` whose URL is the orchestrator's API (port 8080 in the docs).
fn api_calls() -> Vec<Shown> {
    documents()
        .iter()
        .flat_map(|(file, text)| shown_in(file, text, "curl"))
        .filter(|c| c.words.iter().any(|w| w.contains(":8080")))
        .collect()
}

/// The shown command's arguments as run here: its URL pointed at `host`, its placeholders
/// filled, and curl told to print only the status code and to stop streams after a second.
fn as_run(words: &[String], host: &str) -> Vec<String> {
    let mut args: Vec<String> = words[1..]
        .iter()
        .map(|w| match w.split_once(":8080") {
            Some((_, rest)) => format!("http://{host}{rest}").replace("NAME", "shop.example.com"),
            None => w
                .replace("$TOKEN", "read")
                .replace("$ADMIN", ADMIN)
                .replace("$T", PUSH),
        })
        .collect();
    args.extend(
        [
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--max-time",
            "1",
        ]
        .map(String::from),
    );
    args
}

fn config(dir: &std::path::Path, api: &str, gws: &[ho_testkit::Gateway]) -> String {
    std::fs::write(dir.join("admin.token"), ADMIN).unwrap();
    std::fs::write(dir.join("push.token"), PUSH).unwrap();
    let mut endpoints = String::new();
    for (i, g) in gws.iter().enumerate() {
        endpoints.push_str(&format!(
            "[[endpoints]]\nname = \"gw-{}\"\naddress = \"{}\"\nlabels = {{ geo = \"IE\" }}\ncheck = {{ port = {} }}\n\n",
            i + 1,
            g.addr().ip(),
            g.addr().port()
        ));
    }
    endpoints.push_str(&format!(
        "[[endpoints]]\nname = \"batch-1\"\naddress = \"{}\"\ncheck = {{ kind = \"heartbeat\", ttl = \"3s\" }}\n\n",
        loopback_ip()
    ));
    TestConfig::defaults(&Check::FAST)
        .set("api.admin_token_file", dir.join("admin.token").display().to_string())
        .set("api.heartbeat_token_file", dir.join("push.token").display().to_string())
        .set("state_dir", dir.join("state").display().to_string())
        .with(&endpoints)
        .with(&format!(
            "[[tenants]]\nname = \"shop\"\ndomains = [\"shop.example.com\"]\nsinks = [\"local\"]\n\n{}",
            hosts_sink(dir)
        ))
        .render()
        .replace("127.0.0.1:0", api)
}

#[actix_rt::test]
async fn every_api_call_the_docs_show_answers_as_shown() {
    let calls = api_calls();
    assert!(
        calls.len() >= 10,
        "only {} API calls found in the docs",
        calls.len()
    );
    let dir = tempfile::tempdir().unwrap();
    let host = format!("{}:{PORT}", loopback_ip());
    let gws = gateways(2);
    let file = dir.path().join("config.toml");
    std::fs::write(&file, config(dir.path(), &host, &gws)).unwrap();
    let mut run = crate::harness::binary();
    run.args(["run", "--config"])
        .arg(&file)
        .env("RUST_LOG", "warn");
    let _engine = spawn_logged(&mut run, &dir.path().join("engine.log"));
    let addr = host.parse().unwrap();
    eventually_async("the API answers", async || {
        try_api_get(addr, "/healthz").await.is_some()
    })
    .await;
    let mut wrong = Vec::new();
    for call in &calls {
        let args = as_run(&call.words, &host);
        let out = Command::new("curl").args(&args).output().unwrap();
        let code = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !code.starts_with('2') {
            wrong.push(format!(
                "{}: HTTP {code}: curl {}",
                call.place,
                args.join(" ")
            ));
        }
    }
    let log = std::fs::read_to_string(dir.path().join("engine.log")).unwrap_or_default();
    assert!(wrong.is_empty(), "{}\nengine log:\n{log}", wrong.join("\n"));
    eprintln!("{} API calls from the docs answered 2xx", calls.len());
}
