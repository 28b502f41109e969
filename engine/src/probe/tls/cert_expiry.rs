//! When a certificate stops being valid: `notAfter` read from its DER (RFC 5280 section
//! 4.1), by walking the few fields before it. Enough for `min_cert_validity`; nothing else
//! of the certificate is interpreted here (rustls verified it).

use std::time::{Duration, SystemTime};

/// The certificate's `notAfter`, or why it could not be read.
pub fn not_after(der: &[u8]) -> Result<SystemTime, MalformedCertificate> {
    read_not_after(der).map_err(MalformedCertificate)
}

/// [`not_after`] with its reason as text.
fn read_not_after(der: &[u8]) -> Result<SystemTime, String> {
    let (certificate, _) = element(der, 0x30)?;
    let (mut tbs, _) = element(certificate, 0x30)?;
    if tbs.first() == Some(&0xa0) {
        tbs = element(tbs, 0xa0)?.1; // version
    }
    tbs = element(tbs, 0x02)?.1; // serialNumber
    tbs = element(tbs, 0x30)?.1; // signature
    tbs = element(tbs, 0x30)?.1; // issuer
    let (validity, _) = element(tbs, 0x30)?;
    let (_, rest) = time(validity)?; // notBefore
    let (after, _) = time(rest)?;
    Ok(after)
}

/// One DER element of tag `tag` at the start of `bytes`: its content and what follows.
fn element(bytes: &[u8], tag: u8) -> Result<(&[u8], &[u8]), String> {
    let (&found, rest) = bytes.split_first().ok_or("truncated certificate")?;
    if found != tag {
        return Err(format!(
            "unexpected tag {found:#04x} where {tag:#04x} belongs"
        ));
    }
    let (&first, mut rest) = rest.split_first().ok_or("truncated certificate")?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return Err("bad length".into());
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |l, b| (l << 8) | usize::from(*b));
        rest = &rest[n..];
        len
    };
    if rest.len() < len {
        return Err("truncated certificate".into());
    }
    Ok(rest.split_at(len))
}

/// A UTCTime (`YYMMDDHHMMSSZ`) or GeneralizedTime (`YYYYMMDDHHMMSSZ`) and what follows.
fn time(bytes: &[u8]) -> Result<(SystemTime, &[u8]), String> {
    let (tag, year_digits) = match bytes.first() {
        Some(0x17) => (0x17, 2),
        Some(0x18) => (0x18, 4),
        _ => return Err("validity without a time".into()),
    };
    let (text, rest) = element(bytes, tag)?;
    let text = std::str::from_utf8(text).map_err(|_| "time is not text")?;
    let digits = text.strip_suffix('Z').ok_or("time not in UTC")?;
    if digits.len() != year_digits + 10 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("unreadable time {text:?}"));
    }
    let num = |from: usize, len: usize| digits[from..from + len].parse::<i64>().unwrap_or(0);
    let mut year = num(0, year_digits);
    if year_digits == 2 {
        year += if year < 50 { 2000 } else { 1900 }; // RFC 5280 section 4.1.2.5.1
    }
    let at = year_digits;
    let days = days_from_civil(year, num(at, 2), num(at + 2, 2));
    let seconds = days * 86_400 + num(at + 4, 2) * 3600 + num(at + 6, 2) * 60 + num(at + 8, 2);
    let time = u64::try_from(seconds)
        .map(|s| crate::clock::after_epoch(Duration::from_secs(s)))
        .map_err(|_| format!("time before 1970: {text:?}"))?;
    Ok((time, rest))
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A certificate whose `notAfter` cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct MalformedCertificate(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    fn cert_until(year: i32, month: u8, day: u8) -> Vec<u8> {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["a.test".into()]).unwrap();
        params.not_after = rcgen::date_time_ymd(year, month, day);
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn not_after_is_read_from_utc_and_generalized_times() {
        // rcgen writes UTCTime up to 2049 and GeneralizedTime from 2050 (RFC 5280).
        let at = not_after(&cert_until(2031, 3, 1)).unwrap();
        assert_eq!(crate::clock::since_epoch(at).as_secs(), 1_930_089_600);
        let at = not_after(&cert_until(2051, 1, 1)).unwrap();
        assert_eq!(crate::clock::since_epoch(at).as_secs(), 2_556_144_000);
    }

    #[test]
    fn a_broken_certificate_says_so() {
        let mut der = cert_until(2031, 3, 1);
        der.truncate(40);
        assert!(not_after(&der).is_err());
        assert!(not_after(&[]).is_err());
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
    }
}
