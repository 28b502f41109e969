//! The CoreDNS ConfigMap sink through the real kube-rs client against the Kubernetes API
//! test server in [`crate::kube_api`] (no kube-apiserver can be installed here; see its doc
//! for what is faithful), and the written content served by a real resolver (dnsmasq).

use std::time::Duration;

use ho_engine::Engine;
use ho_testkit::{Behaviour, Gateway};

use crate::fakes::kube_api::KubeApi;
use crate::harness::*;
use crate::services::dnsmasq::Dnsmasq;

const NS: &str = "kube-system";
const NAME: &str = "ho-hosts";

/// The engine over `gws` with a `coredns_configmap` sink (`extra`: more sink settings).
async fn start_k8s_engine(
    dir: &std::path::Path,
    gws: &[Gateway],
    api: std::net::SocketAddr,
    extra: &str,
) -> Engine {
    let kubeconfig = KubeApi::kubeconfig(api, dir);
    let tail = format!(
        "[[tenants]]\nname = \"a\"\ndomains = [\"api.tenant-a.io\", \"www.tenant-a.io\"]\nsinks = [\"k8s\"]\n\n\
         [sinks.k8s]\nkind = \"coredns_configmap\"\nnamespace = \"{NS}\"\nname = \"{NAME}\"\nkubeconfig = {:?}\ntimeout = \"1s\"\n{extra}\
         delivery = {{ backoff_min = \"50ms\", backoff_max = \"300ms\", reconcile_interval = \"1s\" }}\n",
        kubeconfig.display().to_string()
    );
    start_engine(
        dir,
        &config(&Check::FAST, &gws.iter().collect::<Vec<_>>(), &tail),
    )
    .await
}

/// Waits until the tenant's key holds exactly `want` addresses (sorted).
async fn wait_for_key(api: &KubeApi, want: &[String], what: &str) -> String {
    let start = tokio::time::Instant::now();
    loop {
        let content = api
            .data(NS, NAME)
            .and_then(|d| d.get("a.hosts").cloned())
            .unwrap_or_default();
        let mut got = addresses(&content);
        got.sort();
        if got == want {
            return content;
        }
        assert!(
            start.elapsed() < LIMIT,
            "timed out waiting for {what}; a.hosts holds:\n{content}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Gateway down and up: the tenant's key follows, CoreDNS's own `Corefile` key in the same
/// ConfigMap is never touched, writes are merge patches with a resourceVersion, and the
/// content is answered by a real hosts-file resolver.
#[actix_rt::test]
async fn the_tenant_key_follows_health_and_other_keys_stay() {
    let api = KubeApi::default();
    let corefile = ".:53 {\n    hosts /etc/coredns/a.hosts { reload 1s }\n}\n";
    api.put(NS, NAME, &[("Corefile", corefile)]);
    let addr = api.start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(3);
    let _engine = start_k8s_engine(dir.path(), &gws, addr, "").await;
    let mut all: Vec<String> = gws.iter().map(ip).collect();
    all.sort();
    let content = wait_for_key(&api, &all, "all three published").await;

    let dns = Dnsmasq::start(dir.path(), &content).await;
    assert_eq!(dns.query("api.tenant-a.io", "A"), all);
    assert_eq!(dns.query("www.tenant-a.io", "A"), all);

    gws[1].set(Behaviour::Refuse).unwrap();
    let left = vec![ip(&gws[0]), ip(&gws[2])];
    let content = wait_for_key(&api, &left, "gw-2 removed").await;
    dns.reload(&content);
    let start = tokio::time::Instant::now();
    while dns.query("api.tenant-a.io", "A") != left {
        assert!(start.elapsed() < LIMIT, "dnsmasq still answers the old set");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    gws[1].set(Behaviour::Healthy).unwrap();
    wait_for_key(&api, &all, "gw-2 back").await;
    assert_eq!(api.data(NS, NAME).unwrap()["Corefile"], corefile);
    let patches: Vec<String> = api
        .requests()
        .into_iter()
        .filter(|r| r.starts_with("PATCH"))
        .collect();
    assert!(
        patches
            .iter()
            .all(|r| r.ends_with("application/merge-patch+json")),
        "{patches:?}"
    );
    // Three changes of content; reconciles of unchanged content write nothing.
    assert_eq!(patches.len(), 3, "{patches:?}");
}

/// Someone edits another key between the sink's read and its write: the API server refuses
/// the stale patch (409), the sink reads again, and both edits survive.
#[actix_rt::test]
async fn a_concurrent_edit_is_kept_and_the_write_retried() {
    let api = KubeApi::default();
    api.put(NS, NAME, &[("Corefile", "old")]);
    let addr = api.start().await;
    let dir = tempfile::tempdir().unwrap();
    let gws = gateways(2);
    api.interleave_edit("Corefile", "edited by an operator");
    let _engine = start_k8s_engine(dir.path(), &gws, addr, "").await;
    let mut all: Vec<String> = gws.iter().map(ip).collect();
    all.sort();
    wait_for_key(&api, &all, "published despite the conflict").await;
    assert_eq!(
        api.data(NS, NAME).unwrap()["Corefile"],
        "edited by an operator"
    );
    let patches = api
        .requests()
        .iter()
        .filter(|r| r.starts_with("PATCH"))
        .count();
    assert_eq!(patches, 2, "one refused as stale, one applied");
}

/// Missing RBAC: the error names the verb, resource and namespace; once granted, the
/// write lands without a restart.
#[actix_rt::test]
async fn a_forbidden_write_names_the_missing_permission() {
    let api = KubeApi::default();
    api.put(NS, NAME, &[]);
    api.deny("patch", true);
    let addr = api.start().await;
    let dir = tempfile::tempdir().unwrap();
    let gws = gateways(1);
    let engine = start_k8s_engine(dir.path(), &gws, addr, "").await;
    let err = wait_for_sink_error(&engine, "k8s", "no error for a missing permission").await;
    assert!(
        err.starts_with("the service account may not patch configmaps in namespace kube-system (needs verb \"patch\" on resource \"configmaps\", resourceNames [\"ho-hosts\"]"),
        "{err}"
    );
    api.deny("patch", false);
    wait_for_key(&api, &[ip(&gws[0])], "written once permitted").await;
}

/// A missing ConfigMap is an error naming it, unless `create = true`.
#[actix_rt::test]
async fn a_missing_configmap_is_reported_or_created() {
    let api = KubeApi::default();
    let addr = api.start().await;
    let dir = tempfile::tempdir().unwrap();
    let gws = gateways(1);
    let engine = start_k8s_engine(dir.path(), &gws, addr, "").await;
    let err = wait_for_sink_error(&engine, "k8s", "no error for a missing ConfigMap").await;
    assert_eq!(
        err,
        "ConfigMap kube-system/ho-hosts does not exist; create it (deploy/kubernetes has one) or set create = true"
    );
    assert!(api.data(NS, NAME).is_none());
    drop(engine);

    let dir = tempfile::tempdir().unwrap();
    let _engine = start_k8s_engine(dir.path(), &gws, addr, "create = true\n").await;
    wait_for_key(&api, &[ip(&gws[0])], "created").await;
}
