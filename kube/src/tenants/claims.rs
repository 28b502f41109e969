//! Who publishes which domain: the first claimant keeps a name.

use std::collections::{HashMap, HashSet};

use ho_config::Config;

use super::admit::{refuse, Key, Verdict};

/// Who publishes which domain: the files' tenants, then each accepted resource.
pub(super) struct Claims {
    domains: HashMap<String, String>,
    tenants: HashSet<String>,
}

impl Claims {
    pub(super) fn of_files(base: &Config) -> Claims {
        let mut domains = HashMap::new();
        for t in &base.tenants {
            for d in &t.domains {
                let d = ho_config::names::normalize_domain(d).unwrap_or_else(|_| d.clone());
                domains.insert(d, format!("[[tenants]] \"{}\" of the config files", t.name));
            }
        }
        Claims {
            domains,
            tenants: base.tenants.iter().map(|t| t.name.clone()).collect(),
        }
    }

    /// Takes every domain, or none when one is already held.
    pub(super) fn claim(
        &mut self,
        k: &Key,
        tenant: &str,
        domains: &[String],
    ) -> Result<(), Verdict> {
        if self.tenants.contains(tenant) {
            return Err(refuse(
                "NameClaimed",
                format!("tenant name \"{tenant}\" is already used by the config files"),
            ));
        }
        let normalized: Vec<String> = domains
            .iter()
            .map(|d| ho_config::names::normalize_domain(d).unwrap_or_else(|_| d.clone()))
            .collect();
        for (i, d) in normalized.iter().enumerate() {
            if let Some(holder) = self.domains.get(d) {
                return Err(refuse(
                    "DomainClaimed",
                    format!("spec.domains[{i}]: \"{d}\" is already published by {holder}; the first claimant keeps a name"),
                ));
            }
        }
        for d in normalized {
            self.domains
                .insert(d, format!("DNSFailover {}/{}", k.0, k.1));
        }
        self.tenants.insert(tenant.to_owned());
        Ok(())
    }
}
