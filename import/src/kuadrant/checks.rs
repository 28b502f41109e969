//! Kuadrant's health-check blocks (a DNSPolicy's `healthCheck`, a DNSRecord's
//! `spec.healthCheck`, a DNSHealthCheckProbe's spec) as our `check` tables.

use super::*;

/// What a block means when it leaves a field out: the `kuadrant.io/v1` DNSPolicy and the
/// DNSRecord's `healthCheck` default to HTTPS on 443 (their CRDs' defaults); the
/// `v1alpha1` RFC drafts and probes to HTTP on the protocol's port.
#[derive(Clone, Copy)]
pub(super) struct CheckDefaults {
    protocol: &'static str,
    port: Option<i64>,
}

impl CheckDefaults {
    pub(super) const PROBE: CheckDefaults = CheckDefaults {
        protocol: "HTTP",
        port: None,
    };
    pub(super) const RECORD: CheckDefaults = CheckDefaults {
        protocol: "HTTPS",
        port: Some(443),
    };

    /// A DNSPolicy's defaults by its `apiVersion`.
    pub(super) fn policy(api_version: Option<&str>) -> CheckDefaults {
        match api_version {
            Some("kuadrant.io/v1") => CheckDefaults::RECORD,
            _ => CheckDefaults::PROBE,
        }
    }
}

/// A health check block as a `check` table.
pub(super) fn check_of(
    hc: &Value,
    at: &str,
    defaults: CheckDefaults,
    notes: &mut Vec<String>,
) -> anyhow::Result<Table> {
    let mut check = Table::new();
    let written = text(hc, "protocol").unwrap_or(defaults.protocol);
    let protocol = written.to_ascii_lowercase();
    if !matches!(protocol.as_str(), "http" | "https") {
        bail!("{at}.protocol {written:?}: only HTTP and HTTPS");
    }
    check.insert("kind".into(), protocol.into());
    if let Some(port) = hc
        .get("port")
        .and_then(|p| p.as_i64().or_else(|| p.as_str()?.parse().ok()))
        .or(defaults.port)
    {
        check.insert("port".into(), port.into());
    }
    if let Some(path) = text(hc, "endpoint").or_else(|| text(hc, "path")) {
        check.insert("path".into(), path.into());
    }
    if let Some(host) = text(hc, "host").or_else(|| text(hc, "hostname")) {
        check.insert("host".into(), host.into());
    }
    if let Some(interval) = text(hc, "interval") {
        check.insert("interval".into(), interval.into());
    }
    if let Some(n) = hc.get("failureThreshold").and_then(Value::as_i64) {
        check.insert("fall".into(), n.into());
    }
    let codes: Vec<toml::Value> = hc
        .get("expectedResponses")
        .and_then(Value::as_sequence)
        .into_iter()
        .flatten()
        .filter_map(Value::as_i64)
        .map(toml::Value::from)
        .collect();
    // Kuadrant's default is 200 and 201; ours is 200.
    check.insert(
        "expect_status".into(),
        if codes.is_empty() {
            vec![200.into(), 201.into()]
        } else {
            codes
        }
        .into(),
    );
    let insecure = [
        "allowInsecureCertificates",
        "AllowInsecureCertificates",
        "allowInsecureCertificate",
        "AllowInsecureCertificate",
    ];
    if insecure
        .iter()
        .any(|k| hc.get(*k).and_then(Value::as_bool) == Some(true))
    {
        check.insert("insecure".into(), true.into());
    }
    if let Some(why) = text(hc, HEADER_ERROR) {
        bail!("{at}.additionalHeadersRef: {why}");
    }
    if let Some(files) = hc.get(HEADER_FILES).and_then(Value::as_mapping) {
        // Live: the operator wrote the Secret's headers to files only it reads.
        let mut table = Table::new();
        for (name, file) in files {
            if let (Some(name), Some(file)) = (name.as_str(), file.as_str()) {
                table.insert(name.into(), file.into());
            }
        }
        check.insert("headers_from_files".into(), table.into());
    } else if let Some(k) = ["additionalHeaders", "additionalHeadersRef"]
        .iter()
        .find(|k| hc.get(**k).is_some())
    {
        notes.push(format!(
            "{at}.{k} (a Secret: mount it and name each header's file in headers_from_files)"
        ));
    }
    let known = [
        "protocol",
        "port",
        "endpoint",
        "path",
        "host",
        "hostname",
        "address",
        "interval",
        "failureThreshold",
        "expectedResponses",
        "additionalHeaders",
        "additionalHeadersRef",
        HEADER_FILES,
        HEADER_ERROR,
    ];
    let mut all_known: Vec<&str> = known.to_vec();
    all_known.extend(insecure);
    unknown_keys(hc, &all_known, at, notes);
    Ok(check)
}
