//! Helpers shared by the scenario tests.

use std::path::Path;

use resilient_llm::testing::{reply, Reply};
use serde_json::Value;

/// A scripted reply from a recorded fixture envelope
/// (`tests/fixtures/<provider>/<name>.json`: status, headers, body or bodyText).
pub fn fixture(name: &str) -> Reply {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let f: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let status = f["status"]
        .as_u64()
        .and_then(|s| u16::try_from(s).ok())
        .expect("fixture status");
    let mut r = reply(status);
    if let Some(headers) = f["headers"].as_object() {
        for (k, v) in headers {
            r = r.header(k, v.as_str().unwrap_or_default());
        }
    }
    match (&f["bodyText"], &f["body"]) {
        (Value::String(t), _) => r.body(t.as_bytes().to_vec()),
        (_, body) => r.body(serde_json::to_vec(body).expect("fixture body")),
    }
}
