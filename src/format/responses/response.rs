//! Outbound to a client: the neutral answer as a Response object.

use serde_json::{json, Map, Value};

use super::{status_of, Echo, OutUsage};
use crate::chat::{ChatResponse, Thinking, ToolCall};

/// The Response object of `resp`, as response `id` created at `created`
/// (Unix seconds), echoing its request's settings. The output lists the
/// reasoning first, then the message (when there is text), then the
/// function calls, as the Responses API orders them. `usage` is `null`
/// when the provider reported none.
pub fn render_response(resp: &ChatResponse, id: &str, created: u64, echo: &Echo) -> Value {
    let mut output = Vec::new();
    for (i, t) in resp.thinking.iter().enumerate() {
        output.push(reasoning_item(&format!("rs_{id}_{i}"), t));
    }
    if !resp.text.is_empty() || resp.tool_calls.is_empty() {
        output.push(message_item(&format!("msg_{id}"), &resp.text, "completed"));
    }
    for (i, c) in resp.tool_calls.iter().enumerate() {
        output.push(call_item(&format!("fc_{id}_{i}"), c, "completed"));
    }
    let (status, incomplete) = status_of(resp.finish_reason.as_ref());
    response_object(ResponseHead {
        id,
        created,
        model: &resp.model,
        status,
        incomplete,
        error: None,
        echo,
        output,
        usage: resp.usage.map(OutUsage::from),
    })
}

/// The parts of a Response object that are not its request's echo.
pub(crate) struct ResponseHead<'a> {
    pub(crate) id: &'a str,
    pub(crate) created: u64,
    pub(crate) model: &'a str,
    pub(crate) status: &'a str,
    pub(crate) incomplete: Option<&'a str>,
    pub(crate) error: Option<Value>,
    pub(crate) echo: &'a Echo,
    pub(crate) output: Vec<Value>,
    pub(crate) usage: Option<OutUsage>,
}

/// A Response object: `object: "response"`, its status, output and usage,
/// and the request's echo.
pub(crate) fn response_object(h: ResponseHead<'_>) -> Value {
    let mut body = Map::new();
    body.insert("id".into(), json!(format!("resp_{}", h.id)));
    body.insert("object".into(), json!("response"));
    body.insert("created_at".into(), json!(h.created));
    body.insert("status".into(), json!(h.status));
    body.insert("model".into(), json!(h.model));
    body.insert("output".into(), Value::Array(h.output));
    body.insert("error".into(), h.error.unwrap_or(Value::Null));
    body.insert(
        "incomplete_details".into(),
        h.incomplete.map_or(Value::Null, |r| json!({ "reason": r })),
    );
    body.insert("previous_response_id".into(), Value::Null);
    body.insert("store".into(), json!(false));
    body.insert("usage".into(), h.usage.map_or(Value::Null, |u| json!(u)));
    for (k, v) in h.echo.fields() {
        body.insert(k.clone(), v.clone());
    }
    Value::Object(body)
}

/// An assistant message item holding one `output_text` part.
pub(crate) fn message_item(id: &str, text: &str, status: &str) -> Value {
    json!({
        "type": "message",
        "id": id,
        "status": status,
        "role": "assistant",
        "content": [text_part(text)],
    })
}

/// An `output_text` content part.
pub(crate) fn text_part(text: &str) -> Value {
    json!({ "type": "output_text", "text": text, "annotations": [] })
}

/// A `function_call` item.
pub(crate) fn call_item(id: &str, c: &ToolCall, status: &str) -> Value {
    json!({
        "type": "function_call",
        "id": id,
        "call_id": c.id,
        "name": c.name,
        "arguments": c.arguments,
        "status": status,
    })
}

/// A `reasoning` item: the reasoning text as its content. A provider's
/// signature is not given back: it is for that provider only, and the
/// Responses API carries OpenAI's own encrypted reasoning instead.
pub(crate) fn reasoning_item(id: &str, t: &Thinking) -> Value {
    let content: Vec<Value> = if t.text.is_empty() {
        Vec::new()
    } else {
        vec![json!({ "type": "reasoning_text", "text": t.text })]
    };
    json!({ "type": "reasoning", "id": id, "summary": [], "content": content })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::{FinishReason, Usage};

    fn answer() -> ChatResponse {
        ChatResponse {
            text: String::new(),
            tool_calls: vec![ToolCall {
                id: "call_1".into(),
                name: "get".into(),
                arguments: "{\"city\":\"Oslo\"}".into(),
            }],
            thinking: Vec::new(),
            model: "m-1".into(),
            provider: "p".into(),
            finish_reason: Some(FinishReason::ToolCalls),
            usage: Some(Usage {
                input_tokens: 5,
                output_tokens: 3,
                ..Usage::default()
            }),
            raw: None,
            dialect: None,
        }
    }

    #[test]
    fn calls_become_function_call_items() {
        let body = serde_json::Map::from_iter([("tools".into(), json!([{"type": "function"}]))]);
        let v = render_response(&answer(), "abc", 7, &Echo::of(&body));
        assert_eq!(v["id"], "resp_abc");
        assert_eq!(v["status"], "completed");
        assert_eq!(v["output"].as_array().map(Vec::len), Some(1));
        assert_eq!(v["output"][0]["type"], "function_call");
        assert_eq!(v["output"][0]["call_id"], "call_1");
        assert_eq!(v["usage"]["total_tokens"], 8);
        assert!(v["usage"].get("input_tokens_details").is_none());
        assert_eq!(v["tools"][0]["type"], "function");
        assert_eq!(v["tool_choice"], "auto");
    }

    #[test]
    fn a_token_limit_is_incomplete_and_unknown_usage_is_null() {
        let mut a = answer();
        a.tool_calls.clear();
        a.text = "partial".into();
        a.finish_reason = Some(FinishReason::Length);
        a.usage = None;
        let v = render_response(&a, "x", 0, &Echo::default());
        assert_eq!(v["status"], "incomplete");
        assert_eq!(v["incomplete_details"]["reason"], "max_output_tokens");
        assert_eq!(v["output"][0]["content"][0]["text"], "partial");
        assert!(v["usage"].is_null());
    }
}
