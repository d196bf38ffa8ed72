//! Header lists across the JS boundary in a constant number of calls, not
//! a few per header: a wasm↔JS call costs more than the header it carries.

use js_sys::{Array, JSON};
use wasm_bindgen::prelude::*;

use crate::platform::Headers;

/// A JS `Headers` (or any iterable of `[name, value]` pairs) as a header
/// list. Two calls: `Array.from(headers).join("\n")` gives `name,value`
/// lines, which split without ambiguity: a name is a token (no comma) and
/// a `Headers` value holds no line break.
pub fn headers_from_js(headers: &JsValue) -> Headers {
    let text = String::from(Array::from(headers).join("\n"));
    text.split('\n')
        .filter_map(|line| line.split_once(','))
        .collect()
}

/// The named headers of a JS `Headers`, one `get` each: cheaper than
/// [`headers_from_js`] when only a few names matter (workerd iterates a
/// `Headers` slowly).
pub fn headers_named(headers: &web_sys::Headers, names: &[&str]) -> Headers {
    let mut out = Headers::new();
    for name in names {
        if let Ok(Some(value)) = headers.get(name) {
            out.append(name, value);
        }
    }
    out
}

/// A header list as what `fetch` and the `Request`, `Response` and
/// `Headers` constructors take, in one `JSON.parse`: a `{name: value}`
/// record, or `[name, value]` pairs when a name repeats (a record cannot
/// say that). workerd builds its headers from a record in half the time it
/// takes for pairs (~4 us less for a `Response`'s five headers).
pub fn headers_to_js(headers: &Headers) -> JsValue {
    let pairs: Vec<(&str, &str)> = headers.iter().collect();
    let repeats = pairs
        .iter()
        .enumerate()
        .any(|(i, (n, _))| pairs[..i].iter().any(|(m, _)| m == n));
    let mut json = String::with_capacity(64);
    json.push(if repeats { '[' } else { '{' });
    for (i, (name, value)) in pairs.iter().enumerate() {
        if i > 0 {
            json.push(',');
        }
        json.push_str(if repeats { "[\"" } else { "\"" });
        push_escaped(&mut json, name);
        json.push_str(if repeats { "\",\"" } else { "\":\"" });
        push_escaped(&mut json, value);
        json.push_str(if repeats { "\"]" } else { "\"" });
    }
    json.push(if repeats { ']' } else { '}' });
    JSON::parse(&json).unwrap_or_else(|_| Array::new().into())
}

/// `s` as the inside of a JSON string.
fn push_escaped(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                let n = c as usize;
                out.push_str("\\u00");
                out.push(HEX[n >> 4] as char);
                out.push(HEX[n & 15] as char);
            }
            c => out.push(c),
        }
    }
}
