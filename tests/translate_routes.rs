//! A route mixing both kinds of provider: a request only one entry can be
//! given is served by that entry; the others are passed over without being
//! called, with the reason; with no entry able, the error names the field.

use resilient_llm::format::{anthropic, openai};
use resilient_llm::testing::{block_on, reply, FakePlatform};
use resilient_llm::{Client, Config};
use serde_json::{json, Value};

fn client(p: &FakePlatform, route: Value) -> Client<FakePlatform> {
    let cfg = json!({
        "providers": {
            "claude": {"kind": "anthropic", "baseUrl": "https://claude.test"},
            "gpt": {"kind": "openai", "baseUrl": "https://gpt.test"}
        },
        "routes": {"default": route}
    });
    let secret = |_: &str| Some("sk-test".to_string());
    Config::parse(&cfg.to_string())
        .unwrap()
        .client(p.clone(), vec![], &secret)
        .unwrap()
}

fn openai_answer() -> Vec<u8> {
    serde_json::to_vec(&json!({"id": "c", "object": "chat.completion", "model": "gpt-x",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1}}))
    .unwrap()
}

fn anthropic_answer() -> Vec<u8> {
    serde_json::to_vec(
        &json!({"id": "m", "type": "message", "role": "assistant", "model": "claude-x",
        "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
        "usage": {"input_tokens": 3, "output_tokens": 1}}),
    )
    .unwrap()
}

#[test]
fn logprobs_pass_over_the_anthropic_entry_to_the_openai_one() {
    let p = FakePlatform::new();
    p.script("https://gpt.test", [reply(200).body(openai_answer())]);
    let c = client(
        &p,
        json!([{"provider": "claude", "model": "claude-x"}, {"provider": "gpt", "model": "gpt-x"}]),
    );
    let req = openai::parse_request(
        br#"{"model":"default","messages":[{"role":"user","content":"hi"}],"logprobs":true,"top_logprobs":2}"#,
    )
    .unwrap();
    let r = block_on(&p, c.chat(req)).unwrap();
    assert_eq!(r.served_by.provider, "gpt");
    assert_eq!(p.requests().len(), 1);
    let sent: Value = serde_json::from_slice(&p.requests()[0].body).unwrap();
    // Sent as the client wrote them, to a provider of its own dialect.
    assert_eq!(sent["logprobs"], true);
    assert_eq!(sent["top_logprobs"], 2);
    let passed = &r.attempts[0];
    assert_eq!(passed.provider, "claude");
    assert!(!passed.reached);
    let text = serde_json::to_string(passed).unwrap();
    assert!(
        text.contains("logprobs: not available from anthropic"),
        "{text}"
    );
}

#[test]
fn an_anthropic_only_feature_is_served_by_the_anthropic_entry() {
    let p = FakePlatform::new();
    p.script("https://claude.test", [reply(200).body(anthropic_answer())]);
    let c = client(
        &p,
        json!([{"provider": "gpt", "model": "gpt-x"}, {"provider": "claude", "model": "claude-x"}]),
    );
    let req = anthropic::parse_request(
        br#"{"model":"default","max_tokens":50,"messages":[{"role":"user","content":"hi"}],
            "context_management":{"edits":[{"type":"clear_tool_uses_20250919"}]},"future_flag":true}"#,
    )
    .unwrap();
    let r = block_on(&p, c.chat(req)).unwrap();
    assert_eq!(r.served_by.provider, "claude");
    let sent: Value = serde_json::from_slice(&p.requests()[0].body).unwrap();
    assert_eq!(
        sent["context_management"],
        json!({"edits": [{"type": "clear_tool_uses_20250919"}]})
    );
    assert_eq!(sent["future_flag"], true);
}

#[test]
fn when_no_entry_can_serve_it_the_error_names_the_field() {
    let p = FakePlatform::new();
    let c = client(&p, json!([{"provider": "claude", "model": "claude-x"}]));
    let req = openai::parse_request(
        br#"{"model":"default","n":3,"messages":[{"role":"user","content":"hi"}]}"#,
    )
    .unwrap();
    let e = block_on(&p, c.chat(req)).unwrap_err();
    assert!(p.requests().is_empty());
    let text = format!("{e} {}", serde_json::to_string(e.attempts()).unwrap());
    assert!(text.contains("n: not available from anthropic"), "{text}");
}

#[test]
fn a_known_field_with_an_unknown_value_goes_as_it_came_to_its_own_dialect() {
    let req = anthropic::parse_request(
        br#"{"model":"r","max_tokens":50,"messages":[{"role":"user","content":"hi"}],
            "thinking":{"type":"between_tools"}}"#,
    )
    .unwrap();
    let opts = anthropic::EncodeOptions {
        default_max_tokens: 50,
        structured_output: anthropic::StructuredOutput::Tool,
    };
    let b = serde_json::to_value(anthropic::encode_request(&req, "m", opts).unwrap()).unwrap();
    assert_eq!(b["thinking"], json!({"type": "between_tools"}));
    let e = openai::encode_request(&req, "m", openai::EncodeOptions::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "thinking: unknown field, cannot be translated for openai"
    );
    let req = openai::parse_request(
        br#"{"model":"r","messages":[{"role":"user","content":"hi"}],
            "tools":[{"type":"function","function":{"name":"f"}}],
            "tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[]}}}"#,
    )
    .unwrap();
    let b = serde_json::to_value(
        openai::encode_request(&req, "m", openai::EncodeOptions::default()).unwrap(),
    )
    .unwrap();
    assert_eq!(b["tool_choice"]["type"], "allowed_tools");
    let e = anthropic::encode_request(&req, "m", opts).unwrap_err();
    assert_eq!(e.to_string(), "tool_choice: not available from anthropic");
}
