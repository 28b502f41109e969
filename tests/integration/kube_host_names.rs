//! A `DNSFailover` whose gateways are load balancers known by host name, end to end: the
//! real binary watches the Kubernetes API test server (`fakes::kube_api`; no real API
//! server can run here) and resolves the names through a real `pdns_server` (as a cloud's
//! DNS answers its load balancers' names). One endpoint comes from `hosts`, one from a
//! LoadBalancer Service whose status reports only a host name (as AWS's do on EKS); both
//! are probed at the addresses their names resolve to and published to a hosts-file sink.

use serde_json::json;

use crate::cname_answers::{balancers, LB_ZONE, PORT};
use crate::fakes::kube_api::KubeApi;
use crate::harness::*;
use crate::kube_tenants::{failover, hosts, operator_config, run_operator, wait_for_condition};
use crate::services::pdns::{PdnsServer, DNS_PORT};

/// The hosts file's addresses, sorted.
fn sorted(content: &str) -> Vec<String> {
    let mut a = addresses(content);
    a.sort();
    a
}

/// Failover moves the answer off a load balancer whose address fails, and when the cloud
/// moves both names to new addresses the published set follows the names, with no edit
/// to any resource.
#[tokio::test]
async fn load_balancer_host_names_from_hosts_and_service_status_are_followed() {
    let pdns = PdnsServer::start(&format!("{LB_ZONE}."));
    let (mut east, west) = balancers(&pdns);
    let kube = KubeApi::default();
    let kube_addr = kube.start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = operator_config(dir.path(), kube_addr, PORT).with(&format!(
        "[resolver]\nservers = [\"{}:{DNS_PORT}\"]\nmin_refresh = \"1s\"\ntimeout = \"500ms\"\n",
        pdns.ip
    ));
    let _process = run_operator(dir.path(), &config);

    kube.apply(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "shop-lb", "namespace": "team-a"},
        "spec": {"type": "LoadBalancer"},
        "status": {"loadBalancer": {"ingress": [{"hostname": format!("lb-west.{LB_ZONE}")}]}},
    }));
    kube.apply(failover(
        "team-a",
        "shop",
        "shop.team-a.io",
        json!([{"hosts": [format!("lb-east.{LB_ZONE}")]}, {"service": "shop-lb"}]),
    ));
    let file = hosts(dir.path(), "team-a_shop");
    let mut both = vec![ip(&east), ip(&west)];
    both.sort();
    wait_for_file(&file, "both load balancers' addresses", |c| {
        sorted(c) == both
    })
    .await;
    wait_for_condition(&kube, "team-a", "shop", "Ready", "True", "Published").await;

    east.set(ho_testkit::Behaviour::Refuse).unwrap();
    wait_for_file(&file, "west's address alone", |c| sorted(c) == [ip(&west)]).await;

    // The cloud moves both names to new addresses (the old ones keep answering, east's
    // still failing): the published set follows the names.
    let (east2, west2) = balancers(&pdns);
    let mut moved = vec![ip(&east2), ip(&west2)];
    moved.sort();
    let took = wait_for_file(&file, "the names' new addresses", |c| sorted(c) == moved).await;
    println!("both names moved: published in {} ms", took.as_millis());
    drop((east, west, east2, west2));
}
