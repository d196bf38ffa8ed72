//! The JS shapes of requests and responses, and their translation to and
//! from the core's [`ChatRequest`] and [`ChatResponse`].
//!
//! JS values come in through `JSON.stringify` and [`config::parse_json`]:
//! that rejects cycles and BigInts with a JS exception instead of recursing
//! without end, bounds the nesting depth, and names the path of a mistake
//! (`messages[0].role: unknown variant "admin"`).

use js_sys::{Object, Reflect, JSON};
use serde_json::Value;
use wasm_bindgen::prelude::*;

use crate::chain::Reply;
use crate::chat::{
    ChatRequest, ChatResponse, FinishReason, Message, Part, Role, Tool, ToolCall, ToolChoice, Usage,
};
use crate::config::read::{invalid_type, read_json, Node, Shape, R};
use crate::config::{ConfigError, ConfigIssue};
use crate::error::{ErrorKind, ProviderError};
use crate::js::errors::{prop, to_js};
use crate::web::error_message;

/// `JSON.stringify(value)`, with the failure as a message.
pub(crate) fn stringify(value: &JsValue) -> Result<String, String> {
    match JSON::stringify(value) {
        Ok(s) => s
            .as_string()
            .ok_or_else(|| "not representable as JSON".to_string()),
        Err(e) => Err(error_message(&e)),
    }
}

/// Reads a JS value with `read`, naming the path of the first mismatch.
pub(crate) fn from_js<T>(value: &JsValue, read: fn(&Node<'_>) -> R<T>) -> Result<T, ConfigError> {
    let json = stringify(value).map_err(|m| ConfigError {
        issues: vec![ConfigIssue::new("(root)", m)],
    })?;
    read_json(&json, read).map_err(|(path, message)| {
        without_position(ConfigError {
            issues: vec![ConfigIssue::new(path, message)],
        })
    })
}

/// Drops serde_json's ` at line 1 column 79`: meaningless for a JS object
/// (the text is our `JSON.stringify`), and the path says where already.
pub(crate) fn without_position(mut e: ConfigError) -> ConfigError {
    for issue in &mut e.issues {
        if let Some(i) = crate::text::rfind(&issue.message, " at line ") {
            let tail = issue
                .message
                .get(i + " at line ".len()..)
                .unwrap_or_default();
            if crate::text::contains(tail, " column ")
                && tail.chars().all(|c| c.is_ascii_alphanumeric() || c == ' ')
            {
                issue.message.truncate(i);
            }
        }
    }
    e
}

/// `client.chat(request)`: the articles' request, plus the core's options.
pub(crate) fn read_request(n: &Node<'_>) -> R<ChatRequest> {
    const SHAPE: Shape = Shape {
        name: "struct JsRequest",
        fields: &[
            "model",
            "messages",
            "maxTokens",
            "temperature",
            "topP",
            "stop",
            "tools",
            "toolChoice",
            "metadata",
        ],
        required: 0b10,
        defaulted: !0b10,
        deny_unknown: true,
        skip: None,
    };
    let mut r = ChatRequest::default();
    n.fields(&SHAPE, &mut |i, v| {
        match i {
            0 => r.model = v.opt_string()?,
            1 => v.seq(&mut |_, m| {
                r.messages.push(read_message(m)?);
                Ok(())
            })?,
            2 => r.max_tokens = v.opt(Node::u32)?,
            3 => r.temperature = v.opt(Node::f64)?,
            4 => r.top_p = v.opt(Node::f64)?,
            5 => r.stop = v.strings()?,
            6 => v.seq(&mut |_, t| {
                r.tools.push(read_tool(t)?);
                Ok(())
            })?,
            7 => r.tool_choice = v.opt(read_tool_choice)?,
            _ => r.metadata = v.opt(|v| Ok(v.to_value()))?,
        }
        Ok(())
    })?;
    Ok(r)
}

/// `{ role, content }`, the content a string or parts.
fn read_message(n: &Node<'_>) -> R<Message> {
    const SHAPE: Shape = Shape {
        name: "struct JsMessage",
        fields: &["role", "content"],
        required: 0b11,
        defaulted: 0,
        deny_unknown: false,
        skip: None,
    };
    let mut m = Message {
        role: Role::User,
        content: Vec::new(),
    };
    n.fields(&SHAPE, &mut |i, v| {
        match i {
            0 => {
                const ROLES: [Role; 4] = [Role::System, Role::User, Role::Assistant, Role::Tool];
                m.role = ROLES[v.variant(&["system", "user", "assistant", "tool"])?];
            }
            _ => match v {
                Node::Str(text) => {
                    m.content = vec![Part::Text {
                        text: text.to_string(),
                    }]
                }
                Node::Seq(_) => v.seq(&mut |_, p| {
                    m.content.push(read_part(p)?);
                    Ok(())
                })?,
                _ => return Err(invalid_type(v, "a string or an array of parts")),
            },
        }
        Ok(())
    })?;
    Ok(m)
}

/// A part, tagged by `type`.
fn read_part(n: &Node<'_>) -> R<Part> {
    const TEXT: Shape = Shape {
        name: "struct variant Part::Text",
        fields: &["text"],
        required: 1,
        defaulted: 0,
        deny_unknown: false,
        skip: Some("type"),
    };
    const RESULT: Shape = Shape {
        name: "struct variant Part::ToolResult",
        fields: &["tool_call_id", "content", "is_error"],
        required: 0b11,
        defaulted: 0b100,
        deny_unknown: false,
        skip: Some("type"),
    };
    Ok(
        match n.tag(
            "type",
            &["text", "tool_call", "tool_result"],
            "internally tagged enum Part",
        )? {
            0 => {
                let mut text = String::new();
                n.fields(&TEXT, &mut |_, v| {
                    text = v.string()?;
                    Ok(())
                })?;
                Part::Text { text }
            }
            1 => Part::ToolCall(read_tool_call_in(n, Some("type"))?),
            _ => {
                let (mut id, mut content, mut is_error) = (String::new(), String::new(), false);
                n.fields(&RESULT, &mut |i, v| {
                    match i {
                        0 => id = v.string()?,
                        1 => content = v.string()?,
                        _ => is_error = v.bool()?,
                    }
                    Ok(())
                })?;
                Part::ToolResult {
                    tool_call_id: id,
                    content,
                    is_error,
                }
            }
        },
    )
}

fn read_tool_call(n: &Node<'_>) -> R<ToolCall> {
    read_tool_call_in(n, None)
}

/// `{ id, name, arguments }`; `skip` is the tag of the part holding it.
fn read_tool_call_in(n: &Node<'_>, skip: Option<&'static str>) -> R<ToolCall> {
    let shape = Shape {
        name: "struct ToolCall",
        fields: &["id", "name", "arguments"],
        required: 0b111,
        defaulted: 0,
        deny_unknown: false,
        skip,
    };
    let mut c = ToolCall {
        id: String::new(),
        name: String::new(),
        arguments: String::new(),
    };
    n.fields(&shape, &mut |i, v| {
        *[&mut c.id, &mut c.name, &mut c.arguments][i] = v.string()?;
        Ok(())
    })?;
    Ok(c)
}

/// `{ name, description?, parameters }`.
fn read_tool(n: &Node<'_>) -> R<Tool> {
    const SHAPE: Shape = Shape {
        name: "struct Tool",
        fields: &["name", "description", "parameters"],
        required: 0b101,
        defaulted: 0b010,
        deny_unknown: false,
        skip: None,
    };
    let mut t = Tool {
        name: String::new(),
        description: None,
        parameters: Value::Null,
    };
    n.fields(&SHAPE, &mut |i, v| {
        match i {
            0 => t.name = v.string()?,
            1 => t.description = v.opt_string()?,
            _ => t.parameters = v.to_value(),
        }
        Ok(())
    })?;
    Ok(t)
}

/// `{ type: "auto" | "none" | "required" }` or `{ type: "tool", name }`.
fn read_tool_choice(n: &Node<'_>) -> R<ToolChoice> {
    const TOOL: Shape = Shape {
        name: "adjacently tagged enum ToolChoice",
        fields: &["name"],
        required: 1,
        defaulted: 0,
        deny_unknown: false,
        skip: Some("type"),
    };
    let variants = ["auto", "none", "required", "tool"];
    Ok(
        match n.tag("type", &variants, "adjacently tagged enum ToolChoice")? {
            0 => ToolChoice::Auto,
            1 => ToolChoice::None,
            2 => ToolChoice::Required,
            _ => {
                let mut name = String::new();
                n.fields(&TOOL, &mut |_, v| {
                    name = v.string()?;
                    Ok(())
                })?;
                ToolChoice::Tool(name)
            }
        },
    )
}

/// Token counts: `{ inputTokens, outputTokens }`.
fn read_usage(n: &Node<'_>) -> R<Usage> {
    const SHAPE: Shape = Shape {
        name: "struct Usage",
        fields: &["inputTokens", "outputTokens"],
        required: 0b11,
        defaulted: 0,
        deny_unknown: false,
        skip: None,
    };
    let mut u = Usage::default();
    n.fields(&SHAPE, &mut |i, v| {
        *[&mut u.input_tokens, &mut u.output_tokens][i] = v.u64()?;
        Ok(())
    })?;
    Ok(u)
}

/// What a JS provider's `chat(request, signal)` receives.
pub(crate) fn provider_request(req: &ChatRequest, model: &str) -> JsValue {
    to_js(|j| crate::json::js::provider_request(j, req, model))
}

/// What a JS provider resolves with: the articles' `{ text, model }`, plus
/// optional tool calls, finish reason and usage. Other fields (`provider`,
/// `raw`) are allowed; `raw` is kept when it is JSON.
fn read_response(n: &Node<'_>) -> R<(ChatResponse, Option<String>)> {
    const SHAPE: Shape = Shape {
        name: "struct ProviderResponse",
        fields: &RESPONSE_FIELDS,
        required: 0,
        defaulted: !0,
        deny_unknown: false,
        skip: None,
    };
    let mut model = None;
    let mut r = ChatResponse {
        text: String::new(),
        tool_calls: Vec::new(),
        model: String::new(),
        provider: String::new(),
        finish_reason: None,
        usage: None,
        raw: Value::Null,
    };
    n.fields(&SHAPE, &mut |i, v| {
        match i {
            0 => r.text = v.string()?,
            1 => model = v.opt_string()?,
            2 => v.seq(&mut |_, c| {
                r.tool_calls.push(read_tool_call(c)?);
                Ok(())
            })?,
            3 => r.finish_reason = v.opt(|v| v.str().map(finish_reason))?,
            _ => r.usage = v.opt(read_usage)?,
        }
        Ok(())
    })?;
    Ok((r, model))
}

const RESPONSE_FIELDS: [&str; 5] = ["text", "model", "toolCalls", "finishReason", "usage"];

pub(crate) fn provider_response(v: &JsValue, model: &str) -> Result<ChatResponse, ProviderError> {
    let decode_error =
        |m: String| ProviderError::new(ErrorKind::Decode, format!("the provider's response: {m}"));
    if !v.is_object() {
        return Err(decode_error(
            "expected an object like { text, model }".to_string(),
        ));
    }
    // Only the known fields go through JSON: `raw` may be anything.
    let known = Object::new();
    for key in RESPONSE_FIELDS {
        let value = prop(v, key);
        if !value.is_undefined() && !value.is_null() {
            let _ = Reflect::set(&known, &key.into(), &value);
        }
    }
    let (mut parsed, given) = from_js(&known, read_response).map_err(|e| {
        decode_error(crate::text::replace(
            &e.to_string(),
            "invalid configuration: ",
            "",
        ))
    })?;
    parsed.model = given.unwrap_or_else(|| model.to_string());
    let raw = prop(v, "raw");
    if !raw.is_undefined() {
        parsed.raw = stringify(&raw)
            .ok()
            .and_then(|s| read_json(&s, |n| Ok(n.to_value())).ok())
            .unwrap_or(Value::Null);
    }
    Ok(parsed)
}

fn finish_reason(s: &str) -> FinishReason {
    match s {
        "stop" | "end_turn" | "stop_sequence" => FinishReason::Stop,
        "length" | "max_tokens" => FinishReason::Length,
        "tool_calls" | "tool_use" => FinishReason::ToolCalls,
        "content_filter" | "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_string()),
    }
}

/// `await client.chat(…)`.
pub(crate) fn chat_result(reply: &Reply) -> JsValue {
    to_js(|j| crate::json::js::chat_result(j, reply))
}
