//! The response cache's key on any JSON body: it never panics, and the
//! same meaning is the same key (a body read back from its own text; every
//! whole number written as a float; the fields that do not change the
//! answer added), while a field added that does change it is another key.
#![no_main]

use libfuzzer_sys::fuzz_target;
use resilient_llm::cache::{cache_key, KeyParts};
use serde_json::{Map, Value};

const PARTS: KeyParts<'static> = KeyParts {
    route: "default",
    format: "openai",
    tenant: None,
    headers: &[],
};

/// `v` with every whole number within 2⁵³ written as a float (`1` → `1.0`).
fn as_floats(v: &Value) -> Value {
    match v {
        Value::Number(n) => match n.as_i64() {
            Some(i) if i.unsigned_abs() <= 1 << 53 => Value::from(i as f64),
            _ => v.clone(),
        },
        Value::Array(items) => Value::Array(items.iter().map(as_floats).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), as_floats(v))).collect())
        }
        _ => v.clone(),
    }
}

fuzz_target!(|input: &[u8]| {
    let Ok(body) = serde_json::from_slice::<Map<String, Value>>(input) else {
        return;
    };
    let key = cache_key(PARTS, &body);
    assert_eq!(key, cache_key(PARTS, &body), "the same body, another key");
    let Some(key) = key else {
        return;
    };
    assert_eq!(key.len(), 64);

    let text = serde_json::to_vec(&body).expect("a map serializes");
    let back: Map<String, Value> = serde_json::from_slice(&text).expect("it reads back");
    assert_eq!(cache_key(PARTS, &back).as_ref(), Some(&key), "read back");

    if let Value::Object(floats) = as_floats(&Value::Object(body.clone())) {
        assert_eq!(cache_key(PARTS, &floats).as_ref(), Some(&key), "1 and 1.0");
    }

    let mut delivered = body.clone();
    delivered.insert("stream".into(), Value::Bool(true));
    delivered.insert("user".into(), Value::from("someone"));
    delivered.insert("metadata".into(), serde_json::json!({ "run": 7 }));
    assert_eq!(
        cache_key(PARTS, &delivered).as_ref(),
        Some(&key),
        "delivery fields"
    );

    let mut other = body;
    let marker = match other.get("fuzz_marker") {
        Some(Value::Bool(true)) => Value::Bool(false),
        _ => Value::Bool(true),
    };
    other.insert("fuzz_marker".into(), marker);
    assert_ne!(
        cache_key(PARTS, &other).as_ref(),
        Some(&key),
        "another field, the same key"
    );
});
