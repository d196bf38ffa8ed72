//! Inbound: a client's Chat Completions request read into the neutral one.

use serde_json::{json, Value};

use crate::chat::{ChatRequest, Dialect, Gap, Message, Part, Role, Thinking, Tool, ToolCall};
use crate::format::mapping::{self, GapFn};
use crate::format::{inbound, index, parse_json, Fields, FormatError};

/// Fields read into the neutral request (`stream_options` is the
/// gateway's to read).
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
    "parallel_tool_calls",
    "user",
    "seed",
    "frequency_penalty",
    "presence_penalty",
    "reasoning_effort",
    "response_format",
    "service_tier",
    "prompt_cache_key",
    "logprobs",
    "top_logprobs",
    "logit_bias",
    "modalities",
];

/// Fields that only tune or label the request, with no equivalent in the
/// other dialect: omitted there, and named.
const HINTS: &[&str] = &[
    "store",
    "metadata",
    "safety_identifier",
    "verbosity",
    "prediction",
];

/// Fields that change the answer and have no equivalent elsewhere.
const NO_EQUIVALENT: &[&str] = &["audio", "functions", "function_call", "web_search_options"];

/// Reads a client's Chat Completions request body.
pub fn parse_request(body: &[u8]) -> Result<ChatRequest, FormatError> {
    request_from_value(&parse_json(body)?)
}

/// Reads a client's Chat Completions request, already parsed as JSON.
/// Malformed known fields fail with their path; unknown fields and parts,
/// and those the neutral request cannot hold, are recorded in
/// [`ChatRequest::untranslated`].
pub fn request_from_value(v: &Value) -> Result<ChatRequest, FormatError> {
    let f = Fields::of(v, "")?;
    let mut gaps = Vec::new();
    let mut gap =
        |path: String, gap: Gap| gaps.push(inbound::untranslated(Dialect::OpenAi, path, gap));
    mapping::unread_fields(&f, READ, HINTS, NO_EQUIVALENT, &mut gap);
    if f.u32("n")?.is_some_and(|n| n != 1) {
        gap("n".into(), Gap::NoEquivalent);
    }
    if f.bool("logprobs")? == Some(true) {
        gap("logprobs".into(), Gap::NoEquivalent);
    }
    if f.u32("top_logprobs")?.is_some() {
        gap("top_logprobs".into(), Gap::NoEquivalent);
    }
    if f.object("logit_bias")?
        .is_some_and(|b| b.keys().next().is_some())
    {
        gap("logit_bias".into(), Gap::NoEquivalent);
    }
    if let Some(modalities) = f.array("modalities")? {
        if modalities.iter().any(|m| m.as_str() != Some("text")) {
            gap("modalities".into(), Gap::NoEquivalent);
        }
    }
    let raw = f
        .array("messages")?
        .ok_or_else(|| FormatError::malformed("messages", "required"))?;
    if raw.is_empty() {
        return Err(FormatError::malformed("messages", "must not be empty"));
    }
    let mut messages = Vec::with_capacity(raw.len());
    for (i, m) in raw.iter().enumerate() {
        if let Some(m) = parse_message(m, &index("messages", i), &mut gap)? {
            messages.push(m);
        }
    }
    let max_tokens = match f.u32("max_completion_tokens")? {
        Some(n) => Some(n),
        None => f.u32("max_tokens")?,
    };
    let stop = match f.get("stop") {
        None => Vec::new(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => inbound::strings(a, "stop")?,
        Some(_) => return Err(FormatError::malformed("stop", "expected string or array")),
    };
    let mut tools = Vec::new();
    for (i, t) in f.array("tools")?.unwrap_or_default().iter().enumerate() {
        if let Some(t) = parse_tool(t, &index("tools", i), &mut gap)? {
            tools.push(t);
        }
    }
    let seed = match f.get("seed") {
        None => None,
        Some(v) => Some(
            v.as_i64()
                .ok_or_else(|| FormatError::malformed("seed", "expected an integer"))?,
        ),
    };
    let reasoning = inbound::effort(f.str("reasoning_effort")?);
    let tool_choice = inbound::tool_choice(f.get("tool_choice"), Some("function"), &mut gap)?;
    let response_format = match f.object("response_format")? {
        Some(rf) => inbound::response_format(&rf, Some("json_schema"), &mut gap)?,
        None => None,
    };
    let tail = inbound::request_tail(&f, gaps)?;
    Ok(ChatRequest {
        messages,
        max_tokens,
        stop,
        tools,
        tool_choice,
        metadata: f.str("user")?.map(|u| json!({"user_id": u})),
        seed,
        frequency_penalty: f.f64("frequency_penalty")?,
        presence_penalty: f.f64("presence_penalty")?,
        parallel_tool_calls: f.bool("parallel_tool_calls")?,
        reasoning,
        response_format,
        prompt_cache_key: f.str("prompt_cache_key")?.map(str::to_string),
        ..tail
    })
}

/// One message, or `None` for one the neutral request cannot hold (its
/// gap recorded).
fn parse_message(
    v: &Value,
    path: &str,
    gap: &mut GapFn<'_>,
) -> Result<Option<Message>, FormatError> {
    let f = Fields::of(v, path)?;
    let role = match f.req_str("role")? {
        "system" | "developer" => Role::System,
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "tool" => Role::Tool,
        "function" => {
            gap(f.path("role"), Gap::NoEquivalent);
            return Ok(None);
        }
        other => {
            return Err(FormatError::malformed(
                f.path("role"),
                format!("unknown role \"{other}\""),
            ))
        }
    };
    let required = matches!(role, Role::System | Role::User);
    let parts = match f.get("content") {
        None if required => return Err(FormatError::malformed(f.path("content"), "required")),
        None => Vec::new(),
        Some(c) => content_parts(c, &f, "content", gap)?,
    };
    match role {
        Role::Tool => {
            let (content, images) = inbound::text_and_images(parts);
            Ok(Some(Message {
                role: Role::Tool,
                content: vec![Part::ToolResult {
                    tool_call_id: f.req_str("tool_call_id")?.to_string(),
                    content,
                    images,
                    is_error: false,
                    cache_control: None,
                }],
            }))
        }
        Role::Assistant => {
            for key in ["audio", "function_call"] {
                if f.get(key).is_some() {
                    gap(f.path(key), Gap::NoEquivalent);
                }
            }
            let mut content = thinking_parts(&f)?;
            content.extend(parts);
            for (i, call) in f
                .array("tool_calls")?
                .unwrap_or_default()
                .iter()
                .enumerate()
            {
                let call = Fields::of(call, index(&f.path("tool_calls"), i))?;
                if let Some(kind) = call.str("type")? {
                    if kind != "function" {
                        gap(call.path("type"), Gap::NoEquivalent);
                        continue;
                    }
                }
                let function = call.req_object("function")?;
                content.push(Part::ToolCall(ToolCall {
                    id: call.req_str("id")?.to_string(),
                    name: function.req_str("name")?.to_string(),
                    arguments: function.str("arguments")?.unwrap_or("{}").to_string(),
                }));
            }
            Ok(Some(Message {
                role: Role::Assistant,
                content,
            }))
        }
        Role::System | Role::User => Ok(Some(Message {
            role,
            content: if parts.is_empty() {
                vec![Part::text("")]
            } else {
                parts
            },
        })),
    }
}

/// An assistant message's reasoning sent back: `thinking_blocks` (with
/// their signatures), else `reasoning_content` as one unsigned block.
fn thinking_parts(f: &Fields<'_>) -> Result<Vec<Part>, FormatError> {
    let mut out = Vec::new();
    if let Some(blocks) = f.array("thinking_blocks")? {
        for (i, b) in blocks.iter().enumerate() {
            let b = Fields::of(b, index(&f.path("thinking_blocks"), i))?;
            let block = match b.req_str("type")? {
                "thinking" => Thinking {
                    text: b.str("thinking")?.unwrap_or_default().to_string(),
                    signature: b.str("signature")?.map(str::to_string),
                    redacted: None,
                },
                "redacted_thinking" => Thinking {
                    redacted: Some(b.req_str("data")?.to_string()),
                    ..Thinking::default()
                },
                other => {
                    return Err(FormatError::malformed(
                        b.path("type"),
                        format!("unknown thinking block type \"{other}\""),
                    ))
                }
            };
            out.push(Part::Thinking(block));
        }
        return Ok(out);
    }
    if let Some(text) = f.str("reasoning_content")?.filter(|t| !t.is_empty()) {
        out.push(Part::Thinking(Thinking {
            text: text.to_string(),
            ..Thinking::default()
        }));
    }
    Ok(out)
}

/// A request's `content`, field `key` of `parent`: a string, or text, image
/// and refusal parts. The field's path is written only for parts and errors.
fn content_parts(
    v: &Value,
    parent: &Fields<'_>,
    key: &str,
    gap: &mut GapFn<'_>,
) -> Result<Vec<Part>, FormatError> {
    match v {
        Value::String(s) => Ok(vec![Part::text(s.clone())]),
        Value::Array(parts) => {
            let path = &parent.path(key);
            let mut out = Vec::with_capacity(parts.len());
            for (i, part) in parts.iter().enumerate() {
                let p = Fields::of(part, index(path, i))?;
                match p.req_str("type")? {
                    "text" => out.push(inbound::text_part(&p)?),
                    "refusal" => out.push(Part::text(p.req_str("refusal")?)),
                    "image_url" => {
                        let image = p.req_object("image_url")?;
                        let url = image.req_str("url")?;
                        let cache_control = p.get("cache_control").cloned();
                        out.extend(
                            inbound::url_image(&image, "url", url, cache_control, gap)?
                                .map(Part::Image),
                        );
                    }
                    "input_audio" | "file" => gap(index(path, i), Gap::NoEquivalent),
                    _ => gap(index(path, i), Gap::Unknown),
                }
            }
            Ok(out)
        }
        _ => Err(FormatError::malformed(
            parent.path(key),
            "expected string or array",
        )),
    }
}

fn parse_tool(v: &Value, path: &str, gap: &mut GapFn<'_>) -> Result<Option<Tool>, FormatError> {
    let t = Fields::of(v, path)?;
    let cache_control = t.get("cache_control").cloned();
    inbound::function_tool(&t, Some("function"), cache_control, gap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_and_parts_are_recorded_with_their_path() {
        let req = parse_request(
            br#"{"model":"m","messages":[{"role":"user","content":"a"},{"role":"user","content":"b"},
                {"role":"user","content":[{"type":"text","text":"see"},{"type":"video","v":1}]}],
                "bogus":1,"store":true,"n":2}"#,
        )
        .unwrap();
        let gaps: Vec<_> = req
            .untranslated
            .iter()
            .map(|u| (u.path.as_str(), u.gap))
            .collect();
        assert_eq!(
            gaps,
            [
                ("bogus", Gap::Unknown),
                ("store", Gap::Hint),
                ("n", Gap::NoEquivalent),
                ("messages[2].content[1]", Gap::Unknown),
            ]
        );
        assert_eq!(req.messages[2].content, [Part::text("see")]);
        let e = parse_request(br#"{"model":"m","messages":[{"role":"user","content":5}]}"#)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "messages[0].content: expected string or array"
        );
        let e = parse_request(
            br#"{"model":"m","messages":[{"role":"user","content":"a"}],"seed":"x"}"#,
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "seed: expected an integer");
    }
}
