//! Structured outputs across dialects: an OpenAI client's `response_format`
//! served by an Anthropic model (a forced tool, or Anthropic's own
//! `output_config.format`, chosen per model in config), the answer given
//! back as the JSON text with finish reason `stop`, whole and streamed; an
//! Anthropic client's `output_config` (or beta `output_format`) served by an
//! OpenAI model.

use resilient_llm::format::{anthropic, openai, openai::stream::OpenAiStreamEncoder};
use resilient_llm::testing::{block_on, reply, FakePlatform};
use resilient_llm::{CallOptions, Client, Config, Delta, FinishReason};
use serde_json::{json, Value};

const OPENAI_REQUEST: &str = r#"{"model":"default","messages":[{"role":"user","content":"Weather in Rome?"}],
  "response_format":{"type":"json_schema","json_schema":{"name":"weather","strict":true,
    "schema":{"type":"object","properties":{"city":{"type":"string"},"celsius":{"type":"number"}},
              "required":["city","celsius"],"additionalProperties":false}}}}"#;

fn client(p: &FakePlatform, models: Value) -> Client<FakePlatform> {
    let cfg = json!({
        "providers": {"claude": {"kind": "anthropic", "baseUrl": "https://claude.test", "models": models}},
        "routes": {"default": [{"provider": "claude", "model": "claude-x"}]}
    });
    let secret = |_: &str| Some("sk-test".to_string());
    Config::parse(&cfg.to_string())
        .unwrap()
        .client(p.clone(), vec![], &secret)
        .unwrap()
}

fn sent(p: &FakePlatform) -> Value {
    serde_json::from_slice(&p.requests()[0].body).unwrap()
}

fn tool_answer() -> Vec<u8> {
    serde_json::to_vec(&json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "weather",
                     "input": {"city": "Rome", "celsius": 24}}],
        "stop_reason": "tool_use", "usage": {"input_tokens": 30, "output_tokens": 12}
    }))
    .unwrap()
}

#[test]
fn a_json_schema_answer_from_anthropic_comes_back_as_the_message_text() {
    let p = FakePlatform::new();
    p.script("https://claude.test", [reply(200).body(tool_answer())]);
    let c = client(&p, json!({}));
    let req = openai::parse_request(OPENAI_REQUEST.as_bytes()).unwrap();
    let r = block_on(&p, c.chat(req)).unwrap();
    let b = sent(&p);
    assert_eq!(
        b["tools"],
        json!([{"name": "weather",
                "description": "Give your final answer by calling this tool; its input is the answer.",
                "input_schema": {"type": "object", "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
                                 "required": ["city", "celsius"], "additionalProperties": false}}])
    );
    assert_eq!(b["tool_choice"], json!({"type": "tool", "name": "weather"}));
    assert_eq!(p.requests()[0].headers.get("anthropic-beta"), None);
    // What an OpenAI SDK's parse helper reads: content is the JSON, stop.
    let out = serde_json::to_value(openai::render_response(&r.response, "c", 0)).unwrap();
    let message = &out["choices"][0]["message"];
    let parsed: Value = serde_json::from_str(message["content"].as_str().unwrap()).unwrap();
    assert_eq!(parsed, json!({"city": "Rome", "celsius": 24}));
    assert_eq!(message.get("tool_calls"), None);
    assert_eq!(out["choices"][0]["finish_reason"], "stop");
}

#[test]
fn a_model_configured_native_gets_output_config_format() {
    let p = FakePlatform::new();
    let text = serde_json::to_vec(&json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
        "content": [{"type": "text", "text": "{\"city\":\"Rome\",\"celsius\":24}"}],
        "stop_reason": "end_turn", "usage": {"input_tokens": 30, "output_tokens": 12}
    }))
    .unwrap();
    p.script("https://claude.test", [reply(200).body(text)]);
    let c = client(&p, json!({"claude-x": {"structuredOutput": "native"}}));
    let req = openai::parse_request(OPENAI_REQUEST.as_bytes()).unwrap();
    let r = block_on(&p, c.chat(req)).unwrap();
    let b = sent(&p);
    assert_eq!(b["output_config"]["format"]["type"], "json_schema");
    assert_eq!(
        b["output_config"]["format"]["schema"]["required"],
        json!(["city", "celsius"])
    );
    assert_eq!(b.get("tools"), None);
    assert_eq!(p.requests()[0].headers.get("anthropic-beta"), None);
    assert_eq!(r.response.text, "{\"city\":\"Rome\",\"celsius\":24}");
    assert_eq!(r.response.finish_reason, Some(FinishReason::Stop));
}

#[test]
fn json_object_uses_the_answer_tool_and_client_tools_stay_callable() {
    let req = openai::parse_request(
        br#"{"model":"r","messages":[{"role":"user","content":"Look it up, then answer in JSON."}],
            "response_format":{"type":"json_object"},"tool_choice":"auto",
            "tools":[{"type":"function","function":{"name":"look_up","parameters":{"type":"object"}}}]}"#,
    )
    .unwrap();
    let opts = anthropic::EncodeOptions {
        default_max_tokens: 512,
        structured_output: anthropic::StructuredOutput::Native,
    };
    let b = serde_json::to_value(anthropic::encode_request(&req, "m", opts).unwrap()).unwrap();
    let names: Vec<&str> = b["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["look_up", anthropic::ANSWER_TOOL]);
    assert_eq!(b["tools"][1]["input_schema"], json!({"type": "object"}));
    assert_eq!(b["tool_choice"], json!({"type": "any"}));
}

#[test]
fn a_streamed_structured_answer_arrives_as_content_deltas() {
    let ev = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
    let chunks = vec![
        ev(
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "content": [], "model": "claude-x", "usage": {"input_tokens": 30, "output_tokens": 1}}}),
        ),
        ev(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}}}),
        ),
        ev(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": "{\"city\": \"Ro"}}),
        ),
        ev(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": "me\", \"celsius\": 24}"}}),
        ),
        ev(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        ev(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 12}}),
        ),
        ev("message_stop", json!({"type": "message_stop"})),
    ];
    let p = FakePlatform::new();
    p.script(
        "https://claude.test",
        [reply(200)
            .header("content-type", "text/event-stream")
            .chunks(chunks)],
    );
    let c = client(&p, json!({}));
    let mut req = openai::parse_request(OPENAI_REQUEST.as_bytes()).unwrap();
    req.stream = true;
    let deltas = block_on(&p, async {
        let mut s = c.stream(req, CallOptions::default()).unwrap();
        let mut out = Vec::new();
        while let Some(d) = s.next().await {
            out.push(d.unwrap());
        }
        out
    });
    assert!(deltas.iter().all(|d| !matches!(d, Delta::ToolCall { .. })));
    let mut e = OpenAiStreamEncoder::new("c".into(), 0, "claude-x".into(), false);
    let mut bytes = Vec::new();
    for d in &deltas {
        bytes.extend(e.delta(d));
    }
    bytes.extend(e.finish());
    let mut content = String::new();
    let mut finish = None;
    for line in String::from_utf8(bytes).unwrap().lines() {
        let Some(data) = line.strip_prefix("data: ").filter(|d| *d != "[DONE]") else {
            continue;
        };
        let v: Value = serde_json::from_str(data).unwrap();
        content.push_str(
            v["choices"][0]["delta"]["content"]
                .as_str()
                .unwrap_or_default(),
        );
        if let Some(f) = v["choices"][0]["finish_reason"].as_str() {
            finish = Some(f.to_string());
        }
    }
    let parsed: Value = serde_json::from_str(&content).unwrap();
    assert_eq!(parsed, json!({"city": "Rome", "celsius": 24}));
    assert_eq!(finish.as_deref(), Some("stop"));
}

#[test]
fn an_anthropic_output_format_becomes_an_openai_json_schema() {
    let req = anthropic::parse_request(
        br#"{"model":"r","max_tokens":200,"messages":[{"role":"user","content":"Weather?"}],
            "output_format":{"type":"json_schema","schema":{"type":"object","properties":{"c":{"type":"number"}}}}}"#,
    )
    .unwrap();
    let b = serde_json::to_value(
        openai::encode_request(&req, "gpt", openai::EncodeOptions::default()).unwrap(),
    )
    .unwrap();
    assert_eq!(
        b["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "output", "strict": true,
               "schema": {"type": "object", "properties": {"c": {"type": "number"}}}}})
    );
}

#[test]
fn an_anthropic_output_config_becomes_an_openai_json_schema_and_effort() {
    let req = anthropic::parse_request(
        br#"{"model":"r","max_tokens":200,"messages":[{"role":"user","content":"Weather?"}],
            "output_config":{"effort":"high","format":{"type":"json_schema","schema":{"type":"object"}}}}"#,
    )
    .unwrap();
    let b = serde_json::to_value(
        openai::encode_request(&req, "gpt", openai::EncodeOptions::default()).unwrap(),
    )
    .unwrap();
    assert_eq!(
        b["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "output", "strict": true,
               "schema": {"type": "object"}}})
    );
    assert_eq!(b["reasoning_effort"], "high");
    // A setting of output_config this crate does not know is not dropped.
    let req = anthropic::parse_request(
        br#"{"model":"r","max_tokens":200,"messages":[{"role":"user","content":"x"}],
            "output_config":{"verbosity":"low"}}"#,
    )
    .unwrap();
    let e = openai::encode_request(&req, "gpt", openai::EncodeOptions::default()).unwrap_err();
    assert!(e.to_string().contains("output_config.verbosity"), "{e}");
}
