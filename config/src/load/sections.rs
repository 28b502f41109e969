//! A TOML document cut at its `[[endpoints]]` and `[[tenants]]` headers, so that each element
//! is parsed on its own.
//!
//! The `toml` crate parses a whole document into an editable tree before serde reads it:
//! about 2.5 KiB an element, most of a load's peak once figment's tree is gone. An element's
//! text is the lines after its header up to the next header line, a document by itself.
//!
//! A cut is only sound at a line that really is a header, not one inside a multi-line string
//! or array. The piece before a cut made inside one ends with that value still open, so it
//! does not parse on its own: [`Sections::check`] parses every piece alone and gives up on
//! the cuts (the caller then parses the document whole) when one does not.

use serde::de::IgnoredAny;

/// The arrays cut out, by their key.
pub(super) const CUT: [&str; 2] = ["endpoints", "tenants"];

/// The pieces of one document, each a slice of its text.
pub(super) struct Sections<'a> {
    /// Everything that is not an element of a [`CUT`] array, in order.
    pub rest: Vec<&'a str>,
    /// The body of each element, by array ([`CUT`]'s order), in order.
    pub elements: [Vec<&'a str>; 2],
}

/// Which piece the lines being read belong to.
#[derive(Clone, Copy)]
enum Piece {
    Rest,
    Element(usize),
}

impl<'a> Sections<'a> {
    /// Cuts `text` at every line that is a header: `[[endpoints]]` and `[[tenants]]` (alone
    /// on their line) start an element; any other line starting with `[` ends it.
    pub fn cut(text: &'a str) -> Self {
        let mut sections = Sections {
            rest: Vec::new(),
            elements: [Vec::new(), Vec::new()],
        };
        let (mut start, mut piece) = (0, Piece::Rest);
        let mut at = 0;
        for line in text.split_inclusive('\n') {
            let trimmed = line.trim();
            if trimmed.starts_with('[') {
                sections.push(piece, &text[start..at]);
                piece = match CUT.iter().position(|key| is_array_header(trimmed, key)) {
                    Some(array) => {
                        start = at + line.len();
                        Piece::Element(array)
                    }
                    None => {
                        start = at;
                        Piece::Rest
                    }
                };
            }
            at += line.len();
        }
        sections.push(piece, &text[start..]);
        sections
    }

    fn push(&mut self, piece: Piece, text: &'a str) {
        match piece {
            Piece::Rest if text.is_empty() => {}
            Piece::Rest => self.rest.push(text),
            Piece::Element(array) => self.elements[array].push(text),
        }
    }

    /// Whether any element was cut out.
    pub fn has_elements(&self) -> bool {
        self.elements.iter().any(|e| !e.is_empty())
    }

    /// Whether every piece of the rest parses alone, so no cut was made inside a value (the
    /// elements are each parsed alone by the caller).
    pub fn check(&self) -> bool {
        self.rest
            .iter()
            .all(|piece| toml::from_str::<IgnoredAny>(piece).is_ok())
    }
}

/// Whether `line` (trimmed) is the header `[[key]]`, written plainly.
fn is_array_header(line: &str, key: &str) -> bool {
    line.strip_prefix("[[")
        .and_then(|l| l.strip_suffix("]]"))
        .is_some_and(|inner| inner == key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_are_cut_at_their_headers_and_sub_tables_stay_in_the_rest() {
        let text = "a = 1\n[[endpoints]]\nname = \"x\"\n\n[defaults]\nb = 2\n[[tenants]]\nname = \"t\"\n  [[endpoints]]  \nname = \"y\"\n[endpoints.check]\nport = 1\n";
        let s = Sections::cut(text);
        assert_eq!(
            s.rest,
            [
                "a = 1\n",
                "[defaults]\nb = 2\n",
                "[endpoints.check]\nport = 1\n"
            ]
        );
        assert_eq!(s.elements[0], ["name = \"x\"\n\n", "name = \"y\"\n"]);
        assert_eq!(s.elements[1], ["name = \"t\"\n"]);
        assert!(s.check());
    }

    #[test]
    fn a_cut_inside_a_multi_line_string_or_array_fails_the_check() {
        for text in [
            "[api]\nx = \"\"\"\n[[endpoints]]\nname = \"a\"\n[telemetry]\n\"\"\"\n",
            "[api]\nx = '''\n[[tenants]]\n'''\n",
            "x = [\n[1],\n]\n",
        ] {
            assert!(!Sections::cut(text).check(), "{text}");
        }
    }
}
