//! A scripted Anthropic Messages stream, as SSE text: the stream tests'
//! one way to write it.

use serde_json::{json, Value};

/// One SSE event, named, with JSON data.
pub fn event(name: &str, data: Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// One text delta, then the end: with `stop_reason` in a `message_delta`
/// when given, `message_stop` in any case.
pub fn anthropic(token: &str, stop_reason: Option<Value>) -> Vec<String> {
    let mut out = vec![
        event(
            "message_start",
            json!({ "type": "message_start", "message": { "id": "msg_1", "type": "message",
            "role": "assistant", "content": [], "model": "claude-x", "stop_reason": null,
            "usage": { "input_tokens": 9, "output_tokens": 1 } } }),
        ),
        event(
            "content_block_start",
            json!({ "type": "content_block_start", "index": 0,
                    "content_block": { "type": "text", "text": "" } }),
        ),
        event(
            "content_block_delta",
            json!({ "type": "content_block_delta", "index": 0,
                    "delta": { "type": "text_delta", "text": token } }),
        ),
        event(
            "content_block_stop",
            json!({ "type": "content_block_stop", "index": 0 }),
        ),
    ];
    if let Some(reason) = stop_reason {
        out.push(event(
            "message_delta",
            json!({ "type": "message_delta", "delta": { "stop_reason": reason, "stop_sequence": null },
                    "usage": { "output_tokens": 3 } }),
        ));
    }
    out.push(event("message_stop", json!({ "type": "message_stop" })));
    out
}
