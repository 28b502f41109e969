//! A cluster's report: what one vantage point tells the others through the shared zone.
//!
//! Each cluster writes one TXT rrset per tenant at `<cluster>._ho-report.<first domain>`
//! and no other cluster ever writes it (upstream Kuadrant moved to per-owner records after
//! write conflicts on a shared one). The name puts every cluster's report of a tenant under
//! one parent, so one sorted listing finds them all (Route53 lists names in reversed-label
//! order).
//!
//! The rrset holds one or more TXT records; each is self-contained: a header, then as many
//! items as fit in [`MAX_RECORD_CHARS`] characters, all separated by single spaces:
//!
//! ```text
//! ho-report=1 owner=<owner_id> cluster=<id> t=<unix ms> part=<i>/<n>
//!   own=<address>,<endpoint name>,<weight>,<priority>[,<geo>]   (one per owned address)
//!   down=<address>                                              (one per address seen down)
//! ```
//!
//! Names and geos are percent-encoded outside `A-Za-z0-9._:-`, so items never contain a
//! space, comma, quote or backslash. A record's text is split into character-strings of at
//! most 255 characters (the TXT limit; the distributed-DNS RFC's overflow rule) which readers concatenate
//! without a separator, as SPF does. All parts of one report carry the same `t`; a reader
//! takes a report only when parts `1..=n` of one `t` are all there (writes replace the
//! rrset atomically, so a complete report is what readers see).

use std::fmt::Write as _;
use std::net::IpAddr;

/// Characters of one TXT record's text: several 255-character strings, well under
/// Route53's 4,000-character value limit and DNS's 64 KiB record limit.
pub const MAX_RECORD_CHARS: usize = 2000;

/// Longest character-string in a TXT record.
const MAX_STRING: usize = 255;

/// The format version readers accept.
const VERSION: &str = "ho-report=1";

/// The label under a tenant's first domain that holds every cluster's report.
pub const REPORT_LABEL: &str = "_ho-report";

/// The label, under [`REPORT_LABEL`], of the reports a cluster relays: those it last read
/// from its peers, when each cluster's own server holds its reports (`dns_server` with
/// `reports`). A reader takes from a relayed report only the addresses its cluster owns,
/// never its votes (see the rounds). Cluster ids cannot begin with `_`, so no cluster's
/// report is ever named so.
pub const RELAY_LABEL: &str = "_ho-relay";

/// One address a cluster contributes, with what every cluster needs to apply the tenant's
/// policy the same way.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct Owned {
    /// The address published.
    pub address: IpAddr,
    /// The owning cluster's endpoint name.
    pub name: String,
    /// Its weight in the tenant.
    pub weight: u32,
    /// Its failover tier.
    pub priority: u32,
    /// Its `geo` label.
    pub geo: Option<String>,
}

/// What one cluster reports for one tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The deployment (`owner_id`): reports of another deployment sharing the zone are
    /// not counted.
    pub owner: String,
    /// The reporting cluster.
    pub cluster: String,
    /// When it was written, by the writer's clock (Unix milliseconds). Readers compare it
    /// only with its own earlier values: a new stamp is a live writer.
    pub at_ms: u64,
    /// The addresses this cluster contributes (sorted by address).
    pub owned: Vec<Owned>,
    /// The addresses this cluster currently judges down, its own or not (sorted).
    pub down: Vec<IpAddr>,
}

/// The rrset name of `cluster`'s report for a tenant whose first domain is `domain`
/// (no trailing dot).
pub fn report_name(cluster: &str, domain: &str) -> String {
    format!("{cluster}.{REPORT_LABEL}.{domain}")
}

/// The suffix every report name of a tenant ends with (no trailing dot).
pub fn report_suffix(domain: &str) -> String {
    format!(".{REPORT_LABEL}.{domain}")
}

/// The name a reader gives `cluster`'s report relayed by a peer, under the tenant's
/// report suffix `suffix` ([`report_suffix`]): `<cluster>._ho-relay._ho-report.<domain>`,
/// told from a cluster's own report by [`is_relayed`].
pub fn relayed_name(cluster: &str, suffix: &str) -> String {
    format!("{cluster}.{RELAY_LABEL}{suffix}")
}

/// Whether a report rrset's name is a relayed one (see [`relayed_name`]).
pub fn is_relayed(name: &str) -> bool {
    name.split('.').nth(1) == Some(RELAY_LABEL)
}

/// The cluster a report record's text names in its header, if it has one.
pub fn cluster_of(text: &str) -> Option<&str> {
    let mut tokens = text.split(' ');
    (tokens.next() == Some(VERSION)).then_some(())?;
    tokens.next()?;
    field(tokens.next(), "cluster").ok()
}

impl Report {
    /// The texts of the TXT records that carry this report (one text per record, before
    /// the split into 255-character strings; see [`to_presentation`]).
    pub fn encode(&self) -> Vec<String> {
        let mut items: Vec<String> = Vec::with_capacity(self.owned.len() + self.down.len());
        for o in &self.owned {
            let mut item = format!(
                "own={},{},{},{}",
                o.address,
                escape(&o.name),
                o.weight,
                o.priority
            );
            if let Some(geo) = &o.geo {
                let _ = write!(item, ",{}", escape(geo));
            }
            items.push(item);
        }
        items.extend(self.down.iter().map(|a| format!("down={a}")));
        // The header's `part=i/n` is at most 23 characters longer than `part=1/1`.
        let header_len = self.header(1, 1).len() + 16;
        let mut records: Vec<Vec<String>> = vec![Vec::new()];
        let mut len = header_len;
        for item in items {
            let current = records.last_mut().expect("never empty");
            if !current.is_empty() && len + 1 + item.len() > MAX_RECORD_CHARS {
                records.push(Vec::new());
                len = header_len;
            }
            len += 1 + item.len();
            records.last_mut().expect("never empty").push(item);
        }
        let n = records.len();
        records
            .into_iter()
            .enumerate()
            .map(|(i, items)| {
                let mut text = self.header(i + 1, n);
                for item in items {
                    text.push(' ');
                    text.push_str(&item);
                }
                text
            })
            .collect()
    }

    fn header(&self, part: usize, parts: usize) -> String {
        format!(
            "{VERSION} owner={} cluster={} t={} part={part}/{parts}",
            self.owner, self.cluster, self.at_ms
        )
    }

    /// Reads a report from the texts of its TXT records (each already concatenated from
    /// its strings, in any order). The error says what is wrong, for the logs.
    pub fn decode(records: &[String]) -> Result<Report, MalformedReport> {
        Self::read(records).map_err(MalformedReport)
    }

    /// [`Self::decode`] with its reason as text.
    fn read(records: &[String]) -> Result<Report, String> {
        let mut report: Option<Report> = None;
        let mut parts_seen: Vec<bool> = Vec::new();
        for text in records {
            let mut tokens = text.split(' ');
            if tokens.next() != Some(VERSION) {
                return Err(format!("not a {VERSION} record: {:.40}", text));
            }
            let owner = field(tokens.next(), "owner")?;
            let cluster = field(tokens.next(), "cluster")?;
            let at_ms: u64 = number(field(tokens.next(), "t")?, "t")?;
            let part = field(tokens.next(), "part")?;
            let (i, n) = part
                .split_once('/')
                .ok_or_else(|| format!("part={part}: expected i/n"))?;
            let (i, n): (usize, usize) = (number(i, "part")?, number(n, "part")?);
            if i == 0 || i > n || n > 1000 {
                return Err(format!("part={part}: out of range"));
            }
            let r = report.get_or_insert_with(|| Report {
                owner: owner.to_owned(),
                cluster: cluster.to_owned(),
                at_ms,
                owned: Vec::new(),
                down: Vec::new(),
            });
            if r.owner != owner || r.cluster != cluster || r.at_ms != at_ms {
                return Err("parts of different reports in one rrset".into());
            }
            if parts_seen.is_empty() {
                parts_seen = vec![false; n];
            }
            if parts_seen.len() != n || std::mem::replace(&mut parts_seen[i - 1], true) {
                return Err(format!("part={part}: repeated or inconsistent"));
            }
            r.add_items(tokens)?;
        }
        let Some(mut report) = report else {
            return Err("empty rrset".into());
        };
        if let Some(missing) = parts_seen.iter().position(|seen| !seen) {
            return Err(format!(
                "part {} of {} missing",
                missing + 1,
                parts_seen.len()
            ));
        }
        report.owned.sort();
        report.owned.dedup_by(|a, b| a.address == b.address);
        report.down.sort();
        report.down.dedup();
        Ok(report)
    }

    /// Adds one record's `own=` and `down=` items.
    fn add_items<'a>(&mut self, tokens: impl Iterator<Item = &'a str>) -> Result<(), String> {
        for token in tokens {
            if let Some(v) = token.strip_prefix("own=") {
                self.owned.push(owned(v)?);
            } else if let Some(v) = token.strip_prefix("down=") {
                self.down.push(address(v)?);
            } else {
                return Err(format!("unknown item {token:.40}"));
            }
        }
        Ok(())
    }
}

fn field<'a>(token: Option<&'a str>, key: &str) -> Result<&'a str, String> {
    token
        .and_then(|t| t.strip_prefix(key))
        .and_then(|t| t.strip_prefix('='))
        .filter(|v| !v.is_empty())
        .ok_or_else(|| format!("header field {key}= missing"))
}

fn number<T: std::str::FromStr>(v: &str, key: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("{key}={v:.20}: not a number"))
}

fn address(v: &str) -> Result<IpAddr, String> {
    v.parse().map_err(|_| format!("{v:.40}: not an IP address"))
}

fn owned(v: &str) -> Result<Owned, String> {
    let mut f = v.split(',');
    let (Some(a), Some(name), Some(weight), Some(priority)) =
        (f.next(), f.next(), f.next(), f.next())
    else {
        return Err(format!(
            "own={v:.40}: expected address,name,weight,priority[,geo]"
        ));
    };
    let geo = f.next().map(unescape).transpose()?;
    if f.next().is_some() {
        return Err(format!("own={v:.40}: too many fields"));
    }
    Ok(Owned {
        address: address(a)?,
        name: unescape(name)?,
        weight: number(weight, "weight")?,
        priority: number(priority, "priority")?,
        geo,
    })
}

fn safe(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-')
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if safe(b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

fn unescape(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("{s:.40}: bad percent escape"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("{s:.40}: not UTF-8"))
}

/// A record's text as the character-strings of one TXT record (at most 255 characters
/// each), for back ends and answers that take the strings apart.
pub fn character_strings(text: &str) -> Vec<String> {
    text.as_bytes()
        .chunks(MAX_STRING)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect()
}

/// A record's text as TXT presentation (zone-file syntax, which the PowerDNS API and
/// Route53 both take): quoted strings of at most 255 characters. Report texts contain no
/// quote or backslash, so nothing needs escaping.
pub fn to_presentation(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / MAX_STRING * 3 + 2);
    for (i, chunk) in text.as_bytes().chunks(MAX_STRING).enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push('"');
        out.push_str(std::str::from_utf8(chunk).expect("report texts are ASCII"));
        out.push('"');
    }
    out
}

/// The text of a TXT record in presentation form: its strings concatenated (escapes
/// `\"`, `\\` and `\DDD` undone, as a back end may add them).
pub fn from_presentation(content: &str) -> String {
    let mut out = Vec::with_capacity(content.len());
    let bytes = content.as_bytes();
    let mut in_string = false;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match (in_string, b) {
            (false, b'"') | (true, b'"') => in_string = !in_string,
            (true, b'\\') => {
                let digits = content.get(i + 1..i + 4).and_then(|d| d.parse::<u8>().ok());
                if let Some(d) = digits.filter(|_| bytes[i + 1].is_ascii_digit()) {
                    out.push(d);
                    i += 3;
                } else if let Some(&next) = bytes.get(i + 1) {
                    out.push(next);
                    i += 1;
                }
            }
            (true, _) => out.push(b),
            (false, _) => {}
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// TXT records that are not one whole report; the text says what is wrong, for the logs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct MalformedReport(pub String);

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn report(owned: usize, down: usize) -> Report {
        Report {
            owner: "prod".into(),
            cluster: "eu1".into(),
            at_ms: 1_732_400_000_123,
            owned: (0..owned)
                .map(|i| Owned {
                    address: format!("10.0.{}.{}", i / 250, i % 250 + 1).parse().unwrap(),
                    name: format!("gw-{i}"),
                    weight: 1 + i as u32 % 3,
                    priority: 0,
                    geo: (i % 2 == 0).then(|| "IE".to_owned()),
                })
                .collect(),
            down: (0..down)
                .map(|i| format!("fd00::{:x}", i + 1).parse().unwrap())
                .collect(),
        }
    }

    #[test]
    fn the_documented_format() {
        let mut r = report(1, 1);
        r.owned[0].name = "gw a".into();
        assert_eq!(
            r.encode(),
            vec!["ho-report=1 owner=prod cluster=eu1 t=1732400000123 part=1/1 own=10.0.0.1,gw%20a,1,0,IE down=fd00::1".to_owned()]
        );
    }

    #[test]
    fn a_large_report_spreads_over_records_of_bounded_size_and_comes_back_whole() {
        let r = report(300, 200);
        let records = r.encode();
        assert!(records.len() > 1, "{} records", records.len());
        assert!(records.iter().all(|t| t.len() <= MAX_RECORD_CHARS));
        let mut shuffled: Vec<String> = records.iter().rev().cloned().collect();
        shuffled.rotate_left(1);
        assert_eq!(Report::decode(&shuffled).unwrap(), r);
    }

    #[test]
    fn a_missing_or_foreign_part_is_an_error_not_a_smaller_report() {
        let records = report(300, 0).encode();
        let err = Report::decode(&records[1..]).unwrap_err();
        assert!(err.0.contains("part 1 of"), "{err}");
        let mut other = report(1, 0);
        other.at_ms += 1;
        let mut mixed = records.clone();
        mixed[0] = other.encode().remove(0);
        assert!(Report::decode(&mixed).is_err());
        assert!(Report::decode(&["v=spf1 -all".to_owned()]).is_err());
    }

    #[test]
    fn presentation_splits_at_255_and_joins_back() {
        let text = report(40, 10).encode().remove(0);
        let p = to_presentation(&text);
        let strings: Vec<&str> = p.split("\" \"").collect();
        assert!(strings.len() > 1);
        assert!(strings.iter().all(|s| s.trim_matches('"').len() <= 255));
        assert_eq!(from_presentation(&p), text);
        assert_eq!(from_presentation(r#""a\"b" "c\\d\065""#), "a\"bc\\dA");
    }

    proptest! {
        #[test]
        fn any_report_round_trips(
            owned in proptest::collection::btree_map(any::<u32>(), ("[ -~]{1,20}", 1u32..100, 0u32..3, proptest::option::of("[ -~]{1,8}")), 0..200),
            down in proptest::collection::btree_set(any::<u128>(), 0..100),
        ) {
            let r = Report {
                owner: "o".into(),
                cluster: "c-1".into(),
                at_ms: 7,
                owned: owned
                    .into_iter()
                    .map(|(a, (name, weight, priority, geo))| Owned {
                        address: IpAddr::from(std::net::Ipv4Addr::from(a)),
                        name,
                        weight,
                        priority,
                        geo,
                    })
                    .collect(),
                down: down.into_iter().map(|a| IpAddr::from(std::net::Ipv6Addr::from(a))).collect(),
            };
            let texts: Vec<String> = r
                .encode()
                .iter()
                .map(|t| from_presentation(&to_presentation(t)))
                .collect();
            prop_assert_eq!(Report::decode(&texts).unwrap(), r);
        }
    }
}
