//! Kuadrant's `DNSHealthCheckProbe`s as endpoints. A probe's `address` is what dns-operator
//! writes for a record's leaf: an IP address (an A record's target), or a load balancer's
//! host name (a CNAME's target outside the record), which is probed at every address it
//! resolves to, as dns-operator's probe worker does. Live, a probe that cannot be read
//! refuses only the records naming its address, and says why on its own status.

use super::records::{normalize, Endpoints};
use super::*;

impl Endpoints {
    /// Probe `doc` as an endpoint at its address (an IP address, or a host name given as
    /// the endpoint's address, resolved by the running config's `[resolver]`); a document
    /// that does not read is refused with its field.
    pub(super) fn probe(&mut self, doc: &Document, notes: &mut Vec<String>) -> anyhow::Result<()> {
        let probe = match doc.object() {
            Some(Ok(Object::Probe(probe))) => probe,
            Some(Err(malformed)) => return Err(malformed.clone().into()),
            _ => bail!("not a DNSHealthCheckProbe"),
        };
        let name = (probe.metadata.as_ref().and_then(|m| m.name.as_deref()))
            .context("a DNSHealthCheckProbe has no metadata.name")?;
        let (Some(spec), Some(raw_spec)) = (&probe.spec, doc.raw().get("spec")) else {
            bail!("DNSHealthCheckProbe {name} has no spec");
        };
        let written = (spec.address.as_deref())
            .with_context(|| format!("DNSHealthCheckProbe {name} has no address"))?;
        let address = probe_address(written).with_context(|| {
            format!("DNSHealthCheckProbe {name}: address {written:?} is neither an IP address nor a host name (dns-operator writes an A record's address or a CNAME's target, e.g. a1b2.elb.amazonaws.com)")
        })?;
        let mut ep = Table::new();
        ep.insert("name".into(), endpoint_name(name).into());
        ep.insert("address".into(), address.clone().into());
        let at = format!("DNSHealthCheckProbe {name}.spec");
        let check = check_of(raw_spec, &at, CheckDefaults::PROBE, notes)?;
        ep.insert("check".into(), check.into());
        self.list.push((address, ep));
        Ok(())
    }
}

/// The endpoint's name for probe `name`: the probe's, when it fits the config's 63
/// characters; else its first 54 and a digest of the whole (dns-operator names a probe
/// `RECORD-LEAF`, and a load balancer's host name is long), unique and stable.
fn endpoint_name(name: &str) -> String {
    if name.len() <= 63 {
        return name.to_owned();
    }
    // FNV-1a: stable across runs and builds, which the standard hasher is not.
    let digest = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let cut = (0..=54)
        .rev()
        .find(|i| name.is_char_boundary(*i))
        .unwrap_or(0);
    let head = name[..cut].trim_end_matches(['-', '.']);
    format!("{head}-{:08x}", digest as u32)
}

/// A probe's address as an endpoint's: an IP address as written, a host name in lower case
/// without its trailing dot; `None` when it is neither (the label rule of the probe's CRD:
/// letters, digits and hyphens, two labels at least, the last not all digits).
pub(super) fn probe_address(written: &str) -> Option<String> {
    if let Ok(ip) = written.parse::<IpAddr>() {
        return Some(ip.to_string());
    }
    let host = normalize(written);
    let labels: Vec<&str> = host.split('.').collect();
    let label_ok = |l: &&str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    let last_ok = labels
        .last()
        .is_some_and(|l| !l.bytes().all(|b| b.is_ascii_digit()));
    (labels.len() >= 2 && labels.iter().all(label_ok) && last_ok && host.len() <= 253)
        .then_some(host)
}

/// Each probe as an endpoint. `import` fails on a probe that cannot be read; live, such a
/// probe refuses only the records naming its address, which keep their last accepted
/// answer, and the namespace's other records go on.
pub(super) fn read_probes(
    probes: &[&Document],
    endpoints: &mut Endpoints,
    notes: &mut Vec<String>,
    mode: Mode,
) -> anyhow::Result<Vec<RefusedProbe>> {
    let mut refused = Vec::new();
    for probe in probes {
        match endpoints.probe(probe, notes) {
            Ok(()) => {}
            Err(e) if mode == Mode::Live => {
                let address = probe.text(&["spec", "address"]).unwrap_or_default();
                refused.push(RefusedProbe {
                    name: probe.name().unwrap_or_default().to_owned(),
                    address: address.to_owned(),
                    why: format!("{e:#}"),
                });
            }
            Err(e) => return Err(e),
        }
    }
    Ok(refused)
}

/// A probe that cannot be read, live: the records naming its address are refused.
pub(super) struct RefusedProbe {
    /// The probe's name.
    pub(super) name: String,
    /// Its address, as written.
    pub(super) address: String,
    /// Why it cannot be read.
    pub(super) why: String,
}

impl RefusedProbe {
    /// What a record naming its address is refused with.
    pub(super) fn refusal(&self) -> String {
        format!(
            "its DNSHealthCheckProbe for {} is refused: {}",
            self.address, self.why
        )
    }
}

/// The refused probe that refuses `record`: the first whose address is among its
/// targets (host names compared as DNS compares them).
pub(super) fn refused_by_probe<'p>(
    record: &Value,
    refused: &'p [RefusedProbe],
) -> Option<&'p RefusedProbe> {
    let targets: Vec<String> = record
        .get("spec")
        .and_then(|s| s.get("endpoints"))
        .and_then(Value::as_sequence)
        .into_iter()
        .flatten()
        .filter_map(|e| e.get("targets").and_then(Value::as_sequence))
        .flatten()
        .filter_map(Value::as_str)
        .map(normalize)
        .collect();
    refused
        .iter()
        .find(|p| targets.contains(&normalize(&p.address)))
}
