//! The part of Lua that PowerDNS's record functions are called with: one function call
//! whose arguments are strings, numbers, booleans, names and table constructors
//! (`ifurlup('https://x/h', {{'192.0.2.1'}, {'192.0.2.2'}}, {selector='pickfirst'})`),
//! optionally written as a statement (`;return ifportup(...)`). Anything else (code with
//! `if`, local variables, other expressions) is not read: the importer names it as not
//! carried over.

/// A Lua value as written.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `'text'` or `"text"`.
    Str(String),
    /// `5`, `2.5`.
    Num(f64),
    /// `true`, `false`.
    Bool(bool),
    /// A bare name (`pdns.A`).
    Name(String),
    /// `{...}`: fields, keyed (`key=v`, `['key']=v`) or positional.
    Table(Vec<(Option<String>, Value)>),
    /// `f(args)`.
    Call(String, Vec<Value>),
}

impl Value {
    /// The positional items of a table.
    pub fn items(&self) -> Option<Vec<&Value>> {
        match self {
            Value::Table(fields) => Some(
                fields
                    .iter()
                    .filter(|(k, _)| k.is_none())
                    .map(|(_, v)| v)
                    .collect(),
            ),
            _ => None,
        }
    }

    /// The keyed fields of a table.
    pub fn fields(&self) -> Vec<(&str, &Value)> {
        match self {
            Value::Table(fields) => fields
                .iter()
                .filter_map(|(k, v)| k.as_deref().map(|k| (k, v)))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The value as text (a string, or a number or boolean written as one).
    pub fn text(&self) -> Option<String> {
        match self {
            Value::Str(s) => Some(s.clone()),
            Value::Num(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    }

    /// The value as a number (a number, or a string holding one).
    pub fn number(&self) -> Option<f64> {
        match self {
            Value::Num(n) => Some(*n),
            Value::Str(s) => s.trim().parse().ok(),
            _ => None,
        }
    }
}

/// Reads `code` as one function call; an error says where it stops being one.
pub(super) fn parse_call(code: &str) -> Result<(String, Vec<Value>), String> {
    let mut code = code.trim();
    if let Some(rest) = code.strip_prefix(';') {
        code = rest.trim_start();
        code = code
            .strip_prefix("return")
            .filter(|r| r.starts_with(char::is_whitespace))
            .ok_or("a statement other than `return f(...)`")?;
    }
    let mut p = Parser {
        s: code.as_bytes(),
        i: 0,
    };
    let value = p.value()?;
    p.space();
    if p.i != p.s.len() {
        return Err(format!("more than one call (at {:?})", &code[p.i..]));
    }
    match value {
        Value::Call(name, args) => Ok((name, args)),
        other => Err(format!("not a function call: {other:?}")),
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn space(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.space();
        self.s.get(self.i).copied()
    }

    fn expect(&mut self, c: u8) -> Result<(), String> {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(format!("expected '{}' at byte {}", c as char, self.i))
        }
    }

    fn value(&mut self) -> Result<Value, String> {
        match self.peek() {
            Some(q @ (b'\'' | b'"')) => self.string(q).map(Value::Str),
            Some(b'{') => self.table(),
            Some(c) if c.is_ascii_digit() || c == b'-' || c == b'.' => self.number(),
            Some(c) if c.is_ascii_alphabetic() || c == b'_' => {
                let name = self.name();
                match name.as_str() {
                    "true" => return Ok(Value::Bool(true)),
                    "false" => return Ok(Value::Bool(false)),
                    _ => {}
                }
                if self.peek() == Some(b'(') {
                    self.i += 1;
                    let mut args = Vec::new();
                    if self.peek() == Some(b')') {
                        self.i += 1;
                        return Ok(Value::Call(name, args));
                    }
                    loop {
                        args.push(self.value()?);
                        match self.peek() {
                            Some(b',') => self.i += 1,
                            Some(b')') => {
                                self.i += 1;
                                return Ok(Value::Call(name, args));
                            }
                            _ => return Err(format!("expected ',' or ')' at byte {}", self.i)),
                        }
                    }
                }
                Ok(Value::Name(name))
            }
            other => Err(format!(
                "unexpected {:?} at byte {}",
                other.map(char::from),
                self.i
            )),
        }
    }

    fn name(&mut self) -> String {
        let start = self.i;
        while self.i < self.s.len()
            && (self.s[self.i].is_ascii_alphanumeric() || matches!(self.s[self.i], b'_' | b'.'))
        {
            self.i += 1;
        }
        String::from_utf8_lossy(&self.s[start..self.i]).into_owned()
    }

    fn number(&mut self) -> Result<Value, String> {
        let start = self.i;
        while self.i < self.s.len()
            && (self.s[self.i].is_ascii_alphanumeric() || matches!(self.s[self.i], b'.' | b'-'))
        {
            self.i += 1;
        }
        let text = String::from_utf8_lossy(&self.s[start..self.i]);
        text.parse()
            .map(Value::Num)
            .map_err(|_| format!("{text:?} is not a number"))
    }

    fn string(&mut self, quote: u8) -> Result<String, String> {
        self.i += 1;
        let mut out = Vec::new();
        while let Some(&c) = self.s.get(self.i) {
            self.i += 1;
            match c {
                c if c == quote => return Ok(String::from_utf8_lossy(&out).into_owned()),
                b'\\' => {
                    let next = *self.s.get(self.i).ok_or("a string ends in a backslash")?;
                    self.i += 1;
                    out.push(match next {
                        b'n' => b'\n',
                        b't' => b'\t',
                        other => other,
                    });
                }
                c => out.push(c),
            }
        }
        Err("a string is not closed".into())
    }

    fn table(&mut self) -> Result<Value, String> {
        self.expect(b'{')?;
        let mut fields = Vec::new();
        loop {
            match self.peek() {
                Some(b'}') => {
                    self.i += 1;
                    return Ok(Value::Table(fields));
                }
                Some(b'[') => {
                    self.i += 1;
                    let key = self.value()?.text().ok_or("a table key that is not text")?;
                    self.expect(b']')?;
                    self.expect(b'=')?;
                    fields.push((Some(key), self.value()?));
                }
                Some(c) if c.is_ascii_alphabetic() || c == b'_' => {
                    let at = self.i;
                    let name = self.name();
                    if self.peek() == Some(b'=') {
                        self.i += 1;
                        fields.push((Some(name), self.value()?));
                    } else {
                        self.i = at;
                        fields.push((None, self.value()?));
                    }
                }
                Some(_) => fields.push((None, self.value()?)),
                None => return Err("a table is not closed".into()),
            }
            match self.peek() {
                Some(b',' | b';') => self.i += 1,
                Some(b'}') => {}
                _ => return Err(format!("expected ',' or '}}' at byte {}", self.i)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn powerdns_calls_are_read_with_their_tables() {
        let (name, args) = parse_call(
            "ifurlup('https://primary.example.com/healthz', {{'5.161.42.18'}, {\"95.217.189.42\"}}, {selector='pickfirst', interval=10, ['stringmatch']='UP', follow=true})",
        )
        .unwrap();
        assert_eq!(name, "ifurlup");
        assert_eq!(
            args[0],
            Value::Str("https://primary.example.com/healthz".into())
        );
        let groups = args[1].items().unwrap();
        assert_eq!(groups.len(), 2);
        assert_eq!(
            groups[1].items().unwrap()[0],
            &Value::Str("95.217.189.42".into())
        );
        let options: Vec<(&str, &Value)> = args[2].fields();
        assert_eq!(options[0], ("selector", &Value::Str("pickfirst".into())));
        assert_eq!(options[1].1.number(), Some(10.0));
        assert_eq!(options[2].0, "stringmatch");
        assert_eq!(options[3].1, &Value::Bool(true));
    }

    #[test]
    fn a_return_statement_is_a_call_and_code_is_not() {
        let (name, args) =
            parse_call(";return pickwhashed({{80, '192.0.2.1'}, {20, '192.0.2.2'}})").unwrap();
        assert_eq!((name.as_str(), args.len()), ("pickwhashed", 1));
        assert!(parse_call("; if country('IR') then return '1.2.3.4' end").is_err());
        assert!(parse_call("'1.2.3.4'").is_err());
        assert!(parse_call("ifportup(443, {'192.0.2.1'}) or 'x'").is_err());
    }
}
