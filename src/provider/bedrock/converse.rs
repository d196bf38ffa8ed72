//! Bedrock's Converse API, both ways: a neutral request as a Converse body
//! (messages of content blocks `text`, `image`, `toolUse`, `toolResult`,
//! `reasoningContent`, `cachePoint`; `system`; `inferenceConfig`;
//! `toolConfig`), a Converse answer and the ConverseStream events
//! (`messageStart`, `contentBlockStart`, `contentBlockDelta`,
//! `messageStop`, `metadata`) read back. Structured answers go through a
//! forced tool, as for Anthropic (see `format::structured`).

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::chat::{
    ChatRequest, ChatResponse, Delta, FinishReason, Hint, ImageSource, Part, ResponseFormat, Role,
    Thinking, ToolCall, ToolChoice, Usage,
};
use crate::chat::{Gap, Image, RawJson};
use crate::format::structured::answer_tool;
use crate::format::{index, join, FormatError, Read};

/// The ConverseStream event types, as `:event-type` names them.
pub(crate) const EVENTS: [&str; 6] = [
    "messageStart",
    "contentBlockStart",
    "contentBlockDelta",
    "contentBlockStop",
    "messageStop",
    "metadata",
];

/// A Converse request body, as [`encode_request`] builds it; serialize it
/// to send it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RequestBody<'a> {
    messages: Vec<Turn<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    system: Vec<Block<'a>>,
    #[serde(skip_serializing_if = "Inference::is_empty")]
    inference_config: Inference<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_config: Option<ToolConfig<'a>>,
}

#[derive(Debug, Serialize)]
struct Turn<'a> {
    role: &'static str,
    content: Vec<Block<'a>>,
}

/// A content block: one member named by its type.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
enum Block<'a> {
    Text(&'a str),
    Image(ImageBlock<'a>),
    ToolUse(ToolUse<'a>),
    ToolResult(ToolResult<'a>),
    ReasoningContent(Reasoning<'a>),
    CachePoint(CachePoint),
}

#[derive(Debug, Serialize)]
struct ImageBlock<'a> {
    format: &'static str,
    source: ImageBytes<'a>,
}

#[derive(Debug, Serialize)]
struct ImageBytes<'a> {
    /// Base64, as the neutral image holds it.
    bytes: &'a str,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolUse<'a> {
    tool_use_id: &'a str,
    name: &'a str,
    input: Value,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolResult<'a> {
    tool_use_id: &'a str,
    content: Vec<Block<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<&'static str>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
enum Reasoning<'a> {
    ReasoningText { text: &'a str, signature: &'a str },
    RedactedContent(&'a str),
}

/// `{"type": "default"}`: a prompt-cache breakpoint after the block before.
#[derive(Debug, Serialize)]
struct CachePoint {
    #[serde(rename = "type")]
    kind: &'static str,
}

const CACHE_POINT: Block<'static> = Block::CachePoint(CachePoint { kind: "default" });

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct Inference<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop_sequences: &'a [String],
}

impl Inference<'_> {
    fn is_empty(&self) -> bool {
        self.max_tokens.is_none()
            && self.temperature.is_none()
            && self.top_p.is_none()
            && self.stop_sequences.is_empty()
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolConfig<'a> {
    tools: Vec<ToolEntry<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Choice<'a>>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolEntry<'a> {
    tool_spec: ToolSpec<'a>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolSpec<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<Cow<'a, str>>,
    input_schema: Schema<'a>,
}

#[derive(Debug, Serialize)]
struct Schema<'a> {
    json: Cow<'a, Value>,
}

/// `{"auto": {}}`, `{"any": {}}`, `{"tool": {"name"}}`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
enum Choice<'a> {
    Auto {},
    Any {},
    Tool { name: &'a str },
}

/// A Converse request body for the neutral request, and the hints left
/// out of it.
pub(crate) fn encode_request(
    req: &ChatRequest,
) -> Result<(RequestBody<'_>, Vec<String>), FormatError> {
    let mut omitted = Vec::new();
    for u in &req.untranslated {
        match u.gap {
            Gap::Unknown => {
                return Err(FormatError::unsupported(
                    &u.path,
                    "unknown field, cannot be translated for bedrock converse",
                ))
            }
            Gap::NoEquivalent => {
                return Err(FormatError::unsupported(
                    &u.path,
                    "not available from bedrock converse",
                ))
            }
            Gap::Hint => omitted.push(u.path.clone()),
        }
    }
    let mut system = Vec::new();
    let mut messages: Vec<Turn<'_>> = Vec::new();
    for (i, m) in req.messages.iter().enumerate() {
        let path = index("messages", i);
        if m.role == Role::System {
            for (j, part) in m.content.iter().enumerate() {
                match part {
                    Part::Text {
                        text,
                        cache_control,
                    } => {
                        system.push(Block::Text(text));
                        if cache_control.is_some() {
                            system.push(CACHE_POINT);
                        }
                    }
                    _ => {
                        return Err(FormatError::unsupported(
                            index(&join(&path, "content"), j),
                            "a system message holds text only",
                        ))
                    }
                }
            }
            continue;
        }
        let role = if m.role == Role::Assistant {
            "assistant"
        } else {
            "user"
        };
        let blocks = encode_blocks(&m.content, &join(&path, "content"), &mut omitted)?;
        if blocks.is_empty() {
            continue;
        }
        // Converse wants turns to alternate: a tool result after a user
        // message joins it.
        match messages.last_mut() {
            Some(last) if last.role == role => last.content.extend(blocks),
            _ => messages.push(Turn {
                role,
                content: blocks,
            }),
        }
    }
    omitted.extend(req.omitted_hints(&[
        Hint::TopK,
        Hint::Seed,
        Hint::FrequencyPenalty,
        Hint::PresencePenalty,
        Hint::ParallelToolCalls,
        Hint::ServiceTier,
        Hint::Reasoning,
        Hint::PromptCacheKey,
    ]));
    let body = RequestBody {
        messages,
        system,
        inference_config: Inference {
            max_tokens: req.max_tokens,
            temperature: req.temperature,
            top_p: req.top_p,
            stop_sequences: &req.stop,
        },
        tool_config: tool_config(req),
    };
    Ok((body, omitted))
}

/// `toolConfig`: the request's tools and, for a structured answer, the
/// answer tool, forced. `None` without tools, or with `tool_choice: none`
/// (which Converse cannot say: the tools are left out instead).
fn tool_config(req: &ChatRequest) -> Option<ToolConfig<'_>> {
    let mut tools = Vec::new();
    if req.tool_choice != Some(ToolChoice::None) {
        for t in &req.tools {
            tools.push(ToolEntry {
                tool_spec: ToolSpec {
                    name: &t.name,
                    description: t.description.as_deref().map(Cow::Borrowed),
                    input_schema: Schema {
                        json: Cow::Borrowed(&t.parameters),
                    },
                },
            });
        }
    }
    let mut choice = match &req.tool_choice {
        Some(ToolChoice::Required) => Some(Choice::Any {}),
        Some(ToolChoice::Tool(name)) => Some(Choice::Tool { name }),
        Some(ToolChoice::Auto) => Some(Choice::Auto {}),
        Some(ToolChoice::None) | None => None,
    };
    if let Some(name) = answer_tool(req).filter(|n| req.tools.iter().all(|t| t.name != *n)) {
        let (schema, description) = match &req.response_format {
            Some(ResponseFormat::JsonSchema(s)) => {
                (Cow::Borrowed(&s.schema), s.description.as_deref())
            }
            _ => (Cow::Owned(json!({"type": "object"})), None),
        };
        tools.push(ToolEntry {
            tool_spec: ToolSpec {
                name,
                description: Some(description.map_or(
                    Cow::Borrowed("Give the answer as this tool's input."),
                    Cow::Borrowed,
                )),
                input_schema: Schema { json: schema },
            },
        });
        choice = Some(Choice::Tool { name });
    }
    if tools.is_empty() {
        return None;
    }
    Some(ToolConfig {
        tools,
        tool_choice: choice,
    })
}

/// An image as a Converse `image` block: inline bytes only (Converse
/// fetches no URLs).
fn image_block<'a>(image: &'a Image, path: &str) -> Result<Block<'a>, FormatError> {
    match &image.source {
        ImageSource::Base64 { media_type, data } => {
            let format = match media_type.as_str() {
                "image/png" => "png",
                "image/jpeg" | "image/jpg" => "jpeg",
                "image/gif" => "gif",
                "image/webp" => "webp",
                other => {
                    return Err(FormatError::unsupported(
                        path,
                        format!(
                            "bedrock converse takes png, jpeg, gif or webp images, not {other}"
                        ),
                    ))
                }
            };
            Ok(Block::Image(ImageBlock {
                format,
                source: ImageBytes { bytes: data },
            }))
        }
        ImageSource::Url { .. } => Err(FormatError::unsupported(
            path,
            "bedrock converse takes inline images only, not URLs",
        )),
    }
}

fn encode_blocks<'a>(
    parts: &'a [Part],
    path: &str,
    omitted: &mut Vec<String>,
) -> Result<Vec<Block<'a>>, FormatError> {
    let mut out = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        let at = index(path, i);
        match part {
            Part::Text {
                text,
                cache_control,
            } => {
                // Converse refuses empty text blocks.
                if !text.is_empty() {
                    out.push(Block::Text(text));
                }
                if cache_control.is_some() {
                    out.push(CACHE_POINT);
                }
            }
            Part::Image(image) => {
                if image.detail.is_some() {
                    omitted.push(join(&at, "detail"));
                }
                out.push(image_block(image, &at)?);
            }
            Part::ToolCall(call) => {
                let input: Value = if call.arguments.trim().is_empty() {
                    json!({})
                } else {
                    serde_json::from_str(&call.arguments).map_err(|e| {
                        FormatError::malformed(
                            join(&at, "arguments"),
                            format!("tool call arguments are not JSON: {e}"),
                        )
                    })?
                };
                out.push(Block::ToolUse(ToolUse {
                    tool_use_id: &call.id,
                    name: &call.name,
                    input,
                }));
            }
            Part::ToolResult {
                tool_call_id,
                content,
                images,
                is_error,
                cache_control,
            } => {
                let mut blocks = vec![Block::Text(content)];
                for (j, image) in images.iter().enumerate() {
                    blocks.push(image_block(image, &index(&join(&at, "images"), j))?);
                }
                out.push(Block::ToolResult(ToolResult {
                    tool_use_id: tool_call_id,
                    content: blocks,
                    status: is_error.then_some("error"),
                }));
                if cache_control.is_some() {
                    out.push(CACHE_POINT);
                }
            }
            Part::Thinking(t) => match (&t.signature, &t.redacted) {
                (_, Some(data)) => {
                    out.push(Block::ReasoningContent(Reasoning::RedactedContent(data)))
                }
                (Some(sig), None) => out.push(Block::ReasoningContent(Reasoning::ReasoningText {
                    text: &t.text,
                    signature: sig,
                })),
                // Unsigned reasoning (another provider's) cannot be sent
                // back: named, not sent.
                (None, None) => omitted.push(at),
            },
        }
    }
    Ok(out)
}

/// Converse's `usage`, cache counts added into the input as the neutral
/// [`Usage`] counts them.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    cache_write_input_tokens: Option<u64>,
}

impl WireUsage {
    fn usage(&self) -> Option<Usage> {
        if self.input_tokens.is_none() && self.output_tokens.is_none() {
            return None;
        }
        let read = self.cache_read_input_tokens;
        let write = self.cache_write_input_tokens;
        Some(Usage {
            input_tokens: self.input_tokens.unwrap_or(0) + read.unwrap_or(0) + write.unwrap_or(0),
            output_tokens: self.output_tokens.unwrap_or(0),
            cached_input_tokens: read,
            cache_write_input_tokens: write,
            reasoning_tokens: None,
        })
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireToolUse {
    tool_use_id: Option<String>,
    name: Option<String>,
    input: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireReasoningText {
    text: Option<String>,
    signature: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireReasoning {
    reasoning_text: Option<WireReasoningText>,
    redacted_content: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireBlock {
    text: Option<String>,
    tool_use: Option<WireToolUse>,
    reasoning_content: Option<WireReasoning>,
}

#[derive(Deserialize)]
struct WireMessage {
    content: Option<Vec<WireBlock>>,
}

#[derive(Deserialize)]
struct WireOutput {
    message: Option<WireMessage>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireAnswer {
    output: Option<WireOutput>,
    stop_reason: Option<String>,
    usage: Option<WireUsage>,
    message: Option<Value>,
}

/// Why a Converse answer stopped.
fn finish_reason(r: &str) -> FinishReason {
    match r {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "tool_use" => FinishReason::ToolCalls,
        "guardrail_intervened" | "content_filtered" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_string()),
    }
}

/// Reads a Converse answer; [`Read::Error`] for a `{"message"}` body
/// without `output`, an AWS error for the classifier.
pub(crate) fn decode_response(body: &[u8]) -> Result<Read<ChatResponse>, FormatError> {
    let a: WireAnswer = serde_json::from_slice(body)
        .map_err(|e| FormatError::malformed("", format!("not a Converse answer: {e}")))?;
    let Some(output) = a.output else {
        if a.message.is_some() {
            return Ok(Read::Error);
        }
        return Err(FormatError::malformed("output", "missing"));
    };
    let blocks = output
        .message
        .and_then(|m| m.content)
        .ok_or_else(|| FormatError::malformed("output.message.content", "missing"))?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    let mut thinking = Vec::new();
    for (i, b) in blocks.into_iter().enumerate() {
        let at = index("output.message.content", i);
        if let Some(t) = b.text {
            text.push_str(&t);
        }
        if let Some(u) = b.tool_use {
            tool_calls.push(ToolCall {
                id: u.tool_use_id.ok_or_else(|| {
                    FormatError::malformed(join(&at, "toolUse.toolUseId"), "missing")
                })?,
                name: u
                    .name
                    .ok_or_else(|| FormatError::malformed(join(&at, "toolUse.name"), "missing"))?,
                arguments: u.input.map_or_else(|| "{}".into(), |v| v.to_string()),
            });
        }
        if let Some(r) = b.reasoning_content {
            if let Some(t) = r.reasoning_text {
                thinking.push(Thinking {
                    text: t.text.unwrap_or_default(),
                    signature: t.signature.filter(|s| !s.is_empty()),
                    redacted: None,
                });
            } else if let Some(data) = r.redacted_content {
                thinking.push(Thinking {
                    redacted: Some(data),
                    ..Thinking::default()
                });
            }
        }
    }
    Ok(Read::Answer(ChatResponse {
        text,
        tool_calls,
        thinking,
        model: String::new(),
        provider: String::new(),
        finish_reason: a.stop_reason.as_deref().map(finish_reason),
        usage: a.usage.as_ref().and_then(WireUsage::usage),
        raw: Some(
            RawJson::from_slice(body).map_err(|e| FormatError::malformed("", e.to_string()))?,
        ),
        dialect: None,
    }))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireStart {
    tool_use: Option<WireToolUse>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireToolInput {
    input: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireReasoningDelta {
    text: Option<String>,
    signature: Option<String>,
    redacted_content: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireDelta {
    text: Option<String>,
    tool_use: Option<WireToolInput>,
    reasoning_content: Option<WireReasoningDelta>,
}

/// Any ConverseStream event's payload; which members matter depends on
/// the event's type.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireEvent {
    content_block_index: Option<u32>,
    start: Option<WireStart>,
    delta: Option<WireDelta>,
    stop_reason: Option<String>,
    usage: Option<WireUsage>,
}

/// One ConverseStream event (named by its `:event-type`) as deltas.
/// `metadata`, the last event, carries the usage and ends the stream.
pub(crate) fn decode_event(event: &str, data: &[u8]) -> Result<Vec<Delta>, FormatError> {
    let e: WireEvent = serde_json::from_slice(data).map_err(|err| {
        FormatError::malformed(event, format!("not a ConverseStream event: {err}"))
    })?;
    let index = e.content_block_index.unwrap_or(0);
    Ok(match event {
        "messageStart" => vec![Delta::Start { model: None }],
        "contentBlockStart" => match e.start.and_then(|s| s.tool_use) {
            Some(u) => vec![Delta::ToolCall {
                index,
                id: u.tool_use_id,
                name: u.name,
                arguments: String::new(),
            }],
            None => Vec::new(),
        },
        "contentBlockDelta" => {
            let Some(d) = e.delta else {
                return Err(FormatError::malformed("delta", "missing"));
            };
            let mut out = Vec::new();
            if let Some(text) = d.text {
                out.push(Delta::Text { text });
            }
            if let Some(u) = d.tool_use {
                out.push(Delta::ToolCall {
                    index,
                    id: None,
                    name: None,
                    arguments: u.input.unwrap_or_default(),
                });
            }
            if let Some(r) = d.reasoning_content {
                out.push(Delta::Thinking(Thinking {
                    text: r.text.unwrap_or_default(),
                    signature: r.signature,
                    redacted: r.redacted_content,
                }));
            }
            out
        }
        "messageStop" => match e.stop_reason {
            Some(r) => vec![Delta::Finish {
                reason: finish_reason(&r),
            }],
            None => Vec::new(),
        },
        "metadata" => {
            let mut out: Vec<Delta> = e
                .usage
                .as_ref()
                .and_then(WireUsage::usage)
                .map(|usage| Delta::Usage { usage })
                .into_iter()
                .collect();
            out.push(Delta::Done);
            out
        }
        _ => Vec::new(),
    })
}
