//! Inbound: a client's Messages API request read into the neutral one.

use serde_json::{json, Value};

use crate::chat::{
    ChatRequest, Dialect, Gap, Image, ImageSource, JsonSchema, Message, Part, Reasoning,
    ResponseFormat, Role, Thinking, Tool, ToolCall, ToolChoice,
};
use crate::format::mapping::{self, GapFn};
use crate::format::{inbound, index, parse_json, Fields, FormatError};

/// Fields read into the neutral request.
const READ: &[&str] = &[
    "model",
    "messages",
    "system",
    "max_tokens",
    "temperature",
    "top_p",
    "top_k",
    "stop_sequences",
    "stream",
    "tools",
    "tool_choice",
    "metadata",
    "thinking",
    "output_config",
    "output_format",
    "service_tier",
];

/// Features with no equivalent in the other dialect.
const NO_EQUIVALENT: &[&str] = &["mcp_servers", "container", "context_management"];

/// The name a client's `output_config.format` schema gets where a name is needed
/// (OpenAI's `json_schema.name`).
const OUTPUT_NAME: &str = "output";

/// Reads a client's Messages API request body.
pub fn parse_request(body: &[u8]) -> Result<ChatRequest, FormatError> {
    request_from_value(&parse_json(body)?)
}

/// Reads a client's Messages API request, already parsed as JSON.
/// Malformed known fields fail with their path; unknown fields and blocks,
/// and those the neutral request cannot hold (documents, server tools, …),
/// are recorded in [`ChatRequest::untranslated`].
pub fn request_from_value(v: &Value) -> Result<ChatRequest, FormatError> {
    let f = Fields::of(v, "")?;
    let mut gaps = Vec::new();
    let mut gap =
        |path: String, gap: Gap| gaps.push(inbound::untranslated(Dialect::Anthropic, path, gap));
    mapping::unread_fields(&f, READ, &[], NO_EQUIVALENT, &mut gap);
    let reasoning = match f.object("thinking")? {
        None => None,
        Some(t) => match t.req_str("type")? {
            "disabled" => Some(Reasoning::Disabled),
            "adaptive" => Some(Reasoning::Adaptive { effort: None }),
            "enabled" => Some(Reasoning::Budget {
                budget_tokens: t
                    .u32("budget_tokens")?
                    .ok_or_else(|| FormatError::malformed(t.path("budget_tokens"), "required"))?,
            }),
            _ => {
                gap("thinking".into(), Gap::Unknown);
                None
            }
        },
    };
    let mut messages = Vec::new();
    match f.get("system") {
        None => {}
        Some(Value::String(s)) => messages.push(Message::system(s.clone())),
        Some(Value::Array(blocks)) => {
            let parts = text_blocks(blocks, "system", &mut gap)?;
            messages.push(Message {
                role: Role::System,
                content: parts,
            });
        }
        Some(_) => return Err(FormatError::malformed("system", "expected string or array")),
    }
    let raw = f
        .array("messages")?
        .ok_or_else(|| FormatError::malformed("messages", "required"))?;
    if raw.is_empty() {
        return Err(FormatError::malformed("messages", "must not be empty"));
    }
    for (i, m) in raw.iter().enumerate() {
        parse_message(m, &index("messages", i), &mut messages, &mut gap)?;
    }
    let stop = inbound::strings(
        f.array("stop_sequences")?.unwrap_or_default(),
        "stop_sequences",
    )?;
    let mut tools = Vec::new();
    for (i, t) in f.array("tools")?.unwrap_or_default().iter().enumerate() {
        if let Some(t) = parse_tool(t, &index("tools", i), &mut gap)? {
            tools.push(t);
        }
    }
    let mut parallel_tool_calls = None;
    let tool_choice = match f.object("tool_choice")? {
        None => None,
        Some(c) => {
            if let Some(disable) = c.bool("disable_parallel_tool_use")? {
                parallel_tool_calls = Some(!disable);
            }
            Some(match c.req_str("type")? {
                "auto" => ToolChoice::Auto,
                "any" => ToolChoice::Required,
                "none" => ToolChoice::None,
                "tool" => ToolChoice::Tool(c.req_str("name")?.to_string()),
                other => {
                    return Err(FormatError::malformed(
                        c.path("type"),
                        format!("unknown tool choice \"{other}\""),
                    ))
                }
            })
        }
    };
    let metadata = match f.object("metadata")? {
        Some(m) => m.str("user_id")?.map(|u| json!({"user_id": u})),
        None => None,
    };
    // `output_config` is the API's; `output_format` the same format under
    // its earlier beta.
    let config = f.object("output_config")?;
    let (format, format_path) = match (&config, f.object("output_format")?) {
        (Some(c), _) if c.get("format").is_some() => (c.object("format")?, "output_config.format"),
        (_, Some(o)) => (Some(o), "output_format"),
        _ => (None, ""),
    };
    let response_format = match format {
        None => None,
        Some(o) => match o.req_str("type")? {
            "json_schema" => Some(ResponseFormat::JsonSchema(JsonSchema {
                name: OUTPUT_NAME.into(),
                description: None,
                schema: o.required("schema")?.clone(),
                strict: Some(true),
            })),
            _ => {
                gap(format_path.into(), Gap::Unknown);
                None
            }
        },
    };
    let mut reasoning = reasoning;
    if let Some(c) = &config {
        for key in c.keys() {
            if key != "format" && key != "effort" && c.get(key).is_some() {
                gap(c.path(key), Gap::Unknown);
            }
        }
        // An effort level sets adaptive thinking's effort, or is the
        // reasoning setting when `thinking` names none.
        if let Some(level) = c.str("effort")? {
            match &mut reasoning {
                Some(Reasoning::Adaptive { effort }) => *effort = Some(level.to_string()),
                Some(_) => {}
                None => {
                    reasoning = Some(Reasoning::Effort {
                        effort: level.to_string(),
                    })
                }
            }
        }
    }
    let tail = inbound::request_tail(&f, gaps)?;
    Ok(ChatRequest {
        messages,
        max_tokens: f.u32("max_tokens")?,
        stop,
        tools,
        tool_choice,
        metadata,
        top_k: f.u32("top_k")?,
        parallel_tool_calls,
        reasoning,
        response_format,
        ..tail
    })
}

/// Text blocks (with their `cache_control`); any other block is recorded.
fn text_blocks(
    blocks: &[Value],
    path: &str,
    gap: &mut GapFn<'_>,
) -> Result<Vec<Part>, FormatError> {
    let mut out = Vec::new();
    for (i, b) in blocks.iter().enumerate() {
        let b = Fields::of(b, index(path, i))?;
        match b.req_str("type")? {
            "text" => out.push(inbound::text_part(&b)?),
            other => gap(index(path, i), block_gap(other)),
        }
    }
    Ok(out)
}

/// The gap of a block that has no neutral form here.
fn block_gap(kind: &str) -> Gap {
    match kind {
        "image"
        | "document"
        | "search_result"
        | "thinking"
        | "redacted_thinking"
        | "server_tool_use"
        | "web_search_tool_result"
        | "web_fetch_tool_result"
        | "code_execution_tool_result"
        | "mcp_tool_use"
        | "mcp_tool_result"
        | "container_upload"
        | "tool_use"
        | "tool_result" => Gap::NoEquivalent,
        _ => Gap::Unknown,
    }
}

/// An `image` block, `None` for a source the neutral form cannot hold (a
/// Files API `file_id`).
fn image(b: &Fields<'_>, gap: &mut GapFn<'_>) -> Result<Option<Image>, FormatError> {
    let s = b.req_object("source")?;
    let source = match s.req_str("type")? {
        "base64" => ImageSource::Base64 {
            media_type: s.req_str("media_type")?.to_string(),
            data: s.req_str("data")?.to_string(),
        },
        "url" => ImageSource::Url {
            url: s.req_str("url")?.to_string(),
        },
        _ => {
            gap(s.path("type"), Gap::NoEquivalent);
            return Ok(None);
        }
    };
    Ok(Some(Image {
        source,
        detail: None,
        cache_control: b.get("cache_control").cloned(),
    }))
}

fn parse_message(
    v: &Value,
    path: &str,
    out: &mut Vec<Message>,
    gap: &mut GapFn<'_>,
) -> Result<(), FormatError> {
    let f = Fields::of(v, path)?;
    let role = match f.req_str("role")? {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        other => {
            return Err(FormatError::malformed(
                f.path("role"),
                format!("unknown role \"{other}\" (expected user or assistant)"),
            ))
        }
    };
    let blocks = match f.required("content")? {
        Value::String(s) => {
            out.push(Message::text(role, s.clone()));
            return Ok(());
        }
        Value::Array(blocks) => blocks,
        _ => {
            return Err(FormatError::malformed(
                f.path("content"),
                "expected string or array",
            ))
        }
    };
    // A user turn mixing text and tool results becomes runs of neutral
    // user and tool messages, in order.
    let push = |out: &mut Vec<Message>, role: Role, part: Part| match out.last_mut() {
        Some(last) if last.role == role => last.content.push(part),
        _ => out.push(Message {
            role,
            content: vec![part],
        }),
    };
    let start = out.len();
    for (i, block) in blocks.iter().enumerate() {
        let at = index(&f.path("content"), i);
        let b = Fields::of(block, at.clone())?;
        match (b.req_str("type")?, role) {
            ("text", _) => push(out, role, inbound::text_part(&b)?),
            ("image", Role::User) => {
                if let Some(image) = image(&b, gap)? {
                    push(out, role, Part::Image(image));
                }
            }
            ("tool_use", Role::Assistant) => {
                let input = b.get("input").cloned().unwrap_or_else(|| json!({}));
                let call = ToolCall {
                    id: b.req_str("id")?.to_string(),
                    name: b.req_str("name")?.to_string(),
                    arguments: input.to_string(),
                };
                push(out, role, Part::ToolCall(call));
            }
            ("thinking", Role::Assistant) => {
                let t = Thinking {
                    text: b.req_str("thinking")?.to_string(),
                    // An unsigned block comes back with an empty signature.
                    signature: b
                        .str("signature")?
                        .filter(|s| !s.is_empty())
                        .map(str::to_string),
                    redacted: None,
                };
                push(out, role, Part::Thinking(t));
            }
            ("redacted_thinking", Role::Assistant) => {
                let t = Thinking {
                    redacted: Some(b.req_str("data")?.to_string()),
                    ..Thinking::default()
                };
                push(out, role, Part::Thinking(t));
            }
            ("tool_result", Role::User) => {
                let mut images = Vec::new();
                let content = match b.get("content") {
                    None => String::new(),
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Array(inner)) => {
                        let mut text = String::new();
                        for (k, block) in inner.iter().enumerate() {
                            let ib = Fields::of(block, index(&b.path("content"), k))?;
                            match ib.req_str("type")? {
                                "text" => text.push_str(ib.req_str("text")?),
                                "image" => images.extend(image(&ib, gap)?),
                                other => gap(index(&b.path("content"), k), block_gap(other)),
                            }
                        }
                        text
                    }
                    Some(_) => {
                        return Err(FormatError::malformed(
                            b.path("content"),
                            "expected string or array",
                        ))
                    }
                };
                let part = Part::ToolResult {
                    tool_call_id: b.req_str("tool_use_id")?.to_string(),
                    content,
                    images,
                    is_error: b.bool("is_error")?.unwrap_or(false),
                    cache_control: b.get("cache_control").cloned(),
                };
                push(out, Role::Tool, part);
            }
            (kind, _) => gap(at, block_gap(kind)),
        }
    }
    if out.len() == start {
        out.push(Message {
            role,
            content: Vec::new(),
        });
    }
    Ok(())
}

/// A custom tool, `None` for a server tool (recorded: no equivalent).
fn parse_tool(v: &Value, path: &str, gap: &mut GapFn<'_>) -> Result<Option<Tool>, FormatError> {
    let t = Fields::of(v, path)?;
    if let Some(kind) = t.str("type")? {
        if kind != "custom" {
            gap(t.path("type"), Gap::NoEquivalent);
            return Ok(None);
        }
    }
    Ok(Some(Tool {
        name: t.req_str("name")?.to_string(),
        description: t.str("description")?.map(str::to_string),
        parameters: t.required("input_schema")?.clone(),
        cache_control: t.get("cache_control").cloned(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_turn_with_results_and_text_splits_in_order() {
        let req = parse_request(
            br#"{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[
                {"type":"tool_result","tool_use_id":"a","content":[{"type":"text","text":"1"}]},
                {"type":"text","text":"next"}]}]}"#,
        )
        .unwrap();
        assert_eq!(req.messages.len(), 2);
        assert_eq!(req.messages[0].role, Role::Tool);
        assert_eq!(req.messages[1], Message::user("next"));
    }

    #[test]
    fn documents_and_unknown_blocks_are_recorded() {
        let req = parse_request(
            br#"{"model":"m","max_tokens":5,"future":1,"messages":[{"role":"user","content":[
                {"type":"document","source":{"type":"text","data":"x"}},
                {"type":"hologram"},{"type":"text","text":"hi"}]}]}"#,
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
                ("future", Gap::Unknown),
                ("messages[0].content[0]", Gap::NoEquivalent),
                ("messages[0].content[1]", Gap::Unknown),
            ]
        );
        assert_eq!(req.messages, [Message::user("hi")]);
    }
}
