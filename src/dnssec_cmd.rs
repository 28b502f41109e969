//! `dnssec keygen` and `dnssec ds`: the keys a signing `dns_server` reads, and the DS
//! records its parent zone needs. Keys are written in BIND's format, so BIND's
//! `dnssec-settime` and `dnssec-dsfromkey` work on them too.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::SystemTime;

use anyhow::{bail, Context};
use clap::{Args, Subcommand, ValueEnum};
use hickory_proto::dnssec::Algorithm;
use ho_dns::server::dnssec::keys::{self, NewKey, Timing};

/// What `dnssec` does.
#[derive(Subcommand)]
pub enum DnssecAction {
    /// Write a new key pair (`K<zone>.+<alg>+<tag>.key` and `.private`) into a directory;
    /// print the DS record for the parent zone when it is a key-signing key.
    Keygen(KeygenArgs),
    /// Print the DS records of every key-signing key in a directory (to give the parent).
    Ds {
        /// The key directory (`dnssec.keys` of the sink).
        dir: PathBuf,
    },
}

/// `dnssec keygen`'s options.
#[derive(Args)]
pub struct KeygenArgs {
    /// The zone the key signs.
    #[arg(long)]
    zone: String,
    /// The key directory (created if missing).
    #[arg(long = "out", value_name = "DIR")]
    out: PathBuf,
    /// Signing algorithm.
    #[arg(long, value_enum, default_value = "ecdsap256sha256")]
    algorithm: AlgorithmArg,
    /// A zone-signing key (flags 256) to pair with a key-signing key; without it the key
    /// is a key-signing key (flags 257), which signs everything when it is the zone's only
    /// key.
    #[arg(long)]
    zsk: bool,
    /// When the key enters the DNSKEY set: `now`, `+SECONDS` (or `+2d`, `+1h`) from now,
    /// or `YYYYMMDDHHMMSS` (UTC). Default: now.
    #[arg(long, value_name = "TIME")]
    publish: Option<String>,
    /// When it starts signing (same forms). Default: now.
    #[arg(long, value_name = "TIME")]
    activate: Option<String>,
    /// When it stops signing (same forms). Default: never.
    #[arg(long, value_name = "TIME")]
    inactive: Option<String>,
    /// When it leaves the DNSKEY set (same forms). Default: never.
    #[arg(long, value_name = "TIME")]
    delete: Option<String>,
}

/// The algorithms the signer supports.
#[derive(Clone, Copy, ValueEnum)]
pub enum AlgorithmArg {
    /// 13: ECDSA P-256 with SHA-256, the most widely validated.
    Ecdsap256sha256,
    /// 14: ECDSA P-384 with SHA-384.
    Ecdsap384sha384,
    /// 15: Ed25519.
    Ed25519,
}

/// Runs `dnssec ...`.
pub fn dnssec(action: DnssecAction) -> anyhow::Result<ExitCode> {
    match action {
        DnssecAction::Keygen(args) => keygen(&args),
        DnssecAction::Ds { dir } => print_ds(&dir),
    }
}

fn keygen(args: &KeygenArgs) -> anyhow::Result<ExitCode> {
    let now = SystemTime::now();
    let secs = ho_engine::clock::since_epoch(now).as_secs();
    let time = |flag: &str, v: &Option<String>| -> anyhow::Result<Option<u64>> {
        v.as_deref()
            .map(|v| parse_when(v, secs).with_context(|| format!("--{flag}")))
            .transpose()
    };
    let timing = Timing {
        publish: time("publish", &args.publish)?,
        activate: time("activate", &args.activate)?,
        inactive: time("inactive", &args.inactive)?,
        delete: time("delete", &args.delete)?,
    };
    let zone = ho_config::names::normalize_domain(&args.zone)
        .map_err(|e| anyhow::anyhow!("--zone: {e}"))?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let algorithm = match args.algorithm {
        AlgorithmArg::Ecdsap256sha256 => Algorithm::ECDSAP256SHA256,
        AlgorithmArg::Ecdsap384sha384 => Algorithm::ECDSAP384SHA384,
        AlgorithmArg::Ed25519 => Algorithm::ED25519,
    };
    let key = NewKey {
        zone,
        algorithm,
        ksk: !args.zsk,
        timing,
    };
    let path = keys::generate(&key, &args.out, now)?;
    let written = keys::read_key(&path)?;
    let role = if args.zsk {
        "zone-signing"
    } else {
        "key-signing"
    };
    eprintln!(
        "wrote {} and its .key ({role} key, tag {})",
        path.display(),
        written.tag
    );
    if !args.zsk {
        eprintln!("give the parent zone this DS record:");
        crate::stdout::write(format_args!("{}\n", written.ds()?))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn print_ds(dir: &Path) -> anyhow::Result<ExitCode> {
    let keys = keys::read_dir(dir)?;
    let ksks: Vec<_> = keys.iter().filter(|k| k.is_ksk()).collect();
    if ksks.is_empty() {
        bail!("{} holds no key-signing key", dir.display());
    }
    for key in ksks {
        crate::stdout::write(format_args!("{}\n", key.ds()?))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A key time as `dnssec-keygen` takes it: `now`, `+SECONDS` or `+` a duration (`+2d`),
/// or `YYYYMMDDHHMMSS`.
fn parse_when(value: &str, now: u64) -> anyhow::Result<u64> {
    if value == "now" {
        return Ok(now);
    }
    if let Some(offset) = value.strip_prefix('+') {
        let secs = match offset.parse::<u64>() {
            Ok(s) => s,
            Err(_) => humantime::parse_duration(offset)
                .with_context(|| format!("\"{value}\" is not +SECONDS or +DURATION"))?
                .as_secs(),
        };
        return Ok(now + secs);
    }
    Ok(keys::parse_time(value)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_times_read_as_dnssec_keygen_takes_them() {
        assert_eq!(parse_when("now", 100).unwrap(), 100);
        assert_eq!(parse_when("+30", 100).unwrap(), 130);
        assert_eq!(parse_when("+2d", 0).unwrap(), 172_800);
        assert_eq!(parse_when("19700101000140", 0).unwrap(), 100);
        assert!(parse_when("tomorrow", 0).is_err());
    }
}
