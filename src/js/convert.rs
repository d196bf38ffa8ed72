//! The JS shapes of requests and responses, and their translation to and
//! from the core's [`ChatRequest`] and [`ChatResponse`].
//!
//! JS values come in through `JSON.stringify` and serde_json: that rejects
//! cycles and BigInts with a JS exception instead of recursing without end,
//! bounds the nesting depth, and names the path of a mistake
//! (`messages[0].role: unknown variant `admin``). Values go out as JSON
//! text through `JSON.parse`.

use js_sys::{Object, Reflect, JSON};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use wasm_bindgen::prelude::*;

use crate::chat::{ChatRequest, ChatResponse, FinishReason, Thinking, ToolCall, Usage};
use crate::engine::client::Reply;
use crate::error::{ErrorKind, ProviderError};
use crate::issue::{path_text, ConfigError, ConfigIssue};
use crate::js::errors::{prop, to_js};
use crate::js::request::JsRequest;
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

/// Reads a JS value as `T`, naming the path of the first mismatch.
fn from_js<T: DeserializeOwned>(value: &JsValue) -> Result<T, ConfigError> {
    let json = stringify(value).map_err(|m| ConfigError {
        issues: vec![ConfigIssue::new("(root)", m)],
    })?;
    parse_json(&json).map_err(without_position)
}

/// Parses JSON into `T`, naming the path of the first mismatch
/// (`messages[0].role: unknown variant `admin` at line 1 column 52`).
fn parse_json<'de, T: Deserialize<'de>>(json: &'de str) -> Result<T, ConfigError> {
    crate::json::read(json.as_bytes()).map_err(|m| ConfigError {
        issues: vec![ConfigIssue::new(path_text(&m.path), m.error.to_string())],
    })
}

/// Drops serde_json's ` at line 1 column 79`: meaningless for a JS object
/// (the text is our `JSON.stringify`), and the path says where already.
pub(crate) fn without_position(mut e: ConfigError) -> ConfigError {
    for issue in &mut e.issues {
        if let Some(i) = issue.message.rfind(" at line ") {
            let numbers = issue.message[i + " at line ".len()..].split_once(" column ");
            if matches!(numbers, Some((l, c)) if l.parse::<u64>().is_ok() && c.parse::<u64>().is_ok())
            {
                issue.message.truncate(i);
            }
        }
    }
    e
}

/// The request of `client.chat(request)` / `client.stream(request)`.
pub(crate) fn read_request(value: &JsValue) -> Result<ChatRequest, ConfigError> {
    from_js::<JsRequest>(value)?.into_request()
}

/// What a JS provider's `chat(request, signal)` receives.
pub(crate) fn provider_request(req: &ChatRequest, model: &str) -> JsValue {
    to_js(&crate::js::shapes::ProviderRequest::new(req, model))
}

/// What a JS provider resolves with: `{ text, model }`, plus optional tool
/// calls, finish reason, usage and thinking. Other fields (`provider`, `raw`) are
/// allowed; `raw` is read apart from these.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct JsAnswer {
    /// Required, unless the answer is tool calls only: an object without
    /// it is not an answer, and must fail over rather than pass as empty.
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    tool_calls: Vec<ToolCall>,
    #[serde(default)]
    finish_reason: Option<String>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    thinking: Vec<Thinking>,
}

/// The fields of [`JsAnswer`], as JS names them.
const ANSWER_FIELDS: [&str; 6] = [
    "text",
    "model",
    "toolCalls",
    "finishReason",
    "usage",
    "thinking",
];

/// A finish reason in OpenAI's or Anthropic's words.
fn finish_reason(s: &str) -> FinishReason {
    match s {
        "stop" | "end_turn" | "stop_sequence" => FinishReason::Stop,
        "length" | "max_tokens" => FinishReason::Length,
        "tool_calls" | "tool_use" => FinishReason::ToolCalls,
        "content_filter" | "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_string()),
    }
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
    for key in ANSWER_FIELDS {
        let value = prop(v, key);
        if !value.is_undefined() && !value.is_null() {
            let _ = Reflect::set(&known, &key.into(), &value);
        }
    }
    let answer: JsAnswer = from_js(&known).map_err(|e| {
        let issues: Vec<String> = e.issues.iter().map(ToString::to_string).collect();
        decode_error(issues.join("; "))
    })?;
    let text = match answer.text {
        Some(text) => text,
        None if !answer.tool_calls.is_empty() => String::new(),
        None => {
            return Err(decode_error(
                "`text` is missing: resolve with { text: string } (or `toolCalls`)".to_string(),
            ))
        }
    };
    let raw = prop(v, "raw");
    Ok(ChatResponse {
        text,
        tool_calls: answer.tool_calls,
        thinking: answer.thinking,
        model: answer.model.unwrap_or_else(|| model.to_string()),
        provider: String::new(),
        finish_reason: answer.finish_reason.as_deref().map(finish_reason),
        usage: answer.usage,
        // Kept when it is JSON.
        raw: stringify(&raw)
            .ok()
            .and_then(|s| crate::chat::RawJson::from_string(s).ok()),
        dialect: None,
    })
}

/// `await client.chat(…)`.
pub(crate) fn chat_result(reply: &Reply, prices: &crate::policy::price::Prices) -> JsValue {
    to_js(&crate::js::shapes::ChatResult::new(reply, prices))
}
