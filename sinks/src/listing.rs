//! What the zones of the HTTP-API kinds serve, for the answer canary (Cloudflare, Cloud DNS,
//! Azure DNS): their listed record sets turned into what each name answers (the listing
//! itself is the rounds frame's, `rounds::provider`, paced with the writes). Route53, whose
//! aliases point into the zone, reads its own sets (`route53/listing.rs`).

use std::net::IpAddr;

use ho_engine::sink::listing::Listed;

/// One listed record set: its name (lower case or not, with or without the trailing dot),
/// its type, its data.
pub(crate) type Record = (String, String, Vec<String>);

fn key(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// What each name answers: its A and AAAA data (a datum a weighted policy prefixes with
/// `weight:` read past it), the host its CNAME names; other types left out.
pub(crate) fn served(records: impl IntoIterator<Item = Record>) -> Listed {
    let mut listed = Listed::new();
    for (name, rtype, data) in records {
        for datum in data {
            match rtype.as_str() {
                "A" | "AAAA" => {
                    let address = datum.parse::<IpAddr>().ok().or_else(|| {
                        let (_, rest) = datum.split_once(':')?;
                        rest.parse().ok()
                    });
                    if let Some(a) = address {
                        listed.entry(key(&name)).or_default().addresses.push(a);
                    }
                }
                "CNAME" => listed.entry(key(&name)).or_default().host = Some(key(&datum)),
                _ => {}
            }
        }
    }
    sorted(listed)
}

/// `listed` with each name's addresses sorted, each once.
pub(crate) fn sorted(mut listed: Listed) -> Listed {
    for name in listed.values_mut() {
        name.addresses.sort();
        name.addresses.dedup();
    }
    listed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &str, rtype: &str, datum: &str) -> Record {
        (name.into(), rtype.into(), vec![datum.into()])
    }

    #[test]
    fn each_name_answers_its_addresses_or_its_host() {
        let listed = served([
            record("API.example.com.", "A", "192.0.2.2"),
            record("api.example.com", "A", "192.0.2.1"),
            record("api.example.com", "AAAA", "2001:db8::1"),
            // Cloud DNS's weighted items.
            (
                "w.example.com".into(),
                "A".into(),
                vec!["3:192.0.2.3".into(), "(another routing policy)".into()],
            ),
            record("w.example.com", "AAAA", "0.5:2001:db8::2"),
            record("www.example.com", "CNAME", "LB-1.example.net."),
            record("_health-orchestrator.api.example.com", "TXT", "\"x\""),
        ]);
        let ips = |l: &[&str]| -> Vec<IpAddr> { l.iter().map(|a| a.parse().unwrap()).collect() };
        assert_eq!(
            listed["api.example.com"].addresses,
            ips(&["192.0.2.1", "192.0.2.2", "2001:db8::1"])
        );
        assert_eq!(
            listed["w.example.com"].addresses,
            ips(&["192.0.2.3", "2001:db8::2"])
        );
        assert_eq!(
            listed["www.example.com"].host.as_deref(),
            Some("lb-1.example.net")
        );
        assert_eq!(listed.len(), 3);
    }
}
