//! Inbound: a client's Responses request read into the neutral one.
//!
//! `input` is a string (one user message) or a list of items: messages
//! (with or without `"type": "message"`), `function_call` and
//! `function_call_output` items. Consecutive calls become one assistant
//! message, each output a tool message, in their order.

use serde_json::{json, Value};

use crate::chat::{ChatRequest, Dialect, Gap, Message, Part, ResponseFormat, Role, Tool, ToolCall};
use crate::format::mapping::{self, GapFn};
use crate::format::{inbound, index, Fields, FormatError};

/// Fields read into the neutral request, or checked below.
const READ: &[&str] = &[
    "model",
    "input",
    "instructions",
    "max_output_tokens",
    "temperature",
    "top_p",
    "stream",
    "stream_options",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "user",
    "reasoning",
    "text",
    "service_tier",
    "prompt_cache_key",
    "store",
    "top_logprobs",
];

/// Fields that only tune or label the request: omitted by a translation,
/// and named.
const HINTS: &[&str] = &[
    "metadata",
    "include",
    "truncation",
    "safety_identifier",
    "prompt_cache_retention",
];

/// Fields that change the answer, or need state a provider keeps, with no
/// equivalent in Chat Completions or Messages.
const NO_EQUIVALENT: &[&str] = &[
    "previous_response_id",
    "conversation",
    "background",
    "prompt",
    "max_tool_calls",
];

/// Reads a client's Responses request, already parsed as JSON. Malformed
/// known fields fail with their path; unknown fields and items, and those
/// the neutral request cannot hold, are recorded in
/// [`ChatRequest::untranslated`].
pub fn request_from_value(v: &Value) -> Result<ChatRequest, FormatError> {
    let f = Fields::of(v, "")?;
    let mut gaps = Vec::new();
    let mut gap =
        |path: String, gap: Gap| gaps.push(inbound::untranslated(Dialect::Responses, path, gap));
    mapping::unread_fields(&f, READ, HINTS, NO_EQUIVALENT, &mut gap);
    // The API stores a response unless told not to; only an explicit
    // `store: true` asks for what a translation cannot keep.
    if f.bool("store")? == Some(true) {
        gap("store".into(), Gap::NoEquivalent);
    }
    if f.u32("top_logprobs")?.is_some_and(|n| n > 0) {
        gap("top_logprobs".into(), Gap::NoEquivalent);
    }
    let mut messages = Vec::new();
    if let Some(instructions) = f.str("instructions")? {
        messages.push(Message::system(instructions));
    }
    match f.required("input")? {
        Value::String(s) => messages.push(Message::user(s.clone())),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                read_item(item, &index("input", i), &mut messages, &mut gap)?;
            }
        }
        _ => return Err(FormatError::malformed("input", "expected string or array")),
    }
    if !messages.iter().any(|m| m.role != Role::System) {
        return Err(FormatError::malformed("input", "must not be empty"));
    }
    let mut tools = Vec::new();
    for (i, t) in f.array("tools")?.unwrap_or_default().iter().enumerate() {
        if let Some(t) = parse_tool(t, &index("tools", i), &mut gap)? {
            tools.push(t);
        }
    }
    let reasoning = match f.object("reasoning")? {
        None => None,
        Some(r) => {
            for key in ["summary", "generate_summary"] {
                if r.get(key).is_some() {
                    gap(r.path(key), Gap::Hint);
                }
            }
            inbound::effort(r.str("effort")?)
        }
    };
    let response_format = parse_text(&f, &mut gap)?;
    let tool_choice = inbound::tool_choice(f.get("tool_choice"), None, &mut gap)?;
    let tail = inbound::request_tail(&f, gaps)?;
    Ok(ChatRequest {
        messages,
        max_tokens: f.u32("max_output_tokens")?,
        tools,
        tool_choice,
        metadata: f.str("user")?.map(|u| json!({"user_id": u})),
        parallel_tool_calls: f.bool("parallel_tool_calls")?,
        reasoning,
        response_format,
        prompt_cache_key: f.str("prompt_cache_key")?.map(str::to_string),
        ..tail
    })
}

/// One `input` item, appended to `out`.
fn read_item(
    v: &Value,
    path: &str,
    out: &mut Vec<Message>,
    gap: &mut GapFn<'_>,
) -> Result<(), FormatError> {
    let f = Fields::of(v, path)?;
    // An item with a role and no type is a message (the SDKs' shorthand).
    let kind = match f.str("type")? {
        Some(k) => k,
        None if f.get("role").is_some() => "message",
        None => return Err(FormatError::malformed(f.path("type"), "required")),
    };
    match kind {
        "message" => {
            let role = match f.req_str("role")? {
                "system" | "developer" => Role::System,
                "user" => Role::User,
                "assistant" => Role::Assistant,
                other => {
                    return Err(FormatError::malformed(
                        f.path("role"),
                        format!("unknown role \"{other}\""),
                    ))
                }
            };
            let content = content_parts(f.required("content")?, &f.path("content"), gap)?;
            let content = if content.is_empty() {
                vec![Part::text("")]
            } else {
                content
            };
            match out.last_mut() {
                // An assistant's text after its calls (or the reverse) is
                // one turn of the conversation.
                Some(last) if role == Role::Assistant && last.role == Role::Assistant => {
                    last.content.extend(content)
                }
                _ => out.push(Message { role, content }),
            }
        }
        "function_call" => {
            let call = Part::ToolCall(ToolCall {
                id: f.req_str("call_id")?.to_string(),
                name: f.req_str("name")?.to_string(),
                arguments: f.str("arguments")?.unwrap_or("{}").to_string(),
            });
            match out.last_mut() {
                Some(last) if last.role == Role::Assistant => last.content.push(call),
                _ => out.push(Message {
                    role: Role::Assistant,
                    content: vec![call],
                }),
            }
        }
        "function_call_output" => {
            let (content, images) = match f.required("output")? {
                Value::String(s) => (s.clone(), Vec::new()),
                other => inbound::text_and_images(content_parts(other, &f.path("output"), gap)?),
            };
            out.push(Message {
                role: Role::Tool,
                content: vec![Part::ToolResult {
                    tool_call_id: f.req_str("call_id")?.to_string(),
                    content,
                    images,
                    is_error: false,
                    cache_control: None,
                }],
            });
        }
        // Reasoning of an earlier turn: encrypted for the provider that
        // wrote it, and a translation's model reasons afresh.
        "reasoning" => gap(path.to_string(), Gap::Hint),
        "item_reference" => gap(path.to_string(), Gap::NoEquivalent),
        "file_search_call"
        | "web_search_call"
        | "computer_call"
        | "computer_call_output"
        | "image_generation_call"
        | "code_interpreter_call"
        | "local_shell_call"
        | "local_shell_call_output"
        | "mcp_call"
        | "mcp_list_tools"
        | "mcp_approval_request"
        | "mcp_approval_response"
        | "custom_tool_call"
        | "custom_tool_call_output" => gap(path.to_string(), Gap::NoEquivalent),
        _ => gap(path.to_string(), Gap::Unknown),
    }
    Ok(())
}

/// A message's `content`: a string, or input and output parts.
fn content_parts(v: &Value, path: &str, gap: &mut GapFn<'_>) -> Result<Vec<Part>, FormatError> {
    match v {
        Value::String(s) => Ok(vec![Part::text(s.clone())]),
        Value::Array(parts) => {
            let mut out = Vec::with_capacity(parts.len());
            for (i, part) in parts.iter().enumerate() {
                let p = Fields::of(part, index(path, i))?;
                match p.req_str("type")? {
                    "input_text" | "output_text" => out.push(Part::text(p.req_str("text")?)),
                    "refusal" => out.push(Part::text(p.req_str("refusal")?)),
                    "input_image" => match p.str("image_url")? {
                        Some(url) => out.extend(
                            inbound::url_image(&p, "image_url", url, None, gap)?.map(Part::Image),
                        ),
                        // A `file_id`: a file stored with the provider.
                        None => gap(index(path, i), Gap::NoEquivalent),
                    },
                    "input_file" | "input_audio" => gap(index(path, i), Gap::NoEquivalent),
                    _ => gap(index(path, i), Gap::Unknown),
                }
            }
            Ok(out)
        }
        _ => Err(FormatError::malformed(path, "expected string or array")),
    }
}

/// A `function` tool (flat: `name`, `parameters` beside `type`); a hosted
/// tool has no equivalent elsewhere.
fn parse_tool(v: &Value, path: &str, gap: &mut GapFn<'_>) -> Result<Option<Tool>, FormatError> {
    inbound::function_tool(&Fields::of(v, path)?, None, None, gap)
}

/// `text.format` (`text`, `json_object`, or a flat `json_schema`);
/// `text.verbosity` is a hint.
fn parse_text(f: &Fields<'_>, gap: &mut GapFn<'_>) -> Result<Option<ResponseFormat>, FormatError> {
    let Some(text) = f.object("text")? else {
        return Ok(None);
    };
    if text.get("verbosity").is_some() {
        gap(text.path("verbosity"), Gap::Hint);
    }
    match text.object("format")? {
        Some(format) => inbound::response_format(&format, None, gap),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::parse_json;

    /// Reads a client's Responses request body.
    fn parse_request(body: &[u8]) -> Result<ChatRequest, FormatError> {
        request_from_value(&parse_json(body)?)
    }

    #[test]
    fn items_become_turns_and_gaps_are_named() {
        let req = parse_request(
            br#"{"model":"m","instructions":"be brief","store":true,"truncation":"auto",
                "previous_response_id":"resp_1","bogus":1,
                "input":[{"role":"user","content":"weather?"},
                  {"type":"reasoning","id":"rs_1","summary":[]},
                  {"type":"function_call","call_id":"c1","name":"get","arguments":"{}"},
                  {"type":"function_call_output","call_id":"c1","output":"sunny"},
                  {"type":"message","role":"user","content":[{"type":"input_text","text":"thanks"},
                    {"type":"input_image","image_url":"data:image/png;base64,AAAA"},
                    {"type":"input_video"}]}]}"#,
        )
        .unwrap();
        let roles: Vec<_> = req.messages.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            [
                Role::System,
                Role::User,
                Role::Assistant,
                Role::Tool,
                Role::User
            ]
        );
        assert_eq!(req.messages[0].joined_text(), "be brief");
        assert!(matches!(req.messages[4].content[1], Part::Image(_)));
        let gaps: Vec<_> = req
            .untranslated
            .iter()
            .map(|u| (u.path.as_str(), u.gap))
            .collect();
        assert_eq!(
            gaps,
            [
                ("bogus", Gap::Unknown),
                ("previous_response_id", Gap::NoEquivalent),
                ("truncation", Gap::Hint),
                ("store", Gap::NoEquivalent),
                ("input[1]", Gap::Hint),
                ("input[4].content[2]", Gap::Unknown),
            ]
        );
        assert!(req
            .untranslated
            .iter()
            .all(|u| u.dialect == Dialect::Responses));
    }

    #[test]
    fn malformed_input_names_the_field() {
        let e = parse_request(br#"{"model":"m","input":5}"#).unwrap_err();
        assert_eq!(e.to_string(), "input: expected string or array");
        let e = parse_request(br#"{"model":"m","input":[{"type":"function_call","name":"x"}]}"#)
            .unwrap_err();
        assert_eq!(e.to_string(), "input[0].call_id: required");
        let e = parse_request(br#"{"model":"m","input":[]}"#).unwrap_err();
        assert_eq!(e.to_string(), "input: must not be empty");
        let e = parse_request(br#"{"input":"hi"}"#).unwrap_err();
        assert_eq!(e.to_string(), "model: required");
    }
}
