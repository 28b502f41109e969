//! Parse errors in words an operator acts on: a misspelt key gets the key it was probably
//! meant to be, a duration without a unit gets the two spellings it was probably meant to
//! be, and lists of what is allowed are plain names, not nested quotes.

use figment::error::{Actual, Kind};

/// What a port may be, said the same whether the type refuses it (70000, -1) or validation
/// does (0).
pub(crate) const PORT: &str = "a port number from 1 to 65535";

/// [`explain`] for the value at `path`: a port's type is a `u16`, but its range is
/// [`PORT`]'s; `rise` and `fall` count probes, at least one.
pub fn explain_at(path: &[String], kind: &Kind) -> String {
    let key = path.last().map(String::as_str);
    match kind {
        Kind::InvalidValue(actual, expected) | Kind::InvalidType(actual, expected)
            if expected == "u16" && key == Some("port") =>
        {
            format!("{} is not {PORT}", written(actual))
        }
        Kind::InvalidValue(actual, expected) | Kind::InvalidType(actual, expected)
            if expected == "u32" && matches!(key, Some("rise" | "fall")) =>
        {
            format!(
                "{} is not a whole number from 1 to {}",
                written(actual),
                u32::MAX
            )
        }
        _ => explain(kind),
    }
}

/// What `kind` means for the operator, in one line: a value that is not what its key takes
/// is quoted as the file spells it (`-1`, `"two"`), not as serde names its type.
pub fn explain(kind: &Kind) -> String {
    match kind {
        Kind::UnknownField(found, expected) => unknown("key", found, expected),
        Kind::UnknownVariant(found, expected) => unknown("value", found, expected),
        Kind::InvalidValue(actual, expected) | Kind::InvalidType(actual, expected)
            if expected.contains("duration") =>
        {
            match bare_number(actual) {
                Some(n) => format!("{n} has no unit: write \"{n}ms\" or \"{n}s\" ({DURATIONS})"),
                None => format!("{} is not a duration ({DURATIONS})", written(actual)),
            }
        }
        Kind::InvalidValue(actual, expected) | Kind::InvalidType(actual, expected) => {
            match expected_words(expected) {
                Some(words) => format!("{} is not {words}", written(actual)),
                None => format!("{} is not what this key takes: {expected}", written(actual)),
            }
        }
        other => other.to_string(),
    }
}

/// How a duration is written, said wherever one is refused.
const DURATIONS: &str = "durations are strings such as \"250ms\", \"1m 30s\"";

/// A refused value as a config file spells it.
fn written(actual: &Actual) -> String {
    match actual {
        Actual::Bool(b) => b.to_string(),
        Actual::Unsigned(n) => n.to_string(),
        Actual::Signed(n) => n.to_string(),
        // `1.0`, not `1`: a whole number written as a float is still refused as one.
        Actual::Float(n) if n.fract() == 0.0 && n.is_finite() => format!("{n:.1}"),
        Actual::Float(n) => n.to_string(),
        Actual::Char(c) => format!("{:?}", c.to_string()),
        Actual::Str(s) => format!("{s:?}"),
        Actual::Seq => "an array".to_owned(),
        Actual::Map => "a table".to_owned(),
        other => other.to_string(),
    }
}

/// What a key takes, in an operator's words: serde names an integer by its Rust type
/// (`u16`) where an operator reads the range it allows, a table a map and an array a
/// sequence.
fn expected_words(expected: &str) -> Option<String> {
    let range = |max: u64| Some(format!("a whole number from 0 to {max}"));
    match expected {
        "u8" => range(u8::MAX.into()),
        "u16" => range(u16::MAX.into()),
        "u32" => range(u32::MAX.into()),
        "u64" | "usize" => Some("a whole number, 0 or more".to_owned()),
        "i32" | "i64" | "isize" => Some("a whole number".to_owned()),
        "f32" | "f64" => Some("a number".to_owned()),
        "a boolean" => Some("true or false".to_owned()),
        "a map" => Some("a table".to_owned()),
        "a sequence" => Some("an array".to_owned()),
        "path string" => Some("a path (a string)".to_owned()),
        "socket address" => Some("an address and port such as \"127.0.0.1:8080\"".to_owned()),
        _ if expected.starts_with("a ") || expected.starts_with("an ") => Some(expected.to_owned()),
        _ => None,
    }
}

/// `found` is not one of `expected`: the closest one if it is a likely typo, else the list.
pub fn unknown(what: &str, found: &str, expected: &[&str]) -> String {
    let closest = expected
        .iter()
        .map(|e| (distance(found, e), *e))
        .min_by_key(|(d, _)| *d);
    match closest {
        Some((_, e)) if likely_typo(found, e) => {
            format!("unknown {what} `{found}`; did you mean `{e}`?")
        }
        _ if expected.is_empty() => format!("unknown {what} `{found}`"),
        _ => format!(
            "unknown {what} `{found}`; expected one of: {}",
            expected.join(", ")
        ),
    }
}

/// Whether `found` is close enough to `meant` to be a misspelling of it.
pub(crate) fn likely_typo(found: &str, meant: &str) -> bool {
    distance(found, meant) <= (found.chars().count() / 3).max(1)
}

/// A number written where a duration belongs, as written.
fn bare_number(actual: &Actual) -> Option<String> {
    match actual {
        Actual::Unsigned(n) => Some(n.to_string()),
        Actual::Signed(n) => Some(n.to_string()),
        Actual::Float(n) => Some(n.to_string()),
        Actual::Str(s) => {
            let t = s.trim();
            (!t.is_empty() && t.chars().all(|c| c.is_ascii_digit() || c == '.'))
                .then(|| t.to_owned())
        }
        _ => None,
    }
}

/// Levenshtein distance in characters.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_gets_its_key_and_a_stranger_gets_the_list() {
        let keys: &'static [&'static str] = &["interval", "fall", "rise"];
        assert_eq!(
            explain(&Kind::UnknownField("intervall".into(), keys)),
            "unknown key `intervall`; did you mean `interval`?"
        );
        assert_eq!(
            explain(&Kind::UnknownField("fal".into(), keys)),
            "unknown key `fal`; did you mean `fall`?"
        );
        assert_eq!(
            explain(&Kind::UnknownField("banana".into(), keys)),
            "unknown key `banana`; expected one of: interval, fall, rise"
        );
    }

    #[test]
    fn a_duration_without_a_unit_says_how_to_write_it() {
        let expected = "a duration".to_owned();
        assert_eq!(
            explain(&Kind::InvalidValue(Actual::Str("500".into()), expected.clone())),
            "500 has no unit: write \"500ms\" or \"500s\" (durations are strings such as \"250ms\", \"1m 30s\")"
        );
        assert!(
            explain(&Kind::InvalidType(Actual::Unsigned(2), expected.clone()))
                .starts_with("2 has no unit")
        );
        assert_eq!(
            explain(&Kind::InvalidValue(Actual::Str("fast".into()), expected)),
            "\"fast\" is not a duration (durations are strings such as \"250ms\", \"1m 30s\")"
        );
    }

    #[test]
    fn a_port_and_a_probe_count_say_the_range_validation_allows() {
        let at = |key: &str| vec!["check".to_owned(), key.to_owned()];
        assert_eq!(
            explain_at(
                &at("port"),
                &Kind::InvalidValue(Actual::Unsigned(70000), "u16".into())
            ),
            "70000 is not a port number from 1 to 65535"
        );
        assert_eq!(
            explain_at(
                &at("port"),
                &Kind::InvalidType(Actual::Str("http".into()), "u16".into())
            ),
            "\"http\" is not a port number from 1 to 65535"
        );
        assert_eq!(
            explain_at(
                &at("rise"),
                &Kind::InvalidValue(Actual::Unsigned(70000), "u16".into())
            ),
            "70000 is not a whole number from 0 to 65535"
        );
        assert_eq!(
            explain_at(
                &at("rise"),
                &Kind::InvalidValue(Actual::Signed(-1), "u32".into())
            ),
            "-1 is not a whole number from 1 to 4294967295"
        );
    }

    #[test]
    fn a_number_out_of_its_type_says_the_range_in_words() {
        assert_eq!(
            explain(&Kind::InvalidValue(Actual::Unsigned(70000), "u16".into())),
            "70000 is not a whole number from 0 to 65535"
        );
        assert_eq!(
            explain(&Kind::InvalidValue(Actual::Signed(-3), "usize".into())),
            "-3 is not a whole number, 0 or more"
        );
        assert_eq!(
            explain(&Kind::InvalidType(Actual::Float(1.0), "u32".into())),
            "1.0 is not a whole number from 0 to 4294967295"
        );
        assert_eq!(
            explain(&Kind::InvalidType(Actual::Str("abc".into()), "f64".into())),
            "\"abc\" is not a number"
        );
        assert_eq!(
            explain(&Kind::InvalidType(Actual::Str("x".into()), "a map".into())),
            "\"x\" is not a table"
        );
        assert_eq!(
            explain(&Kind::InvalidType(
                Actual::Signed(5),
                "socket address".into()
            )),
            "5 is not an address and port such as \"127.0.0.1:8080\""
        );
        assert_eq!(
            explain(&Kind::InvalidType(Actual::Seq, "IP address".into())),
            "an array is not what this key takes: IP address"
        );
    }
}
