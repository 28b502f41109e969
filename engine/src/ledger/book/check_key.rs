//! A check's target key as the book tells checks apart: a digest of the key's text, not
//! the text. The text (`http://10.0.0.1:80/healthz`) took about 55 bytes a target at
//! 100,000 (a shared copy and its allocation) and the book only ever compares keys; the
//! plan makes the text again whenever it is needed.

/// A target key's first 128 bits of SHA-256: two keys of different text share one with a
/// chance of about n²/2¹²⁹ among n keys, which no plan comes near.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CheckKey([u64; 2]);

impl CheckKey {
    /// The key of target key `text`.
    pub fn of(text: &str) -> CheckKey {
        let digest = ::ring::digest::digest(&::ring::digest::SHA256, text.as_bytes());
        let half = |at: usize| {
            let bytes = digest.as_ref()[at..at + 8].try_into();
            u64::from_le_bytes(bytes.expect("SHA-256 has 32 bytes"))
        };
        CheckKey([half(0), half(8)])
    }

    /// Its first 32 bits: what the index of tenants by key sorts on. Two keys sharing them
    /// (about one pair among 100,000 keys) only re-judge a tenant in vain.
    pub(super) fn prefix(self) -> u32 {
        self.0[0] as u32
    }
}

impl From<&str> for CheckKey {
    fn from(text: &str) -> CheckKey {
        CheckKey::of(text)
    }
}

impl From<String> for CheckKey {
    fn from(text: String) -> CheckKey {
        CheckKey::of(&text)
    }
}

#[cfg(test)]
mod tests {
    use super::CheckKey;

    /// Keys of seeded generated texts, many a character apart: equal exactly when their
    /// texts are, sixteen bytes each.
    #[test]
    fn keys_are_equal_exactly_when_their_texts_are() {
        assert_eq!(std::mem::size_of::<CheckKey>(), 16);
        let mut rng = fastrand::Rng::with_seed(7);
        let texts: Vec<String> = (0..3000)
            .map(|_| {
                let port = [80, 443, 8080][rng.usize(..3)];
                let last = rng.u8(..);
                format!("http://10.0.{}.{last}:{port}/h{}", rng.u8(..4), rng.u8(..3))
            })
            .collect();
        let mut by_key = std::collections::HashMap::new();
        for text in &texts {
            let key = CheckKey::of(text);
            let first = by_key.entry(key).or_insert(text);
            assert_eq!(*first, text, "one key, two texts");
            assert_eq!(CheckKey::from(text.as_str()), key);
        }
        let distinct: std::collections::HashSet<&String> = texts.iter().collect();
        assert_eq!(by_key.len(), distinct.len());
    }
}
