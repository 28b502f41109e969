//! A PowerDNS zone's records, read from what PowerDNS gives out: the API's zone
//! (`GET /api/v1/servers/localhost/zones/ZONE`: `rrsets` with `records[].content`) or
//! zone-file text (`pdnsutil list-zone ZONE`, or records written as in a zone file:
//! `$ORIGIN`, `$TTL`, `@`, relative names, an owner left out to repeat the last one,
//! `;` comments, parentheses and quoted strings across lines).

use anyhow::{bail, Context};

/// One record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Its name, lower case, without the trailing dot.
    pub name: String,
    /// Its TTL, if given.
    pub ttl: Option<u32>,
    /// `A`, `LUA`, `MX`, ...
    pub rtype: String,
    /// Its data, in presentation form.
    pub content: String,
}

/// The zone's name and records in `text` (API JSON or zone-file text).
pub fn read(text: &str) -> anyhow::Result<(Option<String>, Vec<Record>)> {
    if text.trim_start().starts_with('{') {
        return from_api(text);
    }
    from_zone_text(text).map(|records| (None, records))
}

fn from_api(text: &str) -> anyhow::Result<(Option<String>, Vec<Record>)> {
    let zone: serde_json::Value =
        serde_json::from_str(text).context("the file starts with '{' but is not JSON")?;
    let rrsets = zone
        .get("rrsets")
        .and_then(|r| r.as_array())
        .context("no `rrsets`: not a zone from PowerDNS's API (GET .../zones/ZONE)")?;
    let mut records = Vec::new();
    for rrset in rrsets {
        let name = rrset["name"].as_str().context("an rrset without a name")?;
        let rtype = rrset["type"].as_str().context("an rrset without a type")?;
        let ttl = rrset["ttl"].as_u64().and_then(|t| u32::try_from(t).ok());
        for record in rrset["records"].as_array().into_iter().flatten() {
            if record["disabled"].as_bool() == Some(true) {
                continue;
            }
            records.push(Record {
                name: normal(name),
                ttl,
                rtype: rtype.to_ascii_uppercase(),
                content: record["content"].as_str().unwrap_or_default().to_owned(),
            });
        }
    }
    let name = zone["name"].as_str().map(normal);
    Ok((name, records))
}

fn normal(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// The logical lines of zone-file text: comments dropped, parentheses and quoted strings
/// joined across lines; each with whether it started with blank space (owner repeated).
fn logical_lines(text: &str) -> anyhow::Result<Vec<(bool, String)>> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut indented = false;
    let (mut quoted, mut depth, mut escaped) = (false, 0i32, false);
    for (n, line) in text.lines().enumerate() {
        if current.is_empty() {
            indented = line.starts_with([' ', '\t']);
        }
        for c in line.chars() {
            if quoted {
                current.push(c);
                match (escaped, c) {
                    (true, _) => escaped = false,
                    (false, '\\') => escaped = true,
                    (false, '"') => quoted = false,
                    _ => {}
                }
                continue;
            }
            match c {
                ';' => break,
                '"' => {
                    quoted = true;
                    current.push(c);
                }
                '(' => {
                    depth += 1;
                    current.push(' ');
                }
                ')' => {
                    depth -= 1;
                    if depth < 0 {
                        bail!("line {}: ')' without '('", n + 1);
                    }
                    current.push(' ');
                }
                c => current.push(c),
            }
        }
        if quoted {
            current.push(' ');
            continue;
        }
        if depth > 0 {
            current.push(' ');
            continue;
        }
        if !current.trim().is_empty() {
            out.push((indented, current.trim().to_owned()));
        }
        current.clear();
    }
    if quoted || depth > 0 {
        bail!("the text ends inside a quoted string or parentheses");
    }
    Ok(out)
}

fn from_zone_text(text: &str) -> anyhow::Result<Vec<Record>> {
    let mut origin = String::new();
    let mut default_ttl = None;
    let mut last_owner: Option<String> = None;
    let mut records = Vec::new();
    for (indented, line) in logical_lines(text)? {
        let mut words = line.split_whitespace();
        let first = words.next().unwrap_or_default();
        match first.to_ascii_uppercase().as_str() {
            "$ORIGIN" => {
                origin = normal(words.next().unwrap_or_default());
                continue;
            }
            "$TTL" => {
                default_ttl = words.next().and_then(|t| t.parse().ok());
                continue;
            }
            _ => {}
        }
        let mut rest: Vec<&str> = line.split_whitespace().collect();
        let owner = if indented {
            last_owner
                .clone()
                .with_context(|| format!("{line:?} repeats an owner, but none came before"))?
        } else {
            rest.remove(0);
            absolute(first, &origin)
        };
        last_owner = Some(owner.clone());
        let mut ttl = default_ttl;
        let mut i = 0;
        while i < rest.len() {
            let w = rest[i];
            if let Ok(t) = w.parse::<u32>() {
                ttl = Some(t);
            } else if !matches!(w.to_ascii_uppercase().as_str(), "IN" | "CH" | "HS") {
                break;
            }
            i += 1;
        }
        let rtype = rest
            .get(i)
            .with_context(|| format!("{line:?} has no record type"))?
            .to_ascii_uppercase();
        // The data as written after the type (quoted strings keep their spaces).
        let type_word = line
            .split_whitespace()
            .nth(i + usize::from(!indented))
            .expect("the type is a word of the line");
        let after_type = type_word.as_ptr() as usize - line.as_ptr() as usize + type_word.len();
        let content = line[after_type..].trim().to_owned();
        records.push(Record {
            name: owner,
            ttl,
            rtype,
            content,
        });
    }
    Ok(records)
}

fn absolute(name: &str, origin: &str) -> String {
    match name {
        "@" => origin.to_owned(),
        n if n.ends_with('.') => normal(n),
        n if origin.is_empty() => normal(n),
        n => format!("{}.{origin}", normal(n)),
    }
}

/// The zone the records belong to: the SOA's owner, else the longest suffix all names
/// share (two labels at least).
pub fn zone_of(records: &[Record]) -> Option<String> {
    if let Some(soa) = records.iter().find(|r| r.rtype == "SOA") {
        return Some(soa.name.clone());
    }
    let mut labels: Vec<&str> = records.first()?.name.rsplit('.').collect();
    for r in records {
        let theirs: Vec<&str> = r.name.rsplit('.').collect();
        let same = labels
            .iter()
            .zip(&theirs)
            .take_while(|(a, b)| a == b)
            .count();
        labels.truncate(same);
    }
    (labels.len() >= 2).then(|| labels.iter().rev().copied().collect::<Vec<_>>().join("."))
}

/// The text of a record's quoted strings, concatenated (escapes `\"`, `\\` undone): a LUA
/// record's code, however it was split.
pub fn unquote(content: &str) -> String {
    let mut out = String::new();
    let (mut quoted, mut escaped) = (false, false);
    for c in content.chars() {
        match (quoted, escaped, c) {
            (true, true, c) => {
                out.push(c);
                escaped = false;
            }
            (true, false, '\\') => escaped = true,
            (_, false, '"') => quoted = !quoted,
            (true, false, c) => out.push(c),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zone_text_is_read_as_pdnsutil_and_people_write_it() {
        let text = "$ORIGIN acme.com.\n$TTL 300\n@ IN SOA ns1 hostmaster 1 2 3 4 5\n\
                    foo.acme.com. IN LUA A \"ifurlup('https://x/h', {'192.0.2.1'})\" ; comment\n\
                    api IN LUA A \"\nifurlup('https://x/h', {\n{'192.0.2.1'}\n})\n\"\n\
                    \t60 IN AAAA 2001:db8::1\n\
                    www 60 IN TXT \"a ; b\" \"c\"\n";
        let records = from_zone_text(text).unwrap();
        let summary: Vec<(&str, Option<u32>, &str)> = records
            .iter()
            .map(|r| (r.name.as_str(), r.ttl, r.rtype.as_str()))
            .collect();
        assert_eq!(
            summary,
            [
                ("acme.com", Some(300), "SOA"),
                ("foo.acme.com", Some(300), "LUA"),
                ("api.acme.com", Some(300), "LUA"),
                ("api.acme.com", Some(60), "AAAA"),
                ("www.acme.com", Some(60), "TXT"),
            ]
        );
        assert_eq!(
            unquote(&records[2].content[2..])
                .split_whitespace()
                .collect::<String>(),
            "ifurlup('https://x/h',{{'192.0.2.1'}})"
        );
        assert_eq!(records[4].content, "\"a ; b\" \"c\"");
        assert_eq!(zone_of(&records).as_deref(), Some("acme.com"));
        assert_eq!(zone_of(&records[1..]).as_deref(), Some("acme.com"));
    }

    #[test]
    fn the_apis_zone_is_read_with_disabled_records_left_out() {
        let json = r#"{"name": "acme.com.", "rrsets": [
            {"name": "foo.acme.com.", "type": "LUA", "ttl": 60, "records": [
                {"content": "A \"ifportup(443, {'192.0.2.1'})\"", "disabled": false},
                {"content": "A \"old\"", "disabled": true}]}]}"#;
        let (zone, records) = read(json).unwrap();
        assert_eq!(zone.as_deref(), Some("acme.com"));
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].content, "A \"ifportup(443, {'192.0.2.1'})\"");
    }
}
