//! The Messages API stream (`"stream": true`): named events
//! `message_start`, `content_block_start` / `_delta` / `_stop`,
//! `message_delta`, `message_stop`, with `ping` and `error` between them.
//!
//! Outbound: [`decode_event`] reads one event of a provider's stream into
//! neutral [`Delta`]s. Inbound: [`AnthropicStreamEncoder`] renders the
//! deltas of any provider as the stream an Anthropic client expects.

use serde_json::Value;

use serde_json::json;

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::{finish_reason, stop_reason_name, uncached_input, WireUsage};
use crate::chat::{Delta, FinishReason, Thinking, Usage};
use crate::error::{ErrorKind, ProviderError};
use crate::format::wire::{self, member, required, Loose, Obj, Str};
use crate::format::{merge_usage, FormatError, Read};

// ---------------------------------------------------------------- outbound

/// The events [`decode_event`] reads; any other is skipped.
pub(crate) const EVENTS: &[&str] = &[
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "ping",
];

/// The data of a stream event as it arrives: one struct for every event,
/// its members kept as text until the event's name says which to read, so
/// that an event is held only to the shape of its own members.
#[derive(Deserialize)]
struct Event<'a> {
    #[serde(borrow)]
    message: Option<&'a RawValue>,
    #[serde(borrow)]
    index: Option<&'a RawValue>,
    #[serde(borrow)]
    content_block: Option<&'a RawValue>,
    #[serde(borrow)]
    delta: Option<&'a RawValue>,
    #[serde(borrow)]
    usage: Option<&'a RawValue>,
    error: Option<IgnoredAny>,
    #[serde(default, borrow)]
    object: Loose<'a>,
    #[serde(default, borrow, rename = "type")]
    kind: Loose<'a>,
}

/// `message_start`'s `message`.
#[derive(Deserialize)]
struct EventMessage<'a> {
    #[serde(borrow)]
    model: Option<Str<'a>>,
    usage: Option<Obj<WireUsage>>,
}

/// `content_block_start`'s `content_block`.
#[derive(Deserialize)]
struct EventBlock<'a> {
    #[serde(borrow, rename = "type")]
    kind: Option<Str<'a>>,
    #[serde(borrow)]
    text: Option<&'a RawValue>,
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    name: Option<&'a RawValue>,
    #[serde(borrow)]
    input: Option<&'a RawValue>,
    #[serde(borrow)]
    thinking: Option<&'a RawValue>,
    #[serde(borrow)]
    signature: Option<&'a RawValue>,
    #[serde(borrow)]
    data: Option<&'a RawValue>,
}

/// The `delta` of `content_block_delta`.
#[derive(Deserialize)]
struct BlockDelta<'a> {
    #[serde(borrow, rename = "type")]
    kind: Option<Str<'a>>,
    #[serde(borrow)]
    text: Option<&'a RawValue>,
    #[serde(borrow)]
    partial_json: Option<&'a RawValue>,
    #[serde(borrow)]
    thinking: Option<&'a RawValue>,
    #[serde(borrow)]
    signature: Option<&'a RawValue>,
}

/// The `delta` of `message_delta`.
#[derive(Deserialize)]
struct MessageDelta<'a> {
    #[serde(borrow)]
    stop_reason: Option<Str<'a>>,
}

/// Reads the data of one event named `named` (its `event:` field; else the
/// data's `type` names it), or [`Read::Error`] when the data is an error
/// object, for the classifier:
///
/// - `message_start`: [`Delta::Start`] with the model, and the usage so far;
/// - `content_block_start`: a `tool_use` block's first [`Delta::ToolCall`]
///   part (`id`, `name`); a `text` block's text, if it starts with any;
/// - `content_block_delta`: `text_delta` as [`Delta::Text`],
///   `input_json_delta` as a [`Delta::ToolCall`] arguments fragment,
///   `thinking_delta` and `signature_delta` as [`Delta::Thinking`] (text,
///   then the signature that ends the block); a `redacted_thinking` block's
///   start is one [`Delta::Thinking`] with its data;
/// - `message_delta`: [`Delta::Finish`] with the stop reason mapped as in a
///   complete answer, and [`Delta::Usage`] (`input_tokens` left 0 when the
///   event does not repeat it);
/// - `message_stop`: [`Delta::Done`];
/// - `ping`, `content_block_stop`, citation deltas, and unknown events:
///   nothing.
///
/// A tool call's `index` in [`Delta::ToolCall`] is its content block's index,
/// the only number the later fragments carry: distinct and increasing per
/// call, but not dense when text blocks come first.
pub fn decode_event(named: Option<&str>, data: &[u8]) -> Result<Read<Vec<Delta>>, FormatError> {
    let Obj(ev) = wire::read::<Obj<Event<'_>>>(data)?;
    if wire::says_error(&ev.error, &ev.object, &ev.kind) {
        return Ok(Read::Error);
    }
    let mut out = Vec::new();
    let index = || required(member::<u32>(ev.index, "index")?, || "index".into());
    match named.or(ev.kind.0.as_deref()) {
        Some("message_start") => {
            let message = member::<Obj<EventMessage<'_>>>(ev.message, "message")?;
            let Obj(m) = required(message, || "message".into())?;
            let model = m.model.as_ref().map(Str::as_str).filter(|s| !s.is_empty());
            out.push(Delta::Start {
                model: model.map(str::to_string),
            });
            if let Some(Obj(u)) = m.usage {
                out.push(Delta::Usage { usage: u.into() });
            }
        }
        Some("content_block_start") => {
            let index = index()?;
            let block = member::<Obj<EventBlock<'_>>>(ev.content_block, "content_block")?;
            let Obj(b) = required(block, || "content_block".into())?;
            match required(b.kind, || "content_block.type".into())?.as_str() {
                "text" => {
                    let text = member::<String>(b.text, "content_block.text")?;
                    if let Some(text) = text.filter(|t| !t.is_empty()) {
                        out.push(Delta::Text { text });
                    }
                }
                "tool_use" => {
                    // The input arrives in `input_json_delta`s; a server that
                    // sends it whole here is taken at its word.
                    let arguments = match member::<Value>(b.input, "content_block.input")? {
                        Some(Value::Object(o)) if !o.is_empty() => Value::Object(o).to_string(),
                        Some(_) | None => String::new(),
                    };
                    let id = member::<String>(b.id, "content_block.id")?;
                    let name = member::<String>(b.name, "content_block.name")?;
                    out.push(Delta::ToolCall {
                        index,
                        id: Some(required(id, || "content_block.id".into())?),
                        name: Some(required(name, || "content_block.name".into())?),
                        arguments,
                    });
                }
                "thinking" => {
                    let text = member::<String>(b.thinking, "content_block.thinking")?;
                    let signature = member::<String>(b.signature, "content_block.signature")?;
                    let t = Thinking {
                        text: text.unwrap_or_default(),
                        signature: signature.filter(|s| !s.is_empty()),
                        redacted: None,
                    };
                    if !t.text.is_empty() || t.signature.is_some() {
                        out.push(Delta::Thinking(t));
                    }
                }
                "redacted_thinking" => {
                    let data = member::<String>(b.data, "content_block.data")?;
                    out.push(Delta::Thinking(Thinking {
                        redacted: Some(required(data, || "content_block.data".into())?),
                        ..Thinking::default()
                    }));
                }
                // Server-tool blocks have no neutral form.
                _ => {}
            }
        }
        Some("content_block_delta") => {
            let index = index()?;
            let delta = member::<Obj<BlockDelta<'_>>>(ev.delta, "delta")?;
            let Obj(d) = required(delta, || "delta".into())?;
            match required(d.kind, || "delta.type".into())?.as_str() {
                "text_delta" => {
                    let text = member::<String>(d.text, "delta.text")?;
                    let text = required(text, || "delta.text".into())?;
                    if !text.is_empty() {
                        out.push(Delta::Text { text });
                    }
                }
                "thinking_delta" => {
                    let text = member::<String>(d.thinking, "delta.thinking")?;
                    let text = required(text, || "delta.thinking".into())?;
                    if !text.is_empty() {
                        out.push(Delta::Thinking(Thinking {
                            text,
                            ..Thinking::default()
                        }));
                    }
                }
                "signature_delta" => {
                    let signature = member::<String>(d.signature, "delta.signature")?;
                    let signature = required(signature, || "delta.signature".into())?;
                    out.push(Delta::Thinking(Thinking {
                        signature: Some(signature),
                        ..Thinking::default()
                    }));
                }
                "input_json_delta" => {
                    let fragment = member::<String>(d.partial_json, "delta.partial_json")?;
                    let fragment = fragment.unwrap_or_default();
                    if !fragment.is_empty() {
                        out.push(Delta::ToolCall {
                            index,
                            id: None,
                            name: None,
                            arguments: fragment,
                        });
                    }
                }
                _ => {}
            }
        }
        Some("message_delta") => {
            let delta = member::<Obj<MessageDelta<'_>>>(ev.delta, "delta")?;
            if let Some(r) = delta.and_then(|Obj(d)| d.stop_reason) {
                out.push(Delta::Finish {
                    reason: finish_reason(r.as_str()),
                });
            }
            if let Some(Obj(u)) = member::<Obj<WireUsage>>(ev.usage, "usage")? {
                out.push(Delta::Usage { usage: u.into() });
            }
        }
        Some("message_stop") => out.push(Delta::Done),
        Some(_) | None => {}
    }
    Ok(Read::Answer(out))
}

// ----------------------------------------------------------------- inbound

/// The content block open in the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    Text,
    /// A tool call, by the provider's index.
    Tool(u32),
    Thinking,
}

/// Renders neutral [`Delta`]s as the Messages API stream an Anthropic
/// client reads, whichever provider produced them.
///
/// - `message_start` is written before the first block (or by
///   [`finish`](Self::finish)), with the model of the latest
///   [`Delta::Start`] and the usage known by then. [`Delta::Start`] and
///   [`Delta::Usage`] write nothing themselves.
/// - Reasoning goes into `thinking` blocks (a signature ends one; a block
///   the provider did not sign ends with the next other block), redacted
///   reasoning into a `redacted_thinking` block.
/// - Text goes into a `text` block, each tool call into a `tool_use` block
///   (`id` `toolu_<n>` when the provider gave none); switching between them
///   stops the open block and starts the next, indices counting from 0.
///   A fragment of a tool call whose block was already stopped is dropped:
///   no real provider interleaves calls, and a stopped block cannot grow.
/// - [`Delta::Finish`] stops the open block; the `message_delta` with the
///   stop reason and usage is written by [`finish`](Self::finish), since
///   OpenAI reports usage after the finish reason. Text or tool calls after
///   the finish reason, and a second finish reason, are dropped;
///   [`Delta::Done`] writes nothing.
/// - After [`finish`](Self::finish) or [`error`](Self::error) every call
///   writes nothing.
#[derive(Debug, Clone)]
pub struct AnthropicStreamEncoder {
    id: String,
    model: String,
    /// `message_start` has been written.
    started: bool,
    /// The open block: its output index and what it holds.
    open: Option<(u32, Block)>,
    /// The index of the next block.
    next: u32,
    /// The provider's index of every tool call seen.
    tools: Vec<u32>,
    usage: Option<Usage>,
    finish: Option<FinishReason>,
    finished: bool,
    closed: bool,
}

impl AnthropicStreamEncoder {
    /// An encoder for the stream of message `id`, answered by `model` until
    /// a [`Delta::Start`] names another.
    pub fn new(id: String, model: String) -> Self {
        AnthropicStreamEncoder {
            id,
            model,
            started: false,
            open: None,
            next: 0,
            tools: Vec::new(),
            usage: None,
            finish: None,
            finished: false,
            closed: false,
        }
    }

    /// The bytes for one delta (often none).
    pub fn delta(&mut self, d: &Delta) -> Vec<u8> {
        if self.closed {
            return Vec::new();
        }
        let mut out = Vec::new();
        match d {
            Delta::Start { model } => {
                if let (false, Some(m)) = (self.started, model.as_deref()) {
                    if !m.is_empty() {
                        self.model = m.to_string();
                    }
                }
            }
            Delta::Text { text } => {
                if self.finished || text.is_empty() {
                    return out;
                }
                self.start(&mut out);
                if self.open.map(|(_, b)| b) != Some(Block::Text) {
                    let index = self.open_block(&mut out, Block::Text);
                    event(
                        &mut out,
                        "content_block_start",
                        &json!({
                            "type": "content_block_start",
                            "index": index,
                            "content_block": {"type": "text", "text": ""},
                        }),
                    );
                }
                self.block_delta(&mut out, OutBlockDelta::TextDelta { text });
            }
            Delta::ToolCall {
                index,
                id,
                name,
                arguments,
            } => {
                if self.finished {
                    return out;
                }
                let open_here = self.open.map(|(_, b)| b) == Some(Block::Tool(*index));
                if !open_here {
                    if self.tools.contains(index) {
                        return out; // its block was stopped
                    }
                    self.tools.push(*index);
                    self.start(&mut out);
                    let at = self.open_block(&mut out, Block::Tool(*index));
                    let id = id.clone().unwrap_or_else(|| format!("toolu_{at}"));
                    event(
                        &mut out,
                        "content_block_start",
                        &json!({
                            "type": "content_block_start",
                            "index": at,
                            "content_block": {
                                "type": "tool_use",
                                "id": id,
                                "name": name.as_deref().unwrap_or_default(),
                                "input": {},
                            },
                        }),
                    );
                }
                if !arguments.is_empty() {
                    self.block_delta(
                        &mut out,
                        OutBlockDelta::InputJsonDelta {
                            partial_json: arguments,
                        },
                    );
                }
            }
            Delta::Thinking(t) => {
                if self.finished {
                    return out;
                }
                self.thinking(&mut out, t);
            }
            Delta::Finish { reason } => {
                if self.finished {
                    return out;
                }
                self.finished = true;
                self.finish = Some(reason.clone());
                self.start(&mut out);
                self.stop_block(&mut out);
            }
            Delta::Usage { usage } => merge_usage(&mut self.usage, *usage),
            Delta::Done => {}
        }
        out
    }

    /// Ends the stream: `message_start` if nothing was written yet, a stop
    /// for the open block, `message_delta` (stop reason, or `null` when no
    /// [`Delta::Finish`] came, and usage) and `message_stop`.
    pub fn finish(&mut self) -> Vec<u8> {
        if self.closed {
            return Vec::new();
        }
        let mut out = Vec::new();
        self.start(&mut out);
        self.stop_block(&mut out);
        self.closed = true;
        let usage = usage_json(self.usage, false);
        event(
            &mut out,
            "message_delta",
            &json!({
                "type": "message_delta",
                "delta": {
                    "stop_reason": self.finish.as_ref().map(stop_reason_name),
                    "stop_sequence": null,
                },
                "usage": usage,
            }),
        );
        event(&mut out, "message_stop", &json!({"type": "message_stop"}));
        out
    }

    /// Ends the stream with an `error` event, and no `message_stop`, so a
    /// client cannot take the answer so far for a complete one.
    pub fn error(&mut self, e: &ProviderError) -> Vec<u8> {
        if self.closed {
            return Vec::new();
        }
        self.closed = true;
        let message = e.message_or_kind();
        let mut out = Vec::new();
        event(
            &mut out,
            "error",
            &json!({"type": "error", "error": {"type": error_type(e), "message": message}}),
        );
        out
    }

    /// Reasoning: text into a `thinking` block (opened when another is
    /// open or none), a signature as its `signature_delta`, which stops
    /// it; a redacted block whole.
    fn thinking(&mut self, out: &mut Vec<u8>, t: &Thinking) {
        self.start(out);
        if let Some(data) = &t.redacted {
            let index = self.open_block(out, Block::Thinking);
            event(
                out,
                "content_block_start",
                &json!({
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "redacted_thinking", "data": data},
                }),
            );
            self.stop_block(out);
            return;
        }
        if t.text.is_empty() && t.signature.is_none() {
            return;
        }
        if self.open.map(|(_, b)| b) != Some(Block::Thinking) {
            let index = self.open_block(out, Block::Thinking);
            event(
                out,
                "content_block_start",
                &json!({
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "thinking", "thinking": "", "signature": ""},
                }),
            );
        }
        if !t.text.is_empty() {
            self.block_delta(out, OutBlockDelta::ThinkingDelta { thinking: &t.text });
        }
        if let Some(signature) = &t.signature {
            self.block_delta(out, OutBlockDelta::SignatureDelta { signature });
            self.stop_block(out);
        }
    }

    /// Writes `message_start` once.
    fn start(&mut self, out: &mut Vec<u8>) {
        if self.started {
            return;
        }
        self.started = true;
        let usage = usage_json(self.usage, true);
        event(
            out,
            "message_start",
            &json!({
                "type": "message_start",
                "message": {
                    "id": self.id,
                    "type": "message",
                    "role": "assistant",
                    "model": self.model,
                    "content": [],
                    "stop_reason": null,
                    "stop_sequence": null,
                    "usage": usage,
                },
            }),
        );
    }

    /// Stops the open block and opens a new one; its index.
    fn open_block(&mut self, out: &mut Vec<u8>, block: Block) -> u32 {
        self.stop_block(out);
        let index = self.next;
        self.next = self.next.saturating_add(1);
        self.open = Some((index, block));
        index
    }

    /// Writes `content_block_stop` for the open block, if any.
    fn stop_block(&mut self, out: &mut Vec<u8>) {
        if let Some((index, _)) = self.open.take() {
            event(
                out,
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": index}),
            );
        }
    }

    /// Writes a `content_block_delta` for the open block.
    fn block_delta(&mut self, out: &mut Vec<u8>, delta: OutBlockDelta<'_>) {
        if let Some((index, _)) = self.open {
            event(
                out,
                "content_block_delta",
                &OutBlockDeltaEvent {
                    kind: "content_block_delta",
                    index,
                    delta,
                },
            );
        }
    }
}

/// A `content_block_delta` event's data, the one event written per piece
/// of an answer.
#[derive(Serialize)]
struct OutBlockDeltaEvent<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    index: u32,
    delta: OutBlockDelta<'a>,
}

/// Named as the wire's `type`s are (`text_delta`, …).
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[allow(clippy::enum_variant_names)]
enum OutBlockDelta<'a> {
    TextDelta { text: &'a str },
    InputJsonDelta { partial_json: &'a str },
    ThinkingDelta { thinking: &'a str },
    SignatureDelta { signature: &'a str },
}

/// `event: <name>`, `data: <json>` and the blank line that ends the event.
/// A stream's `usage` object: Anthropic's counts (input without the cached
/// tokens, which have their own keys). Counts the provider did not report
/// are `null`, never zeros: the SDKs' accumulators take `null` where a
/// missing key would fail them. `with_input`: `message_start` names the
/// input count even when it is unknown.
fn usage_json(usage: Option<Usage>, with_input: bool) -> Value {
    let Some(u) = usage else {
        return if with_input {
            json!({"input_tokens": null, "output_tokens": null})
        } else {
            json!({"output_tokens": null})
        };
    };
    let mut out = serde_json::Map::new();
    if with_input || u.input_tokens > 0 {
        out.insert("input_tokens".into(), json!(uncached_input(&u)));
    }
    out.insert("output_tokens".into(), json!(u.output_tokens));
    for (key, n) in [
        ("cache_read_input_tokens", u.cached_input_tokens),
        ("cache_creation_input_tokens", u.cache_write_input_tokens),
    ] {
        if let Some(n) = n {
            out.insert(key.into(), json!(n));
        }
    }
    Value::Object(out)
}

fn event(out: &mut Vec<u8>, name: &str, data: &impl Serialize) {
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\ndata: ");
    // Serializing into a Vec cannot fail: no I/O, and every key is a string.
    let _ = serde_json::to_writer(&mut *out, data);
    out.extend_from_slice(b"\n\n");
}

/// The Anthropic error `type` for a failure.
fn error_type(e: &ProviderError) -> &'static str {
    match e.kind {
        ErrorKind::RateLimited => "rate_limit_error",
        ErrorKind::QuotaExhausted => "billing_error",
        ErrorKind::Server
            if e.status == Some(529) || e.code.as_deref() == Some("overloaded_error") =>
        {
            "overloaded_error"
        }
        ErrorKind::Server | ErrorKind::Transport | ErrorKind::Decode | ErrorKind::CircuitOpen => {
            "api_error"
        }
        ErrorKind::Timeout | ErrorKind::Stalled | ErrorKind::DeadlineExceeded => "timeout_error",
        ErrorKind::Auth if e.status == Some(403) => "permission_error",
        ErrorKind::Auth => "authentication_error",
        ErrorKind::NotFound => "not_found_error",
        ErrorKind::InvalidRequest if e.status == Some(413) => "request_too_large",
        ErrorKind::ContextLength
        | ErrorKind::ContentFilter
        | ErrorKind::InvalidRequest
        | ErrorKind::Unsupported => "invalid_request_error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(bytes: &[u8]) -> Vec<String> {
        String::from_utf8_lossy(bytes)
            .lines()
            .filter_map(|l| l.strip_prefix("event: "))
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn blocks_switch_with_their_indices() {
        let mut e = AnthropicStreamEncoder::new("msg_1".into(), "m".into());
        let mut out = e.delta(&Delta::Text { text: "a".into() });
        out.extend(e.delta(&Delta::ToolCall {
            index: 0,
            id: Some("t".into()),
            name: Some("f".into()),
            arguments: "{}".into(),
        }));
        out.extend(e.delta(&Delta::Text { text: "b".into() }));
        out.extend(e.finish());
        assert_eq!(
            names(&out),
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop",
            ]
        );
        let s = String::from_utf8_lossy(&out);
        assert!(s.contains(r#""index":2"#), "{s}");
        assert!(s.contains(r#""stop_reason":null"#), "{s}");
    }

    #[test]
    fn an_error_is_the_last_event() {
        let mut e = AnthropicStreamEncoder::new("msg_1".into(), "m".into());
        let mut out = e.delta(&Delta::Text { text: "a".into() });
        let err = ProviderError::new(ErrorKind::Server, "Overloaded").with_code("overloaded_error");
        out.extend(e.error(&err));
        out.extend(e.finish());
        assert_eq!(names(&out).last().map(String::as_str), Some("error"));
        assert!(String::from_utf8_lossy(&out)
            .ends_with("data: {\"error\":{\"message\":\"Overloaded\",\"type\":\"overloaded_error\"},\"type\":\"error\"}\n\n"));
    }
}
