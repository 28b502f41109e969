//! What a sink writing Kubernetes objects tells operators when the API server refuses:
//! one mapping from the API's answers to errors that name what to fix, shared by the sinks
//! of this crate.

use ho_engine::sink::SinkError;

/// The object a sink writes, as its errors name it.
pub struct Target<'a> {
    /// The kind, e.g. `ConfigMap`.
    pub kind: &'a str,
    /// The resource for RBAC, e.g. `configmaps` or `dnsendpoints.externaldns.k8s.io`.
    pub resource: &'a str,
    /// Its namespace.
    pub namespace: &'a str,
    /// Its name.
    pub name: &'a str,
    /// The API server's address, for unreachable errors.
    pub server: &'a str,
    /// What to do about a 404 (the object or its resource type missing).
    pub missing: &'a str,
    /// Whether RBAC grants the verbs on this one name (`resourceNames`): said in a 403.
    pub by_name: bool,
}

impl Target<'_> {
    /// `verb` on the object failed with `e`: an error naming what to fix, retried when
    /// trying again can help.
    pub fn error(&self, verb: &str, e: kube::Error) -> SinkError {
        let object = format!("{} {}/{}", self.kind, self.namespace, self.name);
        match e {
            kube::Error::Api(api) => {
                let said = &api.message;
                match api.code {
                    401 => SinkError::permanent(format!(
                        "Kubernetes rejected the credentials ({verb} {object}): {said}"
                    )),
                    403 => SinkError::permanent(format!(
                        "the service account may not {verb} {} in namespace {} (needs verb \"{verb}\" on resource \"{}\"{}; see deploy/kubernetes/rbac.yaml): {said}",
                        self.resource,
                        self.namespace,
                        self.resource,
                        if self.by_name {
                            format!(", resourceNames [\"{}\"]", self.name)
                        } else {
                            String::new()
                        }
                    )),
                    404 => SinkError::permanent(format!(
                        "{object} not found ({verb}): {}",
                        self.missing
                    )),
                    429 => SinkError::throttled(
                        format!("Kubernetes is throttling ({verb} {object}): {said}"),
                        None,
                    ),
                    409 | 500.. => SinkError::retriable(format!(
                        "Kubernetes answered {} to {verb} {object}: {said}",
                        api.code
                    )),
                    code => SinkError::permanent(format!(
                        "Kubernetes refused to {verb} {object} ({code} {}): {said}",
                        api.reason
                    )),
                }
            }
            other => SinkError::retriable(format!(
                "Kubernetes API at {} unreachable ({verb} {object}): {other}",
                self.server
            )),
        }
    }
}
