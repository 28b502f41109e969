//! DNSSEC key files in BIND's format (`K<zone>.+<alg>+<tag>.key` and `.private`), the
//! format BIND's `dnssec-keygen`, `ldns-keygen` and `pdnsutil export-zone-key` write, and
//! `health-orchestrator dnssec keygen` writes too: keys move between these tools and this
//! server without conversion.
//!
//! A key's timing is BIND's (`Publish`, `Activate`, `Inactive`, `Delete` in the
//! `.private` file, as `dnssec-settime` edits them): published in the DNSKEY set from
//! `Publish` until `Delete`, signing from `Activate` until `Inactive`. A missing time
//! means "from the start" (`Publish`, `Activate`) or "never" (`Inactive`, `Delete`), as
//! BIND reads keys without metadata.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use hickory_proto::dnssec::crypto::{EcdsaSigningKey, Ed25519SigningKey};
use hickory_proto::dnssec::rdata::{DNSKEY, DS};
use hickory_proto::dnssec::{Algorithm, DigestType, PublicKey, PublicKeyBuf, SigningKey};
use hickory_proto::rr::Name;
use ring::rand::{SecureRandom, SystemRandom};

use super::error::{DnssecError, TimeError};
use ring::signature::{
    EcdsaKeyPair, Ed25519KeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING,
    ECDSA_P384_SHA384_FIXED_SIGNING,
};

/// The DNSKEY flags of a key-signing key (zone key + secure entry point).
pub const KSK_FLAGS: u16 = 257;
/// The DNSKEY flags of a zone-signing key.
pub const ZSK_FLAGS: u16 = 256;

/// When a key enters and leaves the DNSKEY set and signing, as Unix seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Timing {
    /// In the DNSKEY set from then.
    pub publish: Option<u64>,
    /// Signs from then.
    pub activate: Option<u64>,
    /// Stops signing then.
    pub inactive: Option<u64>,
    /// Leaves the DNSKEY set then.
    pub delete: Option<u64>,
}

impl Timing {
    /// Whether the key is in the DNSKEY set at `now`.
    pub fn published(&self, now: u64) -> bool {
        self.publish.is_none_or(|t| t <= now) && self.delete.is_none_or(|t| now < t)
    }

    /// Whether the key signs at `now` (it must also be published).
    pub fn active(&self, now: u64) -> bool {
        self.published(now)
            && self.activate.is_none_or(|t| t <= now)
            && self.inactive.is_none_or(|t| now < t)
    }

    /// The first of the key's times after `now`, when its state may change.
    pub fn next_change(&self, now: u64) -> Option<u64> {
        [self.publish, self.activate, self.inactive, self.delete]
            .into_iter()
            .flatten()
            .filter(|t| *t > now)
            .min()
    }
}

/// One key read from its pair of files.
pub struct ZoneKey {
    /// The zone it signs (lower case, no trailing dot).
    pub zone: String,
    /// Its public half as published.
    pub dnskey: DNSKEY,
    /// Its key tag (in RRSIGs and the DS).
    pub tag: u16,
    /// Its private half.
    pub signer: Box<dyn SigningKey>,
    /// When it is published and signs.
    pub timing: Timing,
    /// The `.private` file it came from (for messages).
    pub path: PathBuf,
}

impl ZoneKey {
    /// Whether it is a key-signing key (SEP flag): it signs the DNSKEY set.
    pub fn is_ksk(&self) -> bool {
        self.dnskey.secure_entry_point()
    }

    /// The DS record for the parent zone (SHA-256), in presentation format.
    pub fn ds(&self) -> Result<String, DnssecError> {
        let name = fqdn(&self.zone).map_err(|e| DnssecError::Crypto(e.to_string()))?;
        let digest = self
            .dnskey
            .to_digest(&name, DigestType::SHA256)
            .map_err(|e| {
                DnssecError::Crypto(format!(
                    "cannot make the DS of {}: {e}",
                    self.path.display()
                ))
            })?;
        let ds = DS::new(
            self.tag,
            self.signer.algorithm(),
            DigestType::SHA256,
            digest.as_ref().to_vec(),
        );
        Ok(format!("{name} IN DS {ds}"))
    }
}

fn fqdn(zone: &str) -> Result<Name, String> {
    let mut name =
        Name::from_ascii(zone).map_err(|e| format!("\"{zone}\" is not a DNS name: {e}"))?;
    name.set_fqdn(true);
    Ok(name)
}

/// Every key in `dir`: each `K*.private` with its `.key` beside it. Any file that cannot
/// be read as a key is an error naming it (a signer that silently skipped a key could
/// leave a zone signed with a key its parent does not know).
pub fn read_dir(dir: &Path) -> Result<Vec<ZoneKey>, DnssecError> {
    let entries = std::fs::read_dir(dir).map_err(|source| DnssecError::Io {
        action: "read",
        path: dir.to_owned(),
        source,
    })?;
    let mut keys = Vec::new();
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|x| x == "private")
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with('K'))
        })
        .collect();
    paths.sort();
    for path in paths {
        keys.push(read_key(&path)?);
    }
    Ok(keys)
}

/// The key of one `.private` file and the `.key` file beside it.
pub fn read_key(private: &Path) -> Result<ZoneKey, DnssecError> {
    let public = private.with_extension("key");
    let at = |p: &Path, reason: String| DnssecError::KeyFile {
        path: p.to_owned(),
        reason,
    };
    let private_text =
        std::fs::read_to_string(private).map_err(|e| at(private, format!("cannot read: {e}")))?;
    let public_text =
        std::fs::read_to_string(&public).map_err(|e| at(&public, format!("cannot read: {e}")))?;
    let (zone, dnskey) = parse_public(&public_text).map_err(|e| at(&public, e))?;
    let (algorithm, secret, timing) = parse_private(&private_text).map_err(|e| at(private, e))?;
    if algorithm != dnskey.public_key().algorithm() {
        return Err(at(
            private,
            format!(
                "algorithm {} but its .key file says {}",
                u8::from(algorithm),
                u8::from(dnskey.public_key().algorithm())
            ),
        ));
    }
    let signer = signing_key(algorithm, &secret, dnskey.public_key().public_bytes())
        .map_err(|e| at(private, e))?;
    let tag = dnskey
        .calculate_key_tag()
        .map_err(|e| at(&public, format!("cannot compute the key tag: {e}")))?;
    Ok(ZoneKey {
        zone,
        dnskey,
        tag,
        signer,
        timing,
        path: private.to_owned(),
    })
}

/// The zone and DNSKEY of a `.key` file: comment lines (`;`) and one DNSKEY record
/// (`example.org. [TTL] [IN] DNSKEY 257 3 13 BASE64...`).
fn parse_public(text: &str) -> Result<(String, DNSKEY), String> {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with(';'))
        .ok_or("no DNSKEY record")?;
    let fields: Vec<&str> = line.split_whitespace().collect();
    let at = fields
        .iter()
        .position(|f| f.eq_ignore_ascii_case("DNSKEY"))
        .ok_or("no DNSKEY record")?;
    let zone = fields[0].trim_end_matches('.').to_ascii_lowercase();
    let [flags, protocol, algorithm, key @ ..] = &fields[at + 1..] else {
        return Err("the DNSKEY record lacks fields (flags protocol algorithm key)".into());
    };
    let flags: u16 = flags
        .parse()
        .map_err(|_| format!("DNSKEY flags \"{flags}\" is not a number"))?;
    if *protocol != "3" {
        return Err(format!("DNSKEY protocol is {protocol}, must be 3"));
    }
    if flags & ZSK_FLAGS == 0 {
        return Err(format!("DNSKEY flags {flags} lack the zone key bit (256)"));
    }
    if flags & 0x80 != 0 {
        return Err("the key is revoked (flag 128); RFC 5011 revocation is not supported".into());
    }
    let algorithm = parse_algorithm(algorithm)?;
    let key = data_encoding::BASE64
        .decode(key.concat().as_bytes())
        .map_err(|e| format!("the public key is not base64: {e}"))?;
    Ok((
        zone,
        DNSKEY::with_flags(flags, PublicKeyBuf::new(key, algorithm)),
    ))
}

fn parse_algorithm(number: &str) -> Result<Algorithm, String> {
    match number {
        "13" => Ok(Algorithm::ECDSAP256SHA256),
        "14" => Ok(Algorithm::ECDSAP384SHA384),
        "15" => Ok(Algorithm::ED25519),
        other => Err(format!(
            "algorithm {other} is not supported: use 13 (ECDSAP256SHA256), 14 (ECDSAP384SHA384) \
             or 15 (ED25519)"
        )),
    }
}

/// The algorithm, private key bytes and timing of a `.private` file (`Field: value` lines).
fn parse_private(text: &str) -> Result<(Algorithm, Vec<u8>, Timing), String> {
    let mut algorithm = None;
    let mut secret = None;
    let mut timing = Timing::default();
    for line in text.lines() {
        let Some((field, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match field.trim() {
            "Algorithm" => {
                let number = value.split_whitespace().next().unwrap_or_default();
                algorithm = Some(parse_algorithm(number)?);
            }
            "PrivateKey" => {
                secret = Some(
                    data_encoding::BASE64
                        .decode(value.as_bytes())
                        .map_err(|e| format!("PrivateKey is not base64: {e}"))?,
                );
            }
            "Publish" => timing.publish = Some(parse_time(value).map_err(|e| e.to_string())?),
            "Activate" => timing.activate = Some(parse_time(value).map_err(|e| e.to_string())?),
            "Inactive" => timing.inactive = Some(parse_time(value).map_err(|e| e.to_string())?),
            "Delete" => timing.delete = Some(parse_time(value).map_err(|e| e.to_string())?),
            "Revoke" => return Err("Revoke is set; RFC 5011 revocation is not supported".into()),
            _ => {}
        }
    }
    Ok((
        algorithm.ok_or("no Algorithm line")?,
        secret.ok_or("no PrivateKey line (only ECDSA and Ed25519 keys are read)")?,
        timing,
    ))
}

/// A time as BIND writes it in key files: `YYYYMMDDHHMMSS`, UTC.
pub fn parse_time(value: &str) -> Result<u64, TimeError> {
    let refused = |detail| TimeError {
        value: value.to_owned(),
        detail,
    };
    let v = value.split_whitespace().next().unwrap_or_default();
    if v.len() != 14 || !v.bytes().all(|b| b.is_ascii_digit()) {
        return Err(refused(None));
    }
    let rfc3339 = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &v[0..4],
        &v[4..6],
        &v[6..8],
        &v[8..10],
        &v[10..12],
        &v[12..14]
    );
    let t = humantime::parse_rfc3339(&rfc3339).map_err(|e| refused(Some(e.to_string())))?;
    Ok(ho_engine::clock::since_epoch(t).as_secs())
}

/// `secs` (Unix) as BIND writes it in key files.
pub fn format_time(secs: u64) -> String {
    let t = ho_engine::clock::after_epoch(Duration::from_secs(secs));
    let s = humantime::format_rfc3339_seconds(t).to_string();
    s.chars().filter(char::is_ascii_digit).collect()
}

/// The private key of `algorithm` from BIND's `PrivateKey` bytes (the ECDSA scalar, the
/// Ed25519 seed) checked against the published `public` key.
fn signing_key(
    algorithm: Algorithm,
    secret: &[u8],
    public: &[u8],
) -> Result<Box<dyn SigningKey>, String> {
    let rejected = |e: ring::error::KeyRejected| {
        format!("the private key does not match the .key file's public key ({e})")
    };
    match algorithm {
        Algorithm::ED25519 => {
            let pair =
                Ed25519KeyPair::from_seed_and_public_key(secret, public).map_err(rejected)?;
            Ok(Box::new(Ed25519SigningKey::from_ed25519(pair)))
        }
        Algorithm::ECDSAP256SHA256 | Algorithm::ECDSAP384SHA384 => {
            let curve = if algorithm == Algorithm::ECDSAP256SHA256 {
                &ECDSA_P256_SHA256_FIXED_SIGNING
            } else {
                &ECDSA_P384_SHA384_FIXED_SIGNING
            };
            // DNSKEY holds x | y; ring wants the uncompressed point (0x04 | x | y).
            let point = [&[4u8][..], public].concat();
            // BIND writes the scalar without leading zero bytes; ring wants its full size
            // (half the point's x | y).
            let mut scalar = vec![0u8; (public.len() / 2).saturating_sub(secret.len())];
            scalar.extend_from_slice(secret);
            let pair = EcdsaKeyPair::from_private_key_and_public_key(
                curve,
                &scalar,
                &point,
                &SystemRandom::new(),
            )
            .map_err(rejected)?;
            Ok(Box::new(EcdsaSigningKey::from_ecdsa(pair, algorithm)))
        }
        other => Err(format!("algorithm {} is not supported", u8::from(other))),
    }
}

/// What `dnssec keygen` is asked for.
#[derive(Debug, Clone)]
pub struct NewKey {
    /// The zone (no trailing dot needed).
    pub zone: String,
    /// 13, 14 or 15.
    pub algorithm: Algorithm,
    /// A key-signing key (flags 257) or a zone-signing key (256).
    pub ksk: bool,
    /// Its timing (Unix seconds).
    pub timing: Timing,
}

/// Writes a new key pair into `dir` in BIND's format; the path of its `.private` file.
pub fn generate(key: &NewKey, dir: &Path, now: SystemTime) -> Result<PathBuf, DnssecError> {
    let pair = make_pair(key).map_err(DnssecError::Crypto)?;
    write_pair(key, dir, now, pair)
}

/// The private and public key bytes of a new key of `key.algorithm`, and its tag.
fn make_pair(key: &NewKey) -> Result<(Vec<u8>, Vec<u8>, u16), String> {
    let rng = SystemRandom::new();
    let (secret, public) = match key.algorithm {
        Algorithm::ED25519 => {
            let mut seed = [0u8; 32];
            rng.fill(&mut seed)
                .map_err(|_| "the system's random source failed")?;
            let pair = Ed25519KeyPair::from_seed_unchecked(&seed)
                .map_err(|e| format!("cannot make an Ed25519 key: {e}"))?;
            (seed.to_vec(), pair.public_key().as_ref().to_vec())
        }
        Algorithm::ECDSAP256SHA256 | Algorithm::ECDSAP384SHA384 => {
            let curve = if key.algorithm == Algorithm::ECDSAP256SHA256 {
                &ECDSA_P256_SHA256_FIXED_SIGNING
            } else {
                &ECDSA_P384_SHA384_FIXED_SIGNING
            };
            let pkcs8 = EcdsaKeyPair::generate_pkcs8(curve, &rng)
                .map_err(|_| "the system's random source failed")?;
            let pair = EcdsaKeyPair::from_pkcs8(curve, pkcs8.as_ref(), &rng)
                .map_err(|e| format!("cannot read the key just made: {e}"))?;
            let scalar = ec_private_scalar(pkcs8.as_ref())
                .ok_or("cannot find the private scalar in the key just made")?;
            (scalar.to_vec(), pair.public_key().as_ref()[1..].to_vec())
        }
        other => return Err(format!("algorithm {} is not supported", u8::from(other))),
    };
    let flags = if key.ksk { KSK_FLAGS } else { ZSK_FLAGS };
    let dnskey = DNSKEY::with_flags(flags, PublicKeyBuf::new(public.clone(), key.algorithm));
    let tag = dnskey
        .calculate_key_tag()
        .map_err(|e| format!("cannot compute the key tag: {e}"))?;
    Ok((secret, public, tag))
}

/// The rest of [`generate`]: the two files written.
fn write_pair(
    key: &NewKey,
    dir: &Path,
    now: SystemTime,
    (secret, public, tag): (Vec<u8>, Vec<u8>, u16),
) -> Result<PathBuf, DnssecError> {
    let flags = if key.ksk { KSK_FLAGS } else { ZSK_FLAGS };
    let zone = key.zone.trim_end_matches('.').to_ascii_lowercase();
    let alg = u8::from(key.algorithm);
    let base = format!("K{zone}.+{alg:03}+{tag:05}");
    let created = ho_engine::clock::since_epoch(now).as_secs();
    let times = [
        ("Created", Some(created)),
        ("Publish", Some(key.timing.publish.unwrap_or(created))),
        ("Activate", Some(key.timing.activate.unwrap_or(created))),
        ("Inactive", key.timing.inactive),
        ("Delete", key.timing.delete),
    ];
    let role = if key.ksk {
        "key-signing"
    } else {
        "zone-signing"
    };
    let mut public_text = format!("; This is a {role} key, keyid {tag}, for {zone}.\n");
    let mut private_text = format!(
        "Private-key-format: v1.3\nAlgorithm: {alg} ({})\nPrivateKey: {}\n",
        algorithm_name(key.algorithm),
        data_encoding::BASE64.encode(&secret)
    );
    for (field, time) in times {
        if let Some(t) = time {
            let _ = writeln!(public_text, "; {field}: {}", format_time(t));
            let _ = writeln!(private_text, "{field}: {}", format_time(t));
        }
    }
    let _ = writeln!(
        public_text,
        "{zone}. IN DNSKEY {flags} 3 {alg} {}",
        data_encoding::BASE64.encode(&public)
    );
    let private = dir.join(format!("{base}.private"));
    write_new(&dir.join(format!("{base}.key")), &public_text, 0o644)?;
    write_new(&private, &private_text, 0o600)?;
    Ok(private)
}

fn algorithm_name(a: Algorithm) -> &'static str {
    match a {
        Algorithm::ECDSAP256SHA256 => "ECDSAP256SHA256",
        Algorithm::ECDSAP384SHA384 => "ECDSAP384SHA384",
        _ => "ED25519",
    }
}

/// Creates `path` (never overwriting a key) with `mode`.
fn write_new(path: &Path, text: &str, mode: u32) -> Result<(), DnssecError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(|source| DnssecError::Io {
            action: "create",
            path: path.to_owned(),
            source,
        })?;
    file.write_all(text.as_bytes())
        .map_err(|source| DnssecError::Io {
            action: "write",
            path: path.to_owned(),
            source,
        })
}

/// The private scalar of an EC key in PKCS#8 (what ring makes): PrivateKeyInfo's
/// privateKey holds an ECPrivateKey, whose second field is the scalar (RFC 5915).
fn ec_private_scalar(pkcs8: &[u8]) -> Option<&[u8]> {
    let (info, _) = der(pkcs8, 0x30)?;
    let (_, rest) = der(info, 0x02)?; // version
    let (_, rest) = der(rest, 0x30)?; // algorithm
    let (ec_key, _) = der(rest, 0x04)?; // privateKey
    let (ec_key, _) = der(ec_key, 0x30)?;
    let (_, rest) = der(ec_key, 0x02)?; // version 1
    let (scalar, _) = der(rest, 0x04)?;
    Some(scalar)
}

/// The content of the DER element of `tag` at the start of `bytes`, and what follows it.
fn der(bytes: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    let (&t, rest) = bytes.split_first()?;
    if t != tag {
        return None;
    }
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n > 2 || rest.len() < n {
            return None;
        }
        let (len_bytes, after) = rest.split_at(n);
        rest = after;
        len_bytes
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b))
    };
    (rest.len() >= len).then(|| rest.split_at(len))
}

#[cfg(test)]
#[path = "keys_tests.rs"]
mod tests;
