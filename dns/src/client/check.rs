//! The `dns` check kind: its keys as written ([`DnsSettings`]) and resolved ([`DnsCheck`]),
//! the question encoded once and the verdict on an answer ([`DnsQuestion`]). The attempt
//! (sockets, deadline, UDP then TCP on truncation) is the engine's probe path's.

use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::Arc;

use hickory_proto::op::{Message, Query};
use hickory_proto::rr::{Name, RecordType};
use ho_config::{KindSettings, ResolvedCheck, Target};
use ho_engine::probe::dns::{DnsAnswer, DnsQuestion};
use ho_engine::probe::{
    CheckKind, CheckSettings, Failure, Prepare, PreparedProbe, ProbeContext, ProbeError, Problems,
    Registered, UrlError,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The `dns` check kind's registration, listed in `ho-kinds`.
pub const DNS_CHECK: &dyn CheckKind = &Registered::<DnsSettings>::KIND;

/// `kind = "dns"`: one query to the endpoint as a DNS server, healthy when it answers with
/// the expected rcode (and the expected data, if asked). For gateways that are resolvers
/// or authoritative servers.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DnsSettings {
    /// The name asked, e.g. `health.example.org` (required).
    pub query_name: Option<String>,
    /// The record type asked (default `A`): `A`, `AAAA`, `SOA`, `TXT`, ...
    pub query_type: Option<String>,
    /// Ask over TCP instead of UDP (default false). Over UDP, a truncated answer is asked
    /// again over TCP, as resolvers do.
    pub tcp: Option<bool>,
    /// The rcode that counts as healthy (default `NOERROR`): `NOERROR`, `NXDOMAIN`,
    /// `SERVFAIL`, `REFUSED`, ...
    pub expect_rcode: Option<String>,
    /// Healthy only if one record of the answer section has this data, as DNS writes it
    /// (`192.0.2.1`, `target.example.org.`); names compare without case.
    pub answer_contains: Option<String>,
    /// Set the RD bit (default true: a resolver answers only then; an authoritative server
    /// ignores it).
    pub recursion_desired: Option<bool>,
}

/// A DNS check, resolved.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct DnsCheck {
    /// The name asked, fully qualified.
    pub query_name: String,
    /// The record type asked, by its mnemonic.
    pub query_type: String,
    /// Over TCP from the start.
    pub tcp: bool,
    /// The healthy rcode's number.
    pub expect_rcode: u16,
    /// Data one answer record must have.
    pub answer_contains: Option<String>,
    /// The RD bit.
    pub recursion_desired: bool,
}

/// Rcodes by the mnemonics operators write (RFC 1035, 2136, 6891).
const RCODES: &[(&str, u16)] = &[
    ("NOERROR", 0),
    ("FORMERR", 1),
    ("SERVFAIL", 2),
    ("NXDOMAIN", 3),
    ("NOTIMP", 4),
    ("REFUSED", 5),
    ("YXDOMAIN", 6),
    ("YXRRSET", 7),
    ("NXRRSET", 8),
    ("NOTAUTH", 9),
    ("NOTZONE", 10),
];

/// An rcode's mnemonic, or its number.
fn rcode_name(code: u16) -> String {
    RCODES
        .iter()
        .find(|(_, c)| *c == code)
        .map_or_else(|| code.to_string(), |(name, _)| (*name).to_owned())
}

impl ResolvedCheck for DnsCheck {
    fn kind(&self) -> &'static str {
        DnsSettings::KIND
    }

    fn url(&self, target: SocketAddr) -> String {
        let transport = if self.tcp { "&tcp=1" } else { "" };
        format!(
            "dns://{target}/{}?type={}{transport}",
            self.query_name, self.query_type
        )
    }
}

impl CheckSettings for DnsSettings {
    const KIND: &'static str = "dns";
    const DEFAULT_PORT: Option<u16> = Some(53);
    const URL_PORT: Option<u16> = Some(53);
    type Resolved = DnsCheck;

    fn resolve(self, problems: &mut Problems<'_>) -> Option<DnsCheck> {
        let name = match self.query_name.as_deref().map(Name::from_str) {
            None => {
                problems.push("query_name", "missing: the name a dns check asks");
                None
            }
            Some(Err(e)) => {
                problems.push("query_name", format!("not a domain name: {e}"));
                None
            }
            Some(Ok(mut name)) => {
                name.set_fqdn(true);
                Some(name)
            }
        };
        let query_type = self.query_type.unwrap_or_else(|| "A".into()).to_uppercase();
        if !matches!(RecordType::from_str(&query_type), Ok(t) if !matches!(t, RecordType::Unknown(_)))
        {
            problems.push(
                "query_type",
                format!("{query_type:?} is not a record type (A, AAAA, SOA, TXT, ...)"),
            );
        }
        let rcode = self.expect_rcode.unwrap_or_else(|| "NOERROR".into());
        let expect_rcode = RCODES
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(&rcode))
            .map(|(_, c)| *c);
        if expect_rcode.is_none() {
            let names: Vec<&str> = RCODES.iter().map(|(n, _)| *n).collect();
            problems.push(
                "expect_rcode",
                format!(
                    "{rcode:?} is not an rcode; expected one of: {}",
                    names.join(", ")
                ),
            );
        }
        if self.answer_contains.as_deref() == Some("") {
            problems.push(
                "answer_contains",
                "must not be empty (remove it to skip the answer check)",
            );
        }
        Some(DnsCheck {
            query_name: name?.to_ascii(),
            query_type,
            tcp: self.tcp.unwrap_or(false),
            expect_rcode: expect_rcode?,
            answer_contains: self.answer_contains,
            recursion_desired: self.recursion_desired.unwrap_or(true),
        })
    }

    /// `/NAME?type=A&tcp=1&rcode=NOERROR&contains=ADDR`.
    fn url_keys(rest: &str) -> Result<KindSettings, UrlError> {
        url_keys(rest).map_err(UrlError)
    }
}

/// [`DnsSettings`]'s `probe` URL keys, with the reason they are refused as text.
fn url_keys(rest: &str) -> Result<KindSettings, String> {
    let rest = rest.strip_prefix('/').unwrap_or(rest);
    let (name, query) = rest.split_once('?').unwrap_or((rest, ""));
    if name.is_empty() {
        return Err("a dns target names the name to ask: dns://SERVER/NAME?type=A".into());
    }
    let mut keys = KindSettings::from([("query_name".to_owned(), name.into())]);
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let (key, value) = match key {
            "type" => ("query_type", value.into()),
            "tcp" => ("tcp", matches!(value, "1" | "true" | "").into()),
            "rcode" => ("expect_rcode", value.into()),
            "contains" => ("answer_contains", value.into()),
            "rd" => ("recursion_desired", matches!(value, "1" | "true").into()),
            other => {
                return Err(format!(
                    "unknown dns URL parameter {other:?}: type, tcp, rcode, contains, rd"
                ))
            }
        };
        keys.insert(key.to_owned(), value);
    }
    Ok(keys)
}

impl Prepare for DnsCheck {
    fn prepare(
        &self,
        _target: &Target,
        _ctx: &mut ProbeContext,
    ) -> Result<PreparedProbe, ProbeError> {
        Ok(PreparedProbe::dns(Arc::new(Question::new(self)), self.tcp))
    }
}

/// A DNS check's message: the query encoded once (its id is set per probe) and what the
/// answer must say.
struct Question {
    query: Vec<u8>,
    expect_rcode: u16,
    answer_contains: Option<String>,
}

impl Question {
    fn new(check: &DnsCheck) -> Question {
        let name = Name::from_str(&check.query_name).expect("validated name");
        let rtype = RecordType::from_str(&check.query_type).expect("validated type");
        let mut query = Message::query();
        query.metadata.recursion_desired = check.recursion_desired;
        query.add_query(Query::query(name, rtype));
        Question {
            query: query.to_vec().expect("a query with one question encodes"),
            expect_rcode: check.expect_rcode,
            answer_contains: check.answer_contains.clone(),
        }
    }

    /// The rcode, then the answer data.
    fn judge(&self, answer: &Message) -> Result<(), Failure> {
        let rcode = u16::from(answer.metadata.response_code);
        if rcode != self.expect_rcode {
            return Err(Failure::Answer {
                label: "rcode",
                detail: format!("rcode {}", rcode_name(rcode)),
            });
        }
        let Some(wanted) = &self.answer_contains else {
            return Ok(());
        };
        let found = answer
            .answers
            .iter()
            .any(|r| same_data(&r.data.to_string(), wanted));
        if found {
            Ok(())
        } else {
            Err(Failure::Answer {
                label: "answer",
                detail: format!("answer without {wanted}"),
            })
        }
    }
}

impl DnsQuestion for Question {
    fn query(&self) -> &[u8] {
        &self.query
    }

    fn read(&self, answer: &[u8]) -> Result<DnsAnswer, Failure> {
        let answer = Message::from_vec(answer)
            .map_err(|e| Failure::Protocol(format!("unreadable DNS answer: {e}")))?;
        Ok(DnsAnswer {
            id: answer.metadata.id,
            truncated: answer.metadata.truncation,
            verdict: self.judge(&answer),
        })
    }
}

/// Record data compared as DNS writes it; names without case or the final dot.
fn same_data(found: &str, wanted: &str) -> bool {
    found
        .trim_end_matches('.')
        .eq_ignore_ascii_case(wanted.trim_end_matches('.'))
}
