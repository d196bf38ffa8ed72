//! Reasoning across dialects: `reasoning_effort` ↔ a thinking budget;
//! thinking blocks (signed, redacted) ↔ `reasoning_content` and
//! `thinking_blocks` in answers and stream deltas; blocks sent back in a
//! later turn keep their signatures.

use resilient_llm::format::anthropic::stream::AnthropicStreamEncoder;
use resilient_llm::format::openai::stream::OpenAiStreamEncoder;
use resilient_llm::format::{anthropic, openai};
use resilient_llm::{
    Anthropic, BufferedResponse, Delta, Headers, OpenAi, PresetName, Provider, Secret, SseDecoder,
    Thinking,
};
use serde_json::{json, Value};

fn anthropic_provider() -> Anthropic {
    Anthropic::new("anthropic").api_key(Secret::new("k"))
}

fn openai_provider() -> OpenAi {
    OpenAi::new("openai", PresetName::OpenAi).api_key(Secret::new("k"))
}

fn read(path: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/fixtures/{path}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn fixture(path: &str) -> BufferedResponse {
    let f: Value = serde_json::from_slice(&read(path)).unwrap();
    BufferedResponse {
        status: 200,
        headers: Headers::new(),
        body: serde_json::to_vec(&f["body"]).unwrap(),
    }
}

fn deltas(p: &dyn Provider, bytes: &[u8]) -> Vec<Delta> {
    let mut d = SseDecoder::default();
    let mut events = Vec::new();
    d.feed(bytes, &mut events).unwrap();
    events.extend(d.finish());
    events
        .iter()
        .flat_map(|e| p.decode_event(e).unwrap())
        .collect()
}

fn anthropic_body(json: &str) -> Value {
    let req = openai::parse_request(json.as_bytes()).unwrap();
    let opts = anthropic::EncodeOptions {
        default_max_tokens: 4096,
        structured_output: anthropic::StructuredOutput::Tool,
    };
    let wire = anthropic::encode_request(&req, "m", opts).unwrap();
    let mut v = serde_json::to_value(&wire).unwrap();
    v["omitted"] = json!(wire.omitted);
    v
}

const HI: &str = r#""messages":[{"role":"user","content":"hi"}]"#;

#[test]
fn reasoning_effort_becomes_a_thinking_budget_under_max_tokens() {
    let b = anthropic_body(&format!(
        r#"{{"model":"r",{HI},"reasoning_effort":"medium","temperature":0.3}}"#
    ));
    assert_eq!(
        b["thinking"],
        json!({"type": "enabled", "budget_tokens": 8192})
    );
    // No max_tokens from the client: the default answer room on top.
    assert_eq!(b["max_tokens"], 4096 + 8192);
    // Thinking takes no temperature: left out, named.
    assert_eq!(b.get("temperature"), None);
    assert_eq!(b["omitted"], json!(["temperature"]));
    let b = anthropic_body(&format!(
        r#"{{"model":"r",{HI},"reasoning_effort":"high","max_completion_tokens":3000}}"#
    ));
    assert_eq!(
        b["thinking"],
        json!({"type": "enabled", "budget_tokens": 2999})
    );
    assert_eq!(b["max_tokens"], 3000);
    // Too little room for Anthropic's least budget: no thinking, named.
    let b = anthropic_body(&format!(
        r#"{{"model":"r",{HI},"reasoning_effort":"low","max_tokens":800}}"#
    ));
    assert_eq!(b.get("thinking"), None);
    assert_eq!(b["omitted"], json!(["reasoning_effort"]));
    let b = anthropic_body(&format!(
        r#"{{"model":"r",{HI},"reasoning_effort":"none"}}"#
    ));
    assert_eq!(b["thinking"], json!({"type": "disabled"}));
    let req = openai::parse_request(
        format!(r#"{{"model":"r",{HI},"reasoning_effort":"ultra"}}"#).as_bytes(),
    )
    .unwrap();
    let e = anthropic_provider().encode(&req, "m").unwrap_err();
    assert_eq!(
        e.message,
        "reasoning_effort: \"ultra\" has no thinking budget for anthropic"
    );
}

#[test]
fn a_thinking_budget_becomes_reasoning_effort() {
    for (budget, effort) in [(1024, "low"), (10000, "medium"), (32000, "high")] {
        let req = anthropic::parse_request(
            format!(
                r#"{{"model":"r","max_tokens":40000,{HI},"thinking":{{"type":"enabled","budget_tokens":{budget}}}}}"#
            )
            .as_bytes(),
        )
        .unwrap();
        let b: Value =
            serde_json::from_slice(&openai_provider().encode(&req, "o3").unwrap().body).unwrap();
        assert_eq!(b["reasoning_effort"], effort, "{budget}");
    }
}

#[test]
fn adaptive_thinking_keeps_its_effort_level_across_dialects() {
    let to_openai = |body: &str| -> Value {
        let req = anthropic::parse_request(body.as_bytes()).unwrap();
        serde_json::from_slice(&openai_provider().encode(&req, "o3").unwrap().body).unwrap()
    };
    // The model decides; a level, when given, is the OpenAI effort.
    let b = to_openai(&format!(
        r#"{{"model":"r","max_tokens":900,{HI},"thinking":{{"type":"adaptive"}},"output_config":{{"effort":"high"}}}}"#
    ));
    assert_eq!(b["reasoning_effort"], "high");
    let b = to_openai(&format!(
        r#"{{"model":"r","max_tokens":900,{HI},"thinking":{{"type":"adaptive"}}}}"#
    ));
    assert_eq!(b.get("reasoning_effort"), None, "the provider's default");
    // Through the neutral form back to Anthropic: adaptive, its effort in
    // output_config.
    let req = anthropic::parse_request(
        format!(
            r#"{{"model":"r","max_tokens":900,{HI},"thinking":{{"type":"adaptive"}},"output_config":{{"effort":"low"}}}}"#
        )
        .as_bytes(),
    )
    .unwrap();
    let opts = anthropic::EncodeOptions {
        default_max_tokens: 4096,
        structured_output: anthropic::StructuredOutput::Tool,
    };
    let b = serde_json::to_value(anthropic::encode_request(&req, "m", opts).unwrap()).unwrap();
    assert_eq!(b["thinking"], json!({"type": "adaptive"}));
    assert_eq!(b["output_config"], json!({"effort": "low"}));
}

#[test]
fn thinking_blocks_reach_an_openai_client_with_their_signatures() {
    let resp = anthropic_provider()
        .decode(&fixture("anthropic/ok_thinking_cached.json"), 0)
        .unwrap();
    let o = serde_json::to_value(openai::render_response(&resp, "c", 0)).unwrap();
    let m = &o["choices"][0]["message"];
    assert_eq!(m["content"], "Rome is warmer.");
    assert_eq!(m["reasoning_content"], "Paris is 18C, Rome 24C.");
    assert_eq!(
        m["thinking_blocks"],
        json!([
            {"type": "thinking", "thinking": "Paris is 18C, Rome 24C.", "signature": "EqoBCkgIARABGAIiQL2"},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}
        ])
    );
    // An Anthropic client gets the blocks as they were.
    let a = serde_json::to_value(anthropic::render_response(&resp, "m").unwrap()).unwrap();
    assert_eq!(
        a["content"],
        json!([
            {"type": "thinking", "thinking": "Paris is 18C, Rome 24C.", "signature": "EqoBCkgIARABGAIiQL2"},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
            {"type": "text", "text": "Rome is warmer."}
        ])
    );
}

#[test]
fn thinking_blocks_sent_back_by_an_openai_client_are_signed_thinking_again() {
    let b = anthropic_body(
        r#"{"model":"r","reasoning_effort":"low","messages":[
            {"role":"user","content":"Weather in Rome?"},
            {"role":"assistant","content":null,
             "reasoning_content":"I should call the tool.",
             "thinking_blocks":[{"type":"thinking","thinking":"I should call the tool.","signature":"sig-1"},
                                {"type":"redacted_thinking","data":"enc-2"}],
             "tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"weather","arguments":"{}"}}]},
            {"role":"tool","tool_call_id":"toolu_1","content":"24C"}],
          "tools":[{"type":"function","function":{"name":"weather","parameters":{"type":"object"}}}]}"#,
    );
    assert_eq!(
        b["messages"][1]["content"],
        json!([
            {"type": "thinking", "thinking": "I should call the tool.", "signature": "sig-1"},
            {"type": "redacted_thinking", "data": "enc-2"},
            {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}}
        ])
    );
    // Unsigned reasoning cannot go back to Anthropic: left out, named; and
    // Chat Completions takes no reasoning back at all.
    let b = anthropic_body(
        r#"{"model":"r","messages":[{"role":"user","content":"a"},
            {"role":"assistant","content":"b","reasoning_content":"thought"},
            {"role":"user","content":"c"}]}"#,
    );
    assert_eq!(
        b["messages"][1]["content"],
        json!([{"type": "text", "text": "b"}])
    );
    assert_eq!(b["omitted"], json!(["messages[1].content[0]"]));
    let req = anthropic::parse_request(
        br#"{"model":"r","max_tokens":50,"messages":[{"role":"user","content":"a"},
            {"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"text","text":"b"}]},
            {"role":"user","content":"c"}]}"#,
    )
    .unwrap();
    let wire = openai::encode_request(&req, "m", openai::EncodeOptions::default()).unwrap();
    assert_eq!(wire.omitted, ["messages[1].content[0]"]);
    assert_eq!(
        serde_json::to_value(&wire).unwrap()["messages"][1],
        json!({"role": "assistant", "content": "b"})
    );
}

#[test]
fn an_openai_compatible_providers_reasoning_reaches_an_anthropic_client() {
    let resp = openai_provider()
        .decode(&fixture("openai/ok_reasoning_cached.json"), 0)
        .unwrap();
    assert_eq!(
        resp.thinking,
        [Thinking {
            text: "Compare 18 and 24.".into(),
            ..Thinking::default()
        }]
    );
    let a = serde_json::to_value(anthropic::render_response(&resp, "m").unwrap()).unwrap();
    assert_eq!(
        a["content"][0],
        json!({"type": "thinking", "thinking": "Compare 18 and 24.", "signature": ""})
    );
    // OpenRouter names the field `reasoning`.
    let body = br#"{"model":"x","choices":[{"message":{"content":"ok","reasoning":"hmm"},"finish_reason":"stop"}]}"#;
    let resp = openai_provider()
        .decode(
            &BufferedResponse {
                status: 200,
                headers: Headers::new(),
                body: body.to_vec(),
            },
            0,
        )
        .unwrap();
    assert_eq!(resp.thinking[0].text, "hmm");
}

fn data_lines(bytes: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(bytes)
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

#[test]
fn streamed_thinking_reaches_an_openai_client_as_reasoning_deltas() {
    let ds = deltas(
        &anthropic_provider(),
        &read("anthropic/stream_thinking_max_tokens.sse"),
    );
    let mut e = OpenAiStreamEncoder::new("c".into(), 0, "m".into(), false);
    let mut bytes = Vec::new();
    for d in &ds {
        bytes.extend(e.delta(d));
    }
    bytes.extend(e.finish());
    let chunks = data_lines(&bytes);
    let reasoning: Vec<&Value> = chunks
        .iter()
        .map(|c| &c["choices"][0]["delta"])
        .filter(|d| d.get("thinking_blocks").is_some())
        .collect();
    assert_eq!(reasoning[0]["reasoning_content"], "Counting: 1, 2, 3");
    assert_eq!(
        reasoning[0]["thinking_blocks"],
        json!([{"type": "thinking", "thinking": "Counting: 1, 2, 3"}])
    );
    assert_eq!(
        reasoning[1]["thinking_blocks"],
        json!([{"type": "thinking", "thinking": "", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3h"}])
    );
    assert_eq!(reasoning[1].get("reasoning_content"), None);
}

#[test]
fn streamed_reasoning_content_reaches_an_anthropic_client_as_a_thinking_block() {
    let chunk = |delta: Value, finish: Value| {
        let c = json!({"id": "c", "object": "chat.completion.chunk", "model": "deepseek-reasoner",
                       "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {c}\n\n")
    };
    let sse = [
        chunk(
            json!({"role": "assistant", "content": null, "reasoning_content": "Compare "}),
            Value::Null,
        ),
        chunk(json!({"reasoning_content": "18 and 24."}), Value::Null),
        chunk(json!({"content": "Rome."}), Value::Null),
        chunk(json!({}), json!("stop")),
        "data: [DONE]\n\n".to_string(),
    ]
    .concat();
    let ds = deltas(&openai_provider(), sse.as_bytes());
    let mut e = AnthropicStreamEncoder::new("msg".into(), "m".into());
    let mut bytes = Vec::new();
    for d in &ds {
        bytes.extend(e.delta(d));
    }
    bytes.extend(e.finish());
    let events = data_lines(&bytes);
    let kinds: Vec<String> = events
        .iter()
        .map(|v| match v["type"].as_str().unwrap() {
            "content_block_start" => {
                format!("start {}", v["content_block"]["type"].as_str().unwrap())
            }
            "content_block_delta" => format!("delta {}", v["delta"]["type"].as_str().unwrap()),
            other => other.to_string(),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "message_start",
            "start thinking",
            "delta thinking_delta",
            "delta thinking_delta",
            "content_block_stop",
            "start text",
            "delta text_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
    );
    assert_eq!(
        events[1]["content_block"],
        json!({"type": "thinking", "thinking": "", "signature": ""})
    );
    assert_eq!(events[3]["delta"]["thinking"], "18 and 24.");
}

#[test]
fn a_tool_turn_sent_back_without_its_thinking_is_asked_without_thinking() {
    // Anthropic refuses thinking when the last assistant tool turn does
    // not open with its thinking block: left out, and named.
    let b = anthropic_body(
        r#"{"model":"r","reasoning_effort":"low","messages":[
            {"role":"user","content":"Weather in Rome?"},
            {"role":"assistant","content":null,
             "tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"weather","arguments":"{}"}}]},
            {"role":"tool","tool_call_id":"toolu_1","content":"24C"}],
          "tools":[{"type":"function","function":{"name":"weather","parameters":{"type":"object"}}}]}"#,
    );
    assert_eq!(b.get("thinking"), None);
    assert_eq!(b["omitted"], json!(["reasoning_effort"]));
}
