//! The client's own body sent to a provider of its dialect: the body as
//! the client wrote it, with the few keys an adapter must decide
//! (`model`, `stream`, …) set or removed on the way out. The body is not
//! copied: [`NativeBody`] writes the client's map with its edits laid over.

use std::borrow::Cow;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

use crate::chat::{ChatRequest, Dialect, Native};
use crate::error::{ErrorKind, ProviderError};
use crate::platform::HttpRequest;

/// The client's own body, when it is written in `dialect`: a provider of
/// that dialect is sent it (with the few changes its adapter lists)
/// instead of a translation of the neutral request.
pub(crate) fn native_in(req: &ChatRequest, dialect: Dialect) -> Option<&Native> {
    req.native
        .as_deref()
        .filter(|_| req.sends_native(Some(dialect)))
}

/// A client's body with an adapter's edits: keys set (replacing the
/// client's value) or removed.
pub(crate) struct NativeBody<'a> {
    body: &'a Map<String, Value>,
    /// By key, each at most once: the value written, or `None` to leave
    /// the key out.
    edits: Vec<(&'a str, Option<Cow<'a, Value>>)>,
}

impl<'a> NativeBody<'a> {
    /// `native`'s body with the entry's `model` and the request's `stream`:
    /// the two fields the gateway always decides. `stream` is written when
    /// streaming, and kept (as `false`) only where the client wrote it.
    pub(crate) fn new(native: &'a Native, model: &'a str, stream: bool) -> Self {
        let mut out = NativeBody {
            body: &native.body,
            edits: Vec::new(),
        };
        out.set("model", Value::from(model));
        if stream || native.body.contains_key("stream") {
            out.set("stream", Value::Bool(stream));
        }
        out
    }

    /// The value of `key` as it will be written.
    pub(crate) fn get(&self, key: &str) -> Option<&Value> {
        match self.edits.iter().find(|(k, _)| *k == key) {
            Some((_, edit)) => edit.as_deref(),
            None => self.body.get(key),
        }
    }

    fn edit(&mut self, key: &'a str, value: Option<Cow<'a, Value>>) {
        match self.edits.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.edits.push((key, value)),
        }
    }

    /// Writes `value` under `key`.
    pub(crate) fn set(&mut self, key: &'a str, value: Value) {
        self.edit(key, Some(Cow::Owned(value)));
    }

    /// Leaves `key` out.
    pub(crate) fn remove(&mut self, key: &'a str) {
        self.edit(key, None);
    }

    /// Writes the client's value of `from` under `to` instead, when the
    /// client wrote `from` and not `to`.
    pub(crate) fn rename(&mut self, from: &'a str, to: &'a str) {
        if self.get(to).is_some() {
            return;
        }
        if let Some(v) = self.body.get(from) {
            self.edit(to, Some(Cow::Borrowed(v)));
            self.remove(from);
        }
    }

    /// The JSON text to send.
    pub(crate) fn to_vec(&self) -> Result<Vec<u8>, ProviderError> {
        serde_json::to_vec(self)
            .map_err(|e| ProviderError::new(ErrorKind::InvalidRequest, e.to_string()))
    }
}

impl Serialize for NativeBody<'_> {
    /// The client's keys in their order, each edited one where it was; the
    /// keys the client did not write after them, in key order.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        for (key, value) in self.body {
            match self.edits.iter().find(|(k, _)| k == key) {
                None => map.serialize_entry(key, value)?,
                Some((_, Some(edited))) => map.serialize_entry(key, edited.as_ref())?,
                Some((_, None)) => {}
            }
        }
        let mut added: Vec<_> = self
            .edits
            .iter()
            .filter(|(k, _)| !self.body.contains_key(*k))
            .filter_map(|(k, v)| Some((*k, v.as_deref()?)))
            .collect();
        added.sort_by_key(|(k, _)| *k);
        for (key, value) in added {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// Adds the client's forwarded request headers named in `meaningful` (the
/// ones this provider reads), after the adapter's own and before its
/// credentials, which are written last so nothing forwarded can replace
/// them. A beta list the adapter sets itself is extended, not replaced;
/// any other header the adapter sets keeps the adapter's value.
pub(crate) fn forward_headers(http: &mut HttpRequest, req: &ChatRequest, meaningful: &[&str]) {
    let Some(native) = req.native.as_deref() else {
        return;
    };
    for (name, value) in &native.headers {
        if !meaningful.contains(&name.as_str()) {
            continue;
        }
        let joined = match http.headers.get(name) {
            None => value.clone(),
            Some(own) if name.ends_with("-beta") => format!("{own},{value}"),
            Some(_) => continue,
        };
        http.headers.insert(name, joined);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn native(body: Value) -> Native {
        let Value::Object(body) = body else {
            unreachable!("an object")
        };
        Native {
            dialect: Dialect::OpenAi,
            body,
            headers: Vec::new(),
        }
    }

    #[test]
    fn edits_lay_over_the_clients_body_which_is_otherwise_written_as_it_was() {
        let n = native(
            json!({"model": "route", "max_tokens": 9, "x_future": {"a": [1]},
                              "messages": [{"role": "user", "content": "hi"}]}),
        );
        let mut b = NativeBody::new(&n, "gpt-x", true);
        b.rename("max_tokens", "max_completion_tokens");
        b.set("stream_options", json!({"include_usage": true}));
        b.remove("absent");
        let out: Value = serde_json::from_slice(&b.to_vec().unwrap()).unwrap();
        assert_eq!(
            out,
            json!({"model": "gpt-x", "stream": true, "max_completion_tokens": 9,
                   "stream_options": {"include_usage": true}, "x_future": {"a": [1]},
                   "messages": [{"role": "user", "content": "hi"}]})
        );
        assert_eq!(b.get("max_tokens"), None);
        assert_eq!(b.get("max_completion_tokens"), Some(&json!(9)));
        // The client's map itself is untouched.
        assert_eq!(n.body["model"], "route");
        // Renaming onto a key the client wrote keeps the client's.
        let n = native(json!({"max_tokens": 1, "max_completion_tokens": 2}));
        let mut b = NativeBody::new(&n, "m", false);
        b.rename("max_tokens", "max_completion_tokens");
        let out: Value = serde_json::from_slice(&b.to_vec().unwrap()).unwrap();
        assert_eq!(
            out,
            json!({"model": "m", "max_tokens": 1, "max_completion_tokens": 2})
        );
    }
}
