//! The DNS back ends ("sinks"). Each implements [`ho_engine::sink::Sink`]: make the back end
//! match a tenant's full desired state. Coalescing, rate limits, retries, reconcile and
//! status live in the engine's sink actor, so a sink here is only the write.
//!
//! | kind | module |
//! |---|---|
//! | `hosts_file` | [`hosts_file`] |
//! | `powerdns` | [`powerdns`] |
//! | `webhook` | [`webhook`] |
//! | `coredns_configmap` | [`coredns_configmap`] |
//! | `route53` | [`route53`] |

pub mod coredns_configmap;
pub mod hosts_file;
pub mod hosts_format;
pub mod http;
pub mod powerdns;
pub mod route53;
pub mod secret;
pub mod webhook;

use std::collections::BTreeMap;
use std::sync::Arc;

use aws_config::SdkConfig;
use ho_config::{Plan, SinkConfig};
use ho_engine::sink::Sink;

/// Builds the sink a `[sinks.NAME]` table describes. Fails when a secret, TLS file or
/// kubeconfig cannot be read, naming the sink. Async because cloud credentials are looked up
/// (without contacting the back end itself).
/// `aws`: region and credentials for Route53 sinks; `None` loads them the standard AWS way.
pub async fn build(
    name: &str,
    config: &SinkConfig,
    owner_id: &str,
    aws: Option<&SdkConfig>,
) -> Result<Arc<dyn Sink>, String> {
    let sink: Arc<dyn Sink> = match config {
        SinkConfig::HostsFile { dir, .. } => Arc::new(hosts_file::HostsFileSink::new(dir.clone())),
        SinkConfig::PowerDns(c) => Arc::new(
            powerdns::PowerDnsSink::new(c, owner_id).map_err(|e| format!("sinks.{name}: {e}"))?,
        ),
        SinkConfig::Webhook(c) => {
            Arc::new(webhook::WebhookSink::new(c).map_err(|e| format!("sinks.{name}: {e}"))?)
        }
        SinkConfig::CorednsConfigMap(c) => Arc::new(
            coredns_configmap::CorednsConfigMapSink::new(c)
                .await
                .map_err(|e| format!("sinks.{name}: {e}"))?,
        ),
        SinkConfig::Route53(c) => match aws {
            Some(sdk) => Arc::new(route53::Route53Sink::new(c, owner_id, sdk)),
            None => {
                let sdk = route53::standard_sdk_config(c).await;
                Arc::new(route53::Route53Sink::new(c, owner_id, &sdk))
            }
        },
    };
    Ok(sink)
}

/// Builds every sink of `plan`, with AWS region and credentials loaded the standard way.
pub async fn build_all(plan: &Plan) -> Result<BTreeMap<String, Arc<dyn Sink>>, String> {
    build_all_with(plan, None).await
}

/// Builds every sink of `plan`; Route53 sinks use `aws` (for embedding the engine where the
/// AWS configuration is already at hand, and for tests against compatible servers).
pub async fn build_all_with(
    plan: &Plan,
    aws: Option<&SdkConfig>,
) -> Result<BTreeMap<String, Arc<dyn Sink>>, String> {
    let mut sinks = BTreeMap::new();
    for (name, config) in &plan.sinks {
        sinks.insert(
            name.clone(),
            build(name, config, &plan.owner_id, aws).await?,
        );
    }
    Ok(sinks)
}
