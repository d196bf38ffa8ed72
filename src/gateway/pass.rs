//! A same-dialect stream: the provider's events go to the client as they
//! arrived, unknown event types and fields included. The deltas read from
//! them serve only the gateway's bookkeeping. When a continuation takes
//! over (the provider's stream was cut after the commit point), its deltas
//! are encoded so they extend what already went out: OpenAI chunks under
//! the same id, creation time and model; Anthropic content blocks numbered
//! after the last one passed through, and no second `message_start`;
//! Responses events numbered after the provider's, its items after the
//! provider's, and no second `response.created`.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{json, Value};

use super::http::Format;
use super::pass_responses::ResponsesSeen;
use crate::chat::{Delta, FinishReason, Usage};
use crate::engine::stream::RawEvent;
use crate::format::anthropic::stop_reason_name;
use crate::format::openai::stream::OpenAiStreamEncoder;
use crate::format::responses::ResponsesStreamEncoder;
use crate::format::{anthropic::stream::AnthropicStreamEncoder, merge_usage};
use crate::sse::SseEvent;

/// The writer of a same-dialect stream.
#[derive(Debug)]
pub(crate) struct PassWriter {
    format: Format,
    /// The client asked for usage (OpenAI `stream_options.include_usage`):
    /// the usage-only chunk the gateway asked for reaches it only then.
    client_usage: bool,
    /// The provider's stream end (`[DONE]`, `message_stop`) went out.
    ended: bool,
    closed: bool,
    /// The data of the first OpenAI chunk passed through.
    openai_first: Option<String>,
    anthropic: AnthropicSeen,
    /// The continuation's OpenAI encoder, from its first delta on.
    continued: Option<OpenAiStreamEncoder>,
    responses: ResponsesSeen,
    /// The continuation's Responses encoder, from its first delta on.
    responses_continued: Option<Box<ResponsesStreamEncoder>>,
    /// A continuation's finish reason and usage (Anthropic writes both at
    /// the end, in `message_delta`).
    finish: Option<FinishReason>,
    usage: Option<Usage>,
}

/// What a continuation needs of the first chunk passed through: borrowed,
/// the rest of the chunk skipped, no tree.
#[derive(Deserialize)]
struct ChunkHead<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    #[serde(default)]
    created: Option<u64>,
}

/// What the writer reads of an Anthropic event passed through.
#[derive(Deserialize)]
struct EventHead<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(default)]
    index: Option<u32>,
    #[serde(borrow, default)]
    content_block: Option<BlockHead<'a>>,
}

#[derive(Deserialize)]
struct BlockHead<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
}

/// What the OpenAI chunks passed through said about the completion.
#[derive(Debug, Default)]
struct OpenAiSeen {
    id: String,
    created: u64,
    model: String,
}

/// What the Anthropic events passed through said about the blocks.
#[derive(Debug, Default)]
struct AnthropicSeen {
    /// The index after the highest block index seen.
    next: u32,
    /// The block started and not yet stopped: its index, and whether it
    /// holds text.
    open: Option<(u32, bool)>,
    /// `message_delta` went out.
    message_delta: bool,
}

impl PassWriter {
    /// A writer for a stream in `format`; `client_usage` as the OpenAI
    /// client's `stream_options.include_usage`.
    pub(crate) fn new(format: Format, client_usage: bool) -> Self {
        PassWriter {
            format,
            client_usage,
            ended: false,
            closed: false,
            openai_first: None,
            anthropic: AnthropicSeen::default(),
            continued: None,
            responses: ResponsesSeen::default(),
            responses_continued: None,
            finish: None,
            usage: None,
        }
    }

    /// The client reads OpenAI chunks.
    pub(crate) fn is_openai(&self) -> bool {
        self.format == Format::OpenAi
    }

    /// The bytes of a provider event: the event as it arrived, byte for
    /// byte (comments before it included), or nothing for the usage-only
    /// chunk of an OpenAI client that did not ask for it.
    /// Only what a continuation would need is kept, and read only then
    /// (OpenAI: the first chunk, for its id, creation time and model) or
    /// from the few events that carry it (Anthropic: block starts and
    /// stops), so the bulk of the events is not parsed a second time.
    pub(crate) fn raw(&mut self, raw: RawEvent) -> Vec<u8> {
        if self.closed || self.ended {
            return Vec::new();
        }
        let ev = &raw.event;
        let data = ev.data.trim();
        match self.format {
            Format::OpenAi if data == "[DONE]" => self.ended = true,
            Format::OpenAi => {
                if raw.usage_only && !self.client_usage {
                    return Vec::new();
                }
                if self.openai_first.is_none() {
                    self.openai_first = Some(data.to_string());
                }
            }
            Format::Anthropic => self.seen_anthropic(ev.event.as_deref(), data),
            Format::Responses => {
                let end = [
                    "response.completed",
                    "response.incomplete",
                    "response.failed",
                ];
                if ev.event.as_deref().is_some_and(|e| end.contains(&e)) {
                    self.ended = true;
                }
                self.responses.event(ev.event.as_deref(), data);
            }
        }
        match raw.bytes {
            Some(bytes) => bytes,
            None => write_event(ev),
        }
    }

    /// The id, creation time and model the chunks passed through carried.
    fn openai_seen(&self) -> OpenAiSeen {
        let head = self
            .openai_first
            .as_deref()
            .and_then(|d| serde_json::from_str::<ChunkHead<'_>>(d).ok());
        match head {
            Some(h) => OpenAiSeen {
                id: h.id.map(Cow::into_owned).unwrap_or_default(),
                created: h.created.unwrap_or(0),
                model: h.model.map(Cow::into_owned).unwrap_or_default(),
            },
            None => OpenAiSeen::default(),
        }
    }

    fn seen_anthropic(&mut self, name: Option<&str>, data: &str) {
        // Only block starts and stops say anything of the blocks: deltas,
        // pings and the rest are known by their name and not read again.
        // An unnamed event is read for its type.
        match name {
            Some("message_delta") => {
                self.anthropic.message_delta = true;
                return;
            }
            Some("message_stop") => {
                self.ended = true;
                return;
            }
            Some("content_block_start" | "content_block_stop") | None => {}
            Some(_) => return,
        }
        let head = serde_json::from_str::<EventHead<'_>>(data).ok();
        let kind = name.or_else(|| head.as_ref()?.kind.as_deref());
        let index = head.as_ref().and_then(|h| h.index);
        let seen = &mut self.anthropic;
        match (kind, index) {
            (Some("content_block_start"), Some(i)) => {
                let text = head
                    .as_ref()
                    .and_then(|h| h.content_block.as_ref()?.kind.as_deref())
                    == Some("text");
                seen.open = Some((i, text));
                seen.next = seen.next.max(i.saturating_add(1));
            }
            (Some("content_block_stop"), Some(i)) if seen.open.is_some_and(|(o, _)| o == i) => {
                seen.open = None;
            }
            (Some("message_delta"), _) => seen.message_delta = true,
            (Some("message_stop"), _) => self.ended = true,
            _ => {}
        }
    }

    /// The bytes for a delta: nothing for one whose event went out raw;
    /// a continuation's, encoded to extend what went out.
    pub(crate) fn delta(&mut self, d: &Delta, passed: bool) -> Vec<u8> {
        if passed && self.format == Format::Responses {
            self.responses.passed(d);
        }
        if passed || self.closed || self.ended {
            return Vec::new();
        }
        match self.format {
            Format::OpenAi => {
                if self.continued.is_none() {
                    let seen = self.openai_seen();
                    self.continued = Some(OpenAiStreamEncoder::new(
                        seen.id,
                        seen.created,
                        seen.model,
                        self.client_usage,
                    ));
                }
                self.continued
                    .as_mut()
                    .map_or_else(Vec::new, |c| c.delta(d))
            }
            Format::Anthropic => self.anthropic_delta(d),
            Format::Responses => {
                let mut out = Vec::new();
                let enc = self.responses_continued.get_or_insert_with(|| {
                    let (enc, first) = self.responses.encoder();
                    out = first;
                    Box::new(enc)
                });
                out.extend(enc.delta(d));
                out
            }
        }
    }

    fn anthropic_delta(&mut self, d: &Delta) -> Vec<u8> {
        let mut out = Vec::new();
        match d {
            Delta::Text { text } if !text.is_empty() && self.finish.is_none() => {
                let index = match self.anthropic.open {
                    Some((i, true)) => i,
                    _ => self.open_block(&mut out, json!({"type": "text", "text": ""})),
                };
                event(
                    &mut out,
                    "content_block_delta",
                    &json!({"type": "content_block_delta", "index": index,
                            "delta": {"type": "text_delta", "text": text}}),
                );
            }
            Delta::ToolCall {
                id,
                name,
                arguments,
                ..
            } if self.finish.is_none() => {
                let index = match (self.anthropic.open, id) {
                    (Some((i, false)), None) => i,
                    _ => {
                        let at = self.anthropic.next;
                        let block = json!({"type": "tool_use",
                            "id": id.clone().unwrap_or_else(|| format!("toolu_{at}")),
                            "name": name.as_deref().unwrap_or_default(), "input": {}});
                        self.open_block(&mut out, block)
                    }
                };
                if !arguments.is_empty() {
                    event(
                        &mut out,
                        "content_block_delta",
                        &json!({"type": "content_block_delta", "index": index,
                                "delta": {"type": "input_json_delta", "partial_json": arguments}}),
                    );
                }
            }
            Delta::Finish { reason } => {
                self.finish.get_or_insert_with(|| reason.clone());
            }
            Delta::Usage { usage } => merge_usage(&mut self.usage, *usage),
            _ => {}
        }
        out
    }

    /// Stops the open block, starts `block` after the last index; its index.
    fn open_block(&mut self, out: &mut Vec<u8>, block: Value) -> u32 {
        self.stop_block(out);
        let index = self.anthropic.next;
        self.anthropic.next = index.saturating_add(1);
        self.anthropic.open = Some((index, block["type"] == "text"));
        event(
            out,
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": block}),
        );
        index
    }

    fn stop_block(&mut self, out: &mut Vec<u8>) {
        if let Some((index, _)) = self.anthropic.open.take() {
            event(
                out,
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": index}),
            );
        }
    }

    /// Ends a complete stream with what the provider's own end did not
    /// already say.
    pub(crate) fn finish(&mut self) -> Vec<u8> {
        if self.closed {
            return Vec::new();
        }
        self.closed = true;
        if self.ended {
            return Vec::new();
        }
        match self.format {
            Format::OpenAi => match &mut self.continued {
                Some(enc) => enc.finish(),
                None => b"data: [DONE]\n\n".to_vec(),
            },
            // The provider's own `response.completed` ends it (see `raw`),
            // or the continuation's.
            Format::Responses => self
                .responses_continued
                .as_mut()
                .map_or_else(Vec::new, |enc| enc.finish()),
            Format::Anthropic => {
                let mut out = Vec::new();
                self.stop_block(&mut out);
                if !self.anthropic.message_delta {
                    let usage = match self.usage {
                        Some(u) => json!({"input_tokens": u.input_tokens,
                                          "output_tokens": u.output_tokens}),
                        None => json!({"output_tokens": null}),
                    };
                    event(
                        &mut out,
                        "message_delta",
                        &json!({"type": "message_delta",
                                "delta": {"stop_reason": self.finish.as_ref().map(stop_reason_name),
                                          "stop_sequence": null},
                                "usage": usage}),
                    );
                }
                event(&mut out, "message_stop", &json!({"type": "message_stop"}));
                out
            }
        }
    }

    /// Ends an interrupted stream with the client format's error event.
    pub(crate) fn error(&mut self, e: &crate::error::ProviderError) -> Vec<u8> {
        if self.closed {
            return Vec::new();
        }
        self.closed = true;
        match self.format {
            Format::OpenAi => {
                OpenAiStreamEncoder::new(String::new(), 0, String::new(), false).error(e)
            }
            // The provider's Response failed, after its own events or the
            // continuation's: `response.failed` and `error`, never a
            // completion.
            Format::Responses => match &mut self.responses_continued {
                Some(enc) => enc.error(e),
                None => {
                    let (mut enc, mut out) = self.responses.encoder();
                    out.extend(enc.error(e));
                    out
                }
            },
            Format::Anthropic => AnthropicStreamEncoder::new(String::new(), String::new()).error(e),
        }
    }
}

/// A provider event written back as server-sent event lines.
pub(crate) fn write_event(ev: &SseEvent) -> Vec<u8> {
    let mut out = Vec::with_capacity(ev.data.len() + 32);
    if let Some(name) = &ev.event {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(name.as_bytes());
        out.push(b'\n');
    }
    for line in ev.data.split('\n') {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(line.as_bytes());
        out.push(b'\n');
    }
    out.push(b'\n');
    out
}

/// An Anthropic event of the gateway's own.
fn event(out: &mut Vec<u8>, name: &str, data: &Value) {
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\ndata: ");
    // Serializing a Value into a Vec cannot fail: no I/O, string keys.
    let _ = serde_json::to_writer(&mut *out, data);
    out.extend_from_slice(b"\n\n");
}
