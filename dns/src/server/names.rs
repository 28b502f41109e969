//! Names as the server keys and writes them: a name's key (lower case, no trailing dot),
//! what `Records`, static records, ACME challenges and the lookup all index by; and a name
//! given as text made a fully qualified DNS name.

use std::str::FromStr;

use hickory_proto::rr::Name;

/// Lower case, no trailing dot: how [`Records`](super::records::Records) keys names. Built
/// from the labels without escaping (this runs for every query); a name with a byte a host
/// name cannot hold (a dot inside a label, say) takes the escaped form, which matches no
/// configured domain.
pub fn key_of(name: &Name) -> String {
    let plain = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'*');
    if !name.iter().all(|label| label.iter().all(plain)) {
        let mut escaped = name.to_ascii();
        escaped.make_ascii_lowercase();
        if escaped.ends_with('.') {
            escaped.pop();
        }
        return escaped;
    }
    let mut key = String::with_capacity(name.len());
    for label in name.iter() {
        if !key.is_empty() {
            key.push('.');
        }
        key.extend(label.iter().map(|b| char::from(b.to_ascii_lowercase())));
    }
    key
}

/// A text that is not a DNS name, and why.
#[derive(Debug, thiserror::Error)]
#[error("\"{text}\" is not a DNS name: {why}")]
pub struct NotAName {
    text: String,
    why: String,
}

/// `s` as a fully qualified name; what is not one is said.
pub fn fqdn(s: &str) -> Result<Name, NotAName> {
    let mut n = Name::from_str(s).map_err(|e| NotAName {
        text: s.to_owned(),
        why: e.to_string(),
    })?;
    n.set_fqdn(true);
    Ok(n)
}
