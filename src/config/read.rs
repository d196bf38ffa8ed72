//! Typed reads from a parsed [`Node`] tree, by hand: one small, non-generic
//! helper per JSON shape (struct, map, sequence, enum name, number, string)
//! instead of a serde visitor per type. The configuration, the npm
//! package's requests and its JS providers' answers, and the Worker's fleet
//! protocol are read this way; the public types keep their derived
//! `Deserialize`, which the tests hold these readers to.
//!
//! Messages and paths are serde's and `serde_path_to_error`'s, as the
//! derived readers give them (`routes.default[0].timeoutMs: invalid type:
//! string "5", expected u64`, `retry.maxAttempt: unknown field
//! `maxAttempt`, expected one of …`, `missing field `model``, `duplicate
//! field `x``), except that a mistake inside a tagged enum (a provider
//! entry, a message part) is reported at its own field rather than at the
//! enum: `providers.p.preset` instead of `providers.p`.

use std::fmt::Write as _;

use serde_json::Value;

pub(crate) use super::path::{Error, Node, Seg};

/// A typed read's result.
pub(crate) type R<T> = Result<T, Error>;

/// A struct's shape, for [`Node::fields`].
pub(crate) struct Shape {
    /// `struct Config`, as serde's messages name it.
    pub name: &'static str,
    /// The field names, as written in JSON.
    pub fields: &'static [&'static str],
    /// Bit `i`: field `i` must be present in an object (neither an `Option`
    /// nor defaulted).
    pub required: u32,
    /// Bit `i`: field `i` has a default when an array form is too short.
    pub defaulted: u32,
    /// Whether unknown fields are refused.
    pub deny_unknown: bool,
    /// A key to pass over (the tag of an internally tagged enum).
    pub skip: Option<&'static str>,
}

impl Error {
    /// An error at the current place, with `message`.
    #[cold]
    #[inline(never)]
    pub(crate) fn msg(message: String) -> Self {
        Error {
            message,
            path: Default::default(),
        }
    }
}

#[cold]
#[inline(never)]
fn one_of(out: &mut String, names: &[&str]) {
    match names {
        [a] => {
            let _ = write!(out, "`{a}`");
        }
        [a, b] => {
            let _ = write!(out, "`{a}` or `{b}`");
        }
        _ => {
            out.push_str("one of ");
            for (i, n) in names.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                let _ = write!(out, "`{n}`");
            }
        }
    }
}

/// `unknown field `x`, expected one of `a`, `b``.
#[cold]
#[inline(never)]
pub(crate) fn unknown_field(key: &str, fields: &[&str]) -> Error {
    let mut m = format!("unknown field `{key}`, ");
    if fields.is_empty() {
        m.push_str("there are no fields");
    } else {
        m.push_str("expected ");
        one_of(&mut m, fields);
    }
    Error::msg(m)
}

/// `unknown variant `x`, expected one of `a`, `b``.
#[cold]
#[inline(never)]
pub(crate) fn unknown_variant(name: &str, variants: &[&str]) -> Error {
    let mut m = format!("unknown variant `{name}`, expected ");
    one_of(&mut m, variants);
    Error::msg(m)
}

/// `missing field `x``.
#[cold]
#[inline(never)]
pub(crate) fn missing_field(name: &str) -> Error {
    Error::msg(format!("missing field `{name}`"))
}

#[cold]
#[inline(never)]
fn duplicate_field(name: &str) -> Error {
    Error::msg(format!("duplicate field `{name}`"))
}

/// What serde's `Unexpected` prints for a node.
#[cold]
#[inline(never)]
fn describe(n: &Node<'_>, out: &mut String) {
    let _ = match n {
        Node::Null => out.write_str("null"),
        Node::Bool(b) => write!(out, "boolean `{b}`"),
        Node::U64(v) => write!(out, "integer `{v}`"),
        Node::I64(v) => write!(out, "integer `{v}`"),
        Node::F64(x) => match serde_json::Number::from_f64(*x) {
            Some(v) => write!(out, "floating point `{v}`"),
            None => out.write_str("floating point"),
        },
        Node::Str(s) => {
            out.push_str("string ");
            quote(s, out);
            Ok(())
        }
        Node::Seq(_) => out.write_str("sequence"),
        Node::Map(_) => out.write_str("map"),
    };
}

/// `s` quoted as `{:?}` quotes it (control characters as `\u{1f}`), but for
/// the non-ASCII characters that it would escape with Unicode tables.
fn quote(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '\0' => out.push_str("\\0"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\n' => out.push_str("\\n"),
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '\u{1}'..='\u{1f}' | '\u{7f}' => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `invalid type: string "5", expected u64`.
#[cold]
#[inline(never)]
pub(crate) fn invalid_type(n: &Node<'_>, expected: &str) -> Error {
    let mut m = String::from("invalid type: ");
    describe(n, &mut m);
    m.push_str(", expected ");
    m.push_str(expected);
    Error::msg(m)
}

/// `invalid value: integer `-1`, expected u64`.
#[cold]
#[inline(never)]
fn invalid_value(n: &Node<'_>, expected: &str) -> Error {
    let mut m = String::from("invalid value: ");
    describe(n, &mut m);
    m.push_str(", expected ");
    m.push_str(expected);
    Error::msg(m)
}

impl<'de> Node<'de> {
    /// Whether this is `null` (an absent `Option`).
    pub(crate) fn is_null(&self) -> bool {
        matches!(self, Node::Null)
    }

    /// `None` for `null`, else `read(self)`.
    pub(crate) fn opt<T>(&self, read: impl FnOnce(&Self) -> R<T>) -> R<Option<T>> {
        if self.is_null() {
            Ok(None)
        } else {
            read(self).map(Some)
        }
    }

    /// A non-negative integer up to `max`; `expected` names the type (`u32`).
    #[inline(never)]
    fn uint(&self, expected: &str, max: u64) -> R<u64> {
        match self {
            Node::U64(n) if *n <= max => Ok(*n),
            Node::U64(_) | Node::I64(_) => Err(invalid_value(self, expected)),
            _ => Err(invalid_type(self, expected)),
        }
    }

    /// A `u64`.
    pub(crate) fn u64(&self) -> R<u64> {
        self.uint("u64", u64::MAX)
    }

    /// A `u32`.
    pub(crate) fn u32(&self) -> R<u32> {
        self.uint("u32", u32::MAX.into()).map(|n| n as u32)
    }

    /// A `usize`.
    pub(crate) fn usize(&self) -> R<usize> {
        self.uint("usize", usize::MAX as u64).map(|n| n as usize)
    }

    /// Any number, as `f64`.
    pub(crate) fn f64(&self) -> R<f64> {
        match self {
            Node::U64(n) => Ok(*n as f64),
            Node::I64(n) => Ok(*n as f64),
            Node::F64(x) => Ok(*x),
            _ => Err(invalid_type(self, "f64")),
        }
    }

    /// A boolean.
    pub(crate) fn bool(&self) -> R<bool> {
        match self {
            Node::Bool(b) => Ok(*b),
            _ => Err(invalid_type(self, "a boolean")),
        }
    }

    /// A string, borrowed.
    pub(crate) fn str(&self) -> R<&str> {
        match self {
            Node::Str(s) => Ok(s),
            _ => Err(invalid_type(self, "a string")),
        }
    }

    /// A string.
    pub(crate) fn string(&self) -> R<String> {
        self.str().map(str::to_string)
    }

    /// An optional string (`null` is `None`).
    pub(crate) fn opt_string(&self) -> R<Option<String>> {
        self.opt(Self::string)
    }

    /// An array: `item(i, element)` for each, errors under `[i]`.
    #[inline(never)]
    pub(crate) fn seq(&self, item: &mut dyn FnMut(usize, &Self) -> R<()>) -> R<()> {
        match self {
            Node::Seq(items) => {
                for (i, n) in items.iter().enumerate() {
                    item(i, n).map_err(|e| e.at(Seg::Index(i)))?;
                }
                Ok(())
            }
            _ => Err(invalid_type(self, "a sequence")),
        }
    }

    /// An array of strings.
    pub(crate) fn strings(&self) -> R<Vec<String>> {
        let mut out = Vec::new();
        self.seq(&mut |_, n| {
            out.push(n.string()?);
            Ok(())
        })?;
        Ok(out)
    }

    /// An object as a map: `entry(key, value)` for each, errors under the key.
    #[inline(never)]
    pub(crate) fn map(&self, entry: &mut dyn FnMut(&str, &Self) -> R<()>) -> R<()> {
        match self {
            Node::Map(entries) => {
                for (k, v) in entries {
                    entry(k, v).map_err(|e| e.at(Seg::Key(k.to_string())))?;
                }
                Ok(())
            }
            _ => Err(invalid_type(self, "a map")),
        }
    }

    /// A struct of `shape`: `field(i, value)` for each field present, in
    /// the order written; an object, or an array holding the fields in
    /// order (as serde reads structs). Unknown, duplicate and missing
    /// fields are refused as serde refuses them.
    #[inline(never)]
    pub(crate) fn fields(
        &self,
        shape: &Shape,
        field: &mut dyn FnMut(usize, &Self) -> R<()>,
    ) -> R<()> {
        let names = shape.fields;
        match self {
            Node::Map(entries) => {
                let mut seen = 0u32;
                for (k, v) in entries {
                    if shape.skip == Some(k) {
                        continue;
                    }
                    let Some(i) = names.iter().position(|n| n == k) else {
                        if shape.deny_unknown {
                            return Err(unknown_field(k, names).at(Seg::Key(k.to_string())));
                        }
                        continue;
                    };
                    if seen & (1 << i) != 0 {
                        return Err(duplicate_field(names[i]));
                    }
                    seen |= 1 << i;
                    field(i, v).map_err(|e| e.at(Seg::Key(k.to_string())))?;
                }
                match (0..names.len()).find(|i| shape.required & !seen & (1 << i) != 0) {
                    Some(i) => Err(missing_field(names[i])),
                    None => Ok(()),
                }
            }
            Node::Seq(items) => {
                // A tagged enum's array holds the tag first.
                let first = usize::from(shape.skip.is_some());
                for i in 0..names.len() {
                    match items.get(first + i) {
                        Some(n) => field(i, n).map_err(|e| e.at(Seg::Index(first + i)))?,
                        None if shape.defaulted & (1 << i) != 0 => {}
                        None => {
                            return Err(Error::msg(format!(
                                "invalid length {i}, expected {} with {} elements",
                                shape.name,
                                names.len()
                            )))
                        }
                    }
                }
                Ok(())
            }
            _ => Err(invalid_type(self, shape.name)),
        }
    }

    /// A unit variant's index among `variants`: its name as a string (or
    /// as the only key of an object whose value is `null`).
    #[inline(never)]
    pub(crate) fn variant(&self, variants: &[&str]) -> R<usize> {
        let (name, value) = match self {
            Node::Str(s) => (s, None),
            Node::Map(entries) if entries.len() == 1 => (&entries[0].0, Some(&entries[0].1)),
            Node::Map(_) => {
                return Err(Error::msg(
                    "invalid value: map, expected map with a single key".into(),
                ))
            }
            _ => return Err(invalid_type(self, "string or map")),
        };
        let i = variants
            .iter()
            .position(|v| v == name)
            .ok_or_else(|| unknown_variant(name, variants))?;
        match value {
            Some(v) if !v.is_null() => Err(invalid_type(v, "unit variant")),
            _ => Ok(i),
        }
    }

    /// The tag of an internally tagged enum: the index of the string under
    /// `tag` among `variants` (or of the first element of an array, as
    /// serde reads them). `expected` names the enum for anything else.
    #[inline(never)]
    pub(crate) fn tag(&self, tag: &str, variants: &[&str], expected: &str) -> R<usize> {
        let (v, seg) = match self {
            Node::Map(entries) => {
                let mut found = None;
                for (k, v) in entries {
                    if k == tag {
                        if found.is_some() {
                            return Err(duplicate_field(tag));
                        }
                        found = Some(v);
                    }
                }
                (found, Seg::Key(tag.to_string()))
            }
            Node::Seq(items) => (items.first(), Seg::Index(0)),
            _ => return Err(invalid_type(self, expected)),
        };
        let v = v.ok_or_else(|| missing_field(tag))?;
        let name = match v {
            Node::Str(s) => s,
            other => return Err(invalid_type(other, "variant identifier").at(seg)),
        };
        variants
            .iter()
            .position(|n| n == name)
            .ok_or_else(|| unknown_variant(name, variants).at(seg))
    }

    /// The node as a [`Value`] (numbers and strings as serde_json reads
    /// them; of duplicate keys, the last wins).
    pub(crate) fn to_value(&self) -> Value {
        match self {
            Node::Null => Value::Null,
            Node::Bool(b) => Value::Bool(*b),
            Node::U64(n) => Value::from(*n),
            Node::I64(n) => Value::from(*n),
            Node::F64(x) => serde_json::Number::from_f64(*x).map_or(Value::Null, Value::Number),
            Node::Str(s) => Value::String(s.to_string()),
            Node::Seq(items) => Value::Array(items.iter().map(Node::to_value).collect()),
            Node::Map(entries) => {
                let mut map = serde_json::Map::new();
                for (k, v) in entries {
                    map.insert(k.to_string(), v.to_value());
                }
                Value::Object(map)
            }
        }
    }
}

/// Parses JSON text into a [`Value`], as `serde_json::from_slice` would (the
/// same values, the same messages), through the crate's one parser.
pub(crate) fn parse_value(json: &[u8]) -> Result<Value, String> {
    match super::path::parse_tree(json) {
        Ok(node) => Ok(node.to_value()),
        Err((_, message)) => Err(message),
    }
}

/// Parses `json` and reads it with `read`; on failure, the path of the
/// mistake and the message (syntax errors keep serde_json's `at line 1
/// column 9`).
pub(crate) fn read_json<T>(
    json: &str,
    read: impl FnOnce(&Node<'_>) -> R<T>,
) -> Result<T, (String, String)> {
    let node = super::path::parse_tree(json.as_bytes())?;
    read(&node).map_err(Error::into_parts)
}

#[cfg(test)]
mod tests {
    #[test]
    fn strings_are_quoted_as_debug_quotes_them() {
        for s in [
            "",
            "plain",
            "q\"b\\s'/",
            "\0\t\r\n\u{1}\u{1f}\u{7f}",
            "é ✓ 😀",
        ] {
            let mut out = String::new();
            super::quote(s, &mut out);
            assert_eq!(out, format!("{s:?}"));
        }
    }

    #[test]
    fn values_parse_as_serde_json_parses_them() {
        for json in [
            "{}",
            r#"{"a":[1,-2,3.5,"x\n",true,null,{"b":{}}],"c":"d","c":"e","f":1e300,"g":-0}"#,
            r#"[18446744073709551615,18446744073709551616,-9223372036854775808,1.5e-7]"#,
            "\"\\u00e9\\ud83d\\ude00\"",
            "{",
            "[1,]",
            "{\"a\" 1}",
            "nul",
            "1 2",
            "\"\\ud800\"",
        ] {
            let json = json.as_bytes();
            let ours = super::parse_value(json);
            match serde_json::from_slice::<serde_json::Value>(json) {
                Ok(v) => assert_eq!(ours, Ok(v)),
                Err(e) => assert_eq!(ours, Err(e.to_string())),
            }
        }
        assert_eq!(
            super::parse_value(b"\"\xff\"").unwrap_err(),
            serde_json::from_slice::<serde_json::Value>(b"\"\xff\"")
                .unwrap_err()
                .to_string()
        );
    }

    #[test]
    fn trees_become_the_values_serde_json_reads() {
        let json =
            r#"{"a":[1,-2,3.5,"x\n",true,null,{"b":{}}],"c":"d","c":"e","f":1e300,"g":-0.0}"#;
        let tree = super::read_json(json, |n| Ok(n.to_value())).unwrap();
        assert_eq!(
            tree,
            serde_json::from_str::<serde_json::Value>(json).unwrap()
        );
    }
}
