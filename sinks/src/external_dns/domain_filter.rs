//! The provider's domain filter from the negotiation, read and matched as external-dns's
//! `endpoint.DomainFilter` does (`endpoint/domain_filter.go`): the JSON carries either
//! domain lists (`include`, `exclude`) or regular expressions (`regexInclude`,
//! `regexExclude`), never both; a regex filter takes precedence, its exclusion is checked
//! first, and an exclusion alone takes every other name. Names are compared without a
//! trailing dot, in lower case, with punycode labels in their Unicode form (external-dns's
//! IDNA lookup profile), so a regular expression written for `bücher.example` matches
//! `xn--bcher-kva.example`.

use regex::Regex;
use serde::Deserialize;

/// The filter as external-dns marshals it (empty lists and strings left out).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Marshalled {
    #[serde(default)]
    include: Option<Vec<String>>,
    #[serde(default)]
    exclude: Option<Vec<String>>,
    #[serde(default)]
    regex_include: Option<String>,
    #[serde(default)]
    regex_exclude: Option<String>,
}

/// The names a provider takes.
#[derive(Debug, Clone)]
pub enum DomainFilter {
    /// Domains taken and refused, each with its subdomains (a leading dot: subdomains only);
    /// no `include` takes every name.
    Domains {
        /// Domains taken, normalized.
        include: Vec<String>,
        /// Domains refused, normalized.
        exclude: Vec<String>,
    },
    /// Regular expressions (unanchored, as Go's `MatchString`) of names taken and refused.
    Regex {
        /// Names taken; `None` takes every name not refused.
        include: Option<Regex>,
        /// Names refused.
        exclude: Option<Regex>,
    },
}

/// Why a provider's domain filter is not one external-dns takes.
#[derive(Debug, thiserror::Error)]
pub enum FilterError {
    /// The answer is not a domain filter's JSON.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// Domain lists and a regex together.
    #[error("it has both domain lists and a regex (external-dns refuses this)")]
    ListsAndRegex,
    /// A regex that does not compile.
    #[error("invalid {key} {regex:?}: {source}")]
    Regex {
        /// `regexInclude` or `regexExclude`.
        key: &'static str,
        /// The regex as given.
        regex: String,
        /// What the regex parser said.
        #[source]
        source: regex::Error,
    },
}

impl DomainFilter {
    /// Reads the provider's answer to `GET /`; the error says what external-dns would
    /// refuse in it.
    pub fn from_json(body: &[u8]) -> Result<DomainFilter, FilterError> {
        let m: Marshalled = serde_json::from_slice(body)?;
        let non_empty = |s: Option<String>| s.filter(|s| !s.is_empty());
        let (regex_include, regex_exclude) =
            (non_empty(m.regex_include), non_empty(m.regex_exclude));
        let lists = |l: Option<Vec<String>>| -> Vec<String> {
            l.unwrap_or_default()
                .iter()
                .map(|d| normalize(d.trim()))
                .filter(|d| !d.is_empty())
                .collect()
        };
        let (include, exclude) = (lists(m.include), lists(m.exclude));
        if regex_include.is_none() && regex_exclude.is_none() {
            return Ok(DomainFilter::Domains { include, exclude });
        }
        if !include.is_empty() || !exclude.is_empty() {
            return Err(FilterError::ListsAndRegex);
        }
        let compile = |key: &'static str, r: Option<String>| {
            r.map(|regex| {
                Regex::new(&regex).map_err(|source| FilterError::Regex { key, regex, source })
            })
            .transpose()
        };
        Ok(DomainFilter::Regex {
            include: compile("regexInclude", regex_include)?,
            exclude: compile("regexExclude", regex_exclude)?,
        })
    }

    /// Whether the provider takes `name`.
    pub fn takes(&self, name: &str) -> bool {
        let name = normalize(name);
        match self {
            DomainFilter::Regex { include, exclude } => {
                !exclude.as_ref().is_some_and(|r| r.is_match(&name))
                    && include.as_ref().is_none_or(|r| r.is_match(&name))
            }
            DomainFilter::Domains { include, exclude } => {
                let under = |d: &String| match d.strip_prefix('.') {
                    Some(_) => name.ends_with(d.as_str()),
                    None => name == *d || name.ends_with(&format!(".{d}")),
                };
                (include.is_empty() || include.iter().any(under)) && !exclude.iter().any(under)
            }
        }
    }

    /// The filter as an operator reads it.
    pub fn describe(&self) -> String {
        match self {
            DomainFilter::Domains { include, exclude } => {
                format!("include {include:?}, exclude {exclude:?}")
            }
            DomainFilter::Regex { include, exclude } => {
                [("regexInclude", include), ("regexExclude", exclude)]
                    .iter()
                    .filter_map(|(key, r)| r.as_ref().map(|r| format!("{key} {:?}", r.as_str())))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        }
    }
}

/// A name as external-dns compares it: no trailing dot, lower case, Unicode labels.
fn normalize(name: &str) -> String {
    let name = name.strip_suffix('.').unwrap_or(name);
    // As external-dns, a name the IDNA profile finds fault with is compared as it maps.
    idna::domain_to_unicode(name).0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(json: &str) -> DomainFilter {
        DomainFilter::from_json(json.as_bytes()).unwrap()
    }

    #[test]
    fn domain_lists_match_as_external_dns_matches() {
        let f = filter(r#"{"include":["example.com"],"exclude":["int.example.com"]}"#);
        assert!(f.takes("example.com") && f.takes("API.example.com."));
        assert!(!f.takes("a.int.example.com") && !f.takes("badexample.com"));
        let sub = filter(r#"{"include":[".example.com"]}"#);
        assert!(!sub.takes("example.com") && sub.takes("api.example.com"));
        assert!(filter("{}").takes("anything.org"));
    }

    #[test]
    fn a_regex_filter_takes_precedence_and_excludes_first() {
        let f = filter(r#"{"regexInclude":"^(api|web)\\.","regexExclude":"^web\\.int\\."}"#);
        assert!(f.takes("api.example.com") && f.takes("web.example.com"));
        assert!(!f.takes("web.int.example.com") && !f.takes("db.example.com"));
        let only_exclude = filter(r#"{"regexExclude":"\\.internal$"}"#);
        assert!(only_exclude.takes("api.example.com") && !only_exclude.takes("a.internal"));
        let empty_regex = filter(r#"{"include":["example.com"],"regexInclude":""}"#);
        assert!(
            !empty_regex.takes("example.org"),
            "an empty regex is no regex"
        );
        let idn = filter(r#"{"regexInclude":"^bücher\\."}"#);
        assert!(idn.takes("xn--bcher-kva.example"));
    }

    #[test]
    fn what_external_dns_refuses_is_refused() {
        let both = DomainFilter::from_json(br#"{"include":["a.com"],"regexInclude":"a"}"#);
        assert!(both
            .unwrap_err()
            .to_string()
            .contains("both domain lists and a regex"));
        let bad = DomainFilter::from_json(br#"{"regexExclude":"(unclosed"}"#);
        assert!(bad
            .unwrap_err()
            .to_string()
            .contains("invalid regexExclude \"(unclosed\""));
    }
}
