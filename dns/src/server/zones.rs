//! The zones a server is authoritative for, from its settings: each apex with its SOA names
//! and name servers, kept longest apex first so nested zones answer from the innermost.

use hickory_proto::rr::Name;

use super::config::DnsServerConfig;
use super::names::fqdn;

/// A zone the server is authoritative for.
pub struct Zone {
    /// Lower case, no trailing dot.
    pub apex: String,
    /// `.` + apex, to test "inside" without allocating.
    pub dot_apex: String,
    /// The apex as a name.
    pub name: Name,
    /// The SOA's primary name server.
    pub mname: Name,
    /// The SOA's mailbox of the person responsible.
    pub rname: Name,
    /// The apex's NS records.
    pub nameservers: Vec<Name>,
}

impl Zone {
    /// The zones of `config`, longest apex first so nested zones answer from the innermost;
    /// each with its SOA names and name servers (`ns1.<apex>` unless given).
    pub fn all_of(config: &DnsServerConfig) -> Result<Vec<Zone>, String> {
        let mut zones = Vec::new();
        let fqdn = |s: &str| fqdn(s).map_err(|e| e.to_string());
        for apex in &config.zones {
            let mname = config.soa.mname.clone().unwrap_or(format!("ns1.{apex}"));
            let rname = config
                .soa
                .rname
                .clone()
                .unwrap_or(format!("hostmaster.{apex}"));
            let nameservers = if config.nameservers.is_empty() {
                vec![fqdn(&mname)?]
            } else {
                config
                    .nameservers
                    .iter()
                    .map(|n| fqdn(n))
                    .collect::<Result<_, _>>()?
            };
            zones.push(Zone {
                apex: apex.clone(),
                dot_apex: format!(".{apex}"),
                name: fqdn(apex)?,
                mname: fqdn(&mname)?,
                rname: fqdn(&rname)?,
                nameservers,
            });
        }
        zones.sort_by_key(|z| std::cmp::Reverse(z.apex.len()));
        Ok(zones)
    }

    /// Whether the name keyed `key` is this zone's apex or inside it.
    pub fn holds(&self, key: &str) -> bool {
        key == self.apex || key.ends_with(&self.dot_apex)
    }
}
