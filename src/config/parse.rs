//! The crate's one JSON parser: bytes into a [`Node`] tree, by hand.
//!
//! It is serde_json's parser (1.0, without `float_roundtrip`) restated for
//! one output type: the same grammar, the same numbers (an integer that fits
//! `u64`/`i64` stays one; other numbers are `significand · 10^exponent`
//! computed as serde_json computes them, `-0` is `-0.0`), the same nesting
//! limit, and the same errors, word for word, with the same line and column
//! (`trailing comma at line 1 column 27`). Where a syntax error sits in the
//! document is recorded as serde_json reports it through a tree visitor: the
//! index of the array element, or the key of the member value, it broke.
//! The tests hold it to serde_json itself.

use std::borrow::Cow;

use super::path::{Node, Path, Seg};

/// What went wrong (serde_json's `ErrorCode` wording).
#[derive(Clone, Copy)]
enum Code {
    EofList,
    EofObject,
    EofString,
    EofValue,
    Colon,
    ListCommaOrEnd,
    ObjectCommaOrEnd,
    Ident,
    Value,
    Escape,
    Number,
    OutOfRange,
    Unicode,
    Control,
    KeyString,
    LoneSurrogate,
    TrailingComma,
    Trailing,
    HexEnd,
    Recursion,
}

impl Code {
    fn text(self) -> &'static str {
        match self {
            Code::EofList => "EOF while parsing a list",
            Code::EofObject => "EOF while parsing an object",
            Code::EofString => "EOF while parsing a string",
            Code::EofValue => "EOF while parsing a value",
            Code::Colon => "expected `:`",
            Code::ListCommaOrEnd => "expected `,` or `]`",
            Code::ObjectCommaOrEnd => "expected `,` or `}`",
            Code::Ident => "expected ident",
            Code::Value => "expected value",
            Code::Escape => "invalid escape",
            Code::Number => "invalid number",
            Code::OutOfRange => "number out of range",
            Code::Unicode => "invalid unicode code point",
            Code::Control => "control character (\\u0000-\\u001F) found while parsing a string",
            Code::KeyString => "key must be a string",
            Code::LoneSurrogate => "lone leading surrogate in hex escape",
            Code::TrailingComma => "trailing comma",
            Code::Trailing => "trailing characters",
            Code::HexEnd => "unexpected end of hex escape",
            Code::Recursion => "recursion limit exceeded",
        }
    }
}

/// A syntax error: the message with its line and column.
pub(crate) struct SyntaxError(String);

type P<T> = Result<T, SyntaxError>;

struct Parser<'de> {
    s: &'de [u8],
    i: usize,
    depth: u8,
    scratch: Vec<u8>,
}

/// Parses `json`; on failure, the path where it broke and the message.
pub(crate) fn parse(json: &[u8]) -> Result<Node<'_>, (Path, String)> {
    let mut p = Parser {
        s: json,
        i: 0,
        depth: 128,
        scratch: Vec::new(),
    };
    let mut path = Path::default();
    let node = p.value(&mut path).map_err(|e| (path, e.0))?;
    match p.ws() {
        Some(_) => Err((Path::default(), p.peek_error(Code::Trailing).0)),
        None => Ok(node),
    }
}

impl<'de> Parser<'de> {
    /// An error at byte `at` (serde_json's `position_of_index`).
    #[cold]
    #[inline(never)]
    fn error_at(&self, code: Code, at: usize, back: usize) -> SyntaxError {
        let before = &self.s[..at];
        let start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1);
        let line = 1 + before[..start].iter().filter(|&&b| b == b'\n').count();
        let column = (at - start).saturating_sub(back);
        SyntaxError(format!("{} at line {line} column {column}", code.text()))
    }

    /// An error caused by the byte just read.
    fn error(&self, code: Code) -> SyntaxError {
        self.error_at(code, self.i, 0)
    }

    /// An error caused by the byte about to be read.
    fn peek_error(&self, code: Code) -> SyntaxError {
        self.error_at(code, (self.i + 1).min(self.s.len()), 0)
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.i += 1;
        Some(b)
    }

    /// The next byte that is not whitespace, not consumed.
    fn ws(&mut self) -> Option<u8> {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.peek() {
            self.i += 1;
        }
        self.peek()
    }

    fn value(&mut self, path: &mut Path) -> P<Node<'de>> {
        let Some(b) = self.ws() else {
            return Err(self.peek_error(Code::EofValue));
        };
        Ok(match b {
            b'n' => {
                self.ident(b"null")?;
                Node::Null
            }
            b't' => {
                self.ident(b"true")?;
                Node::Bool(true)
            }
            b'f' => {
                self.ident(b"false")?;
                Node::Bool(false)
            }
            b'-' => {
                self.i += 1;
                self.number(false)?
            }
            b'0'..=b'9' => self.number(true)?,
            b'"' => {
                self.i += 1;
                Node::Str(self.string()?)
            }
            b'[' | b'{' => {
                self.depth -= 1;
                if self.depth == 0 {
                    return Err(self.peek_error(Code::Recursion));
                }
                self.i += 1;
                let node = if b == b'[' {
                    self.seq(path)
                } else {
                    self.map(path)
                };
                self.depth += 1;
                node?
            }
            _ => return Err(self.peek_error(Code::Value)),
        })
    }

    /// `null`, `true` or `false`, its first byte at hand.
    fn ident(&mut self, word: &[u8]) -> P<()> {
        self.i += 1;
        for &expected in &word[1..] {
            match self.next() {
                None => return Err(self.error(Code::EofValue)),
                Some(b) if b != expected => return Err(self.error(Code::Ident)),
                Some(_) => {}
            }
        }
        Ok(())
    }

    fn seq(&mut self, path: &mut Path) -> P<Node<'de>> {
        let mut items = Vec::new();
        loop {
            let next = self.element(items.is_empty(), b']');
            match next {
                Ok(false) => break,
                Ok(true) => match self.value(path) {
                    Ok(n) => items.push(n),
                    Err(e) => {
                        path.0.push(Seg::Index(items.len()));
                        return Err(e);
                    }
                },
                Err(e) => {
                    path.0.push(Seg::Index(items.len()));
                    return Err(e);
                }
            }
        }
        self.i += 1; // `]`
        Ok(Node::Seq(items))
    }

    /// Whether another element or member follows (serde_json's
    /// `has_next_element` / `has_next_key`); `end` is `]` or `}`.
    fn element(&mut self, first: bool, end: u8) -> P<bool> {
        let map = end == b'}';
        let Some(b) = self.ws() else {
            return Err(self.peek_error(if map { Code::EofObject } else { Code::EofList }));
        };
        if b == end {
            return Ok(false);
        }
        if first {
            return if map && b != b'"' {
                Err(self.peek_error(Code::KeyString))
            } else {
                Ok(true)
            };
        }
        if b != b',' {
            return Err(self.peek_error(if map {
                Code::ObjectCommaOrEnd
            } else {
                Code::ListCommaOrEnd
            }));
        }
        self.i += 1;
        match self.ws() {
            Some(b) if b == end => Err(self.peek_error(Code::TrailingComma)),
            Some(b'"') => Ok(true),
            Some(_) if map => Err(self.peek_error(Code::KeyString)),
            Some(_) => Ok(true),
            None => Err(self.peek_error(Code::EofValue)),
        }
    }

    fn map(&mut self, path: &mut Path) -> P<Node<'de>> {
        let mut entries = Vec::new();
        while self.element(entries.is_empty(), b'}')? {
            self.i += 1; // `"`
            let key = self.string()?;
            let value = match self.ws() {
                Some(b':') => {
                    self.i += 1;
                    self.value(path)
                }
                Some(_) => Err(self.peek_error(Code::Colon)),
                None => Err(self.peek_error(Code::EofObject)),
            };
            match value {
                Ok(v) => entries.push((key, v)),
                Err(e) => {
                    path.0.push(Seg::Key(key.into_owned()));
                    return Err(e);
                }
            }
        }
        self.i += 1; // `}`
        Ok(Node::Map(entries))
    }

    /// A string's contents, its opening quote read: borrowed when it has no
    /// escapes.
    fn string(&mut self) -> P<Cow<'de, str>> {
        self.scratch.clear();
        let mut start = self.i;
        loop {
            let Some(b) = self.peek() else {
                return Err(self.error(Code::EofString));
            };
            match b {
                b'"' => {
                    let s = self.s;
                    let raw = &s[start..self.i];
                    self.i += 1;
                    if self.scratch.is_empty() {
                        return std::str::from_utf8(raw).map(Cow::Borrowed).map_err(|e| {
                            self.error_at(Code::Unicode, self.i, raw.len() - e.valid_up_to())
                        });
                    }
                    self.scratch.extend_from_slice(raw);
                    let bytes = std::mem::take(&mut self.scratch);
                    return String::from_utf8(bytes).map(Cow::Owned).map_err(|e| {
                        let back = e.as_bytes().len() - e.utf8_error().valid_up_to();
                        self.error_at(Code::Unicode, self.i, back)
                    });
                }
                b'\\' => {
                    let s = self.s;
                    self.scratch.extend_from_slice(&s[start..self.i]);
                    self.i += 1;
                    self.escape()?;
                    start = self.i;
                }
                0..=0x1f => {
                    self.i += 1;
                    return Err(self.error(Code::Control));
                }
                _ => self.i += 1,
            }
        }
    }

    /// One escape, its backslash read, appended to the scratch buffer.
    fn escape(&mut self) -> P<()> {
        let Some(c) = self.next() else {
            return Err(self.error(Code::EofString));
        };
        let byte = match c {
            b'"' => b'"',
            b'\\' => b'\\',
            b'/' => b'/',
            b'b' => 8,
            b'f' => 12,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => return self.unicode(),
            _ => return Err(self.error(Code::Escape)),
        };
        self.scratch.push(byte);
        Ok(())
    }

    fn hex(&mut self) -> P<u32> {
        let Some(digits) = self.s.get(self.i..self.i + 4) else {
            self.i = self.s.len();
            return Err(self.error(Code::EofString));
        };
        self.i += 4;
        let mut n = 0;
        for &d in digits {
            let v = match d {
                b'0'..=b'9' => d - b'0',
                b'a'..=b'f' => d - b'a' + 10,
                b'A'..=b'F' => d - b'A' + 10,
                _ => return Err(self.error(Code::Escape)),
            };
            n = n << 4 | u32::from(v);
        }
        Ok(n)
    }

    /// A `\u` escape, `\u` read; a leading surrogate takes its pair.
    #[cold]
    fn unicode(&mut self) -> P<()> {
        let mut n = self.hex()?;
        if (0xdc00..=0xdfff).contains(&n) {
            return Err(self.error(Code::LoneSurrogate));
        }
        if (0xd800..=0xdbff).contains(&n) {
            for expected in [b'\\', b'u'] {
                match self.peek() {
                    None => return Err(self.error(Code::EofString)),
                    Some(b) => {
                        self.i += 1;
                        if b != expected {
                            return Err(self.error(Code::HexEnd));
                        }
                    }
                }
            }
            let n2 = self.hex()?;
            if !(0xdc00..=0xdfff).contains(&n2) {
                return Err(self.error(Code::LoneSurrogate));
            }
            n = (((n - 0xd800) << 10) | (n2 - 0xdc00)) + 0x1_0000;
        }
        let c = char::from_u32(n).unwrap_or('\u{fffd}');
        let mut buf = [0; 4];
        self.scratch
            .extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        Ok(())
    }

    /// A number, its sign read (serde_json's `parse_integer` and after).
    fn number(&mut self, positive: bool) -> P<Node<'de>> {
        let Some(first) = self.next() else {
            return Err(self.error(Code::EofValue));
        };
        let mut significand = match first {
            b'0' => {
                if let Some(b'0'..=b'9') = self.peek() {
                    return Err(self.peek_error(Code::Number));
                }
                0
            }
            b'1'..=b'9' => u64::from(first - b'0'),
            _ => return Err(self.error(Code::Number)),
        };
        // Integer digits; past u64, the rest only scale it.
        let mut exponent = 0i32;
        let mut long = false;
        while let Some(c @ b'0'..=b'9') = self.peek() {
            let digit = u64::from(c - b'0');
            if long || overflows(significand, digit) {
                long = true;
                exponent += 1;
            } else {
                significand = significand * 10 + digit;
            }
            self.i += 1;
        }
        match self.peek() {
            Some(b'.') => self.decimal(positive, significand, exponent).map(Node::F64),
            Some(b'e' | b'E') => self
                .exponent(positive, significand, exponent)
                .map(Node::F64),
            _ if long => self.float(positive, significand, exponent).map(Node::F64),
            _ if positive => Ok(Node::U64(significand)),
            _ => {
                let neg = (significand as i64).wrapping_neg();
                Ok(if neg >= 0 {
                    Node::F64(-(significand as f64))
                } else {
                    Node::I64(neg)
                })
            }
        }
    }

    /// The digits after `.`.
    fn decimal(&mut self, positive: bool, mut significand: u64, exponent: i32) -> P<f64> {
        self.i += 1;
        let mut after = 0i32;
        let mut overflowed = false;
        while let Some(c @ b'0'..=b'9') = self.peek() {
            let digit = u64::from(c - b'0');
            if !overflowed && overflows(significand, digit) {
                overflowed = true;
            }
            if !overflowed {
                significand = significand * 10 + digit;
                after -= 1;
            }
            self.i += 1;
        }
        if after == 0 && !overflowed {
            return Err(match self.peek() {
                Some(_) => self.peek_error(Code::Number),
                None => self.peek_error(Code::EofValue),
            });
        }
        let exponent = exponent + after;
        match self.peek() {
            Some(b'e' | b'E') => self.exponent(positive, significand, exponent),
            _ => self.float(positive, significand, exponent),
        }
    }

    /// The exponent after `e`.
    fn exponent(&mut self, positive: bool, significand: u64, starting: i32) -> P<f64> {
        self.i += 1;
        let positive_exp = match self.peek() {
            Some(b'+') => {
                self.i += 1;
                true
            }
            Some(b'-') => {
                self.i += 1;
                false
            }
            _ => true,
        };
        let mut exp = match self.next() {
            None => return Err(self.error(Code::EofValue)),
            Some(c @ b'0'..=b'9') => i32::from(c - b'0'),
            Some(_) => return Err(self.error(Code::Number)),
        };
        while let Some(c @ b'0'..=b'9') = self.peek() {
            self.i += 1;
            let digit = i32::from(c - b'0');
            if exp >= i32::MAX / 10 && (exp > i32::MAX / 10 || digit > i32::MAX % 10) {
                if significand != 0 && positive_exp {
                    return Err(self.error(Code::OutOfRange));
                }
                while let Some(b'0'..=b'9') = self.peek() {
                    self.i += 1;
                }
                return Ok(if positive { 0.0 } else { -0.0 });
            }
            exp = exp * 10 + digit;
        }
        let exponent = if positive_exp {
            starting.saturating_add(exp)
        } else {
            starting.saturating_sub(exp)
        };
        self.float(positive, significand, exponent)
    }

    /// `significand · 10^exponent` as serde_json computes it.
    fn float(&mut self, positive: bool, significand: u64, mut exponent: i32) -> P<f64> {
        let mut f = significand as f64;
        loop {
            let k = exponent.unsigned_abs();
            if k <= 308 {
                let pow = pow10(k);
                if exponent >= 0 {
                    f *= pow;
                    if f.is_infinite() {
                        return Err(self.error(Code::OutOfRange));
                    }
                } else {
                    f /= pow;
                }
                break;
            }
            if f == 0.0 {
                break;
            }
            if exponent >= 0 {
                return Err(self.error(Code::OutOfRange));
            }
            f /= 1e308;
            exponent += 308;
        }
        Ok(if positive { f } else { -f })
    }
}

/// Whether `significand · 10 + digit` would overflow a `u64`.
fn overflows(significand: u64, digit: u64) -> bool {
    significand >= u64::MAX / 10 && (significand > u64::MAX / 10 || digit > u64::MAX % 10)
}

/// `10^k` for `k` ≤ 308, correctly rounded, as the literals `1e0`…`1e308`
/// of serde_json's table are.
fn pow10(k: u32) -> f64 {
    if k <= 22 {
        // Every power up to 10^22 is exact in an f64.
        return (0..k).fold(1.0, |p, _| p * 10.0);
    }
    // 10^k as a big integer (base 2^32, little-endian), rounded to 53 bits.
    let mut limbs: Vec<u32> = vec![1];
    for _ in 0..k {
        let mut carry = 0u64;
        for l in &mut limbs {
            let v = u64::from(*l) * 10 + carry;
            *l = v as u32;
            carry = v >> 32;
        }
        if carry != 0 {
            limbs.push(carry as u32);
        }
    }
    let top = limbs.len() - 1; // at least 3 limbs: 10^23 > 2^64
    let bits = top as u32 * 32 + (32 - limbs[top].leading_zeros());
    let raw = u128::from(limbs[top]) << 64
        | u128::from(limbs[top - 1]) << 32
        | u128::from(limbs[top - 2]);
    let drop = bits - (top as u32 - 2) * 32 - 64; // bits of `raw` below the top 64
    let m = (raw >> drop) as u64;
    let sticky = raw & ((1 << drop) - 1) != 0 || limbs[..top - 2].iter().any(|&l| l != 0);
    let (mut q, low) = (m >> 11, m & 0x7ff);
    if low > 0x400 || (low == 0x400 && (sticky || q & 1 == 1)) {
        q += 1;
    }
    q as f64 * 2f64.powi(bits as i32 - 53)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::pow10;
    use crate::config::path::{parse_tree, parse_tree_with_serde};

    /// Both parsers, compared through `Debug` (so `-0.0` differs from `0.0`).
    fn same(json: &[u8]) {
        let ours = format!("{:?}", parse_tree(json));
        let serde = format!("{:?}", parse_tree_with_serde(json));
        assert_eq!(ours, serde, "{:?}", String::from_utf8_lossy(json));
    }

    #[test]
    fn powers_of_ten_are_the_literals() {
        for k in 0..=308u32 {
            let literal: f64 = format!("1e{k}").parse().unwrap();
            assert_eq!(pow10(k).to_bits(), literal.to_bits(), "1e{k}");
        }
    }

    #[test]
    fn documents_and_mistakes_parse_as_serde_json_parses_them() {
        let deep_ok = "[".repeat(127) + &"]".repeat(127);
        let deep = "[".repeat(128) + &"]".repeat(128);
        let deep_map = "{\"a\":".repeat(130) + "1" + &"}".repeat(130);
        for json in [
            "",
            " ",
            "null",
            "true",
            "false",
            "nul",
            "nulx",
            "tru",
            "t",
            "f",
            "n",
            "0",
            "-0",
            "1",
            "-1",
            "01",
            "-01",
            "-",
            "--1",
            "1.",
            "1.x",
            ".5",
            "1.5",
            "-1.5",
            "1e",
            "1e+",
            "1e-",
            "1ex",
            "1e5",
            "1E5",
            "1e-5",
            "1.5e3",
            "-1.5E-3",
            "0.0",
            "-0.0",
            "18446744073709551615",
            "18446744073709551616",
            "-9223372036854775808",
            "-9223372036854775809",
            "123456789012345678901234567890",
            "1234567890123456789012.5",
            "18446744073709551615.5",
            "0.1234567890123456789012345",
            "1e308",
            "1e309",
            "-1e309",
            "1e-308",
            "1e-324",
            "1e-400",
            "1e-1000000000000",
            "1e2147483647",
            "1e2147483648",
            "0e2147483648",
            "1e-2147483648",
            "123e-20",
            "5e-324",
            "2.2250738585072014e-308",
            "1.7976931348623157e308",
            "1.7976931348623158e308",
            "9007199254740993",
            "0.1e1",
            "\"\"",
            "\"a\"",
            "\"a",
            "\"\\",
            "\"\\x\"",
            "\"\\n\\t\\r\\b\\f\\/\\\\\\\"\"",
            "\"\\u0041\"",
            "\"\\u00e9\"",
            "\"\\u00E9\"",
            "\"\\ud83d\\ude00\"",
            "\"\\ud83d\"",
            "\"\\ud83dx\"",
            "\"\\ud83d\\n\"",
            "\"\\ud83d\\u0041\"",
            "\"\\ude00\"",
            "\"\\u12\"",
            "\"\\u12g4\"",
            "\"\\u",
            "\"\\ud83d\\",
            "\"\\ud83d\\u",
            "\"a\\u0000b\"",
            "\"\x01\"",
            "\"\t\"",
            "\"é\"",
            "\"\\\\\"",
            "[]",
            "[ ]",
            "[1]",
            "[1,2]",
            "[1,]",
            "[,1]",
            "[1 2]",
            "[1",
            "[1,",
            "[",
            "]",
            "[[]]",
            "[[1,[2]],3]",
            "{}",
            "{ }",
            "{\"a\":1}",
            "{\"a\":1,\"b\":[true,null]}",
            "{\"a\":1,}",
            "{\"a\"}",
            "{\"a\" 1}",
            "{\"a\":}",
            "{\"a\":1 \"b\":2}",
            "{1:2}",
            "{a:1}",
            "{\"a\":1,\"a\":2}",
            "{\"a",
            "{\"a\":",
            "{\"a\":1",
            "{\"a\":1,",
            "{",
            "}",
            "{\"a\\n\":{\"b\":[1,{\"c\":x}]}}",
            "{\"retry\":{\"maxAttempts\":3,}}",
            "{} x",
            "1 2",
            "[] ]",
            "\n\n  [1,\n  2,\n  x]",
            "\r\n{\"a\":\n\t[1,\n 2 , ]}",
            "{\"k\":\"\\u00e9\\ud800\"}",
            "[\"a\",\"b\" \"c\"]",
            &deep_ok,
            &deep,
            &deep_map,
        ] {
            same(json.as_bytes());
        }
        for bytes in [
            &b"\"\xff\""[..],
            b"\"ab\xc3\"",
            b"{\"a\xe9\":1}",
            b"\"\\n\xff\"",
            b"[1,\n\"x\xffy\"]",
            b"\xff",
        ] {
            same(bytes);
        }
    }

    proptest! {
        #[test]
        fn numbers_parse_as_serde_json_parses_them(
            n in "-?(0|[1-9][0-9]{0,24})(\\.[0-9]{0,24})?([eE][+-]?[0-9]{1,4})?",
        ) {
            same(n.as_bytes());
        }

        #[test]
        fn noise_parses_as_serde_json_parses_it(
            s in "[\\[\\]{}:, \"\\\\0-9a-eu.+\\-\n\tnulfsr\u{e9}]{0,30}",
        ) {
            same(s.as_bytes());
        }

        #[test]
        fn floats_parse_as_serde_json_parses_them(x in any::<f64>()) {
            same(format!("{x:e}").as_bytes());
            same(format!("{x}").as_bytes());
        }
    }
}
