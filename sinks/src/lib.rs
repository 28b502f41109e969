//! The DNS back ends ("sinks"). Each implements [`ho_engine::sink::Sink`]: make the back end
//! match a tenant's full desired state. Coalescing, retries and status live in the engine's
//! sink actor, so a sink here is only the write.
//!
//! | kind | module |
//! |---|---|
//! | `hosts_file` | [`hosts_file`] |

pub mod hosts_file;
pub mod hosts_format;

use std::sync::Arc;

use ho_config::SinkConfig;
use ho_engine::sink::Sink;

/// Builds the sink a `[sinks.NAME]` table describes.
pub fn build(config: &SinkConfig) -> Arc<dyn Sink> {
    match config {
        SinkConfig::HostsFile { dir } => Arc::new(hosts_file::HostsFileSink::new(dir.clone())),
    }
}
