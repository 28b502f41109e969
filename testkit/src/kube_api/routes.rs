//! Which resources the test server knows and how their URLs read.

/// One resource type: its plural (the URL segment), group, version and kind, and whether
/// its objects live in namespaces.
pub struct ResourceType {
    pub plural: &'static str,
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    /// Whether `/status` is a subresource (then the main resource ignores `status`, the
    /// subresource everything but `status`).
    pub status_subresource: bool,
}

impl ResourceType {
    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// How the real server names the resource in messages: `plural.group`.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_owned()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
}

const fn core(
    plural: &'static str,
    kind: &'static str,
    namespaced: bool,
    status: bool,
) -> ResourceType {
    ResourceType {
        plural,
        group: "",
        version: "v1",
        kind,
        namespaced,
        status_subresource: status,
    }
}

/// A namespaced custom resource with a status subresource.
const fn custom(
    plural: &'static str,
    group: &'static str,
    version: &'static str,
    kind: &'static str,
) -> ResourceType {
    ResourceType {
        plural,
        group,
        version,
        kind,
        namespaced: true,
        status_subresource: true,
    }
}

/// Every resource the server serves.
pub const TYPES: &[ResourceType] = &[
    core("configmaps", "ConfigMap", true, false),
    core("secrets", "Secret", true, false),
    core("services", "Service", true, true),
    core("nodes", "Node", false, true),
    ResourceType {
        plural: "leases",
        group: "coordination.k8s.io",
        version: "v1",
        kind: "Lease",
        namespaced: true,
        status_subresource: false,
    },
    custom(
        "dnsfailovers",
        "healthorchestrator.io",
        "v1alpha1",
        "DNSFailover",
    ),
    custom("gateways", "gateway.networking.k8s.io", "v1", "Gateway"),
    custom("ingresses", "networking.k8s.io", "v1", "Ingress"),
    custom("dnsrecords", "kuadrant.io", "v1alpha1", "DNSRecord"),
    custom(
        "dnsendpoints",
        "externaldns.k8s.io",
        "v1alpha1",
        "DNSEndpoint",
    ),
    custom(
        "dnshealthcheckprobes",
        "kuadrant.io",
        "v1alpha1",
        "DNSHealthCheckProbe",
    ),
    custom("dnspolicies", "kuadrant.io", "v1", "DNSPolicy"),
];

/// The type with this plural.
pub fn by_plural(plural: &str) -> Option<&'static ResourceType> {
    TYPES.iter().find(|t| t.plural == plural)
}

/// A parsed URL: the type, the namespace (`None`: every namespace, or cluster-scoped),
/// the object's name and whether `/status` was asked for.
pub struct Route {
    pub ty: &'static ResourceType,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub status: bool,
}

/// Parses `/api/v1/...` and `/apis/GROUP/VERSION/...` paths.
pub fn parse(path: &str) -> Option<Route> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match parts.as_slice() {
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return None,
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(ns.to_string()), rest),
        _ => (None, rest),
    };
    let (plural, name, status) = match rest {
        [plural] => (*plural, None, false),
        [plural, name] => (*plural, Some(name.to_string()), false),
        [plural, name, "status"] => (*plural, Some(name.to_string()), true),
        _ => return None,
    };
    let ty = by_plural(plural).filter(|t| t.group == group && t.version == version)?;
    if status && !ty.status_subresource {
        return None;
    }
    Some(Route {
        ty,
        namespace,
        name,
        status,
    })
}
