//! The bytes of one ledger file: a four-byte mark of the format, then one varint per change
//! of the name's condition: the time since the previous record, shifted left past a unit
//! bit and the condition's four-bit code. The time is in milliseconds under [`FINE`] (70
//! minutes), in tenths of a second above it: a change that far from the one before (the
//! start of a failure after a quiet day) needs no finer time than the probes have, and so
//! every change keeps 4 bytes or less up to 9 days apart, 3 within a minute of the last.
//!
//! `HOL2` (written today) holds those; `HOL1` (the first format: milliseconds, three-bit
//! codes, no wrong addresses) is read and rewritten as `HOL2` at the next append. A mark of
//! a later format is left alone: a newer replica sharing the folder owns it.

use super::book::Condition;

/// The format this version writes.
pub(super) const MAGIC: &[u8; 4] = b"HOL2";

/// Deltas below this many milliseconds are kept to the millisecond; longer ones to the
/// tenth of a second.
const FINE: u64 = 1 << 22;

/// The first format.
const MAGIC_V1: &[u8; 4] = b"HOL1";

/// A file's records: oldest first.
pub(super) type Records = Vec<(u64, Condition)>;

/// What a file holds, as read.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Parsed {
    /// Its records (a record cut short by a crash mid-append is left out).
    pub records: Records,
    /// Whether it is in the format this version writes (appends may follow at `used`).
    pub current: bool,
    /// The bytes its whole records take, the mark included.
    pub used: usize,
}

/// Why a file's bytes are not a ledger this version can use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unreadable {
    /// Not a ledger file at all (another program's, or bytes garbled on disk).
    #[error(
        "not a ledger file (it does not start with {})",
        String::from_utf8_lossy(MAGIC)
    )]
    Foreign,
    /// A ledger file of a later format than this version reads.
    #[error("written by a newer version (format {0}; this version reads HOL1 and HOL2)")]
    Newer(String),
}

/// Reads a file's bytes. An empty file (created, then the process stopped before it wrote
/// the mark) holds nothing yet.
pub(super) fn parse(bytes: &[u8]) -> Result<Parsed, Unreadable> {
    if bytes.is_empty() {
        return Ok(Parsed {
            records: Vec::new(),
            current: true,
            used: 0,
        });
    }
    let (layout, current) = match bytes.get(..4) {
        Some(m) if m == MAGIC => (Layout::CURRENT, true),
        Some(m) if m == MAGIC_V1 => (Layout::FIRST, false),
        Some(m) if m.starts_with(b"HOL") && m[3].is_ascii_digit() => {
            return Err(Unreadable::Newer(String::from_utf8_lossy(m).into_owned()))
        }
        _ => return Err(Unreadable::Foreign),
    };
    let (records, used) = decode(&bytes[4..], layout);
    Ok(Parsed {
        records,
        current,
        used: 4 + used,
    })
}

/// `records` as a whole file of the current format.
pub(super) fn encode(records: &[(u64, Condition)]) -> Vec<u8> {
    let mut bytes = MAGIC.to_vec();
    append(&mut bytes, None, records);
    bytes
}

/// Appends `records` after the file's last record `last` (none: the first), each dated no
/// earlier than the one before; the last record written.
pub(super) fn append(
    out: &mut Vec<u8>,
    mut last: Option<u64>,
    records: &[(u64, Condition)],
) -> Option<(u64, Condition)> {
    let mut written = None;
    for &(t, c) in records {
        let base = last.unwrap_or(0);
        let delta = t.saturating_sub(base);
        let (value, kept) = if delta < FINE {
            (delta << 5, delta)
        } else {
            let tenths = (delta + 50) / 100;
            ((tenths << 5) | 16, tenths * 100)
        };
        put_varint(out, value | u64::from(c.code()));
        last = Some(base + kept);
        written = Some((base + kept, c));
    }
    written
}

/// How a format lays out a record's value.
#[derive(Clone, Copy)]
struct Layout {
    /// Bits below the time.
    shift: u32,
    /// The bit saying the time is in tenths of a second, if the format has one.
    coarse: Option<u64>,
    /// The code's condition.
    of_code: fn(u8) -> Option<Condition>,
    /// The code's bits.
    code_mask: u64,
}

impl Layout {
    const CURRENT: Layout = Layout {
        shift: 5,
        coarse: Some(16),
        of_code: Condition::of_code,
        code_mask: 15,
    };
    const FIRST: Layout = Layout {
        shift: 3,
        coarse: None,
        of_code: Condition::of_code_v1,
        code_mask: 7,
    };
}

/// The records of a body, and the bytes they took (less than the body when the last
/// record was cut short or a code is not a condition).
fn decode(body: &[u8], layout: Layout) -> (Records, usize) {
    let mut out = Vec::new();
    let mut t = 0u64;
    let mut pos = 0;
    while let Some((value, len)) = get_varint(&body[pos..]) {
        let Some(c) = (layout.of_code)((value & layout.code_mask) as u8) else {
            break;
        };
        let coarse = layout.coarse.is_some_and(|bit| value & bit != 0);
        t += (value >> layout.shift) * if coarse { 100 } else { 1 };
        out.push((t, c));
        pos += len;
    }
    (out, pos)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, &b) in bytes.iter().enumerate().take(10) {
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::book::Served;
    use super::*;

    fn condition(served: Served, maintenance: bool) -> Condition {
        Condition {
            served,
            maintenance,
        }
    }

    /// Every condition, maintenance or not, at seeded intervals, reads back as written (to
    /// the millisecond within 70 minutes of the change before, to the nearest tenth of a
    /// second beyond); a file of the first format reads as it did; a later one and a
    /// foreign one are told apart.
    #[test]
    fn records_round_trip_and_formats_are_told_apart() {
        let mut rng = fastrand::Rng::with_seed(0x9e37_79b9_7f4a_7c15);
        let mut next = || rng.u64(..);
        let kinds = [
            Served::Unknown,
            Served::Answered,
            Served::DeadAddress,
            Served::Unanswered,
            Served::WrongAddress,
        ];
        let mut t = 1_790_000_000_000;
        let mut records = Vec::new();
        let mut kept = Vec::new();
        for _ in 0..2_000 {
            let delta = next() % 90_000_000;
            t += delta;
            let served = kinds[(next() % kinds.len() as u64) as usize];
            let c = condition(served, next() % 2 == 0);
            records.push((t, c));
            let last = kept.last().map_or(0, |(k, _)| *k);
            let rounded = match t - last {
                d if d < FINE => t,
                d => last + (d + 50) / 100 * 100,
            };
            kept.push((rounded, c));
        }
        let bytes = encode(&records);
        let parsed = parse(&bytes).unwrap();
        assert_eq!(
            (parsed.records, parsed.current, parsed.used),
            (kept, true, bytes.len())
        );

        // HOL1: 4,000 ms later, dead address in maintenance (code 2 | 4).
        let mut v1 = MAGIC_V1.to_vec();
        put_varint(&mut v1, (4_000 << 3) | 6);
        let parsed = parse(&v1).unwrap();
        assert!(!parsed.current);
        assert_eq!(
            parsed.records,
            [(4_000, condition(Served::DeadAddress, true))]
        );

        assert_eq!(parse(b"HOL7\x01"), Err(Unreadable::Newer("HOL7".into())));
        assert_eq!(parse(b"junk"), Err(Unreadable::Foreign));
        assert_eq!(parse(b"HO"), Err(Unreadable::Foreign));
        assert_eq!(parse(b"").unwrap().records, []);
    }

    /// 25 months of one name, seeded: failures every few hours to every few days, each
    /// back after seconds to minutes, some undone by a second change, maintenance windows:
    /// the file keeps every change at no more than 4 bytes on average.
    #[test]
    fn twenty_five_months_keep_every_change_in_four_bytes_or_less() {
        let mut rng = fastrand::Rng::with_seed(0x2545_f491_4f6c_dd1d);
        let mut next = |n: u64| rng.u64(..n);
        let end = 25 * 2_630_016_000u64;
        let answered = condition(Served::Answered, false);
        let (mut t, mut records) = (0, vec![(0, answered)]);
        while t < end {
            t += 600_000 + next(3 * 86_400_000);
            let bad = [
                Served::DeadAddress,
                Served::Unanswered,
                Served::WrongAddress,
            ];
            let served = bad[next(3) as usize];
            records.push((t, condition(served, next(10) == 0)));
            t += 1_000 + next(300_000);
            records.push((t, answered));
        }
        let bytes = encode(&records).len() - MAGIC.len();
        let per_change = bytes as f64 / records.len() as f64;
        println!(
            "{} changes in {bytes} bytes: {per_change:.2} bytes a change",
            records.len()
        );
        assert!(per_change <= 4.0, "{per_change}");
        let back = parse(&encode(&records)).unwrap().records;
        assert_eq!(back.len(), records.len());
        for ((t, c), (kept, back)) in records.iter().zip(&back) {
            assert!(
                t.abs_diff(*kept) <= 50 && c == back,
                "{t} {c:?} came back {kept} {back:?}"
            );
        }
    }
}
