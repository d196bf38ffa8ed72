//! A Messages API answer: read from a provider, rendered for a client.

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::{finish_reason, stop_reason_name, OutUsage, WireUsage};
use crate::chat::{ChatResponse, Dialect, RawJson, Thinking, ToolCall};
use crate::format::wire::{self, required, Loose, Obj, Str};
use crate::format::{index, join, FormatError, Read};

/// A Messages API answer as it arrives, and the members that make it an
/// error object instead.
#[derive(Deserialize)]
struct Answer<'a> {
    #[serde(borrow)]
    content: Option<Vec<Obj<AnswerBlock<'a>>>>,
    model: Option<String>,
    #[serde(borrow)]
    stop_reason: Option<Str<'a>>,
    usage: Option<Obj<WireUsage>>,
    error: Option<IgnoredAny>,
    #[serde(default, borrow)]
    object: Loose<'a>,
    #[serde(default, borrow, rename = "type")]
    kind: Loose<'a>,
}

/// A content block: text, tool calls and thinking are read; any other type
/// (server tools, their results) has no neutral form and is skipped.
#[derive(Deserialize)]
struct AnswerBlock<'a> {
    #[serde(borrow, rename = "type")]
    kind: Option<Str<'a>>,
    text: Option<String>,
    id: Option<String>,
    name: Option<String>,
    input: Option<Value>,
    thinking: Option<String>,
    signature: Option<String>,
    data: Option<String>,
}

/// Reads a Messages API answer: [`Read::Error`] when the body is an error
/// object, for the classifier to read. `raw` keeps the body's text.
pub fn decode_response(body: &[u8]) -> Result<Read<ChatResponse>, FormatError> {
    let Obj(a) = wire::read::<Obj<Answer<'_>>>(body)?;
    if wire::says_error(&a.error, &a.object, &a.kind) {
        return Ok(Read::Error);
    }
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    let mut thinking = Vec::new();
    for (i, Obj(b)) in required(a.content, || "content".into())?
        .into_iter()
        .enumerate()
    {
        let at = |key: &str| join(&index("content", i), key);
        match required(b.kind, || at("type"))?.as_str() {
            "text" => text.push_str(&required(b.text, || at("text"))?),
            "tool_use" => tool_calls.push(ToolCall {
                id: required(b.id, || at("id"))?,
                name: required(b.name, || at("name"))?,
                arguments: b.input.map_or_else(|| "{}".into(), |v| v.to_string()),
            }),
            "thinking" => thinking.push(Thinking {
                text: required(b.thinking, || at("thinking"))?,
                signature: b.signature.filter(|s| !s.is_empty()),
                redacted: None,
            }),
            "redacted_thinking" => thinking.push(Thinking {
                redacted: Some(required(b.data, || at("data"))?),
                ..Thinking::default()
            }),
            _ => {}
        }
    }
    Ok(Read::Answer(ChatResponse {
        text,
        tool_calls,
        thinking,
        model: a.model.unwrap_or_default(),
        provider: String::new(),
        finish_reason: a.stop_reason.map(|r| finish_reason(r.as_str())),
        usage: a.usage.map(|Obj(u)| u.into()),
        raw: Some(
            RawJson::from_slice(body).map_err(|e| FormatError::malformed("", e.to_string()))?,
        ),
        dialect: Some(Dialect::Anthropic),
    }))
}

/// A Messages API `message` object, as [`render_response`] renders it;
/// serialize it to answer.
#[derive(Debug, Serialize)]
pub struct ResponseBody<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    role: &'static str,
    content: Vec<OutBlock<'a>>,
    model: &'a str,
    stop_reason: Option<&'a str>,
    /// Always `null`.
    stop_sequence: (),
    /// Absent when the provider reported none: no invented zeros.
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<OutUsage>,
}

/// A content block of an answer.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum OutBlock<'a> {
    /// Reasoning; `signature` is empty for a block the provider did not
    /// sign (an OpenAI-compatible provider's reasoning text).
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    RedactedThinking {
        data: &'a str,
    },
    Text {
        text: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Value,
    },
}

/// Renders a neutral answer as a Messages API `message` object. `model` in
/// the output is the model that actually answered. Fails when a tool call's
/// arguments are not a JSON object (an Anthropic client needs one).
pub fn render_response<'a>(
    resp: &'a ChatResponse,
    id: &'a str,
) -> Result<ResponseBody<'a>, FormatError> {
    let mut content = Vec::with_capacity(resp.thinking.len() + resp.tool_calls.len() + 1);
    for t in &resp.thinking {
        content.push(match &t.redacted {
            Some(data) => OutBlock::RedactedThinking { data },
            None => OutBlock::Thinking {
                thinking: &t.text,
                signature: t.signature.as_deref().unwrap_or_default(),
            },
        });
    }
    if !resp.text.is_empty() || resp.tool_calls.is_empty() {
        content.push(OutBlock::Text { text: &resp.text });
    }
    for (i, c) in resp.tool_calls.iter().enumerate() {
        let path = join(&index("tool_calls", i), "arguments");
        let input: Value = if c.arguments.trim().is_empty() {
            json!({})
        } else {
            serde_json::from_str(&c.arguments)
                .map_err(|e| FormatError::unsupported(&path, format!("not valid JSON: {e}")))?
        };
        if !input.is_object() {
            return Err(FormatError::unsupported(path, "not a JSON object"));
        }
        content.push(OutBlock::ToolUse {
            id: &c.id,
            name: &c.name,
            input,
        });
    }
    Ok(ResponseBody {
        id,
        kind: "message",
        role: "assistant",
        content,
        model: &resp.model,
        stop_reason: resp.finish_reason.as_ref().map(stop_reason_name),
        stop_sequence: (),
        usage: resp.usage.map(OutUsage::from),
    })
}
