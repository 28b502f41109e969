//! Every kind the program knows, in one place: the sink kinds of `ho-dns`, `ho-sinks` and
//! `ho-kube` and the check kinds of the engine and `ho-dns`, as validation ([`CATALOG`],
//! [`load_plan`]), the engine ([`parts`]: the sink factory and the DNS client),
//! `check-config` ([`preflight`]), `probe` URLs ([`CHECK_KINDS`]) and editors
//! ([`schema::config_schema`]) take them. Adding a sink kind is: its folder in the crate
//! that speaks its protocol (its settings type implementing
//! [`ho_engine::sink::kind::SinkSettings`], the writer beside it), one line in
//! [`SINK_KINDS`], and its back end in the conformance suite
//! (`tests/integration/conformance/`).
//!
//! | kind | crate |
//! |---|---|
//! | `hosts_file` | `ho-sinks` |
//! | `powerdns` | `ho-sinks` |
//! | `webhook` | `ho-sinks` |
//! | `coredns_configmap` | `ho-kube` |
//! | `route53` | `ho-sinks` |
//! | `dns_server` | `ho-dns` |
//! | `rfc2136` | `ho-dns` |
//! | `cloudflare` | `ho-sinks` |
//! | `google_cloud_dns` | `ho-sinks` |
//! | `azure_dns` | `ho-sinks` |
//! | `external_dns_webhook` | `ho-sinks` |
//! | `dns_endpoint` | `ho-kube` |
//!
//! Adding a check kind is its settings type implementing
//! [`ho_engine::probe::CheckSettings`] in the crate that speaks its protocol, and one line
//! in [`CHECK_KINDS`].
//!
//! | check kind | crate |
//! |---|---|
//! | `http` | `ho-engine` |
//! | `https` | `ho-engine` |
//! | `tcp` | `ho-engine` |
//! | `dns` | `ho-dns` |
//! | `grpc` | `ho-engine` |
//! | `grpcs` | `ho-engine` |
//! | `icmp` | `ho-engine` |
//! | `heartbeat` | `ho-engine` |
//! | `feed` | `ho-engine` |

pub mod schema;

use std::sync::Arc;

use aws_config::SdkConfig;
use ho_config::{FieldError, Kinds, Plan};
use ho_engine::metrics::Metrics;
use ho_engine::probe::{kinds, CheckList};
use ho_engine::secret::Secret;
use ho_engine::sink::kind::{BuildContext, Extensions, KindList, Registered};
use ho_engine::sink::{BuildFuture, SinkBuildError, SinkFactory};
use ho_engine::Parts;

/// Every sink kind this program knows, in the order error messages list them.
pub const SINK_KINDS: KindList = KindList(&[
    &Registered::<ho_sinks::HostsFileConfig>::KIND,
    &Registered::<ho_sinks::PowerDnsConfig>::KIND,
    &Registered::<ho_sinks::WebhookConfig>::KIND,
    &Registered::<ho_kube::CorednsConfigMapConfig>::KIND,
    &Registered::<ho_sinks::Route53Config>::KIND,
    &Registered::<ho_dns::DnsServerConfig>::KIND,
    &Registered::<ho_dns::Rfc2136Config>::KIND,
    &Registered::<ho_sinks::CloudflareConfig>::KIND,
    &Registered::<ho_sinks::GoogleCloudDnsConfig>::KIND,
    &Registered::<ho_sinks::AzureDnsConfig>::KIND,
    &Registered::<ho_sinks::ExternalDnsWebhookConfig>::KIND,
    &Registered::<ho_kube::DnsEndpointConfig>::KIND,
]);

/// Every check kind this program knows, in the order error messages list them.
pub const CHECK_KINDS: CheckList = CheckList(&[
    kinds::HTTP,
    kinds::HTTPS,
    kinds::TCP,
    ho_dns::DNS_CHECK,
    kinds::GRPC,
    kinds::GRPCS,
    kinds::ICMP,
    kinds::HEARTBEAT,
    kinds::FEED,
]);

/// The component kinds of this program, as validation takes them: every sink kind and
/// every check kind.
pub const CATALOG: Kinds<'static> = Kinds {
    sinks: &SINK_KINDS,
    checks: &CHECK_KINDS,
};

/// What the engine is handed: `sinks` builds the sinks, `ho-dns` asks DNS servers.
pub fn parts(sinks: Sinks) -> Parts {
    Parts {
        sinks: Arc::new(sinks),
        dns: Arc::new(ho_dns::Client),
    }
}

/// Builds the sinks for the engine, at start and on every reload.
#[derive(Default)]
pub struct Sinks {
    /// What the kinds that need more than their settings are handed: the Route53 sinks'
    /// region and credentials (none: each sink loads them the standard AWS way).
    extensions: Extensions,
}

impl Sinks {
    /// Sinks whose Route53 clients use `aws` (for embedding the engine where the AWS
    /// configuration is already at hand, and for tests against compatible servers).
    pub fn with_aws(aws: SdkConfig) -> Sinks {
        let mut extensions = Extensions::default();
        extensions.insert(aws);
        Sinks { extensions }
    }
}

impl SinkFactory for Sinks {
    fn build<'a>(
        &'a self,
        name: &'a str,
        plan: &'a Plan,
        metrics: &'a Arc<Metrics>,
    ) -> BuildFuture<'a> {
        Box::pin(async move {
            let spec = &*plan.sinks[name].spec;
            let ctx = BuildContext {
                name,
                plan,
                owner_id: &plan.owner_id,
                extensions: &self.extensions,
                metrics,
            };
            SINK_KINDS
                .of(spec)
                .build(spec, ctx)
                .await
                .map_err(|source| SinkBuildError {
                    sink: name.to_owned(),
                    source,
                })
        })
    }

    fn register_metrics(&self, metrics: &Metrics) {
        metrics.set::<ho_dns::ServerMetrics>();
    }
}

/// What `run` would refuse in a valid `plan`: every sink's secrets, CA files, kubeconfig and
/// databases, and every https target's CA file, read as building them reads them. Nothing
/// binds a socket or contacts a back end.
pub fn preflight(plan: &Plan) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (name, sink) in &plan.sinks {
        errors.extend(SINK_KINDS.of(&*sink.spec).preflight(name, &*sink.spec));
    }
    for (path, file) in [
        ("api.token_file", &plan.api_token_file),
        ("api.admin_token_file", &plan.api_admin_token_file),
        ("api.heartbeat_token_file", &plan.api_heartbeat_token_file),
    ] {
        if let Some(file) = file {
            if let Err(e) = Secret::load(Some(file), None) {
                errors.push(FieldError {
                    path: path.into(),
                    reason: e.to_string(),
                });
            }
        }
    }
    // Every probe as the engine builds it (TLS trust: CA files read); a problem shared by
    // several endpoints is reported at the first.
    let mut ctx = ho_engine::probe::ProbeContext::default();
    let mut seen = std::collections::HashSet::new();
    for (i, endpoint) in plan.endpoints.iter().enumerate() {
        for (j, target) in endpoint.targets().enumerate() {
            if let Err(e) = ho_engine::probe::Probe::new(&plan.targets[target], &mut ctx) {
                if seen.insert(e.to_string()) {
                    errors.push(FieldError {
                        path: match j {
                            0 => format!("endpoints[{i}].check"),
                            j => format!("endpoints[{i}].checks[{}]", j - 1),
                        },
                        reason: e.to_string(),
                    });
                }
            }
        }
    }
    errors
}

/// Loads, layers and validates config files with every kind of this program.
pub fn load_plan(files: &[impl AsRef<std::path::Path>]) -> Result<Plan, ho_config::ConfigError> {
    ho_config::load_plan(files, &CATALOG)
}

/// [`load_plan`], with YAML config files translated by `yaml` (the binary's importers).
pub fn load_plan_reading(
    files: &[impl AsRef<std::path::Path>],
    yaml: ho_config::YamlReader<'_>,
) -> Result<Plan, ho_config::ConfigError> {
    ho_config::load_plan_reading(files, Some(yaml), &CATALOG)
}
