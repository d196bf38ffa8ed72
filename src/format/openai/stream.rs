//! The Chat Completions stream (`"stream": true`): `chat.completion.chunk`
//! objects in `data:` lines, ended by `data: [DONE]`.
//!
//! Outbound: [`decode_chunk`] reads one chunk of a provider's stream into
//! neutral [`Delta`]s. Inbound: [`OpenAiStreamEncoder`] renders the deltas
//! of any provider as the stream an OpenAI client expects.

use std::borrow::Cow;

use serde_json::json;

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

use super::{finish_reason, finish_reason_name, OutThinking, OutUsage, WireThinking, WireUsage};
use crate::chat::{Delta, FinishReason, Thinking, Usage};
use crate::error::{ErrorKind, ProviderError};
use crate::format::wire::{self, Arguments, First, Loose, Obj, Str};
use crate::format::{merge_usage, FormatError, Read};

// ---------------------------------------------------------------- outbound

/// A `chat.completion.chunk` as it arrives, and the members that make it
/// an error object instead.
#[derive(Deserialize)]
struct Chunk<'a> {
    /// Read only when a delta carries `role`.
    #[serde(borrow)]
    model: Option<Loose<'a>>,
    #[serde(borrow)]
    choices: Option<First<Obj<ChunkChoice<'a>>>>,
    usage: Option<Obj<WireUsage>>,
    error: Option<IgnoredAny>,
    #[serde(default, borrow)]
    object: Loose<'a>,
    #[serde(default, borrow, rename = "type")]
    kind: Loose<'a>,
}

#[derive(Deserialize)]
struct ChunkChoice<'a> {
    #[serde(borrow)]
    delta: Option<Obj<ChunkDelta<'a>>>,
    #[serde(borrow)]
    finish_reason: Option<Str<'a>>,
    error: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct ChunkDelta<'a> {
    #[serde(borrow)]
    role: Option<Str<'a>>,
    content: Option<String>,
    refusal: Option<String>,
    reasoning_content: Option<String>,
    reasoning: Option<String>,
    thinking_blocks: Option<Vec<Obj<WireThinking>>>,
    #[serde(borrow)]
    tool_calls: Option<Vec<Obj<ChunkCall<'a>>>>,
}

#[derive(Deserialize)]
struct ChunkCall<'a> {
    index: Option<u32>,
    #[serde(borrow)]
    id: Option<Str<'a>>,
    #[serde(borrow)]
    function: Option<Obj<ChunkFunction<'a>>>,
}

#[derive(Deserialize)]
struct ChunkFunction<'a> {
    #[serde(borrow)]
    name: Option<Str<'a>>,
    arguments: Option<Arguments>,
}

/// Reads one `chat.completion.chunk`: a delta carrying `role` is
/// [`Delta::Start`] with the chunk's `model`, then text (`content`, or
/// `refusal`), tool call fragments, the finish reason, and usage (the final
/// chunk of a stream asked for with `stream_options.include_usage`, whose
/// `choices` is empty). [`Read::Error`] when the chunk is an error object
/// (at the top, or OpenRouter's in its choice), for the classifier.
///
/// A tool call fragment without an `index` takes its position in the
/// chunk's `tool_calls`, as servers sending whole calls in one chunk do.
pub fn decode_chunk(data: &[u8]) -> Result<Read<Vec<Delta>>, FormatError> {
    let Obj(chunk) = wire::read::<Obj<Chunk<'_>>>(data)?;
    let first = chunk.choices.and_then(|f| f.0);
    let choice_error = first
        .as_ref()
        .is_some_and(|Obj(c)| c.error.is_some() || wire::is_error(c.finish_reason.as_ref()));
    if wire::says_error(&chunk.error, &chunk.object, &chunk.kind) || choice_error {
        return Ok(Read::Error);
    }
    let mut out = Vec::new();
    if let Some(Obj(c)) = first {
        if let Some(Obj(d)) = c.delta {
            if d.role.is_some() {
                let model = match &chunk.model {
                    Some(Loose(None)) => {
                        return Err(FormatError::malformed("model", "expected a string"))
                    }
                    Some(Loose(Some(m))) => Some(m.as_ref()).filter(|m| !m.is_empty()),
                    None => None,
                };
                out.push(Delta::Start {
                    model: model.map(str::to_string),
                });
            }
            // Reasoning text from `reasoning_content` (or `reasoning`);
            // `thinking_blocks` add only what the text lacks: signatures
            // and redacted blocks.
            if let Some(text) = d
                .reasoning_content
                .or(d.reasoning)
                .filter(|t| !t.is_empty())
            {
                out.push(Delta::Thinking(Thinking {
                    text,
                    ..Thinking::default()
                }));
            }
            for Obj(b) in d.thinking_blocks.unwrap_or_default() {
                if let Some(t) = b.into_thinking() {
                    if t.signature.is_some() || t.redacted.is_some() {
                        out.push(Delta::Thinking(Thinking {
                            text: String::new(),
                            ..t
                        }));
                    }
                }
            }
            for text in [d.content, d.refusal].into_iter().flatten() {
                if !text.is_empty() {
                    out.push(Delta::Text { text });
                }
            }
            for (i, Obj(call)) in d.tool_calls.unwrap_or_default().into_iter().enumerate() {
                let position = u32::try_from(i).unwrap_or(u32::MAX);
                let index = call.index.unwrap_or(position);
                let id = call.id.filter(|s| !s.as_str().is_empty());
                let (name, arguments) = match call.function {
                    Some(Obj(function)) => (
                        function.name.filter(|s| !s.as_str().is_empty()),
                        function.arguments.map(|a| a.0).unwrap_or_default(),
                    ),
                    None => (None, String::new()),
                };
                if id.is_some() || name.is_some() || !arguments.is_empty() {
                    out.push(Delta::ToolCall {
                        index,
                        id: id.map(|s| s.0.into_owned()),
                        name: name.map(|s| s.0.into_owned()),
                        arguments,
                    });
                }
            }
        }
        if let Some(reason) = c.finish_reason.filter(|r| !r.as_str().is_empty()) {
            out.push(Delta::Finish {
                reason: finish_reason(reason.as_str()),
            });
        }
    }
    if let Some(Obj(u)) = chunk.usage {
        out.push(Delta::Usage { usage: u.into() });
    }
    Ok(Read::Answer(out))
}

// ----------------------------------------------------------------- inbound

/// Renders neutral [`Delta`]s as the Chat Completions stream an OpenAI
/// client reads, whichever provider produced them.
///
/// - The first chunk's delta carries `"role": "assistant"`. [`Delta::Start`]
///   writes nothing: it only sets the `model` of later chunks (the model
///   that actually answers), so nothing is written before the first text,
///   tool call or finish reason.
/// - Tool calls are numbered 0, 1, … in order of first appearance, whatever
///   indices the provider used (Anthropic numbers content blocks, text
///   included); the first fragment of a call carries its `id`
///   (`call_<n>` when the provider gave none), `type` and `name`.
/// - Reasoning ([`Delta::Thinking`]) goes out as `delta.reasoning_content`
///   (the text) and `delta.thinking_blocks` (one entry per delta: the text
///   fragment, or the block's closing `signature`, or a redacted block), as
///   OpenAI-compatible gateways stream it.
/// - Usage is held until [`finish`](Self::finish), which writes the usage
///   chunk (empty `choices`) when `include_usage` was asked and any usage
///   is known, then `data: [DONE]`.
/// - A second finish reason, and text or tool calls after the finish
///   reason, are dropped; [`Delta::Done`] writes nothing (the caller ends
///   the stream with `finish`).
/// - After [`finish`](Self::finish) or [`error`](Self::error) every call
///   writes nothing.
#[derive(Debug, Clone)]
pub struct OpenAiStreamEncoder {
    id: String,
    created: u64,
    model: String,
    include_usage: bool,
    /// The role chunk has been written.
    started: bool,
    /// The provider's index of each call, at its position in the output.
    calls: Vec<u32>,
    usage: Option<Usage>,
    finished: bool,
    closed: bool,
}

impl OpenAiStreamEncoder {
    /// An encoder for the stream of completion `id` created at `created`
    /// (Unix seconds), answered by `model` until a [`Delta::Start`] names
    /// another; `include_usage` as the client's
    /// `stream_options.include_usage`.
    pub fn new(id: String, created: u64, model: String, include_usage: bool) -> Self {
        OpenAiStreamEncoder {
            id,
            created,
            model,
            include_usage,
            started: false,
            calls: Vec::new(),
            usage: None,
            finished: false,
            closed: false,
        }
    }

    /// The bytes for one delta (often none).
    pub fn delta(&mut self, d: &Delta) -> Vec<u8> {
        if self.closed {
            return Vec::new();
        }
        match d {
            Delta::Start { model } => {
                if let Some(m) = model.as_deref().filter(|m| !m.is_empty()) {
                    self.model = m.to_string();
                }
                Vec::new()
            }
            Delta::Text { text } => {
                if self.finished || text.is_empty() {
                    return Vec::new();
                }
                let delta = OutDelta {
                    content: Some(Some(text)),
                    ..OutDelta::default()
                };
                self.chunk(delta, None)
            }
            Delta::ToolCall {
                index,
                id,
                name,
                arguments,
            } => {
                if self.finished {
                    return Vec::new();
                }
                self.tool_call(*index, id.as_deref(), name.as_deref(), arguments)
            }
            Delta::Thinking(t) => {
                if self.finished {
                    return Vec::new();
                }
                if t.redacted.is_none() && t.signature.is_none() && t.text.is_empty() {
                    return Vec::new();
                }
                let delta = OutDelta {
                    reasoning_content: (!t.text.is_empty()).then_some(t.text.as_str()),
                    thinking_blocks: Some(vec![OutThinking::of(t)]),
                    ..OutDelta::default()
                };
                self.chunk(delta, None)
            }
            Delta::Finish { reason } => {
                if self.finished {
                    return Vec::new();
                }
                self.finished = true;
                self.chunk(OutDelta::default(), Some(reason))
            }
            Delta::Usage { usage } => {
                merge_usage(&mut self.usage, *usage);
                Vec::new()
            }
            Delta::Done => Vec::new(),
        }
    }

    /// Ends the stream: the role chunk if nothing was written yet, the usage
    /// chunk if asked for and known, and `data: [DONE]`.
    pub fn finish(&mut self) -> Vec<u8> {
        if self.closed {
            return Vec::new();
        }
        let mut out = Vec::new();
        if !self.started {
            out = self.chunk(OutDelta::default(), None);
        }
        self.closed = true;
        if let (true, Some(u)) = (self.include_usage, self.usage) {
            out.extend(data_line(&OutChunk {
                id: &self.id,
                object: "chat.completion.chunk",
                created: self.created,
                model: &self.model,
                choices: &[],
                usage: Some(Some(u.into())),
            }));
        }
        out.extend_from_slice(b"data: [DONE]\n\n");
        out
    }

    /// Ends the stream with an error object, and no `[DONE]`, so a client
    /// cannot take the answer so far for a complete one.
    pub fn error(&mut self, e: &ProviderError) -> Vec<u8> {
        if self.closed {
            return Vec::new();
        }
        self.closed = true;
        let message = e.message_or_kind();
        data_line(&json!({
            "error": {
                "message": message,
                "type": error_type(e),
                "code": e.code.as_deref().or_else(|| default_code(e.kind)),
            }
        }))
    }

    fn tool_call(
        &mut self,
        index: u32,
        id: Option<&str>,
        name: Option<&str>,
        arguments: &str,
    ) -> Vec<u8> {
        let (position, first) = match self.calls.iter().position(|i| *i == index) {
            Some(p) => (p, false),
            None => {
                self.calls.push(index);
                (self.calls.len().saturating_sub(1), true)
            }
        };
        let position = u32::try_from(position).unwrap_or(u32::MAX);
        let id = match id {
            Some(id) => Some(Cow::Borrowed(id)),
            None if first => Some(Cow::Owned(format!("call_{position}"))),
            None => None,
        };
        let call = OutToolDelta {
            index: position,
            kind: id.is_some().then_some("function"),
            id,
            function: OutFunctionDelta {
                name: name.or(first.then_some("")),
                arguments,
            },
        };
        let delta = OutDelta {
            tool_calls: Some([call]),
            ..OutDelta::default()
        };
        self.chunk(delta, None)
    }

    /// One chunk with this delta (the role added to the first) and finish
    /// reason.
    fn chunk(&mut self, mut delta: OutDelta<'_>, finish: Option<&FinishReason>) -> Vec<u8> {
        if !self.started {
            self.started = true;
            delta.role = Some("assistant");
            if delta.content.is_none() {
                delta.content = Some(delta.tool_calls.is_none().then_some(""));
            }
        }
        let choices = [OutChunkChoice {
            index: 0,
            delta,
            logprobs: (),
            finish_reason: finish.map(finish_reason_name),
        }];
        data_line(&OutChunk {
            id: &self.id,
            object: "chat.completion.chunk",
            created: self.created,
            model: &self.model,
            choices: &choices,
            usage: self.include_usage.then_some(None),
        })
    }
}

/// A `chat.completion.chunk` as the encoder writes it.
#[derive(Serialize)]
struct OutChunk<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: &'a [OutChunkChoice<'a>],
    /// Absent, or `null` until the usage chunk when usage was asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<Option<OutUsage>>,
}

#[derive(Serialize)]
struct OutChunkChoice<'a> {
    index: u32,
    delta: OutDelta<'a>,
    /// Always `null`.
    logprobs: (),
    finish_reason: Option<&'a str>,
}

#[derive(Default, Serialize)]
struct OutDelta<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    /// Absent, `null` (a first chunk of tool calls) or the text.
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<Option<&'a str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking_blocks: Option<Vec<OutThinking<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<[OutToolDelta<'a>; 1]>,
}

#[derive(Serialize)]
struct OutToolDelta<'a> {
    index: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<Cow<'a, str>>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    kind: Option<&'static str>,
    function: OutFunctionDelta<'a>,
}

#[derive(Serialize)]
struct OutFunctionDelta<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    arguments: &'a str,
}

/// `data: <json>` and the blank line that ends the event.
fn data_line(v: &impl Serialize) -> Vec<u8> {
    let mut out = b"data: ".to_vec();
    // Serializing into a Vec cannot fail: no I/O, and every key is a string.
    let _ = serde_json::to_writer(&mut out, v);
    out.extend_from_slice(b"\n\n");
    out
}

/// The OpenAI error `type` for a failure.
pub(crate) fn error_type(e: &ProviderError) -> &'static str {
    match e.kind {
        ErrorKind::RateLimited => "rate_limit_error",
        ErrorKind::QuotaExhausted => "insufficient_quota",
        ErrorKind::Auth if e.status == Some(403) => "permission_error",
        ErrorKind::Auth => "authentication_error",
        ErrorKind::NotFound => "not_found_error",
        ErrorKind::ContextLength
        | ErrorKind::ContentFilter
        | ErrorKind::InvalidRequest
        | ErrorKind::Unsupported => "invalid_request_error",
        ErrorKind::Server
        | ErrorKind::Timeout
        | ErrorKind::Stalled
        | ErrorKind::Transport
        | ErrorKind::Decode
        | ErrorKind::CircuitOpen
        | ErrorKind::DeadlineExceeded => "server_error",
    }
}

/// The OpenAI error `code` for a failure whose provider gave none.
pub(crate) fn default_code(kind: ErrorKind) -> Option<&'static str> {
    match kind {
        ErrorKind::RateLimited => Some("rate_limit_exceeded"),
        ErrorKind::QuotaExhausted => Some("insufficient_quota"),
        ErrorKind::ContextLength => Some("context_length_exceeded"),
        ErrorKind::ContentFilter => Some("content_filter"),
        ErrorKind::Server
        | ErrorKind::Timeout
        | ErrorKind::Stalled
        | ErrorKind::Transport
        | ErrorKind::Auth
        | ErrorKind::NotFound
        | ErrorKind::InvalidRequest
        | ErrorKind::Unsupported
        | ErrorKind::Decode
        | ErrorKind::CircuitOpen
        | ErrorKind::DeadlineExceeded => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    fn text(bytes: &[u8]) -> String {
        String::from_utf8_lossy(bytes).into_owned()
    }

    #[test]
    fn the_first_chunk_carries_the_role_and_the_answering_model() {
        let mut e = OpenAiStreamEncoder::new("c1".into(), 7, "alias".into(), true);
        assert!(e
            .delta(&Delta::Start {
                model: Some("gpt-x".into())
            })
            .is_empty());
        let first = text(&e.delta(&Delta::Text { text: "Hi".into() }));
        let v: Value = serde_json::from_str(
            first
                .strip_prefix("data: ")
                .and_then(|s| s.strip_suffix("\n\n"))
                .unwrap(),
        )
        .unwrap();
        assert_eq!(v["model"], "gpt-x");
        assert_eq!(v["object"], "chat.completion.chunk");
        assert_eq!(v["choices"][0]["delta"]["role"], "assistant");
        assert_eq!(v["choices"][0]["delta"]["content"], "Hi");
        assert!(v["usage"].is_null());
        let second = text(&e.delta(&Delta::Text { text: "!".into() }));
        assert!(!second.contains("role"));
    }

    #[test]
    fn tool_calls_are_renumbered_densely() {
        let mut e = OpenAiStreamEncoder::new("c".into(), 0, "m".into(), false);
        let out = text(&e.delta(&Delta::ToolCall {
            index: 3,
            id: None,
            name: Some("f".into()),
            arguments: String::new(),
        }));
        assert!(out.contains(r#""index":0"#), "{out}");
        assert!(out.contains(r#""id":"call_0""#), "{out}");
        let out = text(&e.delta(&Delta::ToolCall {
            index: 3,
            id: None,
            name: None,
            arguments: "{}".into(),
        }));
        assert!(!out.contains("call_0"), "{out}");
    }

    #[test]
    fn an_error_ends_the_stream_without_done() {
        let mut e = OpenAiStreamEncoder::new("c".into(), 0, "m".into(), true);
        let out = text(&e.error(&ProviderError::new(ErrorKind::Stalled, "")));
        assert_eq!(
            out,
            "data: {\"error\":{\"code\":null,\"message\":\"response stalled\",\"type\":\"server_error\"}}\n\n"
        );
        assert!(e.finish().is_empty());
        assert!(e.delta(&Delta::Text { text: "x".into() }).is_empty());
    }
}
