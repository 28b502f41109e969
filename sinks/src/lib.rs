//! The DNS back ends ("sinks"). Each implements [`ho_engine::sink::Sink`]: make the back end
//! match a tenant's full desired state. Coalescing, rate limits, retries, reconcile and
//! status live in the engine's sink actor, so a sink here is only the write.
//!
//! | kind | module |
//! |---|---|
//! | `hosts_file` | [`hosts_file`] |
//! | `powerdns` | [`powerdns`] |
//! | `webhook` | [`webhook`] |

pub mod hosts_file;
pub mod hosts_format;
pub mod http;
pub mod powerdns;
pub mod secret;
pub mod webhook;

use std::collections::BTreeMap;
use std::sync::Arc;

use ho_config::{Plan, SinkConfig};
use ho_engine::sink::Sink;

/// Builds the sink a `[sinks.NAME]` table describes. Fails when a secret or TLS file cannot
/// be read, naming the sink.
pub fn build(name: &str, config: &SinkConfig, owner_id: &str) -> Result<Arc<dyn Sink>, String> {
    let sink: Arc<dyn Sink> = match config {
        SinkConfig::HostsFile { dir, .. } => Arc::new(hosts_file::HostsFileSink::new(dir.clone())),
        SinkConfig::PowerDns(c) => Arc::new(
            powerdns::PowerDnsSink::new(c, owner_id).map_err(|e| format!("sinks.{name}: {e}"))?,
        ),
        SinkConfig::Webhook(c) => {
            Arc::new(webhook::WebhookSink::new(c).map_err(|e| format!("sinks.{name}: {e}"))?)
        }
    };
    Ok(sink)
}

/// Builds every sink of `plan`.
pub fn build_all(plan: &Plan) -> Result<BTreeMap<String, Arc<dyn Sink>>, String> {
    plan.sinks
        .iter()
        .map(|(name, config)| Ok((name.clone(), build(name, config, &plan.owner_id)?)))
        .collect()
}
