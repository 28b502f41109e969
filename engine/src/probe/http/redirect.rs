//! Following a redirect (`follow_redirects`) without leaving the endpoint: what is probed
//! is what is published, so only a redirect to the same scheme and authority is followed
//! (a path, or an absolute URL naming the `Host` the probe sends); one elsewhere is a
//! failure that says where it pointed.

use crate::probe::Failure;

/// The redirect status codes (RFC 9110 section 15.4) a probe follows.
pub fn is_redirect(code: u16) -> bool {
    matches!(code, 301 | 302 | 303 | 307 | 308)
}

/// The request a redirect leads to: the method (303 turns any method but HEAD into GET,
/// 301 and 302 turn POST into GET, as every client does; 307 and 308 keep it) and whether
/// the request body goes with it.
pub fn method_after(code: u16, method: &str) -> (&'static str, bool) {
    match (code, method) {
        (_, "HEAD") => ("HEAD", false),
        (303, _) | (301 | 302, "POST") => ("GET", false),
        (_, "POST") => ("POST", true),
        _ => ("GET", false),
    }
}

/// Where a probe is: its scheme, the `Host` it sends, and the port it dials (which a `Host`
/// set by `host` may leave out).
pub struct Origin<'a> {
    pub scheme: &'a str,
    pub authority: &'a str,
    pub port: u16,
}

/// The path `location` points at, relative to `current` (the path just asked), when it
/// stays on `origin`; else the failure saying where it leads.
pub fn same_origin_path(
    location: &str,
    origin: &Origin<'_>,
    current: &str,
) -> Result<String, Failure> {
    let Origin {
        scheme, authority, ..
    } = origin;
    let leaves = || Failure::Answer {
        label: "redirect",
        detail: format!(
            "redirect to {location:?} leaves {scheme}://{authority} (only redirects on the \
             endpoint itself are followed)"
        ),
    };
    let location = location.trim();
    let path = if let Some((their_scheme, rest)) = location.split_once("://") {
        let (their_authority, path) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
        if !their_scheme.eq_ignore_ascii_case(scheme) || !same_authority(their_authority, origin) {
            return Err(leaves());
        }
        path.to_owned()
    } else if location.starts_with("//") {
        return Err(leaves());
    } else if location.starts_with('/') {
        location.to_owned()
    } else {
        // A relative reference: against the directory of the current path.
        let dir = current.split('?').next().unwrap_or("/");
        let dir = &dir[..dir.rfind('/').map_or(0, |i| i + 1)];
        format!("{}{location}", if dir.is_empty() { "/" } else { dir })
    };
    // A fragment is never sent.
    let path = path.split('#').next().unwrap_or_default();
    let path = if path.is_empty() || path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_owned()
    };
    if path.chars().any(|c| c.is_ascii_control() || c == ' ') {
        return Err(Failure::Protocol(format!(
            "redirect to {location:?}: not a valid request target"
        )));
    }
    Ok(path)
}

/// Whether `theirs` names the origin's host, and its port (the scheme's default when left
/// out) is the one in the origin's `Host` or the one dialled.
fn same_authority(theirs: &str, origin: &Origin<'_>) -> bool {
    let default = if origin.scheme == "https" { 443 } else { 80 };
    let split = |s: &str| -> (String, Option<u16>) {
        let s = s.rsplit('@').next().unwrap_or(s);
        match s.rsplit_once(':') {
            Some((host, port)) if !port.contains(']') => {
                (host.to_ascii_lowercase(), port.parse().ok())
            }
            _ => (s.to_ascii_lowercase(), Some(default)),
        }
    };
    let (host, port) = split(theirs);
    let (our_host, our_port) = split(origin.authority);
    host == our_host && port.is_some() && (port == our_port || port == Some(origin.port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirects_on_the_endpoint_are_followed_others_are_not() {
        let origin = Origin {
            scheme: "http",
            authority: "10.0.0.1:8080",
            port: 8080,
        };
        let at = |loc: &str| same_origin_path(loc, &origin, "/health/live");
        assert_eq!(at("/ready").unwrap(), "/ready");
        assert_eq!(at("ready?x=1#top").unwrap(), "/health/ready?x=1");
        assert_eq!(at("http://10.0.0.1:8080/up").unwrap(), "/up");
        assert_eq!(at("HTTP://10.0.0.1:8080").unwrap(), "/");
        for elsewhere in [
            "http://10.0.0.2:8080/up",
            "https://10.0.0.1:8080/up",
            "http://10.0.0.1/up",
            "//evil.example/up",
        ] {
            let e = at(elsewhere).unwrap_err();
            assert_eq!(e.label(), "redirect", "{elsewhere}");
            assert!(e.to_string().contains("leaves http://10.0.0.1:8080"), "{e}");
        }
        // The default port may be written or not; a `host` without the dialled port is
        // still the endpoint.
        let named = Origin {
            scheme: "https",
            authority: "gw.example",
            port: 8443,
        };
        let on = |loc: &str| same_origin_path(loc, &named, "/");
        assert_eq!(on("https://GW.example:443/x").unwrap(), "/x");
        assert_eq!(on("https://gw.example:8443/x").unwrap(), "/x");
        assert!(on("https://gw.example:9443/x").is_err());
        let v6 = |port| Origin {
            scheme: "http",
            authority: "[::1]:81",
            port,
        };
        assert_eq!(
            same_origin_path("http://[::1]:81/x", &v6(81), "/").unwrap(),
            "/x"
        );
        assert!(same_origin_path("http://[::1]/x", &v6(81), "/").is_err());
        assert!(at("/a b").is_err());
    }

    #[test]
    fn the_method_follows_the_status() {
        assert_eq!(method_after(303, "POST"), ("GET", false));
        assert_eq!(method_after(302, "POST"), ("GET", false));
        assert_eq!(method_after(307, "POST"), ("POST", true));
        assert_eq!(method_after(308, "HEAD"), ("HEAD", false));
        assert_eq!(method_after(301, "GET"), ("GET", false));
        assert!(is_redirect(308) && !is_redirect(304) && !is_redirect(300));
    }
}
