//! The OpenAI Chat Completions format (`POST /v1/chat/completions`).
//!
//! Inbound: [`parse_request`] reads a client's request, [`render_response`]
//! and [`render_error`] answer it. Outbound: [`encode_request`] and
//! [`decode_response`] are what the OpenAI adapter and every
//! OpenAI-compatible preset send and read.
//!
//! Request fields with no neutral equivalent that only tune sampling or
//! bookkeeping (`seed`, penalties, `logit_bias`, `parallel_tool_calls`,
//! `store`, `metadata`, `service_tier`, …) are accepted and ignored; fields
//! that change the shape of the answer (`n > 1`, audio, `logprobs`,
//! structured `response_format`, legacy `functions`) are refused, as is any
//! unknown field, the way the OpenAI API itself refuses them. A message's
//! optional participant `name` is ignored.
//!
//! Outbound, a neutral tool result's `is_error` has no OpenAI equivalent and
//! is not sent; results travel as `tool` messages in their original order.

use std::borrow::Cow;

use serde_json::Value;

use serde_json::json;

use serde::de::{self, Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

use super::wire::{self, required, Arguments, First, Loose, Obj, Str};
use super::{index, join, parse_json, Fields, FormatError, Read};
use crate::chat::{
    ChatRequest, ChatResponse, Dialect, FinishReason, Message, Part, RawJson, Role, Tool, ToolCall,
    ToolChoice, Usage,
};

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

// ---------------------------------------------------------------- outbound

/// A Chat Completions request body, as [`encode_request`] renders it;
/// serialize it to send it.
#[derive(Debug, Serialize)]
pub struct RequestBody<'a> {
    model: &'a str,
    messages: Vec<OutMessage<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop: &'a [String],
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<OutTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<OutToolChoice<'a>>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    user: Option<&'a str>,
    /// Hints left out for a provider without such a setting (never sent).
    #[serde(skip)]
    pub omitted: Vec<String>,
}

#[derive(Debug, Serialize)]
struct OutMessage<'a> {
    role: &'static str,
    /// `null` for an assistant turn of tool calls only.
    content: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<OutCall<'a>>,
}

impl<'a> OutMessage<'a> {
    fn text(role: &'static str, text: impl Into<Cow<'a, str>>) -> Self {
        OutMessage {
            role,
            content: Some(text.into()),
            tool_call_id: None,
            tool_calls: Vec::new(),
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

#[derive(Debug, Serialize)]
struct OutTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: OutToolFunction<'a>,
}

#[derive(Debug, Serialize)]
struct OutToolFunction<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    parameters: &'a Value,
}

/// `"auto"`, `"none"`, `"required"`, or `{"type": "function", "function": {"name"}}`.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum OutToolChoice<'a> {
    Mode(&'static str),
    Function {
        #[serde(rename = "type")]
        kind: &'static str,
        function: Named<'a>,
    },
}

#[derive(Debug, Serialize)]
struct Named<'a> {
    name: &'a str,
}

#[derive(Debug, Serialize)]
struct StreamOptions {
    include_usage: bool,
}

/// Renders a neutral request as a Chat Completions body for `model`.
pub fn encode_request<'a>(
    req: &'a ChatRequest,
    model: &'a str,
    opts: EncodeOptions,
) -> Result<RequestBody<'a>, FormatError> {
    let mut messages = Vec::with_capacity(req.messages.len());
    for (i, m) in req.messages.iter().enumerate() {
        encode_message(m, &index("messages", i), &mut messages)?;
    }
    let (max_tokens, max_completion_tokens) = match opts.max_tokens_field {
        MaxTokensField::MaxTokens => (req.max_tokens, None),
        MaxTokensField::MaxCompletionTokens => (None, req.max_tokens),
    };
    let tools = req
        .tools
        .iter()
        .map(|t| OutTool {
            kind: "function",
            function: OutToolFunction {
                name: &t.name,
                description: t.description.as_deref(),
                parameters: &t.parameters,
            },
        })
        .collect();
    let tool_choice = req.tool_choice.as_ref().map(|choice| match choice {
        ToolChoice::Auto => OutToolChoice::Mode("auto"),
        ToolChoice::None => OutToolChoice::Mode("none"),
        ToolChoice::Required => OutToolChoice::Mode("required"),
        ToolChoice::Tool(name) => OutToolChoice::Function {
            kind: "function",
            function: Named { name },
        },
    });
    Ok(RequestBody {
        model,
        messages,
        max_tokens,
        max_completion_tokens,
        temperature: req.temperature,
        top_p: req.top_p,
        stop: &req.stop,
        tools,
        tool_choice,
        stream: req.stream,
        stream_options: (req.stream && opts.stream_usage).then_some(StreamOptions {
            include_usage: true,
        }),
        user: super::user_id(req.metadata.as_ref()),
        omitted: Vec::new(),
    })
}

fn encode_message<'a>(
    m: &'a Message,
    path: &str,
    out: &mut Vec<OutMessage<'a>>,
) -> Result<(), FormatError> {
    let role = match m.role {
        Role::System => "system",
        Role::User | Role::Tool => "user",
        Role::Assistant => "assistant",
    };
    // The common one-text message is sent without a copy.
    if let [Part::Text { text }] = m.content.as_slice() {
        if !text.is_empty() {
            out.push(OutMessage::text(role, text.as_str()));
            return Ok(());
        }
    }
    let mut text = String::new();
    let mut calls = Vec::new();
    for (j, part) in m.content.iter().enumerate() {
        match part {
            Part::Text { text: t } => text.push_str(t),
            Part::ToolCall(c) if m.role == Role::Assistant => calls.push(OutCall::of(c)),
            Part::ToolResult {
                tool_call_id,
                content,
                ..
            } if matches!(m.role, Role::User | Role::Tool) => {
                // Results are messages of their own; keep the text before them.
                if !text.is_empty() {
                    out.push(OutMessage::text(role, std::mem::take(&mut text)));
                }
                out.push(OutMessage {
                    tool_call_id: Some(tool_call_id),
                    ..OutMessage::text("tool", content.as_str())
                });
            }
            Part::ToolCall(_) | Part::ToolResult { .. } => {
                return Err(FormatError::unsupported(
                    index(&join(path, "content"), j),
                    format!("a {role} message cannot carry this tool part"),
                ))
            }
        }
    }
    if m.role == Role::Assistant {
        let content = (!text.is_empty() || calls.is_empty()).then_some(Cow::Owned(text));
        out.push(OutMessage {
            content,
            tool_calls: calls,
            ..OutMessage::text("assistant", "")
        });
    } else if !text.is_empty() || m.content.is_empty() {
        out.push(OutMessage::text(role, text));
    }
    Ok(())
}

/// A Chat Completions answer as it arrives: what is read of it, and the
/// members that make it an error object instead.
#[derive(Deserialize)]
struct Completion<'a> {
    model: Option<String>,
    #[serde(borrow)]
    choices: Option<First<Obj<Choice<'a>>>>,
    usage: Option<Obj<WireUsage>>,
    error: Option<IgnoredAny>,
    #[serde(default, borrow)]
    object: Loose<'a>,
    #[serde(default, borrow, rename = "type")]
    kind: Loose<'a>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    message: Option<Obj<AnswerMessage>>,
    #[serde(borrow)]
    finish_reason: Option<Str<'a>>,
    error: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct AnswerMessage {
    content: Option<AnswerContent>,
    refusal: Option<String>,
    tool_calls: Option<Vec<Obj<AnswerCall>>>,
}

#[derive(Deserialize)]
struct AnswerCall {
    id: Option<String>,
    function: Option<Obj<AnswerFunction>>,
}

#[derive(Deserialize)]
struct AnswerFunction {
    name: Option<String>,
    arguments: Option<Arguments>,
}

/// `usage` of an answer or of a stream's last chunk.
#[derive(Deserialize)]
pub(crate) struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
}

impl From<WireUsage> for Usage {
    fn from(u: WireUsage) -> Usage {
        Usage {
            input_tokens: u.prompt_tokens.unwrap_or(0),
            output_tokens: u.completion_tokens.unwrap_or(0),
        }
    }
}

/// An answer's `content`: a string, or text and refusal parts joined.
struct AnswerContent(String);

impl<'de> Deserialize<'de> for AnswerContent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Part<'a> {
            #[serde(borrow, rename = "type")]
            kind: Option<Str<'a>>,
            text: Option<String>,
            refusal: Option<String>,
        }
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = AnswerContent;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string or an array of content parts")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<AnswerContent, E> {
                Ok(AnswerContent(s.to_string()))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<AnswerContent, E> {
                Ok(AnswerContent(s))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<AnswerContent, A::Error> {
                let mut out = String::new();
                while let Some(Obj(part)) = seq.next_element::<Obj<Part<'_>>>()? {
                    let kind = part.kind.as_ref().map(Str::as_str);
                    let text = match kind {
                        Some("text") => part.text,
                        Some("refusal") => part.refusal,
                        Some(kind @ ("image_url" | "input_audio" | "file")) => {
                            return Err(de::Error::custom(format!(
                                "{kind} content cannot be translated"
                            )))
                        }
                        Some(other) => {
                            return Err(de::Error::custom(format!(
                                "unknown content part type \"{other}\""
                            )))
                        }
                        None => return Err(de::Error::custom("a content part without a type")),
                    };
                    match text {
                        Some(t) => out.push_str(&t),
                        None => {
                            return Err(de::Error::custom(format!(
                                "a {} part without its {0}",
                                kind.unwrap_or_default()
                            )))
                        }
                    }
                }
                Ok(AnswerContent(out))
            }
        }
        d.deserialize_any(V)
    }
}

/// Reads a Chat Completions answer: [`Read::Error`] when the body is an
/// error object (at the top, or OpenRouter's in the first choice: an
/// `error`, or `finish_reason: "error"`), for the classifier to read.
/// `raw` keeps the body's text.
pub fn decode_response(body: &[u8]) -> Result<Read<ChatResponse>, FormatError> {
    let Obj(c) = wire::read::<Obj<Completion<'_>>>(body)?;
    let first = c.choices.as_ref().and_then(|f| f.0.as_ref());
    let choice_error = first
        .is_some_and(|Obj(ch)| ch.error.is_some() || wire::is_error(ch.finish_reason.as_ref()));
    if wire::says_error(&c.error, &c.object, &c.kind) || choice_error {
        return Ok(Read::Error);
    }
    let Obj(choice) = required(c.choices, || "choices".into())?
        .0
        .ok_or_else(|| FormatError::malformed("choices", "no choice in the answer"))?;
    let Obj(msg) = required(choice.message, || "choices[0].message".into())?;
    let mut text = msg.content.map(|c| c.0).unwrap_or_default();
    if text.is_empty() {
        if let Some(refusal) = msg.refusal {
            text = refusal;
        }
    }
    let mut tool_calls = Vec::new();
    for (i, Obj(call)) in msg.tool_calls.unwrap_or_default().into_iter().enumerate() {
        let at = || index("choices[0].message.tool_calls", i);
        let Obj(function) = required(call.function, || join(&at(), "function"))?;
        tool_calls.push(ToolCall {
            id: call.id.unwrap_or_default(),
            name: required(function.name, || join(&join(&at(), "function"), "name"))?,
            arguments: function.arguments.map_or_else(|| "{}".into(), |a| a.0),
        });
    }
    Ok(Read::Answer(ChatResponse {
        text,
        tool_calls,
        model: c.model.unwrap_or_default(),
        provider: String::new(),
        finish_reason: choice.finish_reason.map(|r| finish_reason(r.as_str())),
        usage: c.usage.map(|Obj(u)| u.into()),
        raw: Some(
            RawJson::from_slice(body).map_err(|e| FormatError::malformed("", e.to_string()))?,
        ),
        dialect: Some(Dialect::OpenAi),
    }))
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

/// The Chat Completions `finish_reason` of a neutral reason.
pub fn finish_reason_name(r: &FinishReason) -> &str {
    match r {
        FinishReason::Stop => "stop",
        FinishReason::Length => "length",
        FinishReason::ToolCalls => "tool_calls",
        FinishReason::ContentFilter => "content_filter",
        FinishReason::Other(other) => other.as_str(),
    }
}

// ----------------------------------------------------------------- inbound

/// Fields read into the neutral request.
const READ: &[&str] = &[
    "model",
    "messages",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "stop",
    "n",
    "stream",
    "stream_options",
    "tools",
    "tool_choice",
    "user",
    // Checked, and refused unless they ask for plain text.
    "logprobs",
    "modalities",
    "response_format",
];

/// Hints with no neutral equivalent, accepted and ignored.
const IGNORED: &[&str] = &[
    "frequency_penalty",
    "presence_penalty",
    "seed",
    "logit_bias",
    "top_logprobs",
    "parallel_tool_calls",
    "service_tier",
    "store",
    "metadata",
    "reasoning_effort",
    "prompt_cache_key",
    "safety_identifier",
    "verbosity",
];

/// Fields that would change the answer's shape: refused when set.
const REFUSED: &[&str] = &[
    "audio",
    "functions",
    "function_call",
    "prediction",
    "web_search_options",
];

/// Reads a client's Chat Completions request body.
pub fn parse_request(body: &[u8]) -> Result<ChatRequest, FormatError> {
    request_from_value(&parse_json(body)?)
}

/// Reads a client's Chat Completions request, already parsed as JSON.
pub fn request_from_value(v: &Value) -> Result<ChatRequest, FormatError> {
    let f = Fields::of(v, "")?;
    for key in f.keys() {
        if REFUSED.contains(&key) && f.get(key).is_some() {
            return Err(FormatError::unsupported(key, "cannot be translated"));
        }
        if !(READ.contains(&key) || IGNORED.contains(&key) || REFUSED.contains(&key)) {
            return Err(FormatError::malformed(key, "unknown field"));
        }
    }
    if let Some(n) = f.u32("n")? {
        if n != 1 {
            return Err(FormatError::unsupported(
                "n",
                "only one choice (n = 1) is served",
            ));
        }
    }
    if f.bool("logprobs")? == Some(true) {
        return Err(FormatError::unsupported("logprobs", "cannot be translated"));
    }
    if let Some(modalities) = f.array("modalities")? {
        if modalities.iter().any(|m| m.as_str() != Some("text")) {
            return Err(FormatError::unsupported(
                "modalities",
                "only text output is served",
            ));
        }
    }
    if let Some(rf) = f.object("response_format")? {
        let kind = rf.req_str("type")?;
        if kind != "text" {
            return Err(FormatError::unsupported(
                rf.path("type"),
                format!("{kind} responses cannot be translated"),
            ));
        }
    }
    let raw = f
        .array("messages")?
        .ok_or_else(|| FormatError::malformed("messages", "required"))?;
    if raw.is_empty() {
        return Err(FormatError::malformed("messages", "must not be empty"));
    }
    let messages = raw
        .iter()
        .enumerate()
        .map(|(i, m)| parse_message(m, &index("messages", i)))
        .collect::<Result<Vec<_>, _>>()?;
    let max_tokens = match f.u32("max_completion_tokens")? {
        Some(n) => Some(n),
        None => f.u32("max_tokens")?,
    };
    let stop = match f.get("stop") {
        None => Vec::new(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(i, s)| {
                s.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| FormatError::malformed(index("stop", i), "expected a string"))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(FormatError::malformed("stop", "expected string or array")),
    };
    let tools = f
        .array("tools")?
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, t)| parse_tool(t, &index("tools", i)))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ChatRequest {
        model: Some(f.req_str("model")?.to_string()),
        messages,
        max_tokens,
        temperature: f.f64("temperature")?,
        top_p: f.f64("top_p")?,
        stop,
        tools,
        tool_choice: parse_tool_choice(f.get("tool_choice"))?,
        stream: f.bool("stream")?.unwrap_or(false),
        metadata: f.str("user")?.map(|u| json!({"user_id": u})),
        native: None,
    })
}

fn parse_message(v: &Value, path: &str) -> Result<Message, FormatError> {
    let f = Fields::of(v, path)?;
    let role = f.req_str("role")?;
    let text = |required: bool| -> Result<String, FormatError> {
        match content_text(f.get("content"), &f.path("content"))? {
            Some(t) => Ok(t),
            None if required => Err(FormatError::malformed(f.path("content"), "required")),
            None => Ok(String::new()),
        }
    };
    let text_part = |t: String| -> Vec<Part> {
        if t.is_empty() {
            Vec::new()
        } else {
            vec![Part::Text { text: t }]
        }
    };
    match role {
        "system" | "developer" => Ok(Message::system(text(true)?)),
        "user" => Ok(Message::user(text(true)?)),
        "tool" => Ok(Message {
            role: Role::Tool,
            content: vec![Part::ToolResult {
                tool_call_id: f.req_str("tool_call_id")?.to_string(),
                content: text(false)?,
                is_error: false,
            }],
        }),
        "assistant" => {
            for key in ["audio", "function_call"] {
                if f.get(key).is_some() {
                    return Err(FormatError::unsupported(
                        f.path(key),
                        "cannot be translated",
                    ));
                }
            }
            let mut content = text_part(text(false)?);
            for (i, call) in f
                .array("tool_calls")?
                .unwrap_or_default()
                .iter()
                .enumerate()
            {
                let call = Fields::of(call, index(&f.path("tool_calls"), i))?;
                if let Some(kind) = call.str("type")? {
                    if kind != "function" {
                        return Err(FormatError::unsupported(
                            call.path("type"),
                            format!("{kind} tool calls cannot be translated"),
                        ));
                    }
                }
                let function = call
                    .object("function")?
                    .ok_or_else(|| FormatError::malformed(call.path("function"), "required"))?;
                content.push(Part::ToolCall(ToolCall {
                    id: call.req_str("id")?.to_string(),
                    name: function.req_str("name")?.to_string(),
                    arguments: function.str("arguments")?.unwrap_or("{}").to_string(),
                }));
            }
            Ok(Message {
                role: Role::Assistant,
                content,
            })
        }
        "function" => Err(FormatError::unsupported(
            f.path("role"),
            "the legacy function role cannot be translated; use tool",
        )),
        other => Err(FormatError::malformed(
            f.path("role"),
            format!("unknown role \"{other}\""),
        )),
    }
}

/// A request's `content`: a string or an array of text parts.
fn content_text(v: Option<&Value>, path: &str) -> Result<Option<String>, FormatError> {
    match v {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Array(parts)) => {
            let mut out = String::new();
            for (i, part) in parts.iter().enumerate() {
                let p = Fields::of(part, index(path, i))?;
                match p.req_str("type")? {
                    "text" => out.push_str(p.req_str("text")?),
                    kind @ ("image_url" | "input_audio" | "file" | "refusal") => {
                        return Err(FormatError::unsupported(
                            p.path("type"),
                            format!("{kind} content cannot be translated"),
                        ))
                    }
                    other => {
                        return Err(FormatError::malformed(
                            p.path("type"),
                            format!("unknown content part type \"{other}\""),
                        ))
                    }
                }
            }
            Ok(Some(out))
        }
        Some(_) => Err(FormatError::malformed(path, "expected string or array")),
    }
}

fn parse_tool(v: &Value, path: &str) -> Result<Tool, FormatError> {
    let t = Fields::of(v, path)?;
    let kind = t.req_str("type")?;
    if kind != "function" {
        return Err(FormatError::unsupported(
            t.path("type"),
            format!("{kind} tools cannot be translated"),
        ));
    }
    let function = t
        .object("function")?
        .ok_or_else(|| FormatError::malformed(t.path("function"), "required"))?;
    Ok(Tool {
        name: function.req_str("name")?.to_string(),
        description: function.str("description")?.map(str::to_string),
        parameters: function
            .get("parameters")
            .cloned()
            .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
    })
}

fn parse_tool_choice(v: Option<&Value>) -> Result<Option<ToolChoice>, FormatError> {
    let path = "tool_choice";
    match v {
        None => Ok(None),
        Some(Value::String(s)) => match s.as_str() {
            "auto" => Ok(Some(ToolChoice::Auto)),
            "none" => Ok(Some(ToolChoice::None)),
            "required" => Ok(Some(ToolChoice::Required)),
            other => Err(FormatError::malformed(
                path,
                format!("unknown tool choice \"{other}\""),
            )),
        },
        Some(obj) => {
            let f = Fields::of(obj, path)?;
            let kind = f.req_str("type")?;
            if kind != "function" {
                return Err(FormatError::unsupported(
                    f.path("type"),
                    format!("{kind} tool choice cannot be translated"),
                ));
            }
            let function = f
                .object("function")?
                .ok_or_else(|| FormatError::malformed(f.path("function"), "required"))?;
            Ok(Some(ToolChoice::Tool(
                function.req_str("name")?.to_string(),
            )))
        }
    }
}

/// A `chat.completion` object, as [`render_response`] renders it;
/// serialize it to answer.
#[derive(Debug, Serialize)]
pub struct ResponseBody<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: [OutChoice<'a>; 1],
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<OutUsage>,
}

#[derive(Debug, Serialize)]
struct OutChoice<'a> {
    index: u32,
    message: OutAnswer<'a>,
    /// Always `null`.
    logprobs: (),
    finish_reason: Option<&'a str>,
}

#[derive(Debug, Serialize)]
struct OutAnswer<'a> {
    role: &'static str,
    /// `null` for an answer of tool calls only.
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<OutCall<'a>>,
    /// Always `null`: a refusal is answered as text.
    refusal: (),
}

/// `usage` as an answer or a stream's usage chunk reports it.
#[derive(Debug, Serialize)]
pub(crate) struct OutUsage {
    prompt_tokens: u64,
    completion_tokens: u64,
    total_tokens: u64,
}

impl From<Usage> for OutUsage {
    fn from(u: Usage) -> OutUsage {
        OutUsage {
            prompt_tokens: u.input_tokens,
            completion_tokens: u.output_tokens,
            total_tokens: u.input_tokens.saturating_add(u.output_tokens),
        }
    }
}

/// Renders a neutral answer as a `chat.completion` object. `model` in the
/// output is the model that actually answered.
pub fn render_response<'a>(resp: &'a ChatResponse, id: &'a str, created: u64) -> ResponseBody<'a> {
    let content =
        (!resp.text.is_empty() || resp.tool_calls.is_empty()).then_some(resp.text.as_str());
    ResponseBody {
        id,
        object: "chat.completion",
        created,
        model: &resp.model,
        choices: [OutChoice {
            index: 0,
            message: OutAnswer {
                role: "assistant",
                content,
                tool_calls: resp.tool_calls.iter().map(OutCall::of).collect(),
                refusal: (),
            },
            logprobs: (),
            finish_reason: resp.finish_reason.as_ref().map(finish_reason_name),
        }],
        usage: resp.usage.map(OutUsage::from),
    }
}

/// The OpenAI error `type` for an HTTP status.
pub fn error_type(status: u16) -> &'static str {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_and_images_are_refused_with_their_path() {
        let e = parse_request(
            br#"{"model":"m","messages":[{"role":"user","content":"hi"}],"bogus":1}"#,
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "bogus: unknown field");
        let e = parse_request(
            br#"{"model":"m","messages":[{"role":"user","content":"a"},{"role":"user","content":"b"},
                {"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}"#,
        )
        .unwrap_err();
        assert_eq!(e.kind, super::super::FormatErrorKind::Unsupported);
        assert_eq!(e.path, "messages[2].content[0].type");
        let e = parse_request(br#"{"model":"m","messages":[{"role":"user","content":5}]}"#)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "messages[0].content: expected string or array"
        );
    }

    #[test]
    fn max_tokens_field_follows_the_quirk() {
        let mut req = ChatRequest::new(vec![Message::user("hi")]);
        req.max_tokens = Some(7);
        let opts = EncodeOptions {
            max_tokens_field: MaxTokensField::MaxCompletionTokens,
            stream_usage: true,
        };
        let v = serde_json::to_value(encode_request(&req, "gpt", opts).unwrap()).unwrap();
        assert_eq!(v["max_completion_tokens"], 7);
        assert!(v.get("max_tokens").is_none());
    }
}
