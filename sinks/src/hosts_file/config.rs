//! `kind = "hosts_file"`: settings, checks and capabilities.

use std::path::PathBuf;
use std::sync::Arc;

use ho_config::{Claim, FieldError, RoutingPolicy, SinkSpec, TenantUse};
use schemars::JsonSchema;
use serde::Deserialize;

use ho_engine::sink::kind::{plain_lists_only, BuildContext, KindFuture, Problems, SinkSettings};

/// One hosts file per tenant (`<dir>/<tenant>.hosts`), the format CoreDNS's `hosts` plugin
/// and dnsmasq's `--addn-hosts` read.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HostsFileConfig {
    /// Directory holding the files; created if missing.
    pub dir: PathBuf,
}

impl SinkSettings for HostsFileConfig {
    const KIND: &'static str = "hosts_file";

    fn check(&mut self, p: &mut Problems<'_>) {
        if self.dir.as_os_str().is_empty() {
            p.at("dir", "must not be empty");
        }
    }

    fn build<'a>(&'a self, _: BuildContext<'a>) -> KindFuture<'a> {
        let dir = self.dir.clone();
        Box::pin(async move { Ok(Arc::new(super::HostsFileSink::new(dir)) as _) })
    }

    /// The sink makes `dir` on its first write and retries while it cannot, so a folder
    /// that cannot be made (under `/proc`, below a file, read-only) is said here instead.
    fn preflight(&self, p: &mut Problems<'_>) {
        if let Err(e) = ho_engine::state_file::writable(&self.dir) {
            p.at(
                "dir",
                format!("{e}: the sink could not write its hosts files"),
            );
        }
    }
}

impl SinkSpec for HostsFileConfig {
    fn kind(&self) -> &'static str {
        Self::KIND
    }

    /// A hosts file lists addresses; it cannot answer per client.
    fn supports(&self, policy: RoutingPolicy) -> Result<(), &'static str> {
        plain_lists_only(policy)
    }

    fn check_tenant(&self, _: &str, _: &TenantUse<'_>, _: &mut Vec<FieldError>) {}

    fn claim(&self) -> Option<Claim> {
        (!self.dir.as_os_str().is_empty()).then(|| Claim {
            key: format!("dir:{}", self.dir.display()),
            field: "dir",
            clash: |other| {
                format!("same directory as sinks.{other}; two sinks would write the same files")
            },
        })
    }

    /// Each replica writes the hosts file of its own node (a volume CoreDNS on that node
    /// or a sidecar reads), so it writes as standby too.
    fn shared(&self) -> bool {
        false
    }
}
