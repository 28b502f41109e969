//! The parts of Cloudflare's API v4 this sink speaks, as JSON: every answer is an envelope
//! (`success`, `errors`, `result`, and `result_info` on lists); records are listed a page
//! at a time and changed with one `POST .../dns_records/batch` (deletes, then posts, in one
//! transaction).

use serde::{Deserialize, Serialize};

use crate::rounds::Packable;

/// Most operations in one batch on the Free plan (the default of `max_batch`).
pub const FREE_BATCH: usize = 200;

/// Most operations in one batch on any plan (Pro and above).
pub const PAID_BATCH: usize = 3_500;

/// Records asked for per page of a listing (Cloudflare allows far more).
pub const PAGE: usize = 5_000;

/// Every answer's envelope.
#[derive(Debug, Deserialize)]
pub struct Envelope<T> {
    /// Whether the request did what it asked.
    #[serde(default)]
    pub success: bool,
    /// Why not.
    #[serde(default)]
    pub errors: Vec<ApiError>,
    /// The answer.
    pub result: Option<T>,
    /// A listing's paging.
    pub result_info: Option<ResultInfo>,
}

/// One error of an envelope.
#[derive(Debug, Deserialize)]
pub struct ApiError {
    /// Cloudflare's error code (`81058`: an identical record exists).
    #[serde(default)]
    pub code: u32,
    /// Its text.
    #[serde(default)]
    pub message: String,
}

/// A listing's paging.
#[derive(Debug, Deserialize)]
pub struct ResultInfo {
    /// Pages in all.
    #[serde(default)]
    pub total_pages: usize,
}

/// A zone's details.
#[derive(Debug, Deserialize)]
pub struct Zone {
    /// Its name, without a trailing dot.
    pub name: String,
}

/// A record as listed.
#[derive(Debug, Clone, Deserialize)]
pub struct DnsRecord {
    /// Its id, for deletes.
    pub id: String,
    /// `A`, `AAAA`, `TXT`, ...
    #[serde(rename = "type")]
    pub rtype: String,
    /// Its name, without a trailing dot.
    pub name: String,
    /// Its data (an address, a TXT's quoted strings).
    pub content: String,
    /// Seconds (1: automatic).
    #[serde(default)]
    pub ttl: u32,
}

/// A record to create.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NewRecord {
    /// `A`, `AAAA` or `TXT`.
    #[serde(rename = "type")]
    pub rtype: &'static str,
    /// Its name.
    pub name: String,
    /// Its data.
    pub content: String,
    /// Seconds.
    pub ttl: u32,
    /// Never through Cloudflare's proxy: what is published is what was probed.
    pub proxied: bool,
}

/// A record to delete.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Id {
    /// The record's id.
    pub id: String,
}

/// One `dns_records/batch` request.
#[derive(Debug, Default, Serialize)]
pub struct Batch {
    /// Deleted first.
    pub deletes: Vec<Id>,
    /// Then created.
    pub posts: Vec<NewRecord>,
}

impl Batch {
    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        self.deletes.is_empty() && self.posts.is_empty()
    }

    /// Operations in it.
    pub fn len(&self) -> usize {
        self.deletes.len() + self.posts.len()
    }
}

impl Packable for Batch {
    fn size(&self) -> usize {
        self.len()
    }

    fn absorb(&mut self, other: Batch) {
        self.deletes.extend(other.deletes);
        self.posts.extend(other.posts);
    }

    /// Deletes first.
    fn split(self, max: usize) -> Vec<Batch> {
        let mut out = Vec::new();
        let mut current = Batch::default();
        for id in self.deletes {
            if current.len() == max {
                out.push(std::mem::take(&mut current));
            }
            current.deletes.push(id);
        }
        for post in self.posts {
            if current.len() == max {
                out.push(std::mem::take(&mut current));
            }
            current.posts.push(post);
        }
        if !current.is_empty() {
            out.push(current);
        }
        out
    }
}

/// The envelope's errors as one text (`81058 An identical record already exists.`).
pub fn error_text(body: &[u8]) -> String {
    serde_json::from_slice::<Envelope<serde_json::Value>>(body)
        .map(|e| {
            e.errors
                .iter()
                .map(|x| format!("{} {}", x.code, x.message))
                .collect::<Vec<_>>()
                .join("; ")
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(deletes: usize) -> Batch {
        Batch {
            deletes: (0..deletes).map(|i| Id { id: i.to_string() }).collect(),
            posts: Vec::new(),
        }
    }

    #[test]
    fn tenants_are_packed_whole_into_requests_of_at_most_200() {
        let packed = crate::rounds::pack(
            vec![
                ("a".into(), batch(120)),
                ("b".into(), batch(70)),
                ("c".into(), batch(20)),
                ("d".into(), batch(450)),
                ("e".into(), batch(1)),
            ],
            FREE_BATCH,
        );
        let shape: Vec<(Vec<&str>, usize)> = packed
            .iter()
            .map(|(t, b)| (t.iter().map(String::as_str).collect(), b.len()))
            .collect();
        assert_eq!(
            shape,
            [
                (vec!["a", "b"], 190),
                (vec!["d"], 200),
                (vec!["d"], 200),
                (vec!["d"], 50),
                (vec!["c", "e"], 21),
            ]
        );
    }
}
