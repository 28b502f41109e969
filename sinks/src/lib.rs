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

use std::sync::Arc;

use aws_config::SdkConfig;
use ho_config::{Plan, SinkConfig};
use ho_engine::sink::{BuildFuture, Sink, SinkBuildError, SinkFactory};

/// Builds the sinks of this crate for the engine, at start and on every reload.
#[derive(Default)]
pub struct Sinks {
    /// Region and credentials for Route53 sinks; `None` loads them the standard AWS way
    /// (environment, profile, instance role) for each sink.
    aws: Option<SdkConfig>,
}

impl Sinks {
    /// Sinks whose Route53 clients use `aws` (for embedding the engine where the AWS
    /// configuration is already at hand, and for tests against compatible servers).
    pub fn with_aws(aws: SdkConfig) -> Sinks {
        Sinks { aws: Some(aws) }
    }
}

impl SinkFactory for Sinks {
    fn build<'a>(&'a self, name: &'a str, plan: &'a Plan) -> BuildFuture<'a> {
        Box::pin(async move {
            build(name, &plan.sinks[name], &plan.owner_id, self.aws.as_ref())
                .await
                .map_err(|message| SinkBuildError {
                    sink: name.to_owned(),
                    message,
                })
        })
    }
}

/// Builds the sink a `[sinks.NAME]` table describes. Fails when a secret, TLS file or
/// kubeconfig cannot be read. Async because cloud credentials are looked up (without
/// contacting the back end itself).
async fn build(
    name: &str,
    config: &SinkConfig,
    owner_id: &str,
    aws: Option<&SdkConfig>,
) -> Result<Arc<dyn Sink>, String> {
    let _ = name;
    let sink: Arc<dyn Sink> = match config {
        SinkConfig::HostsFile { dir, .. } => Arc::new(hosts_file::HostsFileSink::new(dir.clone())),
        SinkConfig::PowerDns(c) => Arc::new(powerdns::PowerDnsSink::new(c, owner_id)?),
        SinkConfig::Webhook(c) => Arc::new(webhook::WebhookSink::new(c)?),
        SinkConfig::CorednsConfigMap(c) => {
            Arc::new(coredns_configmap::CorednsConfigMapSink::new(c).await?)
        }
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
