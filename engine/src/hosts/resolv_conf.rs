//! The system's recursive resolvers, as `/etc/resolv.conf` names them: what host names are
//! asked of when `[resolver] servers` is not set.

use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use crate::dns_client::LookupError;

/// The recursive resolvers of `/etc/resolv.conf` (its `nameserver` lines, port 53).
pub fn system_servers() -> Result<Vec<SocketAddr>, LookupError> {
    let text = std::fs::read_to_string("/etc/resolv.conf")
        .map_err(|e| LookupError::ResolvConf(e.to_string()))?;
    let servers = nameservers(&text);
    if servers.is_empty() {
        return Err(LookupError::NoNameserver);
    }
    Ok(servers)
}

fn nameservers(resolv_conf: &str) -> Vec<SocketAddr> {
    resolv_conf
        .lines()
        .filter_map(|l| l.trim().strip_prefix("nameserver"))
        .filter_map(|rest| {
            // A link-local v6 server carries its zone (`fe80::1%eth0`): not supported.
            IpAddr::from_str(rest.trim()).ok()
        })
        .map(|ip| SocketAddr::new(ip, 53))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolv_conf_nameservers_are_read() {
        let text = "search svc.cluster.local\nnameserver 10.96.0.10\n# nameserver 1.1.1.1\nnameserver  2001:db8::53\nnameserver fe80::1%eth0\noptions ndots:5\n";
        assert_eq!(
            nameservers(text),
            vec![
                "10.96.0.10:53".parse::<SocketAddr>().unwrap(),
                "[2001:db8::53]:53".parse().unwrap()
            ]
        );
    }
}
