//! The Anthropic Messages format (`POST /v1/messages`).
//!
//! Inbound: [`parse_request`] reads a client's request, [`render_response`]
//! and [`render_error`] answer it. Outbound: [`encode_request`] and
//! [`decode_response`] are what the Anthropic adapter sends and reads.
//!
//! The neutral format keeps system messages and tool results as messages
//! of their own; here system text is lifted into the top-level `system`,
//! tool results travel as `tool_result` blocks of user messages, and
//! consecutive messages of one role are merged, as the Messages API requires.

use serde_json::Value;

use serde_json::json;

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

use super::wire::{self, required, Loose, Obj, Str};
use super::{index, join, parse_json, Fields, FormatError, Read};
use crate::chat::{
    ChatRequest, ChatResponse, Dialect, FinishReason, Message, Part, RawJson, Role, Tool, ToolCall,
    ToolChoice, Usage,
};

// ---------------------------------------------------------------- outbound

/// A Messages API request body, as [`encode_request`] renders it;
/// serialize it to send it.
#[derive(Debug, Serialize)]
pub struct RequestBody<'a> {
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<String>,
    messages: Vec<Turn<'a>>,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop_sequences: &'a [String],
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<OutTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<OutToolChoice<'a>>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<OutMetadata<'a>>,
    /// Hints left out for a provider without such a setting (never sent).
    #[serde(skip)]
    pub omitted: Vec<String>,
}

#[derive(Debug, Serialize)]
struct Turn<'a> {
    role: &'static str,
    content: Vec<Block<'a>>,
}

/// A content block of a request.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text {
        text: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Value,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: &'a str,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
}

#[derive(Debug, Serialize)]
struct OutTool<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    input_schema: &'a Value,
}

#[derive(Debug, Serialize)]
struct OutToolChoice<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
}

#[derive(Debug, Serialize)]
struct OutMetadata<'a> {
    user_id: &'a str,
}

/// Renders a neutral request as a Messages API body for `model`;
/// `default_max_tokens` fills the required `max_tokens` when the request
/// has none.
pub fn encode_request<'a>(
    req: &'a ChatRequest,
    model: &'a str,
    default_max_tokens: u32,
) -> Result<RequestBody<'a>, FormatError> {
    let mut system: Vec<String> = Vec::new();
    let mut messages: Vec<Turn<'a>> = Vec::new();
    for (i, m) in req.messages.iter().enumerate() {
        let path = index("messages", i);
        if m.role == Role::System {
            if let Some(j) = m
                .content
                .iter()
                .position(|p| !matches!(p, Part::Text { .. }))
            {
                return Err(FormatError::unsupported(
                    index(&join(&path, "content"), j),
                    "a system message can only hold text",
                ));
            }
            system.push(m.joined_text());
            continue;
        }
        let role = if m.role == Role::Assistant {
            "assistant"
        } else {
            "user"
        };
        let blocks = encode_blocks(m, &path)?;
        if blocks.is_empty() {
            continue;
        }
        match messages.last_mut() {
            Some(last) if last.role == role => last.content.extend(blocks),
            _ => messages.push(Turn {
                role,
                content: blocks,
            }),
        }
    }
    for turn in &mut messages {
        // Tool results must open a user turn (a stable partition).
        let (mut content, rest): (Vec<Block<'a>>, Vec<Block<'a>>) =
            std::mem::take(&mut turn.content)
                .into_iter()
                .partition(|b| matches!(b, Block::ToolResult { .. }));
        content.extend(rest);
        turn.content = content;
    }
    let tools = req
        .tools
        .iter()
        .map(|t| OutTool {
            name: &t.name,
            description: t.description.as_deref(),
            input_schema: &t.parameters,
        })
        .collect();
    let tool_choice = req.tool_choice.as_ref().map(|choice| {
        let (kind, name) = match choice {
            ToolChoice::Auto => ("auto", None),
            ToolChoice::None => ("none", None),
            ToolChoice::Required => ("any", None),
            ToolChoice::Tool(name) => ("tool", Some(name.as_str())),
        };
        OutToolChoice { kind, name }
    });
    Ok(RequestBody {
        model,
        system: (!system.is_empty()).then(|| system.join("\n\n")),
        messages,
        max_tokens: req.max_tokens.unwrap_or(default_max_tokens),
        temperature: req.temperature,
        top_p: req.top_p,
        stop_sequences: &req.stop,
        tools,
        tool_choice,
        stream: req.stream,
        metadata: super::user_id(req.metadata.as_ref()).map(|user_id| OutMetadata { user_id }),
        omitted: Vec::new(),
    })
}

fn encode_blocks<'a>(m: &'a Message, path: &str) -> Result<Vec<Block<'a>>, FormatError> {
    let mut blocks = Vec::new();
    for (j, part) in m.content.iter().enumerate() {
        let at = || index(&join(path, "content"), j);
        match part {
            Part::Text { text } if text.is_empty() => {}
            Part::Text { text } => blocks.push(Block::Text { text }),
            Part::ToolCall(c) if m.role == Role::Assistant => {
                let input: Value = if c.arguments.trim().is_empty() {
                    json!({})
                } else {
                    serde_json::from_str(&c.arguments).map_err(|e| {
                        FormatError::unsupported(
                            join(&at(), "arguments"),
                            format!("tool call arguments are not valid JSON: {e}"),
                        )
                    })?
                };
                if !input.is_object() {
                    return Err(FormatError::unsupported(
                        join(&at(), "arguments"),
                        "tool call arguments are not a JSON object",
                    ));
                }
                blocks.push(Block::ToolUse {
                    id: &c.id,
                    name: &c.name,
                    input,
                });
            }
            Part::ToolResult {
                tool_call_id,
                content,
                is_error,
            } if m.role != Role::Assistant => blocks.push(Block::ToolResult {
                tool_use_id: tool_call_id,
                content,
                is_error: *is_error,
            }),
            Part::ToolCall(_) | Part::ToolResult { .. } => {
                return Err(FormatError::unsupported(
                    at(),
                    "this tool part cannot appear in a message of this role",
                ))
            }
        }
    }
    Ok(blocks)
}

/// A Messages API answer as it arrives, and the members that make it an
/// error object instead.
#[derive(Deserialize)]
struct Answer<'a> {
    #[serde(borrow)]
    content: Option<Vec<Obj<AnswerBlock<'a>>>>,
    model: Option<String>,
    #[serde(borrow)]
    stop_reason: Option<Str<'a>>,
    usage: Option<Obj<WireUsage>>,
    error: Option<IgnoredAny>,
    #[serde(default, borrow)]
    object: Loose<'a>,
    #[serde(default, borrow, rename = "type")]
    kind: Loose<'a>,
}

/// A content block: text and tool calls are read, any other type (thinking,
/// server tools) has no neutral form and is skipped.
#[derive(Deserialize)]
struct AnswerBlock<'a> {
    #[serde(borrow, rename = "type")]
    kind: Option<Str<'a>>,
    text: Option<String>,
    id: Option<String>,
    name: Option<String>,
    input: Option<Value>,
}

/// `usage` of an answer, or of a stream's `message_start` and
/// `message_delta`.
#[derive(Deserialize)]
pub(crate) struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
}

impl From<WireUsage> for Usage {
    fn from(u: WireUsage) -> Usage {
        Usage {
            input_tokens: u.input_tokens.unwrap_or(0),
            output_tokens: u.output_tokens.unwrap_or(0),
        }
    }
}

/// Reads a Messages API answer: [`Read::Error`] when the body is an error
/// object, for the classifier to read. `raw` keeps the body's text.
pub fn decode_response(body: &[u8]) -> Result<Read<ChatResponse>, FormatError> {
    let Obj(a) = wire::read::<Obj<Answer<'_>>>(body)?;
    if wire::says_error(&a.error, &a.object, &a.kind) {
        return Ok(Read::Error);
    }
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for (i, Obj(b)) in required(a.content, || "content".into())?
        .into_iter()
        .enumerate()
    {
        let at = |key: &str| join(&index("content", i), key);
        match required(b.kind, || at("type"))?.as_str() {
            "text" => text.push_str(&required(b.text, || at("text"))?),
            "tool_use" => tool_calls.push(ToolCall {
                id: required(b.id, || at("id"))?,
                name: required(b.name, || at("name"))?,
                arguments: b.input.map_or_else(|| "{}".into(), |v| v.to_string()),
            }),
            _ => {}
        }
    }
    Ok(Read::Answer(ChatResponse {
        text,
        tool_calls,
        model: a.model.unwrap_or_default(),
        provider: String::new(),
        finish_reason: a.stop_reason.map(|r| finish_reason(r.as_str())),
        usage: a.usage.map(|Obj(u)| u.into()),
        raw: Some(
            RawJson::from_slice(body).map_err(|e| FormatError::malformed("", e.to_string()))?,
        ),
        dialect: Some(Dialect::Anthropic),
    }))
}

/// A Messages API `stop_reason` in the neutral form.
pub fn finish_reason(r: &str) -> FinishReason {
    match r {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "tool_use" => FinishReason::ToolCalls,
        "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_string()),
    }
}

/// The Messages API `stop_reason` of a neutral reason.
pub fn stop_reason_name(r: &FinishReason) -> &str {
    match r {
        FinishReason::Stop => "end_turn",
        FinishReason::Length => "max_tokens",
        FinishReason::ToolCalls => "tool_use",
        FinishReason::ContentFilter => "refusal",
        FinishReason::Other(other) => other.as_str(),
    }
}

// ----------------------------------------------------------------- inbound

const READ: &[&str] = &[
    "model",
    "messages",
    "system",
    "max_tokens",
    "temperature",
    "top_p",
    "stop_sequences",
    "stream",
    "tools",
    "tool_choice",
    "metadata",
    "thinking",
];

/// Hints with no neutral equivalent, accepted and ignored.
const IGNORED: &[&str] = &["top_k", "service_tier"];

/// Features that cannot be translated: refused when set.
const REFUSED: &[&str] = &["mcp_servers", "container", "context_management"];

/// Reads a client's Messages API request body.
pub fn parse_request(body: &[u8]) -> Result<ChatRequest, FormatError> {
    request_from_value(&parse_json(body)?)
}

/// Reads a client's Messages API request, already parsed as JSON.
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
    if let Some(thinking) = f.object("thinking")? {
        if thinking.req_str("type")? != "disabled" {
            return Err(FormatError::unsupported("thinking", "cannot be translated"));
        }
    }
    let mut messages = Vec::new();
    match f.get("system") {
        None => {}
        Some(Value::String(s)) => messages.push(Message::system(s.clone())),
        Some(Value::Array(blocks)) => {
            let text = text_blocks(blocks, "system")?;
            messages.push(Message::system(text));
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
        parse_message(m, &index("messages", i), &mut messages)?;
    }
    let stop = f
        .array("stop_sequences")?
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, s)| {
            s.as_str().map(str::to_string).ok_or_else(|| {
                FormatError::malformed(index("stop_sequences", i), "expected a string")
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let tools = f
        .array("tools")?
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, t)| parse_tool(t, &index("tools", i)))
        .collect::<Result<Vec<_>, _>>()?;
    let tool_choice = match f.object("tool_choice")? {
        None => None,
        Some(c) => Some(match c.req_str("type")? {
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
        }),
    };
    let metadata = match f.object("metadata")? {
        Some(m) => m.str("user_id")?.map(|u| json!({"user_id": u})),
        None => None,
    };
    Ok(ChatRequest {
        model: Some(f.req_str("model")?.to_string()),
        messages,
        max_tokens: f.u32("max_tokens")?,
        temperature: f.f64("temperature")?,
        top_p: f.f64("top_p")?,
        stop,
        tools,
        tool_choice,
        stream: f.bool("stream")?.unwrap_or(false),
        metadata,
        native: None,
    })
}

/// Text blocks joined; any other block is refused.
fn text_blocks(blocks: &[Value], path: &str) -> Result<String, FormatError> {
    let mut out = String::new();
    for (i, b) in blocks.iter().enumerate() {
        let b = Fields::of(b, index(path, i))?;
        match b.req_str("type")? {
            "text" => out.push_str(b.req_str("text")?),
            other => return Err(unsupported_block(&b, other)),
        }
    }
    Ok(out)
}

fn unsupported_block(b: &Fields<'_>, kind: &str) -> FormatError {
    match kind {
        "image"
        | "document"
        | "search_result"
        | "thinking"
        | "redacted_thinking"
        | "server_tool_use"
        | "web_search_tool_result"
        | "container_upload"
        | "tool_use"
        | "tool_result" => FormatError::unsupported(
            b.path("type"),
            format!("{kind} content cannot be translated here"),
        ),
        other => FormatError::malformed(
            b.path("type"),
            format!("unknown content block type \"{other}\""),
        ),
    }
}

fn parse_message(v: &Value, path: &str, out: &mut Vec<Message>) -> Result<(), FormatError> {
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
        let b = Fields::of(block, index(&f.path("content"), i))?;
        match (b.req_str("type")?, role) {
            ("text", _) => {
                let text = b.req_str("text")?.to_string();
                push(out, role, Part::Text { text });
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
            ("tool_result", Role::User) => {
                let content = match b.get("content") {
                    None => String::new(),
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Array(inner)) => text_blocks(inner, &b.path("content"))?,
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
                    is_error: b.bool("is_error")?.unwrap_or(false),
                };
                push(out, Role::Tool, part);
            }
            (kind, _) => return Err(unsupported_block(&b, kind)),
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

fn parse_tool(v: &Value, path: &str) -> Result<Tool, FormatError> {
    let t = Fields::of(v, path)?;
    if let Some(kind) = t.str("type")? {
        if kind != "custom" {
            return Err(FormatError::unsupported(
                t.path("type"),
                format!("server tool {kind} cannot be translated"),
            ));
        }
    }
    Ok(Tool {
        name: t.req_str("name")?.to_string(),
        description: t.str("description")?.map(str::to_string),
        parameters: t.required("input_schema")?.clone(),
    })
}

/// A Messages API `message` object, as [`render_response`] renders it;
/// serialize it to answer.
#[derive(Debug, Serialize)]
pub struct ResponseBody<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    role: &'static str,
    content: Vec<Block<'a>>,
    model: &'a str,
    stop_reason: Option<&'a str>,
    /// Always `null`.
    stop_sequence: (),
    usage: OutUsage,
}

#[derive(Debug, Serialize)]
struct OutUsage {
    input_tokens: u64,
    output_tokens: u64,
}

/// Renders a neutral answer as a Messages API `message` object. `model` in
/// the output is the model that actually answered. Fails when a tool call's
/// arguments are not a JSON object (an Anthropic client needs one).
pub fn render_response<'a>(
    resp: &'a ChatResponse,
    id: &'a str,
) -> Result<ResponseBody<'a>, FormatError> {
    let mut content = Vec::with_capacity(resp.tool_calls.len() + 1);
    if !resp.text.is_empty() || resp.tool_calls.is_empty() {
        content.push(Block::Text { text: &resp.text });
    }
    for (i, c) in resp.tool_calls.iter().enumerate() {
        let path = join(&index("tool_calls", i), "arguments");
        let input: Value = if c.arguments.trim().is_empty() {
            json!({})
        } else {
            serde_json::from_str(&c.arguments)
                .map_err(|e| FormatError::unsupported(&path, format!("not valid JSON: {e}")))?
        };
        if !input.is_object() {
            return Err(FormatError::unsupported(path, "not a JSON object"));
        }
        content.push(Block::ToolUse {
            id: &c.id,
            name: &c.name,
            input,
        });
    }
    let usage = resp.usage.unwrap_or_default();
    Ok(ResponseBody {
        id,
        kind: "message",
        role: "assistant",
        content,
        model: &resp.model,
        stop_reason: resp.finish_reason.as_ref().map(stop_reason_name),
        stop_sequence: (),
        usage: OutUsage {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
        },
    })
}

/// The Anthropic error `type` for an HTTP status.
pub fn error_type(status: u16) -> &'static str {
    match status {
        401 => "authentication_error",
        402 => "billing_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        400..=499 => "invalid_request_error",
        _ => "api_error",
    }
}

/// Renders an error the way the Anthropic API does:
/// `{"type": "error", "error": {"type", "message"}}`.
pub fn render_error(status: u16, message: &str) -> Value {
    json!({"type": "error", "error": {"type": error_type(status), "message": message}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_roles_merge_and_tool_results_lead() {
        let req = ChatRequest::new(vec![
            Message::system("be brief"),
            Message::user("a"),
            Message {
                role: Role::Tool,
                content: vec![Part::ToolResult {
                    tool_call_id: "t1".into(),
                    content: "42".into(),
                    is_error: false,
                }],
            },
            Message::system("and kind"),
        ]);
        let v = serde_json::to_value(encode_request(&req, "claude", 100).unwrap()).unwrap();
        assert_eq!(v["system"], "be brief\n\nand kind");
        assert_eq!(v["messages"].as_array().unwrap().len(), 1);
        assert_eq!(v["messages"][0]["content"][0]["type"], "tool_result");
        assert_eq!(v["messages"][0]["content"][1]["text"], "a");
        assert_eq!(v["max_tokens"], 100);
    }

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
}
