//! The OpenAI Responses format (`POST /v1/responses`), a client format.
//!
//! Inbound: [`request_from_value`] reads a client's request into the
//! neutral one; [`render_response`] answers it with a Response object and
//! `ResponsesStreamEncoder` with the typed stream events
//! (`response.created` … `response.completed`, each with its
//! `sequence_number`). Errors are the Chat Completions error object
//! ([`openai::render_error`](super::openai::render_error)), as the
//! Responses API answers them.
//!
//! The neutral request holds what both provider dialects can serve: text,
//! images, function tools and their calls and outputs, `instructions`,
//! `max_output_tokens`, `text.format` (structured output), `reasoning`.
//! What it cannot hold is recorded in
//! [`ChatRequest::untranslated`](crate::ChatRequest::untranslated) in the
//! [`Dialect::Responses`](crate::chat::Dialect::Responses) dialect, so a
//! Chat Completions or Messages encoder refuses it (hosted tools, stored
//! state: `previous_response_id`, `conversation`, `store: true`, item
//! references) or omits it by name (hints such as `include`, `truncation`,
//! `text.verbosity`, reasoning items of earlier turns). A provider that
//! speaks Responses is sent the client's own body instead.

mod decode;
mod echo;
mod parse;
mod response;
mod stream;

pub(crate) use decode::{decode_event, decode_response};
pub use echo::Echo;
pub use parse::request_from_value;
pub use response::render_response;
pub(crate) use stream::ResponsesStreamEncoder;
pub(crate) use stream::{Followed, OpenItem};

use crate::chat::{FinishReason, Usage};
use serde::Serialize;

/// A Responses `usage` object. The token details appear only where the
/// provider reported them.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub(crate) struct OutUsage {
    input_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    input_tokens_details: Option<InputDetails>,
    output_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_tokens_details: Option<OutputDetails>,
    total_tokens: u64,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
struct InputDetails {
    cached_tokens: u64,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
struct OutputDetails {
    reasoning_tokens: u64,
}

impl From<Usage> for OutUsage {
    fn from(u: Usage) -> Self {
        OutUsage {
            input_tokens: u.input_tokens,
            input_tokens_details: u
                .cached_input_tokens
                .map(|cached_tokens| InputDetails { cached_tokens }),
            output_tokens: u.output_tokens,
            output_tokens_details: u
                .reasoning_tokens
                .map(|reasoning_tokens| OutputDetails { reasoning_tokens }),
            total_tokens: u.input_tokens.saturating_add(u.output_tokens),
        }
    }
}

/// A Response's `status` and `incomplete_details.reason` for a finish
/// reason: a token limit or a content filter leaves it `incomplete`.
pub(crate) fn status_of(reason: Option<&FinishReason>) -> (&'static str, Option<&'static str>) {
    match reason {
        Some(FinishReason::Length) => ("incomplete", Some("max_output_tokens")),
        Some(FinishReason::ContentFilter) => ("incomplete", Some("content_filter")),
        Some(FinishReason::Stop | FinishReason::ToolCalls | FinishReason::Other(_)) | None => {
            ("completed", None)
        }
    }
}
