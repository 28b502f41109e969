//! Kuadrant's resources (and the Gateways its policies target) as types, with the field
//! spellings Kuadrant's CRDs use. Only the fields the translation reads are declared;
//! any other is tolerated, as the API server tolerates it (the translation notes the
//! ones without an equivalent). A field of the wrong type is not ignored: the document
//! does not read, and says which field and why ([`super::document`]).
//!
//! The types are as lenient as Kuadrant's own readers where Kuadrant is lenient: a port
//! may be a number or a string of one (`IntOrString`), every field is optional (what is
//! required is said by the translation, with Kuadrant's words).

use std::collections::BTreeMap;

use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

/// `metadata`, as far as the translation reads it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
#[serde(expecting = "metadata (a map)")]
pub struct Meta {
    /// `metadata.name`.
    pub name: Option<String>,
    /// `metadata.namespace`.
    pub namespace: Option<String>,
    /// `metadata.labels` (Kuadrant labels a listener's record with its listener).
    #[serde(default)]
    pub labels: Option<BTreeMap<String, String>>,
    /// `metadata.ownerReferences` (Kuadrant owns a record by its policy).
    #[serde(default)]
    pub owner_references: Option<Vec<OwnerReference>>,
}

/// One of `metadata.ownerReferences`.
#[derive(Debug, Clone, Deserialize)]
#[serde(expecting = "an owner reference (a map)")]
pub struct OwnerReference {
    /// The owner's kind.
    pub kind: Option<String>,
    /// The owner's name.
    pub name: Option<String>,
}

/// A `DNSRecord` (`kuadrant.io/v1alpha1`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
#[serde(expecting = "a DNSRecord (a map)")]
pub struct DnsRecord {
    /// `metadata`.
    #[serde(default)]
    pub metadata: Option<Meta>,
    /// `spec`.
    pub spec: Option<RecordSpec>,
}

/// A DNSRecord's `spec`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
#[serde(expecting = "a DNSRecord spec (a map)")]
pub struct RecordSpec {
    /// The name the record's layout hangs from.
    pub root_host: Option<String>,
    /// The record's endpoints (external-dns's shape).
    pub endpoints: Option<Vec<RecordEndpoint>>,
    /// Its own health check, before its policy's.
    pub health_check: Option<HealthCheck>,
}

/// One of a DNSRecord's `spec.endpoints`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
#[serde(expecting = "an endpoint (a map with dnsName, recordType, targets)")]
pub struct RecordEndpoint {
    /// The name.
    pub dns_name: Option<String>,
    /// `A`, `AAAA`, `CNAME`, ...
    pub record_type: Option<String>,
    /// Addresses or names.
    pub targets: Option<Vec<String>>,
    /// The TTL in seconds.
    #[serde(rename = "recordTTL")]
    pub record_ttl: Option<i64>,
    /// Which of several answers this is.
    pub set_identifier: Option<String>,
    /// `weight`, `geo-code`, ...
    pub provider_specific: Option<Vec<ProviderSpecific>>,
    /// external-dns's labels.
    pub labels: Option<BTreeMap<String, String>>,
}

/// One `providerSpecific` property.
#[derive(Debug, Clone, Deserialize)]
#[serde(expecting = "a providerSpecific property (a map with name and value)")]
pub struct ProviderSpecific {
    /// Its name (`weight`, `geo-code`).
    pub name: Option<String>,
    /// Its value.
    pub value: Option<String>,
}

/// A health check block: a DNSPolicy's `healthCheck`, a DNSRecord's `spec.healthCheck`,
/// a DNSHealthCheckProbe's `spec`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
#[serde(expecting = "a health check (a map)")]
pub struct HealthCheck {
    /// `HTTP` or `HTTPS`.
    pub protocol: Option<String>,
    /// The port, a number or a string of one.
    pub port: Option<IntOrString>,
    /// The path (the RFCs' spelling).
    pub endpoint: Option<String>,
    /// The path.
    pub path: Option<String>,
    /// The `Host` header.
    pub host: Option<String>,
    /// The `Host` header (the probe's spelling).
    pub hostname: Option<String>,
    /// The probe's address: an IP address or a load balancer's host name.
    pub address: Option<String>,
    /// How often (a duration, `5m`).
    pub interval: Option<String>,
    /// Failures before unhealthy.
    pub failure_threshold: Option<i64>,
    /// The status codes that pass.
    pub expected_responses: Option<Vec<i64>>,
    /// Skip certificate checks (each spelling Kuadrant's versions used).
    pub allow_insecure_certificates: Option<bool>,
    /// As above.
    #[serde(rename = "AllowInsecureCertificates")]
    pub allow_insecure_certificates_upper: Option<bool>,
    /// As above.
    pub allow_insecure_certificate: Option<bool>,
    /// As above.
    #[serde(rename = "AllowInsecureCertificate")]
    pub allow_insecure_certificate_upper: Option<bool>,
    /// Headers given inline (noted: carried through a Secret here).
    pub additional_headers: Option<IgnoredAny>,
    /// The Secret holding the headers.
    pub additional_headers_ref: Option<SecretRef>,
    /// Live: each header's file, written by ho-kube from the Secret.
    pub additional_headers_files: Option<BTreeMap<String, String>>,
    /// Live: why the Secret cannot be used.
    pub additional_headers_error: Option<String>,
}

/// A number or a string (Kubernetes' `IntOrString`).
#[derive(Debug, Clone)]
pub enum IntOrString {
    /// A number.
    Int(i64),
    /// A string.
    String(String),
}

/// A reference to a Secret of the object's namespace.
#[derive(Debug, Clone, Deserialize)]
#[serde(expecting = "a Secret reference (a map with name)")]
pub struct SecretRef {
    /// The Secret's name.
    pub name: Option<String>,
}

/// A `DNSPolicy`, `kuadrant.io/v1` or the RFCs' `v1alpha1` (which may have `name` at the
/// top).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
#[serde(expecting = "a DNSPolicy (a map)")]
pub struct DnsPolicy {
    /// `kuadrant.io/v1` or `kuadrant.io/v1alpha1`.
    pub api_version: Option<String>,
    /// `metadata`.
    pub metadata: Option<Meta>,
    /// The RFCs' drafts' name.
    pub name: Option<String>,
    /// `spec`.
    pub spec: Option<PolicySpec>,
}

/// A DNSPolicy's `spec`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
#[serde(expecting = "a DNSPolicy spec (a map)")]
pub struct PolicySpec {
    /// The Gateway (and listener) it governs.
    pub target_ref: Option<TargetRef>,
    /// The check of the addresses it governs.
    pub health_check: Option<HealthCheck>,
    /// As above (an older spelling).
    pub health: Option<HealthCheck>,
    /// Weights and geo.
    pub load_balancing: Option<LoadBalancing>,
    /// The DNS provider's Secret (noted: no equivalent).
    pub provider_refs: Option<IgnoredAny>,
}

/// A policy's `targetRef`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
#[serde(expecting = "a targetRef (a map with group, kind, name)")]
pub struct TargetRef {
    /// `gateway.networking.k8s.io`.
    pub group: Option<String>,
    /// `Gateway`.
    pub kind: Option<String>,
    /// The Gateway's name.
    pub name: Option<String>,
    /// One listener's name.
    pub section_name: Option<String>,
}

/// A policy's `loadBalancing`, in both shapes: v1's `{weight, geo, defaultGeo}` and
/// v1alpha1's `{weighted, GEO}` (or `geo` as a map).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
#[serde(expecting = "loadBalancing (a map)")]
pub struct LoadBalancing {
    /// v1: the targeted gateways' weight.
    pub weight: Option<i64>,
    /// v1: their geo code; v1alpha1: the geo layout.
    pub geo: Option<Geo>,
    /// v1: whether their geo is the default.
    pub default_geo: Option<bool>,
    /// v1alpha1: weights by cluster attribute.
    pub weighted: Option<Weighted>,
    /// v1alpha1: the geo layout.
    #[serde(rename = "GEO")]
    pub geo_layout: Option<GeoLayout>,
}

/// `loadBalancing.geo`: v1's code, or v1alpha1's layout.
#[derive(Debug, Clone)]
pub enum Geo {
    /// v1: a geo code.
    Code(String),
    /// v1alpha1: the layout.
    Layout(GeoLayout),
}

/// v1alpha1's geo layout.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
#[serde(expecting = "a geo layout (a map with defaultGeo)")]
pub struct GeoLayout {
    /// The geo answered where no geo matches.
    pub default_geo: Option<String>,
}

/// v1alpha1's `loadBalancing.weighted`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
#[serde(expecting = "weighted (a map with defaultWeight, custom)")]
pub struct Weighted {
    /// The weight of what no rule matches.
    pub default_weight: Option<i64>,
    /// The rules.
    pub custom: Option<Vec<CustomWeight>>,
}

/// One custom weight rule.
#[derive(Debug, Clone, Deserialize)]
#[serde(expecting = "a custom weight (a map with attribute, value, weight)")]
pub struct CustomWeight {
    /// The cluster attribute (label) matched.
    pub attribute: Option<String>,
    /// Its value.
    pub value: Option<String>,
    /// The weight of what matches.
    pub weight: Option<i64>,
}

/// A `DNSHealthCheckProbe` (`kuadrant.io/v1alpha1`): its spec is a health check block
/// with the address probed.
#[derive(Debug, Clone, Deserialize)]
#[serde(expecting = "a DNSHealthCheckProbe (a map)")]
pub struct DnsHealthCheckProbe {
    /// `metadata`.
    pub metadata: Option<Meta>,
    /// `spec`.
    pub spec: Option<HealthCheck>,
}

/// A Gateway API `Gateway`, as far as its listeners' records need it.
#[derive(Debug, Clone, Deserialize)]
#[serde(expecting = "a Gateway (a map)")]
pub struct Gateway {
    /// `metadata`.
    pub metadata: Option<Meta>,
    /// `spec`.
    pub spec: Option<GatewaySpec>,
    /// `status`.
    pub status: Option<GatewayStatus>,
}

/// A Gateway's `spec`.
#[derive(Debug, Clone, Deserialize)]
#[serde(expecting = "a Gateway spec (a map)")]
pub struct GatewaySpec {
    /// Its listeners.
    pub listeners: Option<Vec<GatewayListener>>,
}

/// One listener.
#[derive(Debug, Clone, Deserialize)]
#[serde(expecting = "a listener (a map with name, hostname)")]
pub struct GatewayListener {
    /// Its name (`sectionName` names it).
    pub name: Option<String>,
    /// The host name published.
    pub hostname: Option<String>,
}

/// A Gateway's `status`.
#[derive(Debug, Clone, Deserialize)]
#[serde(expecting = "a Gateway status (a map)")]
pub struct GatewayStatus {
    /// The addresses its controller reports.
    pub addresses: Option<Vec<GatewayAddress>>,
}

/// One of `status.addresses`.
#[derive(Debug, Clone, Deserialize)]
#[serde(expecting = "an address (a map with type and value)")]
pub struct GatewayAddress {
    /// `IPAddress` (when unset) or `Hostname`.
    #[serde(rename = "type")]
    pub type_: Option<String>,
    /// The address or host name.
    pub value: Option<String>,
}

/// Reads `IntOrString` and `Geo`, each of two shapes, saying both when neither is given
/// (an untagged enum would only say that no variant matched).
impl<'de> Deserialize<'de> for IntOrString {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<IntOrString, D::Error> {
        struct Either;
        impl Visitor<'_> for Either {
            type Value = IntOrString;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a number or a string")
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<IntOrString, E> {
                Ok(IntOrString::Int(n))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<IntOrString, E> {
                i64::try_from(n)
                    .map(IntOrString::Int)
                    .map_err(|_| E::invalid_value(de::Unexpected::Unsigned(n), &self))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<IntOrString, E> {
                Ok(IntOrString::String(s.to_owned()))
            }
        }
        d.deserialize_any(Either)
    }
}

impl<'de> Deserialize<'de> for Geo {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Geo, D::Error> {
        struct Either;
        impl<'de> Visitor<'de> for Either {
            type Value = Geo;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a geo code or a map with defaultGeo")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Geo, E> {
                Ok(Geo::Code(s.to_owned()))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Geo, A::Error> {
                GeoLayout::deserialize(de::value::MapAccessDeserializer::new(map)).map(Geo::Layout)
            }
        }
        d.deserialize_any(Either)
    }
}
