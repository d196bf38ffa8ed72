//! Limits on what a client sends, checked before any of it is used: each
//! breach is a 400 (413 for the body, `limits.maxRequestBytes`) in the
//! client's format, and none can make the gateway allocate without bound
//! or loop.
//!
//! | input | limit | where |
//! |---|---|---|
//! | body | `limits.maxRequestBytes` (1 MiB): 413 | `body.rs`, read as far as the limit |
//! | body's arrival | 60 s for all of it (`body::BODY_DEADLINE`): 408 | `body.rs` |
//! | JSON nesting | [`MAX_JSON_DEPTH`] (serde_json's own) | the parse |
//! | messages | [`MAX_MESSAGES`] | [`check_request`] |
//! | names (model, tools, tool calls) | [`MAX_NAME_BYTES`] | [`check_request`] |
//! | any other string | the body limit | the body |
//! | each header the gateway reads | [`MAX_HEADER_BYTES`] | [`oversized_header`] |
//! | an upstream stream's length | [`crate::MAX_STREAM_BYTES`], events `MAX_LINE_BYTES` | `sse.rs` |
//! | an upstream stream's duration | the request's deadline (`deadlineMs`, 60 s) | `engine/stream.rs` |

use super::http::REQUEST_HEADERS;
use crate::chat::{ChatRequest, Part, ToolChoice};
use crate::format::FormatError;
use crate::platform::Headers;

/// How deep a client's JSON may nest (arrays and objects): serde_json's
/// recursion limit, which refuses the next level while parsing (before
/// anything deeper is built); a test pins it. Nothing a provider takes
/// comes near it.
pub const MAX_JSON_DEPTH: usize = 127;

/// The most messages one request may hold: the most any provider takes
/// (Anthropic's Messages API: 100,000), so no request a provider would
/// answer is refused.
pub const MAX_MESSAGES: usize = 100_000;

/// The longest name a client may give: the model (a route, or
/// `provider/model`), a tool's name, a tool call's id. Names end up in
/// routing tables, breaker keys, headers and logs, where text of any size
/// does not belong; providers take far shorter ones (64 characters for a
/// tool name).
pub const MAX_NAME_BYTES: usize = 256;

/// The longest value of a request header the gateway reads
/// ([`REQUEST_HEADERS`]), forwarded ones included.
pub const MAX_HEADER_BYTES: usize = 8 << 10;

/// The first header (as they came) the gateway reads whose value is longer than
/// [`MAX_HEADER_BYTES`].
pub(super) fn oversized_header(headers: &Headers) -> Option<&'static str> {
    // One pass over what came; a name is compared only for a long value.
    headers
        .iter()
        .filter(|(_, v)| v.len() > MAX_HEADER_BYTES)
        .find_map(|(n, _)| {
            REQUEST_HEADERS
                .iter()
                .copied()
                .find(|r| n.eq_ignore_ascii_case(r))
        })
}

/// The message of a 400 for an oversized header: its name, never its value
/// (it may be a key).
pub(super) fn header_message(name: &str) -> String {
    format!("the {name} header is longer than {MAX_HEADER_BYTES} bytes")
}

/// Checks a parsed request against the limits on counts and names.
pub(super) fn check_request(req: &ChatRequest) -> Result<(), FormatError> {
    if req.messages.len() > MAX_MESSAGES {
        return Err(FormatError::malformed(
            "messages",
            format!(
                "{} messages: at most {MAX_MESSAGES} are taken",
                req.messages.len()
            ),
        ));
    }
    name("model", req.model.as_deref())?;
    for (i, tool) in req.tools.iter().enumerate() {
        name(&format!("tools[{i}].name"), Some(&tool.name))?;
    }
    if let Some(ToolChoice::Tool(n)) = &req.tool_choice {
        name("tool_choice.name", Some(n))?;
    }
    for (i, m) in req.messages.iter().enumerate() {
        for (j, part) in m.content.iter().enumerate() {
            let path = || format!("messages[{i}].content[{j}]");
            match part {
                Part::ToolCall(c) => {
                    name(&path(), Some(&c.id))?;
                    name(&path(), Some(&c.name))?;
                }
                Part::ToolResult { tool_call_id, .. } => name(&path(), Some(tool_call_id))?,
                _ => {}
            }
        }
    }
    Ok(())
}

fn name(path: &str, value: Option<&str>) -> Result<(), FormatError> {
    match value {
        Some(v) if v.len() > MAX_NAME_BYTES => Err(FormatError::malformed(
            path,
            format!("{} bytes long: at most {MAX_NAME_BYTES} are taken", v.len()),
        )),
        _ => Ok(()),
    }
}
