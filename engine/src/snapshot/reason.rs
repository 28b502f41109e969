//! The text of why a verdict changed, shared: the start-up wave (every endpoint's `ok`) or
//! a mass failure's one cause is one copy, referenced by each change that carries it.

use std::borrow::Borrow;
use std::collections::HashSet;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Serialize, Serializer};

/// Why a verdict changed (`refused`, `status 503`, `ok`, ...), as receivers read it: one
/// pointer wide, its text shared by every change [`Reasons`] gave the same one. Compares,
/// hashes and serializes as its text.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Reason(Arc<Box<str>>);

impl Reason {
    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Reason {
    fn from(text: &str) -> Reason {
        Reason(Arc::new(text.into()))
    }
}

impl From<String> for Reason {
    fn from(text: String) -> Reason {
        Reason(Arc::new(text.into_boxed_str()))
    }
}

impl Deref for Reason {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

/// For a set of reasons looked up by text; `Hash` and `Eq` are the text's.
impl Borrow<str> for Reason {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq<str> for Reason {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Reason {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl Serialize for Reason {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// The reasons given lately, so that changes of the same text share one copy: at most
/// [`Reasons::MOST`], all forgotten when that many are kept (a text given again is kept
/// again), so failure texts that differ each time cannot make it grow.
#[derive(Default)]
pub(crate) struct Reasons {
    kept: HashSet<Reason>,
}

impl Reasons {
    /// Most texts kept.
    pub(crate) const MOST: usize = 64;

    /// `text` as a reason, shared with the last one given of the same text while kept.
    pub(crate) fn get(&mut self, text: &str) -> Reason {
        if let Some(kept) = self.kept.get(text) {
            return kept.clone();
        }
        if self.kept.len() >= Self::MOST {
            self.kept.clear();
        }
        let reason = Reason::from(text);
        self.kept.insert(reason.clone());
        reason
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seeded texts from a small and a large vocabulary: each reason says its text, the
    /// same text given while kept is the same copy, and no more than `MOST` are kept.
    #[test]
    fn the_same_text_is_one_copy_while_kept_and_the_kept_stay_bounded() {
        let mut rng = fastrand::Rng::with_seed(0x5eed_0f0c);
        let mut reasons = Reasons::default();
        for vocabulary in [3, 1000] {
            let mut previous: std::collections::HashMap<String, Reason> = Default::default();
            for _ in 0..5000 {
                let text = format!("status {}", rng.usize(..vocabulary));
                let reason = reasons.get(&text);
                assert_eq!(reason, *text.as_str());
                assert_eq!(reason.to_string(), text);
                if vocabulary <= Reasons::MOST {
                    if let Some(before) = previous.get(&text) {
                        assert!(Arc::ptr_eq(&before.0, &reason.0), "{text} shared");
                    }
                }
                previous.insert(text, reason);
                assert!(reasons.kept.len() <= Reasons::MOST);
            }
        }
        assert_eq!(std::mem::size_of::<Reason>(), std::mem::size_of::<usize>());
    }
}
