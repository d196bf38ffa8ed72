//! The route the hedging tests share: three OpenAI providers in order
//! (`first`, `second`, `third`), the route's hedge as given.

use resilient_llm::testing::FakePlatform;
use resilient_llm::{ChatRequest, Client, Config, Message};
use serde_json::{json, Value};

pub fn client(p: &FakePlatform, hedge: Value) -> Client<FakePlatform> {
    client_with(p, hedge, json!({}))
}

/// The same route with `more`'s top-level settings too (e.g. `retry`).
pub fn client_with(p: &FakePlatform, hedge: Value, more: Value) -> Client<FakePlatform> {
    let mut config = json!({
        "providers": {
            "first": { "kind": "openai", "baseUrl": "https://first.test" },
            "second": { "kind": "openai", "baseUrl": "https://second.test" },
            "third": { "kind": "openai", "baseUrl": "https://third.test" }
        },
        "routes": { "default": [ { "provider": "first", "model": "m1" },
                                 { "provider": "second", "model": "m2" },
                                 { "provider": "third", "model": "m3" } ] },
        "hedge": { "default": hedge }
    });
    if let (Some(config), Value::Object(more)) = (config.as_object_mut(), more) {
        config.extend(more);
    }
    Config::parse(&config.to_string())
        .unwrap()
        .client(p.clone(), vec![], &|_| Some("sk-test".into()))
        .unwrap()
}

pub fn req() -> ChatRequest {
    ChatRequest::new(vec![Message::user("hi")])
}
