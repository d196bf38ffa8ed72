//! The OpenAI Chat Completions format (`POST /v1/chat/completions`).
//!
//! Inbound: [`parse_request`] reads a client's request, [`render_response`]
//! and [`render_error`] answer it. Outbound: [`encode_request`] and
//! [`decode_response`] are what the OpenAI adapter and every
//! OpenAI-compatible preset send and read.
//!
//! Parsing refuses only what is malformed. A field or content part it does
//! not know, or one the neutral request cannot hold (`n > 1`, `logprobs`,
//! audio, non-function tools, …), is recorded in
//! [`ChatRequest::untranslated`](crate::ChatRequest::untranslated): a
//! provider of this dialect is sent the client's own body, and an encoder
//! for another dialect refuses or omits it.
//!
//! Outbound, a neutral tool result's `is_error` has no OpenAI equivalent and
//! is not sent; results travel as `tool` messages in their original order,
//! and images a tool returned follow them in a user message.

mod encode;
mod parse;
mod response;
pub mod stream;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::chat::{FinishReason, ToolCall, Usage};

pub use encode::{encode_request, RequestBody};
pub use parse::{parse_request, request_from_value};
pub use response::{decode_response, render_response, ResponseBody};
pub(crate) use response::{OutThinking, WireThinking};

/// Which field carries the output token limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MaxTokensField {
    /// `max_tokens`: most OpenAI-compatible servers.
    MaxTokens,
    /// `max_completion_tokens`: OpenAI's current name (required by its
    /// reasoning models) and Azure's.
    MaxCompletionTokens,
}

/// Provider quirks that change the request body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodeOptions {
    /// Which field carries the output token limit.
    pub max_tokens_field: MaxTokensField,
    /// Whether a streamed request asks for usage
    /// (`stream_options.include_usage`).
    pub stream_usage: bool,
}

impl Default for EncodeOptions {
    fn default() -> Self {
        EncodeOptions {
            max_tokens_field: MaxTokensField::MaxTokens,
            stream_usage: false,
        }
    }
}

/// A tool call: `{"id", "type": "function", "function": {"name", "arguments"}}`.
#[derive(Debug, Serialize)]
pub(crate) struct OutCall<'a> {
    pub(crate) id: &'a str,
    #[serde(rename = "type")]
    pub(crate) kind: &'static str,
    pub(crate) function: OutFunction<'a>,
}

#[derive(Debug, Serialize)]
pub(crate) struct OutFunction<'a> {
    pub(crate) name: &'a str,
    pub(crate) arguments: &'a str,
}

impl<'a> OutCall<'a> {
    pub(crate) fn of(c: &'a ToolCall) -> Self {
        OutCall {
            id: &c.id,
            kind: "function",
            function: OutFunction {
                name: &c.name,
                arguments: &c.arguments,
            },
        }
    }
}

/// `usage` of an answer or of a stream's last chunk.
#[derive(Deserialize)]
pub(crate) struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    prompt_tokens_details: Option<crate::format::wire::Obj<PromptDetails>>,
    completion_tokens_details: Option<crate::format::wire::Obj<CompletionDetails>>,
}

#[derive(Deserialize)]
pub(crate) struct PromptDetails {
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
pub(crate) struct CompletionDetails {
    reasoning_tokens: Option<u64>,
}

impl From<WireUsage> for Usage {
    fn from(u: WireUsage) -> Usage {
        Usage {
            input_tokens: u.prompt_tokens.unwrap_or(0),
            output_tokens: u.completion_tokens.unwrap_or(0),
            cached_input_tokens: u.prompt_tokens_details.and_then(|d| d.0.cached_tokens),
            cache_write_input_tokens: None,
            reasoning_tokens: u
                .completion_tokens_details
                .and_then(|d| d.0.reasoning_tokens),
        }
    }
}

/// `usage` as an answer or a stream's usage chunk reports it. Tokens
/// written to a cache have no OpenAI field: they are counted in
/// `prompt_tokens`, as every input token is.
#[derive(Debug, Serialize)]
pub(crate) struct OutUsage {
    prompt_tokens: u64,
    completion_tokens: u64,
    total_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_tokens_details: Option<OutPromptDetails>,
    #[serde(skip_serializing_if = "Option::is_none")]
    completion_tokens_details: Option<OutCompletionDetails>,
}

#[derive(Debug, Serialize)]
struct OutPromptDetails {
    cached_tokens: u64,
}

#[derive(Debug, Serialize)]
struct OutCompletionDetails {
    reasoning_tokens: u64,
}

impl From<Usage> for OutUsage {
    fn from(u: Usage) -> OutUsage {
        OutUsage {
            prompt_tokens: u.input_tokens,
            completion_tokens: u.output_tokens,
            total_tokens: u.input_tokens.saturating_add(u.output_tokens),
            prompt_tokens_details: u
                .cached_input_tokens
                .map(|cached_tokens| OutPromptDetails { cached_tokens }),
            completion_tokens_details: u
                .reasoning_tokens
                .map(|reasoning_tokens| OutCompletionDetails { reasoning_tokens }),
        }
    }
}

/// A Chat Completions `finish_reason` in the neutral form.
pub fn finish_reason(r: &str) -> FinishReason {
    match r {
        "stop" => FinishReason::Stop,
        "length" => FinishReason::Length,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "content_filter" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_string()),
    }
}

/// The Chat Completions `finish_reason` of a neutral reason. A reason
/// OpenAI has no word for (Anthropic's `pause_turn`) keeps its name.
pub fn finish_reason_name(r: &FinishReason) -> &str {
    match r {
        FinishReason::Stop => "stop",
        FinishReason::Length => "length",
        FinishReason::ToolCalls => "tool_calls",
        FinishReason::ContentFilter => "content_filter",
        FinishReason::Other(other) => other.as_str(),
    }
}

/// The OpenAI error `type` for an HTTP status.
pub(crate) fn error_type(status: u16) -> &'static str {
    match status {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        429 => "rate_limit_error",
        400..=499 => "invalid_request_error",
        _ => "server_error",
    }
}

/// Renders an error the way the OpenAI API does:
/// `{"error": {"message", "type", "param", "code"}}`.
pub fn render_error(status: u16, message: &str, code: Option<&str>) -> Value {
    json!({
        "error": {
            "message": message,
            "type": error_type(status),
            "param": null,
            "code": code,
        }
    })
}
