//! The operator's sinks the imported resources publish to, when the import is given the
//! config (`--config`): a Gslb whose strategy becomes a policy one of them cannot carry
//! is refused at import, saying what to do, rather than by `check-config --resource`
//! after. An external-dns sink (`external_dns_webhook`, `dns_endpoint`) answers every
//! target of a record set alike: external-dns carries weights and locations only as one
//! provider's `providerSpecific` properties, which these sinks do not write.

use std::collections::BTreeMap;
use std::sync::Arc;

use ho_config::{Config, RoutingPolicy, SinkCatalog, SinkSpec};

/// Why the sinks named cannot publish a Gslb's resources.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// The config does not load.
    #[error("--config: {0}")]
    Config(String),
    /// A `--sink` names no sink of the config.
    #[error("--sink {name}: the config has no sink of that name (its sinks: {known})")]
    Unknown {
        /// The name given.
        name: String,
        /// The config's sinks, joined.
        known: String,
    },
    /// A sink cannot carry the policy the Gslb's strategy becomes.
    #[error(transparent)]
    Cannot(Box<Cannot>),
}

/// A sink that cannot carry the policy a Gslb's strategy becomes, and what to do instead.
#[derive(Debug, thiserror::Error)]
#[error("{at}: strategy {strategy} becomes policy {policy}, which sink \"{sink}\" ({kind}) cannot carry{hint}. Either import it for a sink that can (--sink NAME: dns_server, route53, or powerdns with lua = true; --sink applies to every Gslb of a run, so import the Gslbs needing it in a run of their own, split from the others by hand), or {instead}")]
pub struct Cannot {
    at: String,
    strategy: String,
    policy: String,
    sink: String,
    kind: &'static str,
    hint: &'static str,
    instead: &'static str,
}

/// The sinks named, as the config's kinds parse them.
pub struct Sinks(BTreeMap<String, Arc<dyn SinkSpec>>);

impl Sinks {
    /// The sinks `names` of the operator's `config`, as `catalog`'s kinds parse them.
    pub fn of(
        config: &Config,
        names: &[String],
        catalog: &dyn SinkCatalog,
    ) -> Result<Sinks, SinkError> {
        let mut specs = BTreeMap::new();
        for name in names {
            let unknown = || SinkError::Unknown {
                name: name.clone(),
                known: config.sinks.keys().cloned().collect::<Vec<_>>().join(", "),
            };
            let table = config.sinks.get(name).ok_or_else(unknown)?;
            let parsed = catalog.parse(name, table);
            let spec = parsed.spec.ok_or_else(|| {
                let errors: Vec<String> = parsed.errors.iter().map(|e| e.to_string()).collect();
                SinkError::Config(errors.join("; "))
            })?;
            specs.insert(name.clone(), spec);
        }
        Ok(Sinks(specs))
    }

    /// Whether every sink carries `policy`, the Gslb at `at`'s `strategy` (its type).
    pub fn carry(&self, at: &str, strategy: &str, policy: RoutingPolicy) -> Result<(), SinkError> {
        for (sink, spec) in &self.0 {
            if let Err(hint) = spec.supports(policy) {
                let instead = match policy {
                    RoutingPolicy::Weighted => "drop strategy.weight from the Gslb before importing it: roundRobin then publishes every healthy address alike, which an external-dns sink carries",
                    _ => "change the Gslb's strategy before importing it to roundRobin (every healthy address) or failover (primaryGeoTag first), which an external-dns sink carries",
                };
                return Err(SinkError::Cannot(Box::new(Cannot {
                    at: at.to_owned(),
                    strategy: strategy.to_owned(),
                    policy: serde_json::to_value(policy)
                        .ok()
                        .and_then(|p| p.as_str().map(str::to_owned))
                        .unwrap_or_default(),
                    sink: sink.clone(),
                    kind: spec.kind(),
                    hint,
                    instead,
                })));
            }
        }
        Ok(())
    }
}
