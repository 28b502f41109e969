//! Syntax rules for names the config refers to: object names, domain names, HTTP headers.

/// Why a name, header or URL the config gives is refused; its text is what a config error
/// says after the field's path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SyntaxError {
    /// An empty object name.
    #[error("must not be empty")]
    Empty,
    /// An object name over 63 characters.
    #[error("\"{0}\" is longer than 63 characters")]
    TooLong(String),
    /// An object name outside the file-safe alphabet.
    #[error("\"{0}\" must start with a letter or digit and contain only letters, digits, '-', '_' and '.'")]
    ObjectName(String),
    /// Not an RFC 1123 Kubernetes name of at most `max` characters.
    #[error("\"{name}\" is not a Kubernetes name (lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, at most {max} characters)")]
    KubeName {
        /// The name as written.
        name: String,
        /// The most characters the field allows.
        max: usize,
    },
    /// Not an RFC 9110 token.
    #[error("\"{0}\" is not a valid HTTP header name")]
    HeaderName(String),
    /// A header value with line breaks or other control characters.
    #[error("header value may contain only visible ASCII, spaces and tabs")]
    HeaderValue,
    /// A URL whose scheme is not http or https.
    #[error("\"{0}\" must start with http:// or https://")]
    Scheme(String),
    /// A URL without a host, or with spaces or control characters.
    #[error("\"{0}\" is not a valid URL")]
    Url(String),
}

/// Checks an endpoint, tenant or sink name. Names become file names, ConfigMap keys and
/// metric labels, so they are kept to a safe alphabet.
pub fn check_object_name(name: &str) -> Result<(), SyntaxError> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if name.is_empty() {
        return Err(SyntaxError::Empty);
    }
    if name.len() > 63 {
        return Err(SyntaxError::TooLong(name.to_owned()));
    }
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) || !name.chars().all(ok_char) {
        return Err(SyntaxError::ObjectName(name.to_owned()));
    }
    Ok(())
}

/// Kubernetes object names: lower-case letters, digits, '-' and '.', starting and ending
/// with a letter or digit (RFC 1123), at most `max` characters.
pub fn check_kube_name(name: &str, max: usize) -> Result<(), SyntaxError> {
    let ok = !name.is_empty()
        && name.len() <= max
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
    if ok {
        Ok(())
    } else {
        Err(SyntaxError::KubeName {
            name: name.to_owned(),
            max,
        })
    }
}

/// Why a domain name is refused; its text is what a config error says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// Nothing but perhaps a dot.
    #[error("empty domain name")]
    Empty,
    /// Over DNS's 253 characters.
    #[error("\"{raw}\" is longer than 253 characters")]
    TooLong {
        /// The name as written.
        raw: String,
    },
    /// A label that is not RFC 1123's.
    #[error("\"{raw}\" is not a valid domain name (label \"{label}\": 1-63 letters, digits or '-', not starting or ending with '-')")]
    BadLabel {
        /// The name as written.
        raw: String,
        /// The label at fault.
        label: String,
    },
    /// `*.` followed by what is not a domain name.
    #[error("\"{raw}\" is not a valid wildcard name (after \"*.\": {parent})")]
    BadWildcard {
        /// The name as written.
        raw: String,
        /// What is wrong after `*.`.
        parent: Box<NameError>,
    },
}

/// The config checks collect problems as text.
impl From<NameError> for String {
    fn from(e: NameError) -> String {
        e.to_string()
    }
}

/// Normalises and checks a domain name: lower case, no trailing dot, RFC 1123 labels.
/// Wildcards are refused because hosts files cannot express them.
pub fn normalize_domain(raw: &str) -> Result<String, NameError> {
    let name = raw.strip_suffix('.').unwrap_or(raw).to_ascii_lowercase();
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if name.len() > 253 {
        return Err(NameError::TooLong { raw: raw.into() });
    }
    for label in name.split('.') {
        let valid = !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
        if !valid {
            return Err(NameError::BadLabel {
                raw: raw.into(),
                label: label.into(),
            });
        }
    }
    Ok(name)
}

/// A tenant's domain: a name as [`normalize_domain`] takes it, or a wildcard (`*.` then a
/// name, RFC 4592: it answers every name under its parent that no other name holds).
pub fn normalize_tenant_domain(raw: &str) -> Result<String, NameError> {
    match raw.strip_prefix("*.") {
        Some(rest) => {
            let parent = normalize_domain(rest).map_err(|e| NameError::BadWildcard {
                raw: raw.into(),
                parent: Box::new(e),
            })?;
            Ok(format!("*.{parent}"))
        }
        None => normalize_domain(raw),
    }
}

/// Whether a normalised tenant domain is a wildcard.
pub fn is_wildcard(domain: &str) -> bool {
    domain.starts_with("*.")
}

/// Checks an HTTP header name (RFC 9110 token).
pub fn check_header_name(name: &str) -> Result<(), SyntaxError> {
    let tchar = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if name.is_empty() || !name.chars().all(tchar) {
        return Err(SyntaxError::HeaderName(name.to_owned()));
    }
    Ok(())
}

/// Checks an HTTP header value: visible ASCII, spaces and tabs only (no line breaks, which
/// would let a config smuggle a second header or request).
pub fn check_header_value(value: &str) -> Result<(), SyntaxError> {
    if value.chars().all(|c| c == '\t' || (' '..='~').contains(&c)) {
        Ok(())
    } else {
        Err(SyntaxError::HeaderValue)
    }
}

/// Checks that `url` is an absolute `http://` or `https://` URL with a host; the sink
/// parses it fully when it is built.
pub fn check_url(url: &str) -> Result<(), SyntaxError> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or_else(|| SyntaxError::Scheme(url.to_owned()))?;
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    if host.is_empty() || url.chars().any(|c| c.is_ascii_control() || c == ' ') {
        return Err(SyntaxError::Url(url.to_owned()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_are_normalised_and_checked() {
        assert_eq!(
            normalize_domain("API.Tenant-A.io.").unwrap(),
            "api.tenant-a.io"
        );
        assert!(normalize_domain("*.tenant-a.io").is_err());
        assert!(normalize_domain("-bad.io").is_err());
        assert!(normalize_domain("a..b").is_err());
        assert!(normalize_domain(&format!("{}.io", "a".repeat(64))).is_err());
    }

    #[test]
    fn object_names_stay_file_safe() {
        assert!(check_object_name("tenant-a").is_ok());
        assert!(check_object_name("../etc").is_err());
        assert!(check_object_name("a/b").is_err());
        assert!(check_object_name("").is_err());
    }

    #[test]
    fn header_values_cannot_break_lines() {
        assert!(check_header_value("Bearer abc").is_ok());
        assert!(check_header_value("x\r\nEvil: 1").is_err());
        assert!(check_header_name("X-Token").is_ok());
        assert!(check_header_name("X Token").is_err());
    }
}
