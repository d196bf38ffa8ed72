//! count_tokens at Google Vertex AI's Claude, on the fake platform: the
//! `count-tokens:rawPredict` path with the model in the body, the service
//! account's token fetched first, a failover to it from Anthropic's 529;
//! Gemini entries left out.

#[path = "vertex/support.rs"]
mod support;

use resilient_llm::testing::{block_on, reply, FakePlatform};
use resilient_llm::{CallOptions, Endpoint, EndpointCall, Error};
use serde_json::{json, Value};
use support::*;

fn count(route: &str) -> EndpointCall {
    let body = json!({"model": route, "system": "terse",
                      "messages": [{"role": "user", "content": "hi"}]});
    let Value::Object(body) = body else {
        unreachable!()
    };
    EndpointCall::new(Endpoint::CountTokens, body)
}

#[test]
fn count_tokens_fails_over_from_anthropic_to_vertex_claude() {
    let p = FakePlatform::new().at(NOW);
    let c = client(&p);
    p.script("https://anthropic.test", [reply(529)]);
    p.script(TOKEN_URI, [token_reply(3600)]);
    let url = format!("{VERTEX}/anthropic/models/count-tokens:rawPredict");
    p.script(&url, [reply(200).body(r#"{"input_tokens":9}"#)]);
    let r = block_on(&p, c.call(&count("claude"), CallOptions::default())).unwrap();
    assert_eq!(r.body, br#"{"input_tokens":9}"#);
    assert_eq!(r.served_by.provider, "vertex");
    let sent = p.requests();
    assert_eq!(
        sent[0].url,
        "https://anthropic.test/v1/messages/count_tokens"
    );
    let last = sent.last().unwrap();
    assert_eq!(last.url, url);
    assert_eq!(
        last.headers.get("authorization"),
        Some(format!("Bearer {TOKEN}").as_str())
    );
    let body: Value = serde_json::from_slice(&last.body).unwrap();
    assert_eq!(body["model"], "claude-sonnet-4-5@20250929");
    assert_eq!(body["anthropic_version"], "vertex-2023-10-16");
    assert_eq!(body["system"], "terse");
}

#[test]
fn gemini_counts_no_tokens_here() {
    let p = FakePlatform::new().at(NOW);
    let c = client(&p);
    match block_on(&p, c.call(&count("gemini"), CallOptions::default())) {
        Err(Error::InvalidRequest(m)) => assert!(m.contains("serves count_tokens"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(p.requests().is_empty());
}
