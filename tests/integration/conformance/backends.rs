//! The conformance suite's back ends: each a real server, or the faithful test server its
//! doc names, behind the suite's [`Backend`].

use crate::fakes::azure_dns::AzureDns;
use crate::fakes::cloudflare::{Cloudflare, TOKEN as CLOUDFLARE_TOKEN, ZONE_ID};
use crate::fakes::external_dns::ExternalDnsProvider;
use crate::fakes::google_dns::{GoogleDns, MANAGED_ZONE, PROJECT};
use crate::fakes::kube_api::KubeApi;
use crate::fakes::route53::{Moto, Proxy};
use crate::fakes::webhook::{addresses_of, Receiver, SECRET};
use crate::harness::*;
use crate::services::dig::dig1;
use crate::services::dns_primary::{Primary, KEY};
use crate::services::pdns::PdnsServer;

use super::{Backend, DELIVERY, DOMAIN};

pub(super) struct HostsFiles {
    pub(super) dir: tempfile::TempDir,
}

impl Backend for HostsFiles {
    fn sink_table(&self) -> String {
        format!(
            "[sinks.s]\nkind = \"hosts_file\"\ndir = {:?}\n{DELIVERY}\n",
            self.path().display().to_string()
        )
    }
    async fn published(&self) -> Option<Vec<String>> {
        let mut list = addresses(&std::fs::read_to_string(self.path().join("conf.hosts")).ok()?);
        list.sort();
        Some(list)
    }
    /// Root ignores permissions, so the outage moves the folder away and puts a file in
    /// its place: every write fails until it is moved back.
    async fn outage_start(&mut self) {
        std::fs::rename(self.path(), self.dir.path().join("away")).unwrap();
        std::fs::write(self.path(), "not a directory").unwrap();
    }
    async fn outage_end(&mut self) {
        std::fs::remove_file(self.path()).unwrap();
        std::fs::rename(self.dir.path().join("away"), self.path()).unwrap();
    }
    async fn lose_state(&mut self) {
        std::fs::remove_file(self.path().join("conf.hosts")).unwrap();
    }
}

impl HostsFiles {
    fn path(&self) -> std::path::PathBuf {
        self.dir.path().join("hosts")
    }
}

pub(super) struct PowerDns(pub(super) PdnsServer);

impl Backend for PowerDns {
    fn sink_table(&self) -> String {
        format!(
            "[sinks.s]\nkind = \"powerdns\"\nurl = \"{}\"\napi_key_file = {:?}\nzone = \"tenant-a.io.\"\ntimeout = \"1s\"\n{DELIVERY}\n",
            self.0.url(),
            self.0.key_file().display().to_string()
        )
    }
    async fn published(&self) -> Option<Vec<String>> {
        Some(self.0.dig(DOMAIN, "A").await).filter(|l| !l.is_empty())
    }
    async fn outage_start(&mut self) {
        self.0.stop();
    }
    async fn outage_end(&mut self) {
        self.0.launch();
    }
    async fn lose_state(&mut self) {
        self.0.patch_zone(
            "tenant-a.io.",
            &format!(r#"{{"rrsets":[{{"name":"{DOMAIN}.","type":"A","changetype":"DELETE"}}]}}"#),
        );
    }
}

pub(super) struct ConfigMap {
    pub(super) api: KubeApi,
    pub(super) addr: std::net::SocketAddr,
    pub(super) dir: tempfile::TempDir,
}

impl Backend for ConfigMap {
    fn sink_table(&self) -> String {
        let kubeconfig = KubeApi::kubeconfig(self.addr, self.dir.path());
        format!(
            "[sinks.s]\nkind = \"coredns_configmap\"\nnamespace = \"dns\"\nname = \"hosts\"\nkubeconfig = {:?}\ntimeout = \"1s\"\n{DELIVERY}\n",
            kubeconfig.display().to_string()
        )
    }
    async fn published(&self) -> Option<Vec<String>> {
        let content = self.api.data("dns", "hosts")?.get("conf.hosts")?.clone();
        let mut list = addresses(&content);
        list.sort();
        Some(list)
    }
    async fn outage_start(&mut self) {
        self.api.set_unavailable(true);
    }
    async fn outage_end(&mut self) {
        self.api.set_unavailable(false);
    }
    async fn lose_state(&mut self) {
        self.api.put("dns", "hosts", &[]);
    }
}

/// external-dns `DNSEndpoint` objects on the Kubernetes API test server (no API server
/// can be installed here; the test server's doc lists what it implements).
pub(super) struct DnsEndpoints {
    pub(super) api: KubeApi,
    pub(super) addr: std::net::SocketAddr,
    pub(super) dir: tempfile::TempDir,
}

impl Backend for DnsEndpoints {
    fn sink_table(&self) -> String {
        let kubeconfig = KubeApi::kubeconfig(self.addr, self.dir.path());
        format!(
            "[sinks.s]\nkind = \"dns_endpoint\"\nnamespace = \"dns\"\nkubeconfig = {:?}\ntimeout = \"1s\"\n{DELIVERY}\n",
            kubeconfig.display().to_string()
        )
    }
    async fn published(&self) -> Option<Vec<String>> {
        let object = self.api.object("dnsendpoints", "dns", "ho-conf")?;
        let mut list: Vec<String> = object["spec"]["endpoints"]
            .as_array()?
            .iter()
            .filter(|e| e["dnsName"] == DOMAIN)
            .flat_map(|e| e["targets"].as_array().cloned().unwrap_or_default())
            .filter_map(|t| t.as_str().map(str::to_owned))
            .collect();
        list.sort();
        (!list.is_empty()).then_some(list)
    }
    async fn outage_start(&mut self) {
        self.api.set_unavailable(true);
    }
    async fn outage_end(&mut self) {
        self.api.set_unavailable(false);
    }
    async fn lose_state(&mut self) {
        self.api.delete("dnsendpoints", "dns", "ho-conf");
    }
}

pub(super) struct Route53 {
    pub(super) moto: Moto,
    pub(super) proxy: Proxy,
    pub(super) url: String,
    pub(super) zone: String,
}

impl Backend for Route53 {
    fn sink_table(&self) -> String {
        format!(
            "[sinks.s]\nkind = \"route53\"\nhosted_zone_id = \"{}\"\nzone = \"tenant-a.io\"\nregion = \"us-east-1\"\nendpoint_url = \"{}\"\ntimeout = \"1s\"\n{DELIVERY}\n",
            self.zone, self.url
        )
    }
    async fn published(&self) -> Option<Vec<String>> {
        let mut list: Vec<String> = self
            .moto
            .records(&self.zone)
            .await
            .iter()
            .filter(|l| l.starts_with(&format!("{DOMAIN}. A ")))
            .filter_map(|l| l.rsplit(' ').next().map(str::to_owned))
            .collect();
        list.sort();
        Some(list).filter(|l| !l.is_empty())
    }
    async fn outage_start(&mut self) {
        self.proxy
            .down
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }
    async fn outage_end(&mut self) {
        self.proxy
            .down
            .store(false, std::sync::atomic::Ordering::SeqCst);
    }
    async fn lose_state(&mut self) {
        self.moto.delete(&self.zone, DOMAIN, "A").await;
    }
}

/// Cloudflare's API, on its test server (no Cloudflare can be run here).
pub(super) struct CloudflareZone {
    pub(super) server: Cloudflare,
    pub(super) token: tempfile::TempDir,
}

impl Backend for CloudflareZone {
    fn sink_table(&self) -> String {
        let file = self.token.path().join("token");
        std::fs::write(&file, CLOUDFLARE_TOKEN).unwrap();
        format!(
            "[sinks.s]\nkind = \"cloudflare\"\nzone_id = \"{ZONE_ID}\"\nzone = \"tenant-a.io\"\napi_token_file = {:?}\nurl = \"{}\"\ntimeout = \"1s\"\n{DELIVERY}\n",
            file.display().to_string(),
            self.server.url
        )
    }
    async fn published(&self) -> Option<Vec<String>> {
        self.server.addresses(DOMAIN)
    }
    async fn outage_start(&mut self) {
        self.server.set_down(true);
    }
    async fn outage_end(&mut self) {
        self.server.set_down(false);
    }
    async fn lose_state(&mut self) {
        self.server.lose(DOMAIN);
    }
    fn tenant_keys(&self) -> &'static str {
        "ttl = \"60s\"\n"
    }
}

/// An external-dns webhook provider, on the test server written from external-dns's
/// protocol and its in-memory provider (no provider of a real DNS API can be reached here),
/// raising TTLs under 60 s in `/adjustendpoints` as providers with a minimum do.
pub(super) struct ExternalDnsWebhook(pub(super) ExternalDnsProvider);

impl Backend for ExternalDnsWebhook {
    fn sink_table(&self) -> String {
        format!(
            "[sinks.s]\nkind = \"external_dns_webhook\"\nurl = \"{}\"\ntimeout = \"1s\"\nmax_requests_per_second = 100\n{DELIVERY}\n",
            self.0.url
        )
    }
    async fn published(&self) -> Option<Vec<String>> {
        self.0.addresses(DOMAIN)
    }
    async fn outage_start(&mut self) {
        self.0.set_down(true);
    }
    async fn outage_end(&mut self) {
        self.0.set_down(false);
    }
    async fn lose_state(&mut self) {
        self.0.lose(DOMAIN);
    }
}

/// Google Cloud DNS's API, on its test server (no Cloud DNS can be run here), with a
/// service account key.
pub(super) struct GoogleZone {
    pub(super) server: GoogleDns,
    pub(super) key: tempfile::TempDir,
}

impl Backend for GoogleZone {
    fn sink_table(&self) -> String {
        format!(
            "[sinks.s]\nkind = \"google_cloud_dns\"\nproject = \"{PROJECT}\"\nmanaged_zone = \"{MANAGED_ZONE}\"\nzone = \"tenant-a.io\"\ncredentials_file = {:?}\nurl = \"{}\"\ntimeout = \"1s\"\n{DELIVERY}\n",
            self.server.key_file(self.key.path()).display().to_string(),
            self.server.url
        )
    }
    async fn published(&self) -> Option<Vec<String>> {
        self.server.addresses(DOMAIN)
    }
    async fn outage_start(&mut self) {
        self.server.set_down(true);
    }
    async fn outage_end(&mut self) {
        self.server.set_down(false);
    }
    async fn lose_state(&mut self) {
        self.server.lose(DOMAIN);
    }
}

/// Azure DNS through Resource Manager, on its test server (no Azure can be run here), with
/// an app registration's client secret.
pub(super) struct AzureZone {
    pub(super) server: AzureDns,
    pub(super) secret: tempfile::TempDir,
}

impl Backend for AzureZone {
    fn sink_table(&self) -> String {
        format!(
            "[sinks.s]\n{}timeout = \"1s\"\n{DELIVERY}\n",
            crate::azure_dns::sink_keys(&self.server, self.secret.path())
        )
    }
    async fn published(&self) -> Option<Vec<String>> {
        self.server.addresses(DOMAIN)
    }
    async fn outage_start(&mut self) {
        self.server.set_down(true);
    }
    async fn outage_end(&mut self) {
        self.server.set_down(false);
    }
    async fn lose_state(&mut self) {
        self.server.lose(DOMAIN);
    }
}

pub(super) struct Webhook {
    pub(super) rx: Receiver,
    pub(super) addr: std::net::SocketAddr,
    pub(super) secret: tempfile::TempDir,
}

impl Backend for Webhook {
    fn sink_table(&self) -> String {
        let file = self.secret.path().join("secret");
        std::fs::write(&file, SECRET).unwrap();
        format!(
            "[sinks.s]\nkind = \"webhook\"\nurl = \"http://{}/\"\nsecret_file = {:?}\ntimeout = \"1s\"\n{DELIVERY}\n",
            self.addr,
            file.display().to_string()
        )
    }
    async fn published(&self) -> Option<Vec<String>> {
        self.rx.accepted().last().map(|d| addresses_of(d, DOMAIN))
    }
    async fn outage_start(&mut self) {
        *self.rx.failing.lock().unwrap() = true;
    }
    async fn outage_end(&mut self) {
        *self.rx.failing.lock().unwrap() = false;
    }
    async fn lose_state(&mut self) {
        self.rx.forget();
    }
}

/// A primary taking RFC 2136 updates; an outage kills it, a lost state is another tool
/// deleting the records.
pub(super) struct Rfc2136(pub(super) Primary);

impl Backend for Rfc2136 {
    fn sink_table(&self) -> String {
        format!(
            "[sinks.s]\nkind = \"rfc2136\"\nserver = \"{}\"\nzone = \"tenant-a.io\"\ntsig = {{ name = \"{KEY}\", secret_file = {:?} }}\ntimeout = \"1s\"\n{DELIVERY}\n",
            self.0.addr,
            self.0.key_file().display().to_string()
        )
    }
    async fn published(&self) -> Option<Vec<String>> {
        Some(dig1(self.0.addr, &[DOMAIN, "A"]).await.sorted()).filter(|l| !l.is_empty())
    }
    async fn outage_start(&mut self) {
        self.0.stop();
    }
    async fn outage_end(&mut self) {
        self.0.launch().await;
    }
    async fn lose_state(&mut self) {
        self.0.nsupdate(&format!("update delete {DOMAIN} A"));
    }
}

/// The embedded server on a loopback address of its own: a serving back end.
pub(super) struct DnsServer(pub(super) std::net::SocketAddr);

impl Backend for DnsServer {
    const SERVING: bool = true;
    fn sink_table(&self) -> String {
        format!(
            "[sinks.s]\nkind = \"dns_server\"\nlisten = [\"{}\"]\nzones = [\"tenant-a.io\"]\n{DELIVERY}\n",
            self.0
        )
    }
    /// `None` while the server answers SERVFAIL (a name pending its first verdicts); an
    /// empty NOERROR answer is `Some([])`, which no step accepts.
    async fn published(&self) -> Option<Vec<String>> {
        let answer = dig1(self.0, &[DOMAIN, "A"]).await;
        (answer.status != "SERVFAIL").then(|| answer.sorted())
    }
    async fn outage_start(&mut self) {
        unreachable!("a serving back end has no outage")
    }
    async fn outage_end(&mut self) {
        unreachable!("a serving back end has no outage")
    }
    async fn lose_state(&mut self) {
        unreachable!("a serving back end loses nothing behind its back")
    }
    /// Until the stopped engine's sockets are closed: in one process, a server started on
    /// the address of a running one takes it over with what it answers (as a reload does),
    /// and step 5 is about a start from nothing.
    async fn released(&self) {
        eventually("the stopped engine's DNS sockets closed", || {
            std::net::UdpSocket::bind(self.0).is_ok() && std::net::TcpListener::bind(self.0).is_ok()
        })
        .await;
    }
}
