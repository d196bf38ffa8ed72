//! The Anthropic Messages format (`POST /v1/messages`).
//!
//! Inbound: [`parse_request`] reads a client's request, [`render_response`]
//! and [`render_error`] answer it. Outbound: [`encode_request`] and
//! [`decode_response`] are what the Anthropic adapter sends and reads.
//!
//! The neutral format keeps system messages and tool results as messages
//! of their own; here system text is lifted into the top-level `system`,
//! tool results travel as `tool_result` blocks of user messages, and
//! consecutive messages of one role are merged, as the Messages API requires.
//!
//! Usage: Anthropic's `input_tokens` counts only uncached input; the
//! neutral [`Usage`] counts every input token, so the cache reads and
//! writes are added in on the way in and taken out on the way out.

mod encode;
mod parse;
mod response;
pub mod stream;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::chat::{FinishReason, Usage};

pub use encode::{encode_request, RequestBody, ANSWER_TOOL};
pub use parse::{parse_request, request_from_value};
pub use response::{decode_response, render_response, ResponseBody};

/// How a structured answer (`response_format` `json_object` /
/// `json_schema`) is asked of an Anthropic model: per model, in
/// configuration (`models.<m>.structuredOutput`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StructuredOutput {
    /// A forced tool named after the schema, whose input is the answer
    /// (every model; the default). The answer is given back as text.
    #[default]
    Tool,
    /// Anthropic's own `output_config: {"format": {"type": "json_schema",
    /// "schema"}}` (models that support it). A `json_object` request has no schema to
    /// give and still uses the tool.
    Native,
}

/// What the Anthropic encoder needs besides the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodeOptions {
    /// The `max_tokens` sent when the request has none (the API requires
    /// one).
    pub default_max_tokens: u32,
    /// How a structured answer is asked for.
    pub structured_output: StructuredOutput,
}

/// `usage` of an answer, or of a stream's `message_start` and
/// `message_delta`.
#[derive(Deserialize)]
pub(crate) struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
}

impl From<WireUsage> for Usage {
    fn from(u: WireUsage) -> Usage {
        let read = u.cache_read_input_tokens;
        let written = u.cache_creation_input_tokens;
        Usage {
            input_tokens: u
                .input_tokens
                .unwrap_or(0)
                .saturating_add(read.unwrap_or(0))
                .saturating_add(written.unwrap_or(0)),
            output_tokens: u.output_tokens.unwrap_or(0),
            cached_input_tokens: read,
            cache_write_input_tokens: written,
            reasoning_tokens: None,
        }
    }
}

/// `usage` as an answer or a stream event reports it: `input_tokens`
/// without the cached ones.
#[derive(Debug, Serialize)]
pub(crate) struct OutUsage {
    input_tokens: u64,
    output_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_read_input_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_creation_input_tokens: Option<u64>,
}

impl From<Usage> for OutUsage {
    fn from(u: Usage) -> OutUsage {
        OutUsage {
            input_tokens: uncached_input(&u),
            output_tokens: u.output_tokens,
            cache_read_input_tokens: u.cached_input_tokens,
            cache_creation_input_tokens: u.cache_write_input_tokens,
        }
    }
}

/// The input tokens Anthropic calls `input_tokens`: those neither read
/// from nor written to the cache.
pub(crate) fn uncached_input(u: &Usage) -> u64 {
    u.input_tokens
        .saturating_sub(u.cached_input_tokens.unwrap_or(0))
        .saturating_sub(u.cache_write_input_tokens.unwrap_or(0))
}

/// A Messages API `stop_reason` in the neutral form.
pub fn finish_reason(r: &str) -> FinishReason {
    match r {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "tool_use" => FinishReason::ToolCalls,
        "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_string()),
    }
}

/// The Messages API `stop_reason` of a neutral reason.
pub fn stop_reason_name(r: &FinishReason) -> &str {
    match r {
        FinishReason::Stop => "end_turn",
        FinishReason::Length => "max_tokens",
        FinishReason::ToolCalls => "tool_use",
        FinishReason::ContentFilter => "refusal",
        FinishReason::Other(other) => other.as_str(),
    }
}

/// The Anthropic error `type` for an HTTP status.
pub(crate) fn error_type(status: u16) -> &'static str {
    match status {
        401 => "authentication_error",
        402 => "billing_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        400..=499 => "invalid_request_error",
        _ => "api_error",
    }
}

/// Renders an error the way the Anthropic API does:
/// `{"type": "error", "error": {"type", "message"}}`.
pub fn render_error(status: u16, message: &str) -> Value {
    json!({"type": "error", "error": {"type": error_type(status), "message": message}})
}
