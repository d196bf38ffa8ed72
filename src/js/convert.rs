//! The JS shapes of requests and responses, and their translation to and
//! from the core's [`ChatRequest`] and [`ChatResponse`].
//!
//! JS values come in through `JSON.stringify` and [`config::parse_json`]:
//! that rejects cycles and BigInts with a JS exception instead of recursing
//! without end, bounds the nesting depth, and names the path of a mistake
//! (`messages[0].role: unknown variant "admin"`).

use js_sys::{Object, Reflect, JSON};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use wasm_bindgen::prelude::*;

use crate::chain::Reply;
use crate::chat::{
    ChatRequest, ChatResponse, FinishReason, Message, Part, Role, Tool, ToolCall, ToolChoice, Usage,
};
use crate::config::{parse_json, ConfigError, ConfigIssue};
use crate::error::{ErrorKind, ProviderError};
use crate::js::errors::{prop, AttemptJs};
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

/// Parses a JS value as `T`, naming the path of the first mismatch.
pub(crate) fn from_js<T: for<'de> Deserialize<'de>>(value: &JsValue) -> Result<T, ConfigError> {
    let json = stringify(value).map_err(|m| ConfigError {
        issues: vec![ConfigIssue::new("(root)", m)],
    })?;
    parse_json(&json).map_err(without_position)
}

/// Drops serde_json's ` at line 1 column 79`: meaningless for a JS object
/// (the text is our `JSON.stringify`), and the path says where already.
pub(crate) fn without_position(mut e: ConfigError) -> ConfigError {
    for issue in &mut e.issues {
        if let Some(i) = issue.message.rfind(" at line ") {
            let tail = &issue.message[i + " at line ".len()..];
            if tail.contains(" column ")
                && tail.chars().all(|c| c.is_ascii_alphanumeric() || c == ' ')
            {
                issue.message.truncate(i);
            }
        }
    }
    e
}

/// A message's content: a string, or parts.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Part>),
}

// By hand rather than `untagged`: no buffering of the value, a clear
// message, and a fraction of the code.
impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Content;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string or an array of parts")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Content, E> {
                Ok(Content::Text(s.to_string()))
            }
            fn visit_string<E: serde::de::Error>(self, s: String) -> Result<Content, E> {
                Ok(Content::Text(s))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Content, A::Error> {
                let mut parts = Vec::new();
                while let Some(p) = seq.next_element::<Part>()? {
                    parts.push(p);
                }
                Ok(Content::Parts(parts))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Deserialize, Serialize)]
struct JsMessage {
    role: Role,
    content: Content,
}

/// `client.chat(request)`: the articles' request, plus the core's options.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct JsRequest {
    #[serde(default)]
    model: Option<String>,
    messages: Vec<JsMessage>,
    #[serde(default)]
    max_tokens: Option<u32>,
    #[serde(default)]
    temperature: Option<f64>,
    #[serde(default)]
    top_p: Option<f64>,
    #[serde(default)]
    stop: Vec<String>,
    #[serde(default)]
    tools: Vec<Tool>,
    #[serde(default)]
    tool_choice: Option<ToolChoice>,
    #[serde(default)]
    metadata: Option<Value>,
}

impl From<JsRequest> for ChatRequest {
    fn from(r: JsRequest) -> Self {
        ChatRequest {
            model: r.model,
            messages: r
                .messages
                .into_iter()
                .map(|m| Message {
                    role: m.role,
                    content: match m.content {
                        Content::Text(text) => vec![Part::Text { text }],
                        Content::Parts(parts) => parts,
                    },
                })
                .collect(),
            max_tokens: r.max_tokens,
            temperature: r.temperature,
            top_p: r.top_p,
            stop: r.stop,
            tools: r.tools,
            tool_choice: r.tool_choice,
            stream: false,
            metadata: r.metadata,
        }
    }
}

/// What a JS provider's `chat(request, signal)` receives: the request with
/// the entry's `model`, and text-only messages as plain strings.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ProviderRequest<'a> {
    model: &'a str,
    messages: Vec<JsMessage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    stop: &'a [String],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    tools: &'a [Tool],
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<&'a ToolChoice>,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<&'a Value>,
}

pub(crate) fn provider_request(req: &ChatRequest, model: &str) -> JsValue {
    let messages = req
        .messages
        .iter()
        .map(|m| JsMessage {
            role: m.role,
            content: if m.content.iter().all(|p| matches!(p, Part::Text { .. })) {
                Content::Text(m.joined_text())
            } else {
                Content::Parts(m.content.clone())
            },
        })
        .collect();
    super::errors::to_js(&ProviderRequest {
        model,
        messages,
        max_tokens: req.max_tokens,
        temperature: req.temperature,
        top_p: req.top_p,
        stop: &req.stop,
        tools: &req.tools,
        tool_choice: req.tool_choice.as_ref(),
        metadata: req.metadata.as_ref(),
    })
}

/// What a JS provider resolves with: the articles' `{ text, model }`, plus
/// optional tool calls, finish reason and usage. Other fields (`provider`,
/// `raw`) are allowed; `raw` is kept when it is JSON.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ProviderResponse {
    #[serde(default)]
    text: String,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    tool_calls: Vec<ToolCall>,
    #[serde(default)]
    finish_reason: Option<String>,
    #[serde(default)]
    usage: Option<Usage>,
}

const RESPONSE_FIELDS: [&str; 5] = ["text", "model", "toolCalls", "finishReason", "usage"];

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
    let parsed: ProviderResponse = from_js(&known)
        .map_err(|e| decode_error(e.to_string().replace("invalid configuration: ", "")))?;
    let raw = match prop(v, "raw") {
        r if r.is_undefined() => Value::Null,
        r => stringify(&r)
            .ok()
            .and_then(|s| serde_json::from_str(&s).ok())
            .unwrap_or(Value::Null),
    };
    Ok(ChatResponse {
        text: parsed.text,
        tool_calls: parsed.tool_calls,
        model: parsed.model.unwrap_or_else(|| model.to_string()),
        provider: String::new(),
        finish_reason: parsed.finish_reason.map(|r| finish_reason(&r)),
        usage: parsed.usage,
        raw,
    })
}

fn finish_reason(s: &str) -> FinishReason {
    match s {
        "stop" | "end_turn" | "stop_sequence" => FinishReason::Stop,
        "length" | "max_tokens" => FinishReason::Length,
        "tool_calls" | "tool_use" => FinishReason::ToolCalls,
        "content_filter" | "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_string()),
    }
}

fn finish_reason_name(r: &FinishReason) -> &str {
    match r {
        FinishReason::Stop => "stop",
        FinishReason::Length => "length",
        FinishReason::ToolCalls => "tool_calls",
        FinishReason::ContentFilter => "content_filter",
        FinishReason::Other(s) => s,
    }
}

/// `await client.chat(…)`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ChatResult<'a> {
    text: &'a str,
    model: &'a str,
    provider: &'a str,
    served_by: &'a crate::chain::ServedBy,
    attempts: Vec<AttemptJs<'a>>,
    usage: Option<&'a Usage>,
    finish_reason: Option<&'a str>,
    tool_calls: &'a [ToolCall],
    raw: &'a Value,
}

pub(crate) fn chat_result(reply: &Reply) -> JsValue {
    let r = &reply.response;
    super::errors::to_js(&ChatResult {
        text: &r.text,
        model: &r.model,
        provider: &r.provider,
        served_by: &reply.served_by,
        attempts: reply.attempts.iter().map(AttemptJs::new).collect(),
        usage: r.usage.as_ref(),
        finish_reason: r.finish_reason.as_ref().map(finish_reason_name),
        tool_calls: &r.tool_calls,
        raw: &r.raw,
    })
}
