//! The seam between the config and the check kinds, as [`super::sinks`] is for sink kinds.
//! The config knows a check table's common keys (kind, port, timing, thresholds, damping,
//! source address) and keeps the rest as written; a [`CheckCatalog`] (the engine's probe
//! registry: one line per kind) parses those keys into the kind's own typed settings and
//! resolves them into a [`ResolvedCheck`], which the plan carries and the engine's probe for
//! that kind gets back.

use std::any::Any;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::sync::Arc;

use serde::Serialize;

use crate::model::KindSettings;

use super::FieldError;

/// The check kinds a program knows. Validation asks it which keys a kind reads and to
/// resolve every check table's own keys.
pub trait CheckCatalog: Sync {
    /// The `kind` names, in the order error messages list them.
    fn kinds(&self) -> Vec<&'static str>;

    /// The keys kind `kind` reads besides the common ones (empty for an unknown kind).
    fn reads(&self, kind: &str) -> &[String];

    /// The port a check of kind `kind` probes when none is set (`None`: it must be set).
    fn default_port(&self, kind: &str) -> Option<u16>;

    /// Whether kind `kind` has ports at all (ICMP has none: its checks carry port 0).
    fn uses_port(&self, kind: &str) -> bool;

    /// Parses `settings` (only keys the kind reads) as kind `kind` (one of
    /// [`CheckCatalog::kinds`]) and resolves them: defaults filled in, values checked,
    /// files the settings name read (header secrets). Errors are located under `path`.
    fn resolve(
        &self,
        kind: &str,
        settings: KindSettings,
        path: &str,
    ) -> Result<KindCheck, Vec<FieldError>>;
}

/// A kind's resolved settings: what its probe needs, and what the rest of the program asks
/// of any check.
pub trait ResolvedCheck: SameCheck + fmt::Debug + Send + Sync {
    /// The `kind` name.
    fn kind(&self) -> &'static str;

    /// The target's identity in logs and the seed of its schedule phase
    /// (`http://10.0.0.1:80/healthz`, `tcp://[::1]:443`).
    fn url(&self, target: SocketAddr) -> String;

    /// Whether probes keep their connection open between them (`reuse_connection`),
    /// holding a descriptor while idle.
    fn keeps_connection(&self) -> bool {
        false
    }

    /// Whether the probe talks TLS: such targets share TLS client configurations, whose
    /// session caches are sized to their number.
    fn speaks_tls(&self) -> bool {
        false
    }

    /// Whether the probe talks TLS without verifying certificates (`insecure = true`):
    /// logged at start, since a forged certificate goes unnoticed there.
    fn unverified_tls(&self) -> bool {
        false
    }
}

/// Equality, hashing and a JSON form for a [`ResolvedCheck`] behind `dyn`: two targets with
/// equal checks share one prober, and a reload keeps a target whose check did not change.
/// Implemented for every type that is `PartialEq + Hash + Serialize`.
pub trait SameCheck: Any {
    /// Whether `other` is the same type with an equal value.
    fn same(&self, other: &dyn Any) -> bool;
    /// Feeds the value to `state`.
    fn hash_into(&self, state: &mut dyn Hasher);
    /// The settings as `/status` and `check-config --plan` show them.
    fn to_json(&self) -> serde_json::Value;
}

impl<T: PartialEq + Hash + Serialize + Any> SameCheck for T {
    fn same(&self, other: &dyn Any) -> bool {
        other.downcast_ref::<T>() == Some(self)
    }

    fn hash_into(&self, mut state: &mut dyn Hasher) {
        self.hash(&mut state);
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

/// A check's kind-specific part in the plan: shared, compared and hashed by value. It
/// carries the registration of the kind that resolved it, so the program that probes it
/// finds that kind again without a list of kinds of its own (kinds are registered in more
/// than one crate).
#[derive(Clone)]
pub struct KindCheck(Arc<dyn ResolvedCheck>, Arc<dyn Any + Send + Sync>);

impl KindCheck {
    /// Wraps a kind's resolved settings and `origin`, the registration that resolved them
    /// (compared by neither: the kind's name and settings say it all).
    pub fn new(check: impl ResolvedCheck, origin: impl Any + Send + Sync) -> KindCheck {
        KindCheck(Arc::new(check), Arc::new(origin))
    }

    /// The resolved settings.
    pub fn get(&self) -> &dyn ResolvedCheck {
        &*self.0
    }

    /// The registration that resolved the settings, as [`KindCheck::new`] was given it.
    pub fn origin<T: 'static>(&self) -> Option<&T> {
        self.1.downcast_ref::<T>()
    }

    /// The settings as the kind's own type, for the kind that resolved them.
    pub fn downcast<T: 'static>(&self) -> Option<&T> {
        let any: &dyn Any = &*self.0;
        any.downcast_ref::<T>()
    }
}

impl PartialEq for KindCheck {
    fn eq(&self, other: &KindCheck) -> bool {
        let other: &dyn Any = &*other.0;
        self.0.same(other)
    }
}

impl Eq for KindCheck {}

impl Hash for KindCheck {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.kind().hash(state);
        self.0.hash_into(state);
    }
}

impl fmt::Debug for KindCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl Serialize for KindCheck {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut json = serde_json::Map::new();
        json.insert("kind".into(), self.0.kind().into());
        if let serde_json::Value::Object(fields) = self.0.to_json() {
            json.extend(fields);
        }
        json.serialize(s)
    }
}
