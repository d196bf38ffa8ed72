//! Wire formats: the OpenAI Chat Completions and Anthropic Messages JSON,
//! translated to and from the neutral [`ChatRequest`](crate::ChatRequest) and
//! [`ChatResponse`](crate::ChatResponse), both ways.
//!
//! The same functions serve two sides:
//! - the *outbound* side, where a provider adapter renders a neutral request
//!   in its provider's format and reads the provider's answer back;
//! - the *inbound* side, where a gateway reads a client's request in either
//!   format and renders the neutral answer (or an error) in the format the
//!   client spoke, whichever provider answered.
//!
//! Streams translate the same way, one piece at a time:
//! [`openai::stream`] and [`anthropic::stream`] read a provider's stream
//! events into neutral [`Delta`](crate::Delta)s and render deltas as the
//! stream a client of either format expects.
//!
//! Provider answers and stream events are read into typed wire structs
//! that borrow from the body (`wire` has their shared pieces), and
//! requests, answers and stream pieces are written from typed structs; a
//! client's request is read from a [`serde_json::Value`] by a path-aware
//! walker (`Fields`).
//!
//! Everything here is pure JSON work. Parsing a client's request fails only
//! on malformed input; what the neutral request cannot hold is recorded on
//! it ([`ChatRequest::untranslated`](crate::ChatRequest::untranslated)),
//! and an encoder for the other dialect refuses it as a [`FormatError`]
//! naming the field, or, for a mere hint, names it in its `omitted` list:
//! never a silent drop. `mapping` holds the tables (reasoning effort and
//! thinking budgets, service tiers, image URLs); `structured` turns the
//! forced tool of a structured answer back into the answer's text.

pub mod anthropic;
pub(crate) mod endpoints;
pub mod gemini;
mod inbound;
pub(crate) mod mapping;
pub mod openai;
pub mod responses;
pub(crate) mod structured;
pub(crate) mod wire;

use serde_json::{Map, Value};

use crate::chat::Usage;
use crate::error::{ErrorKind, ProviderError};

/// Why a request or response could not be read or translated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", if path.is_empty() { "body" } else { path.as_str() })]
pub struct FormatError {
    /// Whether the input was malformed or merely untranslatable.
    pub kind: FormatErrorKind,
    /// The offending field, as `messages[2].content`; empty for the whole body.
    pub path: String,
    /// What is wrong, for humans.
    pub message: String,
}

/// The two ways a translation fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormatErrorKind {
    /// Not valid JSON, a wrong type, a missing or unknown field.
    Malformed,
    /// Well-formed, but the neutral format (or the target provider) cannot
    /// express it: images, audio, several choices, ….
    Unsupported,
}

impl FormatError {
    /// A malformed field.
    pub fn malformed(path: impl Into<String>, message: impl Into<String>) -> Self {
        FormatError {
            kind: FormatErrorKind::Malformed,
            path: path.into(),
            message: message.into(),
        }
    }

    /// An untranslatable field.
    pub fn unsupported(path: impl Into<String>, message: impl Into<String>) -> Self {
        FormatError {
            kind: FormatErrorKind::Unsupported,
            path: path.into(),
            message: message.into(),
        }
    }

    /// The HTTP status to answer a client with: always 400.
    pub fn status(&self) -> u16 {
        400
    }

    /// As the error of a request that cannot be sent: malformed input is
    /// [`ErrorKind::InvalidRequest`], untranslatable input
    /// [`ErrorKind::Unsupported`] (another provider may take it).
    pub fn into_request_error(self) -> ProviderError {
        let kind = match self.kind {
            FormatErrorKind::Malformed => ErrorKind::InvalidRequest,
            FormatErrorKind::Unsupported => ErrorKind::Unsupported,
        };
        ProviderError::new(kind, self.to_string())
    }

    /// As the error of a provider answer that could not be read
    /// ([`ErrorKind::Decode`]).
    pub(crate) fn into_decode_error(self, status: u16) -> ProviderError {
        ProviderError::new(ErrorKind::Decode, format!("response {self}")).with_status(status)
    }
}

/// What a typed read of a provider's body or stream event found.
#[derive(Debug, Clone, PartialEq)]
pub enum Read<T> {
    /// The answer, or the event's deltas.
    Answer(T),
    /// An error object (`error`, `"type": "error"`, `"object": "error"`, or
    /// an OpenRouter error in the first choice): not an answer, and the
    /// classifier's to read.
    Error,
}

/// Folds a streamed usage report into the counts so far: each non-zero
/// count, and each detail given, replaces the earlier one (Anthropic
/// reports input tokens in `message_start` and output tokens in
/// `message_delta`).
pub(crate) fn merge_usage(acc: &mut Option<Usage>, new: Usage) {
    let u = acc.get_or_insert_with(Usage::default);
    if new.input_tokens > 0 {
        u.input_tokens = new.input_tokens;
    }
    if new.output_tokens > 0 {
        u.output_tokens = new.output_tokens;
    }
    for (to, from) in [
        (&mut u.cached_input_tokens, new.cached_input_tokens),
        (
            &mut u.cache_write_input_tokens,
            new.cache_write_input_tokens,
        ),
        (&mut u.reasoning_tokens, new.reasoning_tokens),
    ] {
        if from.is_some() {
            *to = from;
        }
    }
}

/// Parses a JSON body.
pub(crate) fn parse_json(bytes: &[u8]) -> Result<Value, FormatError> {
    serde_json::from_slice(bytes)
        .map_err(|e| FormatError::malformed("", format!("malformed JSON: {e}")))
}

/// `path.key`, or `key` at the top.
pub(crate) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// `path[i]`.
pub(crate) fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

/// The JSON type of `v`, for messages.
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Typed, path-aware access to a JSON object's fields. A `null` field reads
/// as absent.
pub(crate) struct Fields<'a> {
    map: &'a Map<String, Value>,
    path: String,
}

impl<'a> Fields<'a> {
    /// `v` as an object, or an error at `path`.
    pub(crate) fn of(v: &'a Value, path: impl Into<String>) -> Result<Self, FormatError> {
        let path = path.into();
        match v {
            Value::Object(map) => Ok(Fields { map, path }),
            other => Err(FormatError::malformed(
                path,
                format!("expected an object, got {}", type_name(other)),
            )),
        }
    }

    /// The path of field `key`.
    pub(crate) fn path(&self, key: &str) -> String {
        join(&self.path, key)
    }

    /// The field names present.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &'a str> {
        self.map.keys().map(String::as_str)
    }

    /// The field, `None` when absent or null.
    pub(crate) fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    fn wrong(&self, key: &str, expected: &str, got: &Value) -> FormatError {
        FormatError::malformed(
            self.path(key),
            format!("expected {expected}, got {}", type_name(got)),
        )
    }

    /// A required field.
    pub(crate) fn required(&self, key: &str) -> Result<&'a Value, FormatError> {
        self.get(key)
            .ok_or_else(|| FormatError::malformed(self.path(key), "required"))
    }

    /// An optional string.
    pub(crate) fn str(&self, key: &str) -> Result<Option<&'a str>, FormatError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(self.wrong(key, "a string", v)),
        }
    }

    /// A required string.
    pub(crate) fn req_str(&self, key: &str) -> Result<&'a str, FormatError> {
        self.str(key)?
            .ok_or_else(|| FormatError::malformed(self.path(key), "required"))
    }

    /// An optional number.
    pub(crate) fn f64(&self, key: &str) -> Result<Option<f64>, FormatError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Number(n)) => Ok(n.as_f64()),
            Some(v) => Err(self.wrong(key, "a number", v)),
        }
    }

    /// An optional non-negative integer that fits 32 bits.
    pub(crate) fn u32(&self, key: &str) -> Result<Option<u32>, FormatError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .map(Some)
                .ok_or_else(|| self.wrong(key, "a non-negative integer", v)),
        }
    }

    /// An optional boolean.
    pub(crate) fn bool(&self, key: &str) -> Result<Option<bool>, FormatError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(self.wrong(key, "a boolean", v)),
        }
    }

    /// An optional array.
    pub(crate) fn array(&self, key: &str) -> Result<Option<&'a [Value]>, FormatError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(a)) => Ok(Some(a)),
            Some(v) => Err(self.wrong(key, "an array", v)),
        }
    }

    /// An optional object.
    pub(crate) fn object(&self, key: &str) -> Result<Option<Fields<'a>>, FormatError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => Fields::of(v, self.path(key)).map(Some),
        }
    }

    /// A required object.
    pub(crate) fn req_object(&self, key: &str) -> Result<Fields<'a>, FormatError> {
        self.object(key)?
            .ok_or_else(|| FormatError::malformed(self.path(key), "required"))
    }
}

/// `gaps` with the values of those that are top-level fields of `f`, for
/// an encoder of the same dialect to send as they came.
pub(crate) fn with_values(
    mut gaps: Vec<crate::chat::Untranslated>,
    f: &Fields<'_>,
) -> Vec<crate::chat::Untranslated> {
    for u in &mut gaps {
        u.value = f.get(&u.path).cloned();
    }
    gaps
}

/// The neutral `metadata.user_id`, the one piece of caller metadata every
/// format carries.
pub(crate) fn user_id(metadata: Option<&Value>) -> Option<&str> {
    metadata?.get("user_id")?.as_str()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_field() {
        let v: Value = serde_json::json!({"a": 1, "n": null});
        let f = Fields::of(&v, "messages[2]").unwrap();
        let e = f.str("a").unwrap_err();
        assert_eq!(
            e.to_string(),
            "messages[2].a: expected a string, got a number"
        );
        assert_eq!(f.str("n").unwrap(), None);
        assert_eq!(
            f.req_str("b").unwrap_err().to_string(),
            "messages[2].b: required"
        );
        let e = parse_json(b"{").unwrap_err();
        assert!(e.to_string().starts_with("body: malformed JSON"));
    }
}
