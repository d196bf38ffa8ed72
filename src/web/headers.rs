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
    let json = if repeats {
        serde_json::to_string(&pairs)
    } else {
        serde_json::to_string(&Record(&pairs))
    };
    let Ok(json) = json else {
        return Array::new().into();
    };
    JSON::parse(&json).unwrap_or_else(|_| Array::new().into())
}

/// Pairs whose names are unique, written as a JSON object.
struct Record<'a>(&'a [(&'a str, &'a str)]);

impl serde::Serialize for Record<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().copied())
    }
}
