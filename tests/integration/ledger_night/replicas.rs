//! Two replicas of one deployment, as the shipped manifests run them: the real binary,
//! leader election and operator state on the Kubernetes API test server (no real API server
//! runs here), a `state_dir` each with `[ledger] standbys_record = true`, each serving the
//! night's zone from its own embedded DNS server and sharing one PowerDNS zone that only the
//! writer writes. Both canaries ask both back ends.

use std::net::SocketAddr;
use std::time::Duration;

use ho_testkit::Gateway;
use tokio::time::Instant;

use super::script::{Gw, ENDPOINTS, GATEWAYS, NAMES};
use crate::fakes::kube_api::KubeApi;
use crate::harness::*;
use crate::services::pdns::{PdnsServer, DNS_PORT};

pub const ZONE: &str = "night.test";
pub const ADMIN: &str = "night-admin-1";
/// The probes' interval ([`Check::FAST`]) and the canaries' period at both back ends.
pub const INTERVAL: Duration = Duration::from_millis(200);
pub const EVERY: Duration = Duration::from_millis(200);

/// One replica: its process, API and embedded DNS server.
pub struct Replica {
    _process: Running,
    pub api: SocketAddr,
    pub dns: SocketAddr,
    dir: tempfile::TempDir,
}

impl Replica {
    /// Starts replica `identity` on `gws` (in [`GATEWAYS`] order).
    pub fn start(identity: &str, kube: SocketAddr, pdns: &PdnsServer, gws: &[Gateway]) -> Replica {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = KubeApi::kubeconfig_with(kube, dir.path(), &format!("test-{identity}"));
        let admin = dir.path().join("admin");
        std::fs::write(&admin, ADMIN).unwrap();
        let api = SocketAddr::new(loopback_ip().into(), 8080);
        let dns = SocketAddr::new(loopback_ip().into(), 5353);
        let config = TestConfig::defaults(&Check::FAST)
            .set("api.listen", api.to_string())
            .set("api.admin_token_file", admin.display().to_string())
            .set("state_dir", dir.path().join("state").display().to_string())
            .with(&format!(
                "[ledger]\nstandbys_record = true\n\n\
                 [leader_election]\nenabled = true\nnamespace = \"dns\"\nname = \"ho\"\nidentity = \"{identity}\"\n\
                 lease_duration = \"3s\"\nrenew_deadline = \"2s\"\nretry_period = \"300ms\"\nkubeconfig = {kc:?}\n\n\
                 [kubernetes]\noperator_state = \"ho-operator\"\nkubeconfig = {kc:?}\n\n{}{}",
                endpoints(gws),
                sinks(pdns, dns),
                kc = kubeconfig.display().to_string(),
            ));
        let mut cmd = run_config(dir.path(), &config);
        cmd.env("RUST_LOG", "info");
        let process = spawn_logged(&mut cmd, &dir.path().join("log"));
        Replica {
            _process: process,
            api,
            dns,
            dir,
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }

    /// Waits until `/status` says this replica's role is `role`.
    pub async fn wait_for_role(&self, role: &str) {
        let start = Instant::now();
        loop {
            let status = try_api_get(self.api, "/status").await.unwrap_or_default();
            let status: serde_json::Value = serde_json::from_str(&status).unwrap_or_default();
            if status["leadership"]["role"] == role {
                return;
            }
            assert!(start.elapsed() < LIMIT, "never {role}:\n{}", self.log());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Where gateway `g` listens, from `gws` in [`GATEWAYS`] order.
pub fn gateway(gws: &[Gateway], g: Gw) -> &Gateway {
    &gws[GATEWAYS.iter().position(|x| *x == g).unwrap()]
}

fn endpoints(gws: &[Gateway]) -> String {
    let mut text = String::new();
    for (name, g, kind, _) in ENDPOINTS {
        let gw = gateway(gws, g);
        text += &format!(
            "[[endpoints]]\nname = \"{name}\"\naddress = \"{}\"\ncheck = {{ kind = \"{kind}\", port = {} }}\n\n",
            ip(gw),
            gw.addr().port()
        );
    }
    for name in NAMES {
        let tenant = name.split('.').next().unwrap();
        let members: Vec<String> = (ENDPOINTS.iter())
            .filter(|e| e.3 == name)
            .map(|e| format!("\"{}\"", e.0))
            .collect();
        text += &format!(
            "[[tenants]]\nname = \"{tenant}\"\ndomains = [\"{name}\"]\nendpoints = [{}]\nsinks = [\"dns\", \"pdns\"]\nttl = \"5s\"\n\n",
            members.join(", ")
        );
    }
    text
}

/// The embedded server on `dns` and the shared PowerDNS zone, reconciled only hourly (a hand
/// edit stays until the script undoes it), each asked by the canary every [`EVERY`].
fn sinks(pdns: &PdnsServer, dns: SocketAddr) -> String {
    let canary = format!("every = \"{}ms\", grace = \"1s\"", EVERY.as_millis());
    format!(
        "[sinks.dns]\nkind = \"dns_server\"\nlisten = [\"{dns}\"]\nzones = [\"{ZONE}\"]\ncanary = {{ {canary} }}\n\n\
         [sinks.pdns]\nkind = \"powerdns\"\nurl = \"{url}\"\napi_key_file = {key:?}\nzone = \"{ZONE}.\"\ntimeout = \"1s\"\n\
         delivery = {{ backoff_min = \"50ms\", backoff_max = \"500ms\", reconcile_interval = \"1h\" }}\n\
         canary = {{ address = \"{ip}:{DNS_PORT}\", {canary} }}\n",
        url = pdns.url(),
        key = pdns.key_file().display().to_string(),
        ip = pdns.ip,
    )
}
