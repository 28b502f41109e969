//! The checks of the `dns_server` sink's feature tables (`transfer`, `reports`, `xdp`,
//! `rate_limit`, `geo.networks`), each naming the key at fault.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use ho_engine::sink::kind::Problems;

use super::{RateLimitConfig, ReportsConfig, TransferConfig, XdpConfig};

/// `geo.networks` with every location upper-cased; a key that is not a network or an
/// empty location is a problem.
pub(super) fn checked_networks(
    given: BTreeMap<String, String>,
    p: &mut Problems<'_>,
) -> BTreeMap<String, String> {
    let mut networks = BTreeMap::new();
    for (net, geo) in given {
        if net.parse::<ipnet::IpNet>().is_err() {
            p.at(
                &format!("geo.networks.\"{net}\""),
                "is not a network (address/prefix, e.g. 10.1.0.0/16)",
            );
        }
        if geo.is_empty() {
            p.at(
                &format!("geo.networks.\"{net}\""),
                "location must not be empty",
            );
        }
        networks.insert(net, geo.to_ascii_uppercase());
    }
    networks
}

/// `transfer`: networks that parse, at least one; the key's name and algorithm.
pub(super) fn check_transfer(transfer: &mut TransferConfig, p: &mut Problems<'_>) {
    if transfer.allow.is_empty() {
        p.at(
            "transfer.allow",
            "must list the secondaries' networks (e.g. [\"192.0.2.53/32\"])",
        );
    }
    for (i, net) in transfer.allow.iter().enumerate() {
        if net.parse::<ipnet::IpNet>().is_err() {
            p.at(
                &format!("transfer.allow[{i}]"),
                format!("\"{net}\" is not a network (address/prefix, e.g. 192.0.2.53/32)"),
            );
        }
    }
    if let Some(tsig) = &mut transfer.tsig {
        tsig.check("transfer.tsig", p);
    }
}

/// `reports`: at least one peer, none of them this server; the key's name and algorithm.
pub(super) fn check_reports(
    reports: &mut ReportsConfig,
    listen: &[SocketAddr],
    p: &mut Problems<'_>,
) {
    if reports.peers.is_empty() {
        p.at(
            "reports.peers",
            "must list the other clusters' servers (e.g. [\"198.51.100.53:53\"])",
        );
    }
    for (i, peer) in reports.peers.iter().enumerate() {
        if listen.contains(peer) {
            p.at(
                &format!("reports.peers[{i}]"),
                format!(
                    "{peer} is this server's own listen address; list the other clusters' servers"
                ),
            );
        }
    }
    if reports.timeout.is_zero() {
        p.at("reports.timeout", "must be more than 0");
    }
    reports.tsig.check("reports.tsig", p);
}

/// `xdp`: an interface name, and listen addresses the filter program can match (a fixed
/// port: port 0 is only known once bound; an address, not "any").
pub(super) fn check_xdp(xdp: &XdpConfig, listen: &[SocketAddr], p: &mut Problems<'_>) {
    if xdp.interface.is_empty() || xdp.interface.contains('/') {
        p.at(
            "xdp.interface",
            "must name a network interface (e.g. \"eth0\")",
        );
    }
    if listen.iter().any(|a| a.port() == 0) {
        p.at("xdp", "needs every listen address to have a port (not 0)");
    }
    // The program answers by destination address: on a host that forwards (a Kubernetes
    // node, a router), "any address" would take queries meant for others behind it.
    if listen.iter().any(|a| a.ip().is_unspecified()) {
        p.at(
            "xdp",
            "needs the listen addresses themselves, not 0.0.0.0 or [::] (it would also answer \
             queries this host forwards to others, such as a Kubernetes Service's)",
        );
    }
}

/// `rate_limit`'s bounds.
pub(super) fn check_rate_limit(limit: &RateLimitConfig, p: &mut Problems<'_>) {
    if limit.responses_per_second == 0 {
        p.at(
            "rate_limit.responses_per_second",
            "must be at least 1 (remove rate_limit to answer without a limit)",
        );
    }
    if limit.slip > 10 {
        p.at(
            "rate_limit.slip",
            "must be between 0 (drop every limited answer) and 10",
        );
    }
    if !(8..=32).contains(&limit.ipv4_prefix) {
        p.at("rate_limit.ipv4_prefix", "must be between 8 and 32");
    }
    if !(16..=128).contains(&limit.ipv6_prefix) {
        p.at("rate_limit.ipv6_prefix", "must be between 16 and 128");
    }
    for (i, net) in limit.exempt.iter().enumerate() {
        if net.parse::<ipnet::IpNet>().is_err() {
            p.at(
                &format!("rate_limit.exempt[{i}]"),
                format!("\"{net}\" is not a network (address/prefix, e.g. 10.0.0.0/8)"),
            );
        }
    }
}
