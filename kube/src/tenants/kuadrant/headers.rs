//! The header Secrets of health checks (`additionalHeadersRef`: a DNSHealthCheckProbe's
//! `spec`, a DNSPolicy's `spec.healthCheck`, which dns-operator copies into each probe it
//! makes): each key of the Secret in the resource's namespace is a header name and its
//! value the header's, sent with every probe, as dns-operator sends them. Only the Secrets
//! of namespaces with a `[[kubernetes.allow]]` entry are read. The values never enter the
//! config: each is written to a file only this process reads (under `state_dir`), which
//! the check names in `headers_from_files`, so it is shown and logged redacted like any
//! secret header. The Secret is read by name (`get`, nothing listed or watched), at each round
//! and again after [`REREAD`], so a rotated token is picked up. An allowance that lists its
//! `header_secrets` has only those read (the list RBAC grants by name).
//!
//! A probe whose Secret cannot be read, or holds a key that cannot be a header name,
//! refuses itself alone (the records naming its address keep their last answer), its
//! status saying why in dns-operator's words; a policy's refuses that policy alone (the
//! records it governs keep their last answer), its `Accepted` condition saying why.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ho_config::model::NamespaceAllowance;
use ho_import::kuadrant::{HEADER_ERROR, HEADER_FILES};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject};
use kube::Client;
use serde_json::json;

/// Why a probe's header Secret gives it no headers, in dns-operator's words where it has
/// them: the translation refuses the probe with this (`additionalHeadersError`).
#[derive(Debug, thiserror::Error)]
pub enum HeaderError {
    /// The Secret does not exist.
    #[error("error retrieving additional headers secret {ns}/{secret}: not found")]
    NotFound {
        /// The probe's namespace.
        ns: String,
        /// The Secret's name.
        secret: String,
    },
    /// The API server did not give it.
    #[error("error retrieving additional headers secret {ns}/{secret}: {source}")]
    Read {
        /// The probe's namespace.
        ns: String,
        /// The Secret's name.
        secret: String,
        /// What the client said (boxed: the client's error is large).
        source: Box<kube::Error>,
    },
    /// The namespace has no allowance, so none of its Secrets is read.
    #[error("additional headers secret {ns}/{secret} is not read: namespace \"{ns}\" has no [[kubernetes.allow]] entry in the orchestrator's config")]
    NotAllowed {
        /// The resource's namespace.
        ns: String,
        /// The Secret's name.
        secret: String,
    },
    /// The namespace's allowance lists its header Secrets, and not this one.
    #[error("additional headers secret {ns}/{secret} is not read: it is not among the header_secrets of namespace \"{ns}\"'s [[kubernetes.allow]] entry in the orchestrator's config")]
    NotNamed {
        /// The resource's namespace.
        ns: String,
        /// The Secret's name.
        secret: String,
    },
    /// A key cannot be a header name.
    #[error("invalid header found: {0}")]
    Invalid(String),
    /// A header's file cannot be written.
    #[error("the header {name} cannot be kept for the probe: {source}")]
    Keep {
        /// The header.
        name: String,
        /// What writing its file said.
        source: std::io::Error,
    },
}

/// How long a Secret read is trusted before it is read again.
pub const REREAD: Duration = Duration::from_secs(30);

/// A resource whose health check names a header Secret: (namespace, kind, name).
type Owner = (String, &'static str, String);

/// The health checks' header Secrets as last read, and where their values are written.
pub struct HeaderSecrets {
    dir: PathBuf,
    /// Per resource: header name -> file, or why there are none.
    read: HashMap<Owner, Result<BTreeMap<String, PathBuf>, HeaderError>>,
    last: Option<Instant>,
}

impl HeaderSecrets {
    /// Values are written under `state_dir` (the system's temporary directory without one).
    pub fn new(state_dir: Option<&Path>) -> HeaderSecrets {
        let base = match state_dir {
            Some(d) => d.to_path_buf(),
            None => std::env::temp_dir().join(format!("ho-{}", std::process::id())),
        };
        HeaderSecrets {
            dir: base.join("kuadrant-headers"),
            read: HashMap::new(),
            last: None,
        }
    }

    /// Whether the Secrets are due to be read again.
    pub fn due(&self) -> bool {
        !self.read.is_empty() && self.last.is_none_or(|at| at.elapsed() >= REREAD)
    }

    /// Reads the Secret each of `resources` (probes and policies) names (if due) where
    /// `allow` permits it ([`permit`]), writes its headers' files, and forgets (and deletes
    /// the files of) resources that name none any more.
    pub async fn refresh(
        &mut self,
        client: &Client,
        resources: &[Arc<DynamicObject>],
        allow: &[NamespaceAllowance],
    ) {
        let wanted: Vec<(Owner, String)> = resources.iter().filter_map(|r| named(r)).collect();
        let fresh = self.last.is_some_and(|at| at.elapsed() < REREAD);
        // Known: read (or refused) under the permission that holds now.
        let known = wanted.iter().all(|(k, secret)| {
            let refused = |r: &Result<_, HeaderError>| {
                matches!(
                    r,
                    Err(HeaderError::NotAllowed { .. } | HeaderError::NotNamed { .. })
                )
            };
            let now_refused = permit(allow, &k.0, secret).is_err();
            self.read.get(k).is_some_and(|r| refused(r) == now_refused)
        });
        if fresh && known && wanted.len() == self.read.len() {
            return;
        }
        let mut read = HashMap::new();
        for (owner, secret) in wanted {
            let headers = match permit(allow, &owner.0, &secret) {
                Err(why) => Err(why),
                Ok(()) => {
                    let ns = owner.0.clone();
                    self.read_one(client, &owner, ns, secret).await
                }
            };
            read.insert(owner, headers);
        }
        for owner in self.read.keys().filter(|k| !read.contains_key(*k)) {
            let _ = std::fs::remove_dir_all(self.dir_of(owner));
        }
        self.read = read;
        self.last = Some(Instant::now());
    }

    /// Reads Secret `secret` of `ns` for `owner` and writes its headers' files.
    async fn read_one(
        &self,
        client: &Client,
        owner: &Owner,
        ns: String,
        secret: String,
    ) -> Result<BTreeMap<String, PathBuf>, HeaderError> {
        let api: Api<Secret> = Api::namespaced(client.clone(), &ns);
        match api.get_opt(&secret).await {
            Ok(Some(s)) => self.write(owner, &s),
            Ok(None) => Err(HeaderError::NotFound { ns, secret }),
            Err(source) => Err(HeaderError::Read {
                ns,
                secret,
                source: Box::new(source),
            }),
        }
    }

    /// Where `owner`'s header files are written.
    fn dir_of(&self, (ns, kind, name): &Owner) -> PathBuf {
        self.dir.join(ns).join(kind).join(name)
    }

    /// Writes each header of `secret` to its file (readable by this process alone).
    fn write(
        &self,
        owner: &Owner,
        secret: &Secret,
    ) -> Result<BTreeMap<String, PathBuf>, HeaderError> {
        let data = secret.data.clone().unwrap_or_default();
        if let Some(bad) = data.keys().find(|k| !is_header_name(k.trim())) {
            return Err(HeaderError::Invalid(bad.clone()));
        }
        let dir = self.dir_of(owner);
        let _ = std::fs::remove_dir_all(&dir);
        let mut files = BTreeMap::new();
        for (name, value) in data {
            let file = dir.join(name.trim());
            private_write(&file, &value.0).map_err(|source| HeaderError::Keep {
                name: name.clone(),
                source,
            })?;
            files.insert(name.trim().to_owned(), file);
        }
        Ok(files)
    }

    /// Resource `o` as the translation reads it: the files of its health check's headers,
    /// or why it has none, beside its `additionalHeadersRef`; as it is when it names no
    /// header Secret.
    pub fn annotate(&self, o: Arc<DynamicObject>) -> Arc<DynamicObject> {
        let Some((owner, _)) = named(&o) else {
            return o;
        };
        let mut doc = (*o).clone();
        let check = match owner.1 {
            PROBE => &mut doc.data["spec"],
            _ => &mut doc.data["spec"]["healthCheck"],
        };
        match self.read.get(&owner) {
            Some(Ok(files)) => check[HEADER_FILES] = json!(files),
            Some(Err(why)) => check[HEADER_ERROR] = json!(why.to_string()),
            None => {}
        }
        Arc::new(doc)
    }
}

/// Whether header Secret `secret` of namespace `ns` may be read: only with an allowance
/// for `ns`, and only one its `header_secrets` lists when it lists them.
pub fn permit(allow: &[NamespaceAllowance], ns: &str, secret: &str) -> Result<(), HeaderError> {
    let refused = |named| {
        let (ns, secret) = (ns.to_owned(), secret.to_owned());
        Err(match named {
            false => HeaderError::NotAllowed { ns, secret },
            true => HeaderError::NotNamed { ns, secret },
        })
    };
    match allow.iter().find(|a| a.namespace == ns) {
        None => refused(false),
        Some(a) => match &a.header_secrets {
            Some(names) if !names.iter().any(|n| n == secret) => refused(true),
            _ => Ok(()),
        },
    }
}

const PROBE: &str = "DNSHealthCheckProbe";
const POLICY: &str = "DNSPolicy";

/// The resource and the header Secret its health check names, if it names one: a probe's
/// `spec.additionalHeadersRef`, a policy's `spec.healthCheck.additionalHeadersRef`.
fn named(r: &DynamicObject) -> Option<(Owner, String)> {
    let (kind, check) = match r.types.as_ref()?.kind.as_str() {
        PROBE => (PROBE, &r.data["spec"]),
        POLICY => (POLICY, &r.data["spec"]["healthCheck"]),
        _ => return None,
    };
    let secret = check["additionalHeadersRef"]["name"].as_str()?;
    let ns = r.metadata.namespace.clone().unwrap_or_default();
    Some(((ns, kind, r.metadata.name.clone()?), secret.to_owned()))
}

/// An HTTP header name (RFC 9110's token), not `Host`, which the probe's `hostname` sets.
fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && !name.eq_ignore_ascii_case("host")
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Writes `bytes` to `file`, its directories created, readable and writable by the owner
/// alone.
fn private_write(file: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    if let Some(dir) = file.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(file)?;
    f.write_all(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowance(ns: &str, header_secrets: Option<&[&str]>) -> NamespaceAllowance {
        NamespaceAllowance {
            namespace: ns.to_owned(),
            domains: vec![format!("{ns}.io")],
            sinks: vec!["dns".to_owned()],
            nodes: false,
            header_secrets: header_secrets.map(|l| l.iter().map(|s| (*s).to_owned()).collect()),
        }
    }

    /// Every (namespace, Secret) pair over allowances with and without a list: read only
    /// with an allowance, and then only a listed Secret when there is a list; each refusal
    /// says which rule refused it.
    #[test]
    fn only_allowed_namespaces_and_listed_secrets_are_read() {
        let allow = [
            allowance("open", None),
            allowance("listed", Some(&["token", "other"])),
            allowance("none-listed", Some(&[])),
        ];
        let no_entry = "has no [[kubernetes.allow]] entry";
        let not_listed = "is not read: it is not among the header_secrets";
        for ns in ["open", "listed", "none-listed", "elsewhere"] {
            for secret in ["token", "other", "stranger"] {
                let want = match (ns, secret) {
                    ("elsewhere", _) => Some(no_entry),
                    ("open", _) | ("listed", "token" | "other") => None,
                    _ => Some(not_listed),
                };
                let got = permit(&allow, ns, secret).err().map(|e| e.to_string());
                match (want, &got) {
                    (None, None) => {}
                    (Some(w), Some(why)) if why.contains(w) => {
                        assert!(why.contains(&format!("secret {ns}/{secret} ")), "{why}")
                    }
                    _ => panic!("{ns}/{secret}: want {want:?}, got {got:?}"),
                }
            }
        }
    }
}
