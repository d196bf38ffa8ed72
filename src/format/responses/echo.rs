//! The request settings a Response object repeats back to the client.

use serde_json::{json, Map, Value};

/// What a Response object echoes of its request (`instructions`, `tools`,
/// `text`, …), taken from the client's body as sent, with the API's
/// defaults where the client set nothing. `store` is always `false` and
/// `previous_response_id` `null` in a translated answer: the gateway keeps
/// no responses.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Echo {
    fields: Map<String, Value>,
}

/// Echoed fields and their defaults when absent.
const ECHOED: &[&str] = &[
    "instructions",
    "max_output_tokens",
    "metadata",
    "parallel_tool_calls",
    "reasoning",
    "service_tier",
    "temperature",
    "text",
    "tool_choice",
    "tools",
    "top_p",
    "truncation",
    "user",
];

impl Echo {
    /// The echo of a client's request body.
    pub fn of(body: &Map<String, Value>) -> Self {
        let mut fields = Map::new();
        for key in ECHOED {
            let value = match body.get(*key).filter(|v| !v.is_null()) {
                Some(v) => v.clone(),
                None => default_of(key),
            };
            fields.insert((*key).to_string(), value);
        }
        Echo { fields }
    }

    /// The echoed fields, to merge into a Response object.
    pub(crate) fn fields(&self) -> &Map<String, Value> {
        &self.fields
    }
}

fn default_of(key: &str) -> Value {
    match key {
        "metadata" => json!({}),
        "parallel_tool_calls" => json!(true),
        "text" => json!({"format": {"type": "text"}}),
        "tool_choice" => json!("auto"),
        "tools" => json!([]),
        "truncation" => json!("disabled"),
        _ => Value::Null,
    }
}
