//! A prefill continuation in the client's own body.

use crate::chat::Native;

/// Appends `text` to the client's own body as the start of the assistant's
/// answer: to a last assistant message's content (text or blocks), or as a
/// new assistant message. Both dialects write messages so.
pub(crate) fn prefill_native(native: &mut Native, text: &str) {
    let Some(messages) = native
        .body
        .get_mut("messages")
        .and_then(serde_json::Value::as_array_mut)
    else {
        return;
    };
    let last_assistant = messages
        .last_mut()
        .filter(|m| m.get("role").and_then(serde_json::Value::as_str) == Some("assistant"))
        .and_then(serde_json::Value::as_object_mut);
    let block = serde_json::json!({"type": "text", "text": text});
    match last_assistant.map(|m| m.entry("content").or_insert(serde_json::Value::Null)) {
        Some(serde_json::Value::Array(blocks)) => blocks.push(block),
        Some(serde_json::Value::String(s)) => s.push_str(text),
        Some(content) => *content = serde_json::Value::from(text),
        None => messages.push(serde_json::json!({"role": "assistant", "content": text})),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::chat::Dialect;

    fn native(messages: serde_json::Value) -> Native {
        let mut body = serde_json::Map::new();
        body.insert("messages".into(), messages);
        body.insert("future".into(), json!({"kept": true}));
        Native {
            dialect: Dialect::Anthropic,
            body,
            headers: Vec::new(),
        }
    }

    #[test]
    fn a_prefill_extends_the_clients_own_body_in_every_shape_of_content() {
        let user = json!({"role": "user", "content": "q"});
        for (last, want) in [
            (None, json!({"role": "assistant", "content": "so far"})),
            (
                Some(json!({"role": "assistant", "content": "Start: "})),
                json!({"role": "assistant", "content": "Start: so far"}),
            ),
            (
                Some(json!({"role": "assistant", "content": [{"type": "text", "text": "A"}]})),
                json!({"role": "assistant", "content": [
                    {"type": "text", "text": "A"}, {"type": "text", "text": "so far"}]}),
            ),
            (
                Some(json!({"role": "assistant", "content": null})),
                json!({"role": "assistant", "content": "so far"}),
            ),
        ] {
            let mut messages = vec![user.clone()];
            messages.extend(last);
            let mut n = native(json!(messages));
            prefill_native(&mut n, "so far");
            assert_eq!(n.body["messages"], json!([user.clone(), want]));
            assert_eq!(n.body["future"], json!({"kept": true}));
        }
    }
}
