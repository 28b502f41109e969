//! ACME DNS-01 challenges in the zones the server holds (`acme = { tsig = { ... } }`):
//! the server takes RFC 2136 updates signed with that key, limited to TXT records at
//! `_acme-challenge.NAME` where NAME is a name it serves (or the parent of a wildcard it
//! serves, as a wildcard certificate's challenge is), and answers them beside the tenants'
//! records. cert-manager's `rfc2136` solver, `nsupdate` and `knsupdate` work against it.
//!
//! An update is all or nothing: any record out of scope (another type, another name, a
//! zone the server does not hold) refuses the whole update and changes nothing. Unsigned
//! updates, or ones signed with another key, are refused (a TSIG that does not verify is
//! NOTAUTH before this is reached). The challenges live in memory, are carried over a
//! reload, and are kept in `<state_dir>/acme-<sink>.json` across restarts.
//!
//! Replicas that share `state_dir` (several on one host, or a volume each mounts) share the
//! challenges, whichever replica the solver's update reached: the file is the truth. An
//! update is applied to the file under an exclusive lock (`acme-<sink>.json.lock`: two
//! replicas taking updates at once both land), and a query for a challenge name first
//! looks whether the file changed since it was last read (one `stat`, and only for
//! `_acme-challenge.` names), so another replica's update is answered from the next query.
//! Replicas with a `state_dir` each of their own answer only the updates they took.
//!
//! Zone transfers carry the challenges, and an update raises the SOA serial and NOTIFYs the
//! secondaries: an ACME server asks whichever of the zone's name servers it picks, so a
//! challenge must reach the secondaries too.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, RwLock};

use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::rdata::TXT;
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType, TSigner};
use ho_engine::state_file::{self, StateFormat};
use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use super::names::key_of;
use super::records::Records;

/// The label a DNS-01 challenge lives under (RFC 8555 8.4).
const CHALLENGE: &str = "_acme-challenge.";

/// How long resolvers may keep a challenge: short, as ACME servers ask again.
pub const TTL: u32 = 60;

/// The key updates are signed with, and the challenges taken.
pub struct Acme {
    pub key: TSigner,
    challenges: RwLock<BTreeMap<String, Vec<String>>>,
    /// `<state_dir>/acme-<sink>.json`, when there is a `state_dir`.
    keep_in: Option<PathBuf>,
    /// The kept file as last read or written here: when it differs, another replica
    /// sharing `state_dir` wrote it.
    seen: Mutex<Option<Stamp>>,
}

/// What identifies one version of the kept file: writes replace it (a new inode), and
/// the time and length tell apart a file replaced in place by hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    inode: u64,
    modified_ns: i128,
    len: u64,
}

impl Stamp {
    /// The file's stamp now; `None` when there is no file.
    fn of(path: &Path) -> Option<Stamp> {
        let m = std::fs::metadata(path).ok()?;
        Some(Stamp {
            inode: m.ino(),
            modified_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
            len: m.len(),
        })
    }
}

/// `acme-<sink>.json`.
#[derive(Default, Serialize, Deserialize)]
struct KeptChallenges {
    challenges: BTreeMap<String, Vec<String>>,
}

impl StateFormat for KeptChallenges {
    const WHAT: &'static str = "ACME challenges";
    const LOSS: &'static str =
        "challenges in progress are then lost; the ACME client sets them again when it retries";
    const VERSION: u64 = 2;
}

/// One change an update asks for.
enum Change {
    Add(String, String),
    DeleteAll(String),
    Delete(String, String),
}

impl Change {
    /// `challenges` (TXT texts by name) with this change made.
    fn apply_to(self, challenges: &mut BTreeMap<String, Vec<String>>) {
        match self {
            Change::Add(name, text) => {
                let texts = challenges.entry(name.clone()).or_default();
                if !texts.contains(&text) {
                    info!(name = %name, "ACME challenge added");
                    texts.push(text);
                }
            }
            Change::DeleteAll(name) => {
                challenges.remove(&name);
            }
            Change::Delete(name, text) => {
                if let Some(texts) = challenges.get_mut(&name) {
                    texts.retain(|t| *t != text);
                    if texts.is_empty() {
                        challenges.remove(&name);
                    }
                }
            }
        }
    }
}

impl Acme {
    /// Updates signed with `key`; challenges kept in `keep_in` (those kept there before
    /// are read back), or only in memory.
    pub fn new(key: TSigner, keep_in: Option<PathBuf>) -> Acme {
        let acme = Acme {
            key,
            challenges: RwLock::new(BTreeMap::new()),
            keep_in,
            seen: Mutex::new(None),
        };
        acme.follow();
        acme
    }

    /// Reads the kept file again if it changed since this replica last read or wrote it.
    fn follow(&self) {
        let Some(path) = &self.keep_in else {
            return;
        };
        let mut seen = self.seen.lock().expect("not poisoned");
        let now = Stamp::of(path);
        if now == *seen {
            return;
        }
        match state_file::read::<KeptChallenges>(path) {
            Ok(kept) => {
                *self.challenges.write().expect("not poisoned") =
                    kept.unwrap_or_default().challenges;
                *seen = now;
            }
            // A file being replaced, or broken: what is in memory keeps answering, and
            // the next query looks again.
            Err(e) => warn!(error = %e, "the ACME challenges kept there are not read"),
        }
    }

    /// Takes over the challenges of the server this one replaces (a reload).
    pub fn carry_over(&self, previous: &Acme) {
        let taken = previous.challenges.read().expect("not poisoned").clone();
        *self.challenges.write().expect("not poisoned") = taken;
    }

    /// The TXT values of challenge name `key`, if it has any (another replica's included).
    pub fn texts(&self, key: &str) -> Option<Vec<String>> {
        if key.starts_with(CHALLENGE) {
            self.follow();
        }
        self.challenges
            .read()
            .expect("not poisoned")
            .get(key)
            .cloned()
    }

    /// Every challenge name (lower case, no trailing dot) and its TXT values, another
    /// replica's included: what zone transfers carry.
    pub fn all(&self) -> BTreeMap<String, Vec<String>> {
        self.follow();
        self.challenges.read().expect("not poisoned").clone()
    }

    /// Applies `update`, signed by `signer` (the key it was verified with, if any), to the
    /// zone `apex` it names: the response code. `records`: what the server serves, for
    /// the names a challenge may sit under.
    pub fn apply(
        &self,
        update: &Message,
        signer: Option<&Name>,
        zones: &[&str],
        records: &Records,
    ) -> ResponseCode {
        if signer != Some(self.key.signer_name()) {
            return ResponseCode::Refused;
        }
        let zone = &update.queries[0];
        let apex = key_of(zone.name());
        if zone.query_type() != RecordType::SOA || !zones.contains(&apex.as_str()) {
            return ResponseCode::NotAuth;
        }
        // Prerequisites (RFC 2136 2.4) are not taken: ACME clients send none.
        if !update.answers.is_empty() {
            return ResponseCode::NotImp;
        }
        let mut changes = Vec::new();
        for rr in &update.authorities {
            match change_of(rr, &apex, records) {
                Some(change) => changes.push(change),
                None => return ResponseCode::Refused,
            }
        }
        // The file is the truth replicas share: read it again under the lock, change it,
        // write it, so an update another replica took meanwhile is kept.
        let lock = match self.keep_in.as_deref().map(state_file::lock) {
            Some(Err(e)) => {
                warn!(error = %e, "the ACME challenges cannot be locked: the update is refused");
                return ResponseCode::ServFail;
            }
            Some(Ok(file)) => Some(file),
            None => None,
        };
        self.follow();
        let mut challenges = self.challenges.read().expect("not poisoned").clone();
        for change in changes {
            change.apply_to(&mut challenges);
        }
        if let Some(path) = &self.keep_in {
            let kept = KeptChallenges { challenges };
            if let Err(e) = state_file::write_state(path, &kept, true) {
                warn!(error = %e, "the ACME challenges are not kept: the update is refused");
                return ResponseCode::ServFail;
            }
            *self.seen.lock().expect("not poisoned") = Stamp::of(path);
            challenges = kept.challenges;
        }
        *self.challenges.write().expect("not poisoned") = challenges;
        drop(lock);
        ResponseCode::NoError
    }
}

/// What record `rr` of an update's update section asks, when it is in scope: a TXT at
/// `_acme-challenge.NAME` under `apex`, NAME a served name or the parent of a served
/// wildcard.
fn change_of(rr: &Record, apex: &str, records: &Records) -> Option<Change> {
    let name = key_of(&rr.name);
    let under = name.strip_prefix(CHALLENGE)?;
    let in_zone = under == apex || under.ends_with(&format!(".{apex}"));
    let served = records.get(under).is_some() || records.get(&format!("*.{under}")).is_some();
    if !in_zone || !served {
        return None;
    }
    let text = || match &rr.data {
        RData::TXT(txt) => Some(
            txt.txt_data
                .iter()
                .map(|part| String::from_utf8_lossy(part).into_owned())
                .collect::<String>(),
        ),
        _ => None,
    };
    match (rr.dns_class, rr.record_type()) {
        (DNSClass::IN, RecordType::TXT) => Some(Change::Add(name, text()?)),
        (DNSClass::ANY, RecordType::TXT | RecordType::ANY) => Some(Change::DeleteAll(name)),
        (DNSClass::NONE, RecordType::TXT) => Some(Change::Delete(name, text()?)),
        _ => None,
    }
}

/// The TXT records answering challenge `name` (as asked, `qname`).
pub fn records(qname: &Name, texts: &[String]) -> Vec<Record> {
    texts
        .iter()
        .map(|t| Record::from_rdata(qname.clone(), TTL, RData::TXT(TXT::new(vec![t.clone()]))))
        .collect()
}

/// Three versions of the kept challenges, as the file holds them: what this replica last
/// shared (`base`, none at first), what it holds now (`ours`), what the others shared since
/// (`theirs`). The result is `theirs` with this replica's changes since `base` applied (a
/// challenge added here is added, one removed here is removed), so updates taken by two
/// replicas at once both land (`[kubernetes] operator_state` shares the file).
pub fn merge_kept(
    base: Option<&[u8]>,
    ours: &[u8],
    theirs: &[u8],
) -> Result<Vec<u8>, state_file::StateFileError> {
    let decode = |bytes: &[u8]| {
        state_file::decode::<KeptChallenges>(Path::new("(shared ACME challenges)"), bytes)
            .map(|k| k.challenges)
    };
    let base = base.map(decode).transpose()?.unwrap_or_default();
    let ours = decode(ours)?;
    let mut merged = decode(theirs)?;
    let pairs = |m: &BTreeMap<String, Vec<String>>| -> Vec<(String, String)> {
        m.iter()
            .flat_map(|(name, texts)| texts.iter().map(move |t| (name.clone(), t.clone())))
            .collect()
    };
    let (before, now) = (pairs(&base), pairs(&ours));
    for (name, text) in now.iter().filter(|p| !before.contains(p)) {
        let texts = merged.entry(name.clone()).or_default();
        if !texts.contains(text) {
            texts.push(text.clone());
        }
    }
    for (name, text) in before.iter().filter(|p| !now.contains(p)) {
        if let Some(texts) = merged.get_mut(name) {
            texts.retain(|t| t != text);
            if texts.is_empty() {
                merged.remove(name);
            }
        }
    }
    Ok(state_file::encode(&KeptChallenges { challenges: merged }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(pairs: &[(&str, &str)]) -> Vec<u8> {
        let mut challenges: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, text) in pairs {
            challenges
                .entry(name.to_string())
                .or_default()
                .push(text.to_string());
        }
        state_file::encode(&KeptChallenges { challenges })
    }

    #[test]
    fn changes_on_two_replicas_at_once_both_land() {
        let base = kept(&[("_acme-challenge.a", "old")]);
        // Here: "old" cleared, "mine" added; there: "theirs" added meanwhile.
        let ours = kept(&[("_acme-challenge.b", "mine")]);
        let theirs = kept(&[
            ("_acme-challenge.a", "old"),
            ("_acme-challenge.c", "theirs"),
        ]);
        let merged = merge_kept(Some(&base), &ours, &theirs).unwrap();
        assert_eq!(
            merged,
            kept(&[
                ("_acme-challenge.b", "mine"),
                ("_acme-challenge.c", "theirs")
            ])
        );
        // Nothing shared before: everything here is added to theirs.
        let merged = merge_kept(None, &ours, &theirs).unwrap();
        assert_eq!(
            merged,
            kept(&[
                ("_acme-challenge.a", "old"),
                ("_acme-challenge.b", "mine"),
                ("_acme-challenge.c", "theirs")
            ])
        );
        assert!(merge_kept(None, b"{", &theirs).is_err());
    }
}
