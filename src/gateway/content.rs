//! Message contents as the GenAI conventions record them, only when the
//! configuration opts in (`tracing.export.captureContent`):
//! `gen_ai.input.messages` on the request's span and
//! `gen_ai.output.messages` on the answering attempt's, each a JSON array
//! of `{role, parts: [{type, …}]}` (the output's with its
//! `finish_reason`). Images are named by their media type, never copied.

use serde_json::{json, Value};

use crate::chat::{Image, ImageSource, Message, Part, Role, ToolCall};

/// `gen_ai.input.messages` of a request's `messages`.
pub(super) fn input_messages(messages: &[Message]) -> String {
    let all: Vec<Value> = messages
        .iter()
        .map(|m| json!({ "role": role(m.role), "parts": parts(&m.content) }))
        .collect();
    Value::Array(all).to_string()
}

/// `gen_ai.output.messages` of an answer: its text, its tool calls and
/// why it stopped.
pub(super) fn output_messages(
    text: &str,
    tool_calls: &[ToolCall],
    finish_reason: Option<&str>,
) -> String {
    let mut parts = Vec::new();
    if !text.is_empty() {
        parts.push(json!({ "type": "text", "content": text }));
    }
    parts.extend(tool_calls.iter().map(tool_call));
    let mut message = json!({ "role": "assistant", "parts": parts });
    if let Some(reason) = finish_reason {
        message["finish_reason"] = Value::from(reason);
    }
    Value::Array(vec![message]).to_string()
}

fn role(r: Role) -> &'static str {
    match r {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

fn tool_call(c: &ToolCall) -> Value {
    json!({ "type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments })
}

/// An image by where it is: a URL as it was given, inline bytes by their
/// media type only.
fn image(i: &Image) -> Value {
    match &i.source {
        ImageSource::Url { url } => json!({ "type": "uri", "modality": "image", "uri": url }),
        ImageSource::Base64 { media_type, .. } => {
            json!({ "type": "blob", "modality": "image", "mime_type": media_type })
        }
    }
}

fn parts(content: &[Part]) -> Vec<Value> {
    content
        .iter()
        .map(|p| match p {
            Part::Text { text, .. } => json!({ "type": "text", "content": text }),
            Part::Image(i) => image(i),
            Part::ToolCall(c) => tool_call(c),
            Part::ToolResult {
                tool_call_id,
                content,
                ..
            } => json!({ "type": "tool_call_response", "id": tool_call_id, "response": content }),
            Part::Thinking(_) => json!({ "type": "reasoning" }),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_arrays_of_roles_and_parts() {
        let input = input_messages(&[Message::system("be brief"), Message::user("hi")]);
        let v: Value = serde_json::from_str(&input).unwrap();
        assert_eq!(v[0]["role"], "system");
        assert_eq!(v[1]["parts"][0], json!({ "type": "text", "content": "hi" }));
        let out: Value =
            serde_json::from_str(&output_messages("hello", &[], Some("stop"))).unwrap();
        assert_eq!(
            out,
            json!([{ "role": "assistant", "finish_reason": "stop",
                     "parts": [{ "type": "text", "content": "hello" }] }])
        );
    }
}
