//! Outbound: a neutral request as a Chat Completions body.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::{Map, Value};

use super::{EncodeOptions, MaxTokensField, OutCall};
use crate::chat::{
    ChatRequest, Dialect, Image, Message, Part, Reasoning, ResponseFormat, Role, ToolChoice,
};
use crate::format::mapping::{self, budget_effort};
use crate::format::{index, join, FormatError};

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
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    frequency_penalty: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    presence_penalty: Option<f64>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop: &'a [String],
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<OutTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<OutToolChoice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_tool_calls: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<OutResponseFormat<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    service_tier: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<&'a str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    user: Option<&'a str>,
    /// Fields of the request this dialect has no setting for, left out of
    /// the body: sampling hints (`top_k`), `cache_control` breakpoints,
    /// earlier turns' reasoning, and the client's hints of its own dialect.
    /// For the log line and the `x-omitted-fields` header.
    #[serde(skip)]
    pub omitted: Vec<String>,
    /// Top-level fields the client wrote in this dialect that the neutral
    /// request does not hold, sent as they came.
    #[serde(flatten)]
    extra: Map<String, Value>,
}

#[derive(Debug, Serialize)]
struct OutMessage<'a> {
    role: &'static str,
    /// `null` for an assistant turn of tool calls only.
    content: Option<OutContent<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<OutCall<'a>>,
}

/// A message's content: a string, or parts when it holds images.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum OutContent<'a> {
    Text(Cow<'a, str>),
    Parts(Vec<OutPart<'a>>),
}

#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum OutPart<'a> {
    Text { text: Cow<'a, str> },
    ImageUrl { image_url: OutImageUrl<'a> },
}

#[derive(Debug, Serialize)]
struct OutImageUrl<'a> {
    url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<&'a str>,
}

impl<'a> OutPart<'a> {
    fn image(image: &'a Image) -> Self {
        OutPart::ImageUrl {
            image_url: OutImageUrl {
                url: mapping::image_url(&image.source),
                detail: image.detail.as_deref(),
            },
        }
    }
}

impl<'a> OutMessage<'a> {
    fn text(role: &'static str, text: impl Into<Cow<'a, str>>) -> Self {
        OutMessage {
            role,
            content: Some(OutContent::Text(text.into())),
            tool_call_id: None,
            tool_calls: Vec::new(),
        }
    }

    fn parts(role: &'static str, parts: Vec<OutPart<'a>>) -> Self {
        OutMessage {
            content: Some(OutContent::Parts(parts)),
            ..OutMessage::text(role, "")
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

/// `{"type": "text" | "json_object"}` or `{"type": "json_schema", "json_schema": {…}}`.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum OutResponseFormat<'a> {
    Text,
    JsonObject,
    JsonSchema { json_schema: OutJsonSchema<'a> },
}

#[derive(Debug, Serialize)]
struct OutJsonSchema<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    schema: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    strict: Option<bool>,
}

#[derive(Debug, Serialize)]
struct StreamOptions {
    include_usage: bool,
}

/// Renders a neutral request as a Chat Completions body for `model`.
/// Fails with [`FormatError::unsupported`] on what the request holds that
/// this dialect cannot be given (an unknown field or one without
/// equivalent from an Anthropic client).
pub fn encode_request<'a>(
    req: &'a ChatRequest,
    model: &'a str,
    opts: EncodeOptions,
) -> Result<RequestBody<'a>, FormatError> {
    let mut omitted = Vec::new();
    let mut extra = Map::new();
    mapping::check_untranslated(req, Dialect::OpenAi, &mut omitted, &mut extra)?;
    let mut messages = Vec::with_capacity(req.messages.len());
    for (i, m) in req.messages.iter().enumerate() {
        encode_message(m, &index("messages", i), &mut messages, &mut omitted)?;
    }
    let (max_tokens, max_completion_tokens) = match opts.max_tokens_field {
        MaxTokensField::MaxTokens => (req.max_tokens, None),
        MaxTokensField::MaxCompletionTokens => (None, req.max_tokens),
    };
    let cached = req.tools.iter().any(|t| t.cache_control.is_some())
        || req
            .messages
            .iter()
            .any(|m| m.content.iter().any(has_cache_control));
    if cached {
        omitted.push("cache_control".into());
    }
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
    let reasoning_effort = match &req.reasoning {
        None => None,
        Some(Reasoning::Effort { effort }) => Some(effort.as_str()),
        Some(Reasoning::Budget { budget_tokens }) => Some(budget_effort(*budget_tokens)),
        // The model decides: the provider's default, unless a level was set.
        Some(Reasoning::Adaptive { effort }) => effort.as_deref(),
        Some(Reasoning::Disabled) => {
            omitted.push("thinking".into());
            None
        }
    };
    let response_format = req.response_format.as_ref().map(|f| match f {
        ResponseFormat::Text => OutResponseFormat::Text,
        ResponseFormat::JsonObject => OutResponseFormat::JsonObject,
        ResponseFormat::JsonSchema(s) => OutResponseFormat::JsonSchema {
            json_schema: OutJsonSchema {
                name: &s.name,
                description: s.description.as_deref(),
                schema: &s.schema,
                strict: s.strict,
            },
        },
    });
    let service_tier = match req.service_tier.as_deref() {
        None => None,
        Some(tier) => {
            let mapped = mapping::openai_tier(tier);
            if mapped.is_none() {
                omitted.push("service_tier".into());
            }
            mapped
        }
    };
    if req.top_k.is_some() {
        omitted.push("top_k".into());
    }
    Ok(RequestBody {
        model,
        messages,
        max_tokens,
        max_completion_tokens,
        temperature: req.temperature,
        top_p: req.top_p,
        seed: req.seed,
        frequency_penalty: req.frequency_penalty,
        presence_penalty: req.presence_penalty,
        stop: &req.stop,
        tools,
        tool_choice,
        // Only meaningful, and only accepted, beside tools.
        parallel_tool_calls: req.parallel_tool_calls.filter(|_| !req.tools.is_empty()),
        reasoning_effort,
        response_format,
        service_tier,
        prompt_cache_key: req.prompt_cache_key.as_deref(),
        stream: req.stream,
        stream_options: (req.stream && opts.stream_usage).then_some(StreamOptions {
            include_usage: true,
        }),
        user: crate::format::user_id(req.metadata.as_ref()),
        extra,
        omitted,
    })
}

fn has_cache_control(p: &Part) -> bool {
    match p {
        Part::Text { cache_control, .. } | Part::ToolResult { cache_control, .. } => {
            cache_control.is_some()
        }
        Part::Image(image) => image.cache_control.is_some(),
        Part::ToolCall(_) | Part::Thinking(_) => false,
    }
}

fn encode_message<'a>(
    m: &'a Message,
    path: &str,
    out: &mut Vec<OutMessage<'a>>,
    omitted: &mut Vec<String>,
) -> Result<(), FormatError> {
    let role = match m.role {
        Role::System => "system",
        Role::User | Role::Tool => "user",
        Role::Assistant => "assistant",
    };
    // The common one-text message is sent without a copy.
    if let [Part::Text { text, .. }] = m.content.as_slice() {
        if !text.is_empty() {
            out.push(OutMessage::text(role, text.as_str()));
            return Ok(());
        }
    }
    let mut parts: Vec<OutPart<'a>> = Vec::new();
    let mut calls = Vec::new();
    // Images returned by tools: a tool message holds text only, so they
    // follow the results in a user message.
    let mut returned: Vec<OutPart<'a>> = Vec::new();
    let flush = |parts: &mut Vec<OutPart<'a>>, out: &mut Vec<OutMessage<'a>>| {
        if !parts.is_empty() {
            out.push(content_message(role, std::mem::take(parts)));
        }
    };
    for (j, part) in m.content.iter().enumerate() {
        let at = || index(&join(path, "content"), j);
        match part {
            Part::Text { text, .. } => parts.push(OutPart::Text {
                text: Cow::Borrowed(text),
            }),
            Part::Image(image) if m.role != Role::Assistant && m.role != Role::System => {
                parts.push(OutPart::image(image));
            }
            Part::ToolCall(c) if m.role == Role::Assistant => calls.push(OutCall::of(c)),
            Part::ToolResult {
                tool_call_id,
                content,
                images,
                ..
            } if matches!(m.role, Role::User | Role::Tool) => {
                // Results are messages of their own; keep the parts before them.
                flush(&mut parts, out);
                out.push(OutMessage {
                    tool_call_id: Some(tool_call_id),
                    ..OutMessage::text("tool", content.as_str())
                });
                if !images.is_empty() {
                    returned.push(OutPart::Text {
                        text: Cow::Owned(format!("Images returned by tool call {tool_call_id}:")),
                    });
                    returned.extend(images.iter().map(OutPart::image));
                }
            }
            // Chat Completions takes no reasoning back: earlier turns'
            // thinking is left out.
            Part::Thinking(_) if m.role == Role::Assistant => omitted.push(at()),
            Part::Image(_) | Part::ToolCall(_) | Part::ToolResult { .. } | Part::Thinking(_) => {
                return Err(FormatError::unsupported(
                    at(),
                    format!("a {role} message cannot carry this part"),
                ))
            }
        }
    }
    if !returned.is_empty() {
        out.push(OutMessage::parts("user", returned));
    }
    if m.role == Role::Assistant {
        let text = joined_text(&parts);
        let content =
            (!text.is_empty() || calls.is_empty()).then_some(OutContent::Text(text.into()));
        out.push(OutMessage {
            content,
            tool_calls: calls,
            ..OutMessage::text("assistant", "")
        });
    } else if !parts.is_empty() || m.content.is_empty() {
        out.push(content_message(role, parts));
    }
    Ok(())
}

/// The text parts of `parts`, joined (its images left out).
fn joined_text(parts: &[OutPart<'_>]) -> String {
    parts
        .iter()
        .filter_map(|p| match p {
            OutPart::Text { text } => Some(text.as_ref()),
            OutPart::ImageUrl { .. } => None,
        })
        .collect()
}

/// A message of text and images: plain text when it holds no image.
fn content_message<'a>(role: &'static str, parts: Vec<OutPart<'a>>) -> OutMessage<'a> {
    if parts.iter().all(|p| matches!(p, OutPart::Text { .. })) {
        OutMessage::text(role, joined_text(&parts))
    } else {
        OutMessage::parts(role, parts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::Message;

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
