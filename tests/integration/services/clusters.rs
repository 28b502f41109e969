//! Clusters sharing one zone, as the multi-cluster tests and the fault harness run them:
//! orchestrator processes (`Cluster`), each probing from its own loopback address, and
//! gateways that answer per client address (`VantageGateway`), so a fault can be seen from
//! some vantage points only.

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::time::Instant;

use crate::fakes::gateways::scripted;
use crate::fakes::kube_api::KubeApi;
use crate::harness::*;
use crate::services::pdns::PdnsServer;

/// The shared zone.
pub const ZONE: &str = "mc.test";
/// The name the clusters publish together.
pub const NAME: &str = "api.mc.test";

/// The port of every gateway: a cluster probes the addresses it learns from the others'
/// reports with its own check, port included, as gateways of one tenant share their
/// health-check port.
pub const GATEWAY_PORT: u16 = 18080;

/// An HTTP gateway that fails (503) for the client addresses it is told to.
pub struct VantageGateway {
    pub addr: SocketAddr,
    failing_for: Arc<Mutex<HashSet<IpAddr>>>,
}

impl VantageGateway {
    pub async fn start() -> VantageGateway {
        let failing_for: Arc<Mutex<HashSet<IpAddr>>> = Arc::default();
        let failing = failing_for.clone();
        let (addr, _) = scripted(
            SocketAddr::new(IpAddr::V4(loopback_ip()), GATEWAY_PORT),
            move |mut stream| {
                let fail = stream
                    .peer_addr()
                    .is_ok_and(|peer| failing.lock().unwrap().contains(&peer.ip()));
                async move {
                    let answer: &[u8] = if fail {
                        b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    } else {
                        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
                    };
                    let _ = stream.write_all(answer).await;
                }
            },
        )
        .await;
        VantageGateway { addr, failing_for }
    }

    /// Fails for the probes of these clusters, answers the others.
    pub fn fail_for(&self, clusters: &[&Cluster]) {
        *self.failing_for.lock().unwrap() = clusters.iter().map(|c| c.source).collect();
    }

    pub fn ip(&self) -> String {
        self.addr.ip().to_string()
    }
}

/// One orchestrator process: a cluster with its own vantage address.
pub struct Cluster {
    pub id: &'static str,
    /// The address its probes leave from: its vantage point.
    pub source: IpAddr,
    pub api: SocketAddr,
    pub dir: tempfile::TempDir,
    pub process: Option<Running>,
    /// libfaketime's offset of this cluster's wall clock (`"+30s"`), if any.
    pub clock: Option<&'static str>,
    /// Its identity in a Lease, when it is one of the cluster's replicas under one.
    pub identity: Option<&'static str>,
}

/// libfaketime, preloaded into a cluster whose clock is set apart.
pub const FAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

impl Cluster {
    /// Cluster `id` owning `gateway`, publishing through the sinks `sinks` (their tables;
    /// the first, `zone`, holds the reports).
    pub fn new(id: &'static str, gateway: &VantageGateway, sinks: &str) -> Cluster {
        let cluster = Cluster {
            id,
            source: IpAddr::V4(loopback_ip()),
            api: SocketAddr::new(IpAddr::V4(loopback_ip()), 9100),
            dir: tempfile::tempdir().unwrap(),
            process: None,
            clock: None,
            identity: None,
        };
        let names: Vec<&str> = sinks
            .lines()
            .filter_map(|l| l.strip_prefix("[sinks.")?.strip_suffix(']'))
            .collect();
        let text = TestConfig::at(&Check::FAST, [gateway.addr], |_| format!("gw-{id}"))
            .set("api.listen", cluster.api.to_string())
            .set("defaults.check.source_address", cluster.source.to_string())
            .set("cluster.id", id)
            .set("owner_id", "mc")
            .with(&format!(
                "[multi_cluster]\nenabled = true\nreport_interval = \"300ms\"\nreport_ttl = \"2s\"\n\n\
                 [[tenants]]\nname = \"api\"\ndomains = [\"{NAME}\"]\nsinks = {names:?}\nttl = \"5s\"\n\n{sinks}"
            ))
            .render();
        std::fs::write(cluster.config(), text).unwrap();
        cluster
    }

    /// Makes this process one replica of its cluster, `identity` in the Lease `lease`
    /// (namespace, name) of the Kubernetes API at `kube`: 3 s leases renewed every 300 ms
    /// within 2 s, as `leader_election.rs` runs them.
    pub fn elect(&mut self, identity: &'static str, kube: SocketAddr, lease: (&str, &str)) {
        self.identity = Some(identity);
        let kubeconfig = KubeApi::kubeconfig_with(kube, self.dir.path(), &self.token().unwrap());
        let election = format!(
            "\n[leader_election]\nenabled = true\nnamespace = \"{}\"\nname = \"{}\"\nidentity = \"{identity}\"\n\
             lease_duration = \"3s\"\nrenew_deadline = \"2s\"\nretry_period = \"300ms\"\nkubeconfig = {:?}\n",
            lease.0,
            lease.1,
            kubeconfig.display().to_string()
        );
        let mut text = std::fs::read_to_string(self.config()).unwrap();
        text.push_str(&election);
        std::fs::write(self.config(), text).unwrap();
    }

    /// Gives this process a `state_dir` (in its own folder), so what it must remember
    /// survives its restarts (with its own `dns_server` reports: its peers' last reports).
    pub fn keep_state(&mut self) {
        let text = std::fs::read_to_string(self.config()).unwrap();
        let state = self.dir.path().join("state");
        let kept = format!("state_dir = {:?}\n{text}", state.display().to_string());
        std::fs::write(self.config(), kept).unwrap();
    }

    /// The token it presents to the Kubernetes API, when it is a replica under a Lease.
    pub fn token(&self) -> Option<String> {
        self.identity.map(|i| format!("test-{i}"))
    }

    pub fn config(&self) -> PathBuf {
        self.dir.path().join("config.toml")
    }

    pub fn start(&mut self) {
        let mut cmd = binary();
        cmd.args(["run", "--config"])
            .arg(self.config())
            // `CLUSTER_LOG=info` to see the clusters' decisions in their logs.
            .env(
                "RUST_LOG",
                std::env::var("CLUSTER_LOG").unwrap_or("warn".into()),
            )
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_EC2_METADATA_DISABLED", "true");
        if let Some(offset) = self.clock {
            assert!(
                std::path::Path::new(FAKETIME).exists(),
                "{FAKETIME} is missing: run the test command (bash .ci/test), which installs faketime"
            );
            // The wall clock only: a constant offset of the monotonic clock changes nothing.
            cmd.env("LD_PRELOAD", FAKETIME)
                .env("FAKETIME", offset)
                .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        }
        self.process = Some(spawn_logged(&mut cmd, &self.dir.path().join("log")));
    }

    /// SIGKILL: no goodbye, its report just stops being refreshed.
    pub fn kill(&mut self) {
        self.process = None;
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }

    /// The tenant's vote as this cluster last counted it.
    pub async fn votes(&self) -> Option<Value> {
        let body = try_api_get(self.api, "/status").await?;
        let status: Value = serde_json::from_str(&body).ok()?;
        status["tenants"][0].get("votes").cloned()
    }

    /// Waits until this cluster's vote satisfies `ready`.
    pub async fn wait_for_votes(&self, what: &str, ready: impl Fn(&Value) -> bool) -> Value {
        let start = Instant::now();
        loop {
            let votes = self.votes().await;
            if let Some(v) = votes.as_ref().filter(|v| ready(v)) {
                return v.clone();
            }
            if start.elapsed() > LIMIT {
                let metrics = try_api_get(self.api, "/metrics").await.unwrap_or_default();
                let reports: Vec<&str> =
                    metrics.lines().filter(|l| l.contains("cluster_")).collect();
                panic!(
                    "cluster {}: timed out waiting for {what}; votes: {votes:#?}\nlog:\n{}\n{reports:#?}",
                    self.id,
                    self.log()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

pub fn pdns_sink(pdns: &PdnsServer) -> String {
    pdns_sink_at(pdns, &pdns.url())
}

/// [`pdns_sink`] reaching the API at `url` (a [`crate::services::link::Link`] in front of it).
pub fn pdns_sink_at(pdns: &PdnsServer, url: &str) -> String {
    format!(
        "[sinks.zone]\nkind = \"powerdns\"\nurl = \"{url}\"\napi_key_file = {:?}\nzone = \"{ZONE}\"\ntimeout = \"1s\"\n\
         delivery = {{ backoff_min = \"50ms\", backoff_max = \"500ms\", reconcile_interval = \"1s\" }}\n",
        pdns.key_file().display().to_string()
    )
}
