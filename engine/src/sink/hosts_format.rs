//! The hosts-file text of a tenant, shared by every sink that writes hosts files
//! (the `hosts_file` sink, and the CoreDNS ConfigMap sink).

use std::fmt::Write;

use crate::snapshot::TenantSnapshot;

/// One line per address, `ADDR domain1 domain2 ...`, addresses sorted (IPv4 first), the
/// format CoreDNS's `hosts` plugin and dnsmasq's `--addn-hosts` read. No comments: the file
/// holds records only, so line counts equal address counts. An empty set renders as an
/// empty file (only reachable with `on_all_unhealthy = "publish_none"`).
pub fn render(snapshot: &TenantSnapshot) -> String {
    let mut addresses: Vec<_> = snapshot.addresses.iter().map(|a| a.address).collect();
    addresses.sort();
    addresses.dedup();
    let mut out = String::with_capacity(
        addresses.len() * (16 + snapshot.domains.iter().map(|d| d.len() + 1).sum::<usize>()),
    );
    for address in addresses {
        write!(out, "{address}").expect("writing to a String cannot fail");
        for domain in &snapshot.domains {
            out.push(' ');
            out.push_str(domain);
        }
        out.push('\n');
    }
    out
}
