//! The JS shapes of requests and responses, and their translation to and
//! from the core's [`ChatRequest`] and [`ChatResponse`].
//!
//! JS values come in through `JSON.stringify` and the crate's JSON reader
//! (the readers of [`crate::json::js`]): that rejects cycles and BigInts
//! with a JS exception instead of recursing without end, bounds the nesting
//! depth, and names the path of a mistake (`messages[0].role: unknown
//! variant "admin"`). Values go out as JSON text through `JSON.parse`.

use js_sys::{Object, Reflect, JSON};
use serde_json::Value;
use wasm_bindgen::prelude::*;

use crate::chain::Reply;
use crate::chat::{ChatRequest, ChatResponse};
use crate::config::read::{read_json, Node, R};
use crate::config::{ConfigError, ConfigIssue};
use crate::error::{ErrorKind, ProviderError};
use crate::js::errors::{prop, to_js};
use crate::json::js::{read_response, RESPONSE_FIELDS};
use crate::web::error_message;

/// `JSON.stringify(value)`, with the failure as a message.
pub(crate) fn stringify(value: &JsValue) -> Result<String, String> {
    match JSON::stringify(value) {
        Ok(s) => s
            .as_string()
            .ok_or_else(|| "not representable as JSON".to_string()),
        Err(e) => Err(error_message(&e)),
    }
}

/// Reads a JS value with `read`, naming the path of the first mismatch.
pub(crate) fn from_js<T>(value: &JsValue, read: fn(&Node<'_>) -> R<T>) -> Result<T, ConfigError> {
    let json = stringify(value).map_err(|m| ConfigError {
        issues: vec![ConfigIssue::new("(root)", m)],
    })?;
    read_json(&json, read).map_err(|(path, message)| {
        without_position(ConfigError {
            issues: vec![ConfigIssue::new(path, message)],
        })
    })
}

/// Drops serde_json's ` at line 1 column 79`: meaningless for a JS object
/// (the text is our `JSON.stringify`), and the path says where already.
pub(crate) fn without_position(mut e: ConfigError) -> ConfigError {
    for issue in &mut e.issues {
        if let Some(i) = crate::text::rfind(&issue.message, " at line ") {
            let tail = issue
                .message
                .get(i + " at line ".len()..)
                .unwrap_or_default();
            if crate::text::contains(tail, " column ")
                && tail.chars().all(|c| c.is_ascii_alphanumeric() || c == ' ')
            {
                issue.message.truncate(i);
            }
        }
    }
    e
}

/// What a JS provider's `chat(request, signal)` receives.
pub(crate) fn provider_request(req: &ChatRequest, model: &str) -> JsValue {
    to_js(|j| crate::json::js::provider_request(j, req, model))
}

pub(crate) fn provider_response(v: &JsValue, model: &str) -> Result<ChatResponse, ProviderError> {
    let decode_error =
        |m: String| ProviderError::new(ErrorKind::Decode, format!("the provider's response: {m}"));
    if !v.is_object() {
        return Err(decode_error(
            "expected an object like { text, model }".to_string(),
        ));
    }
    // Only the known fields go through JSON: `raw` may be anything.
    let known = Object::new();
    for key in RESPONSE_FIELDS {
        let value = prop(v, key);
        if !value.is_undefined() && !value.is_null() {
            let _ = Reflect::set(&known, &key.into(), &value);
        }
    }
    let (mut parsed, given) = from_js(&known, read_response).map_err(|e| {
        decode_error(crate::text::replace(
            &e.to_string(),
            "invalid configuration: ",
            "",
        ))
    })?;
    parsed.model = given.unwrap_or_else(|| model.to_string());
    let raw = prop(v, "raw");
    if !raw.is_undefined() {
        parsed.raw = stringify(&raw)
            .ok()
            .and_then(|s| read_json(&s, |n| Ok(n.to_value())).ok())
            .and_then(|v: Value| crate::chat::RawJson::from_value(&v).ok());
    }
    Ok(parsed)
}

/// `await client.chat(…)`.
pub(crate) fn chat_result(reply: &Reply) -> JsValue {
    to_js(|j| crate::json::js::chat_result(j, reply))
}
