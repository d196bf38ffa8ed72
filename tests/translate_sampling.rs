//! Sampling settings and the rest across dialects: what maps (parallel
//! tool calls, service tier, user, stop sequences), what is left out and
//! named (`seed` and penalties for Anthropic, `top_k` for OpenAI), and stop
//! reasons.

use resilient_llm::format::{anthropic, openai};
use resilient_llm::{FinishReason, Provider};
use serde_json::{json, Value};

fn to_anthropic(req: &resilient_llm::ChatRequest) -> (Value, Vec<String>) {
    let opts = anthropic::EncodeOptions {
        default_max_tokens: 1000,
        structured_output: anthropic::StructuredOutput::Tool,
    };
    let wire = anthropic::encode_request(req, "claude", opts).unwrap();
    (serde_json::to_value(&wire).unwrap(), wire.omitted.clone())
}

fn to_openai(req: &resilient_llm::ChatRequest) -> (Value, Vec<String>) {
    let wire = openai::encode_request(req, "gpt", openai::EncodeOptions::default()).unwrap();
    (serde_json::to_value(&wire).unwrap(), wire.omitted.clone())
}

const TOOLS: &str =
    r#""tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]"#;

#[test]
fn openai_sampling_settings_map_or_are_named_as_omitted() {
    let req = openai::parse_request(
        format!(
            r#"{{"model":"r","messages":[{{"role":"developer","content":"Be exact."}},{{"role":"user","content":"hi"}}],
            "seed":42,"frequency_penalty":0.5,"presence_penalty":-0.5,"parallel_tool_calls":false,
            "service_tier":"default","user":"u-1","stop":["END","STOP"],"store":true,{TOOLS}}}"#
        )
        .as_bytes(),
    )
    .unwrap();
    let (a, omitted) = to_anthropic(&req);
    assert_eq!(
        omitted,
        ["store", "seed", "frequency_penalty", "presence_penalty"]
    );
    assert_eq!(a["system"], "Be exact.");
    assert_eq!(
        a["tool_choice"],
        json!({"type": "auto", "disable_parallel_tool_use": true})
    );
    assert_eq!(a["service_tier"], "standard_only");
    assert_eq!(a["metadata"], json!({"user_id": "u-1"}));
    assert_eq!(a["stop_sequences"], json!(["END", "STOP"]));
    for key in ["seed", "frequency_penalty", "presence_penalty", "store"] {
        assert_eq!(a.get(key), None, "{key}");
    }
    // The same request to an OpenAI-dialect provider keeps them all, and
    // the client's own field the neutral request does not hold.
    let (o, omitted) = to_openai(&req);
    assert!(omitted.is_empty(), "{omitted:?}");
    assert_eq!(o["store"], true);
    assert_eq!(o["seed"], 42);
    assert_eq!(o["frequency_penalty"], 0.5);
    assert_eq!(o["presence_penalty"], -0.5);
    assert_eq!(o["parallel_tool_calls"], false);
    assert_eq!(o["service_tier"], "default");
    assert_eq!(o["user"], "u-1");
}

#[test]
fn anthropic_sampling_settings_map_or_are_named_as_omitted() {
    let req = anthropic::parse_request(
        br#"{"model":"r","max_tokens":100,"messages":[{"role":"user","content":"hi"}],
            "top_k":40,"top_p":0.9,"service_tier":"standard_only","metadata":{"user_id":"u-2"},
            "tool_choice":{"type":"any","disable_parallel_tool_use":true},
            "tools":[{"name":"f","input_schema":{"type":"object"}}]}"#,
    )
    .unwrap();
    let (o, omitted) = to_openai(&req);
    assert_eq!(omitted, ["top_k"]);
    assert_eq!(o.get("top_k"), None);
    assert_eq!(o["top_p"], 0.9);
    assert_eq!(o["tool_choice"], "required");
    assert_eq!(o["parallel_tool_calls"], false);
    assert_eq!(o["service_tier"], "default");
    assert_eq!(o["user"], "u-2");
    assert_eq!(o["max_tokens"], 100);
    let (a, omitted) = to_anthropic(&req);
    assert!(omitted.is_empty(), "{omitted:?}");
    assert_eq!(a["top_k"], 40);
    assert_eq!(
        a["tool_choice"],
        json!({"type": "any", "disable_parallel_tool_use": true})
    );
}

#[test]
fn a_service_tier_without_equivalent_is_named() {
    let req = openai::parse_request(
        br#"{"model":"r","messages":[{"role":"user","content":"hi"}],"service_tier":"flex"}"#,
    )
    .unwrap();
    let (a, omitted) = to_anthropic(&req);
    assert_eq!(omitted, ["service_tier"]);
    assert_eq!(a.get("service_tier"), None);
    // parallel_tool_calls without tools means nothing and is not sent.
    let req = openai::parse_request(
        br#"{"model":"r","messages":[{"role":"user","content":"hi"}],"parallel_tool_calls":false}"#,
    )
    .unwrap();
    assert_eq!(to_openai(&req).0.get("parallel_tool_calls"), None);
    assert_eq!(to_anthropic(&req).0.get("tool_choice"), None);
}

#[test]
fn stop_reasons_translate_both_ways() {
    for (stop_reason, neutral, finish) in [
        ("end_turn", FinishReason::Stop, "stop"),
        ("stop_sequence", FinishReason::Stop, "stop"),
        ("max_tokens", FinishReason::Length, "length"),
        (
            "model_context_window_exceeded",
            FinishReason::Length,
            "length",
        ),
        ("tool_use", FinishReason::ToolCalls, "tool_calls"),
        ("refusal", FinishReason::ContentFilter, "content_filter"),
        // No OpenAI word for a paused turn: its name is kept.
        (
            "pause_turn",
            FinishReason::Other("pause_turn".into()),
            "pause_turn",
        ),
    ] {
        assert_eq!(anthropic::finish_reason(stop_reason), neutral);
        assert_eq!(openai::finish_reason_name(&neutral), finish);
        assert_eq!(openai::finish_reason(finish), neutral);
    }
    assert_eq!(
        anthropic::stop_reason_name(&openai::finish_reason("content_filter")),
        "refusal"
    );
}

#[test]
fn the_adapters_send_what_the_encoders_render() {
    // The omitted list stays out of the body itself.
    let req = openai::parse_request(
        br#"{"model":"r","messages":[{"role":"user","content":"hi"}],"seed":1}"#,
    )
    .unwrap();
    let p = resilient_llm::Anthropic::new("a").api_key(resilient_llm::Secret::new("k"));
    let b: Value = serde_json::from_slice(&p.encode(&req, "m").unwrap().body).unwrap();
    assert_eq!(b.get("omitted"), None);
    assert_eq!(b.get("seed"), None);
}
