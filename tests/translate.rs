//! Format translation: a request in one client format served by the other
//! provider, the answer translated back; untranslatable input refused with
//! a clear, located error; no input makes a parser panic.

use proptest::prelude::*;
use resilient_llm::format::{anthropic, openai, Read};
use resilient_llm::OpenAi;
use resilient_llm::{
    Anthropic, BufferedResponse, ChatResponse, ErrorKind, FinishReason, FormatErrorKind, Headers,
    PresetName, Provider, Role, Secret, ToolCall, Usage,
};
use serde_json::{json, to_value as value_of, Value};

fn fixture(path: &str) -> BufferedResponse {
    let full = format!("{}/tests/fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
    let f: Value = serde_json::from_str(&std::fs::read_to_string(full).unwrap()).unwrap();
    BufferedResponse {
        status: u16::try_from(f["status"].as_u64().unwrap()).unwrap(),
        headers: Headers::new(),
        body: serde_json::to_vec(&f["body"]).unwrap(),
    }
}

fn anthropic_provider() -> Anthropic {
    Anthropic::new("anthropic").api_key(Secret::new("k"))
}

fn openai_provider() -> OpenAi {
    OpenAi::new("openai", PresetName::OpenAi).api_key(Secret::new("k"))
}

fn body(p: &dyn Provider, req: &resilient_llm::ChatRequest, model: &str) -> Value {
    serde_json::from_slice(&p.encode(req, model).unwrap().body).unwrap()
}

const OPENAI_REQUEST: &str = r#"{
  "model": "default",
  "messages": [
    {"role": "system", "content": "You are terse."},
    {"role": "developer", "content": [{"type": "text", "text": "Use metric units."}]},
    {"role": "user", "content": "Weather in Paris and Rome?"},
    {"role": "assistant", "content": null, "tool_calls": [
      {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
      {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Rome\"}"}}
    ]},
    {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
    {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "24C"}]},
    {"role": "user", "content": "Which is warmer?"}
  ],
  "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Current weather",
             "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
  "tool_choice": "required",
  "max_tokens": 300,
  "temperature": 0.5,
  "stop": "END",
  "user": "user-42",
  "seed": 7,
  "stream": false
}"#;

#[test]
fn an_openai_request_is_served_by_anthropic() {
    let req = openai::parse_request(OPENAI_REQUEST.as_bytes()).unwrap();
    assert_eq!(req.model.as_deref(), Some("default"));
    let b = body(&anthropic_provider(), &req, "claude-x");
    assert_eq!(b["model"], "claude-x");
    assert_eq!(b["system"], "You are terse.\n\nUse metric units.");
    assert_eq!(b["max_tokens"], 300);
    assert_eq!(b["temperature"], 0.5);
    assert_eq!(b["stop_sequences"], json!(["END"]));
    assert_eq!(b["metadata"], json!({"user_id": "user-42"}));
    assert_eq!(b["tool_choice"], json!({"type": "any"}));
    assert_eq!(
        b["tools"],
        json!([{"name": "get_weather", "description": "Current weather",
                "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}])
    );
    // user / assistant(tool_use ×2) / user(tool_result ×2 then the text).
    assert_eq!(
        b["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "Weather in Paris and Rome?"}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "call_2", "name": "get_weather", "input": {"city": "Rome"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "18C"},
                {"type": "tool_result", "tool_use_id": "call_2", "content": "24C"},
                {"type": "text", "text": "Which is warmer?"}
            ]}
        ])
    );
}

#[test]
fn an_anthropic_answer_goes_back_to_an_openai_client() {
    let resp = anthropic_provider()
        .decode(&fixture("anthropic/ok_tool_use.json"), 0)
        .unwrap();
    let out = to_value(openai::render_response(&resp, "chatcmpl-1", 1_700_000_000));
    assert_eq!(out["object"], "chat.completion");
    assert_eq!(out["id"], "chatcmpl-1");
    assert_eq!(out["created"], 1_700_000_000);
    assert_eq!(out["model"], "claude-sonnet-4-5-20250929");
    let choice = &out["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(choice["message"]["role"], "assistant");
    assert_eq!(choice["message"]["content"], "I'll check the weather.");
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["id"], "toolu_01A09q90qw90lq917835lq9");
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "get_weather");
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(
        args,
        json!({"location": "San Francisco, CA", "unit": "celsius"})
    );
    assert_eq!(
        out["usage"],
        json!({"prompt_tokens": 380, "completion_tokens": 62, "total_tokens": 442})
    );
}

const ANTHROPIC_REQUEST: &str = r#"{
  "model": "fast",
  "max_tokens": 512,
  "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
  "messages": [
    {"role": "user", "content": "Look up order 7."},
    {"role": "assistant", "content": [
      {"type": "text", "text": "Looking."},
      {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"order": 7}}
    ]},
    {"role": "user", "content": [
      {"type": "tool_result", "tool_use_id": "toolu_1", "content": "shipped", "is_error": false},
      {"type": "text", "text": "When will it arrive?"}
    ]},
    {"role": "assistant", "content": "It"}
  ],
  "tools": [{"name": "lookup", "description": "Find an order", "input_schema": {"type": "object"}}],
  "tool_choice": {"type": "tool", "name": "lookup"},
  "stop_sequences": ["\n\nHuman:"],
  "top_k": 5,
  "metadata": {"user_id": "u-9"}
}"#;

#[test]
fn an_anthropic_request_is_served_by_openai() {
    let req = anthropic::parse_request(ANTHROPIC_REQUEST.as_bytes()).unwrap();
    assert_eq!(req.messages[0].role, Role::System);
    let b = body(&openai_provider(), &req, "gpt-x");
    assert_eq!(b["model"], "gpt-x");
    assert_eq!(b["max_completion_tokens"], 512);
    assert_eq!(b["user"], "u-9");
    assert_eq!(b["stop"], json!(["\n\nHuman:"]));
    assert_eq!(
        b["tool_choice"],
        json!({"type": "function", "function": {"name": "lookup"}})
    );
    assert_eq!(
        b["tools"],
        json!([{"type": "function", "function": {"name": "lookup", "description": "Find an order",
                "parameters": {"type": "object"}}}])
    );
    assert_eq!(
        b["messages"],
        json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Look up order 7."},
            {"role": "assistant", "content": "Looking.", "tool_calls": [
                {"id": "toolu_1", "type": "function", "function": {"name": "lookup", "arguments": "{\"order\":7}"}}
            ]},
            {"role": "tool", "tool_call_id": "toolu_1", "content": "shipped"},
            {"role": "user", "content": "When will it arrive?"},
            {"role": "assistant", "content": "It"}
        ])
    );
}

#[test]
fn an_openai_answer_goes_back_to_an_anthropic_client() {
    let resp = openai_provider()
        .decode(&fixture("openai/ok_tool_calls.json"), 0)
        .unwrap();
    let out = to_value(anthropic::render_response(&resp, "msg_1").unwrap());
    assert_eq!(
        out,
        json!({
            "id": "msg_1", "type": "message", "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "call_abc123", "name": "get_weather", "input": {"location": "Boston, MA"}},
                {"type": "tool_use", "id": "call_def456", "name": "get_time", "input": {}}
            ],
            "model": "gpt-4o-2024-08-06",
            "stop_reason": "tool_use",
            "stop_sequence": null,
            "usage": {"input_tokens": 82, "output_tokens": 17}
        })
    );
    let text = openai_provider()
        .decode(&fixture("openai/ok_length.json"), 0)
        .unwrap();
    let out = to_value(anthropic::render_response(&text, "msg_2").unwrap());
    assert_eq!(
        out["content"],
        json!([{"type": "text", "text": "Once upon"}])
    );
    assert_eq!(out["stop_reason"], "max_tokens");
}

#[test]
fn each_format_round_trips_through_the_neutral_request() {
    let req = openai::parse_request(OPENAI_REQUEST.as_bytes()).unwrap();
    let wire = body(&openai_provider(), &req, "default");
    let mut wire = wire.as_object().unwrap().clone();
    // The adapter uses max_completion_tokens; the parser reads both.
    assert_eq!(wire.remove("max_completion_tokens"), Some(json!(300)));
    wire.insert("max_tokens".into(), json!(300));
    let again = openai::request_from_value(&Value::Object(wire)).unwrap();
    // Two system messages travel as two; the tool results stay separate.
    assert_eq!(again, req);

    let req = anthropic::parse_request(ANTHROPIC_REQUEST.as_bytes()).unwrap();
    let wire = body(&anthropic_provider(), &req, "fast");
    let again = anthropic::request_from_value(&wire).unwrap();
    assert_eq!(again, req);
}

#[test]
fn finish_reasons_translate_both_ways() {
    let cases = [
        (FinishReason::Stop, "stop", "end_turn"),
        (FinishReason::Length, "length", "max_tokens"),
        (FinishReason::ToolCalls, "tool_calls", "tool_use"),
        (FinishReason::ContentFilter, "content_filter", "refusal"),
    ];
    for (reason, oa, an) in cases {
        let resp = ChatResponse {
            text: "x".into(),
            tool_calls: vec![],
            thinking: vec![],
            model: "m".into(),
            provider: "p".into(),
            finish_reason: Some(reason.clone()),
            usage: Some(Usage {
                input_tokens: 1,
                output_tokens: 2,
                ..Usage::default()
            }),
            raw: None,
            dialect: None,
        };
        let o = to_value(openai::render_response(&resp, "id", 0));
        assert_eq!(o["choices"][0]["finish_reason"], oa);
        let a = to_value(anthropic::render_response(&resp, "id").unwrap());
        assert_eq!(a["stop_reason"], an);
        let back = answer(openai::decode_response(o.to_string().as_bytes()));
        assert_eq!(back.finish_reason, Some(reason.clone()));
        let back = answer(anthropic::decode_response(a.to_string().as_bytes()));
        assert_eq!(back.finish_reason, Some(reason));
        assert_eq!(back.usage, resp.usage);
    }
}

/// A rendered body as JSON.
fn to_value(body: impl serde::Serialize) -> Value {
    value_of(body).unwrap()
}

/// The answer a decoder read, which must not be an error object.
fn answer(read: Result<Read<ChatResponse>, resilient_llm::FormatError>) -> ChatResponse {
    match read.unwrap() {
        Read::Answer(a) => a,
        Read::Error => panic!("read as an error object"),
    }
}

fn openai_err(body: &str) -> resilient_llm::FormatError {
    openai::parse_request(body.as_bytes()).unwrap_err()
}

fn anthropic_err(body: &str) -> resilient_llm::FormatError {
    anthropic::parse_request(body.as_bytes()).unwrap_err()
}

/// A request the other dialect cannot be given is refused by that
/// provider's encoder as Unsupported (the chain passes over the entry),
/// naming the field and the provider: parsing itself refuses only what is
/// malformed. (These were 400s at parse time before same-format
/// passthrough: a provider of the client's own dialect can serve them.)
fn refusal(p: &dyn Provider, req: &resilient_llm::ChatRequest) -> String {
    let e = p.encode(req, "m").unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unsupported, "{e}");
    e.message
}

#[test]
fn untranslatable_openai_input_is_refused_by_the_other_provider() {
    let m = r#""messages":[{"role":"user","content":"hi"}]"#;
    let parse = |extra: &str| {
        openai::parse_request(format!(r#"{{"model":"x",{m},{extra}}}"#).as_bytes()).unwrap()
    };
    for (extra, message) in [
        (r#""n":2"#, "n: not available from anthropic"),
        (
            r#""logprobs":true"#,
            "logprobs: not available from anthropic",
        ),
        (
            r#""logit_bias":{"50256":-100}"#,
            "logit_bias: not available from anthropic",
        ),
        (
            r#""audio":{"voice":"alloy","format":"wav"}"#,
            "audio: not available from anthropic",
        ),
        (
            r#""foo":1"#,
            "foo: unknown field, cannot be translated for anthropic",
        ),
        (
            r#""tools":[{"type":"custom","custom":{"name":"grammar"}}]"#,
            "tools[0].type: not available from anthropic",
        ),
    ] {
        assert_eq!(
            refusal(&anthropic_provider(), &parse(extra)),
            message,
            "{extra}"
        );
    }
    let req = openai::parse_request(
        br#"{"model":"x","messages":[{"role":"user","content":[{"type":"text","text":"hear"},
            {"type":"input_audio","input_audio":{"data":"AA==","format":"wav"}}]}]}"#,
    )
    .unwrap();
    assert_eq!(
        refusal(&anthropic_provider(), &req),
        "messages[0].content[1]: not available from anthropic"
    );
    // n = 1 and logprobs = false ask for nothing special.
    let req = parse(r#""n":1,"logprobs":false"#);
    assert!(req.untranslated.is_empty());
    assert!(anthropic_provider().encode(&req, "m").is_ok());
}

#[test]
fn malformed_openai_input_is_a_clear_error() {
    let m = r#""messages":[{"role":"user","content":"hi"}]"#;
    let e = openai_err(&format!(
        r#"{{"model":"x",{m},"response_format":{{"type":"json_schema"}}}}"#
    ));
    assert_eq!(e.to_string(), "response_format.json_schema: required");
    let e = openai_err(&format!(r#"{{"model":"x",{m},"n":"two"}}"#));
    assert_eq!(
        e.to_string(),
        "n: expected a non-negative integer, got a string"
    );
    let e = openai_err(r#"{"model":"x","messages":[{"role":"wizard","content":"hi"}]}"#);
    assert_eq!(e.to_string(), "messages[0].role: unknown role \"wizard\"");
    let e = openai_err(r#"{"model":"x","messages":[{"role":"user","content":{"a":1}}]}"#);
    assert_eq!(
        e.to_string(),
        "messages[0].content: expected string or array"
    );
    let e = openai_err(r#"{"messages":[{"role":"user","content":"hi"}]}"#);
    assert_eq!(e.to_string(), "model: required");
    let e = openai_err("{\"model\":");
    assert_eq!(e.kind, FormatErrorKind::Malformed);
    assert!(e.to_string().starts_with("body: malformed JSON"));
    assert_eq!(e.status(), 400);
    assert_eq!(e.into_request_error().kind, ErrorKind::InvalidRequest);
}

#[test]
fn untranslatable_anthropic_input_is_refused_by_the_other_provider() {
    let req = anthropic::parse_request(
        br#"{"model":"x","max_tokens":1,"messages":[{"role":"user","content":[
            {"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"AA=="}}]}]}"#,
    )
    .unwrap();
    assert_eq!(
        refusal(&openai_provider(), &req),
        "messages[0].content[0]: not available from openai"
    );
    let req = anthropic::parse_request(
        br#"{"model":"x","max_tokens":1,"messages":[{"role":"user","content":"hi"}],
            "tools":[{"type":"web_search_20250305","name":"web_search"}]}"#,
    )
    .unwrap();
    assert_eq!(
        refusal(&openai_provider(), &req),
        "tools[0].type: not available from openai"
    );
    let req = anthropic::parse_request(
        br#"{"model":"x","max_tokens":1,"messages":[{"role":"user","content":"hi"}],
            "mcp_servers":[{"type":"url","url":"https://m.example","name":"m"}],"future_field":{"a":1}}"#,
    )
    .unwrap();
    assert_eq!(
        refusal(&openai_provider(), &req),
        "future_field: unknown field, cannot be translated for openai"
    );
    let e = anthropic_err(r#"{"model":"x","messages":[{"role":"system","content":"hi"}]}"#);
    assert_eq!(e.path, "messages[0].role");
    let e = anthropic_err(
        r#"{"model":"x","max_tokens":1,"thinking":{"type":"enabled"},"messages":[{"role":"user","content":"hi"}]}"#,
    );
    assert_eq!(e.to_string(), "thinking.budget_tokens: required");
}

#[test]
fn what_a_provider_cannot_express_is_unsupported_not_a_panic() {
    let mut req = openai::parse_request(OPENAI_REQUEST.as_bytes()).unwrap();
    if let resilient_llm::Part::ToolCall(call) = &mut req.messages[3].content[0] {
        call.arguments = "{not json".into();
    }
    let e = anthropic_provider().encode(&req, "claude").unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unsupported);
    assert!(
        e.message.contains("messages[3].content[0].arguments"),
        "{e}"
    );
    // An answer whose tool arguments are not an object cannot go to an
    // Anthropic client.
    let resp = ChatResponse {
        text: String::new(),
        tool_calls: vec![ToolCall {
            id: "c".into(),
            name: "f".into(),
            arguments: "[1,2]".into(),
        }],
        thinking: vec![],
        model: "m".into(),
        provider: "p".into(),
        finish_reason: Some(FinishReason::ToolCalls),
        usage: None,
        raw: None,
        dialect: None,
    };
    let e = anthropic::render_response(&resp, "id").unwrap_err();
    assert_eq!(e.to_string(), "tool_calls[0].arguments: not a JSON object");
}

#[test]
fn errors_render_in_each_client_format() {
    assert_eq!(
        openai::render_error(429, "slow down", Some("rate_limit_exceeded")),
        json!({"error": {"message": "slow down", "type": "rate_limit_error", "param": null, "code": "rate_limit_exceeded"}})
    );
    assert_eq!(
        openai::render_error(503, "all providers failed", None)["error"]["type"],
        "server_error"
    );
    assert_eq!(
        anthropic::render_error(400, "messages: required"),
        json!({"type": "error", "error": {"type": "invalid_request_error", "message": "messages: required"}})
    );
    assert_eq!(
        anthropic::render_error(529, "x")["error"]["type"],
        "overloaded_error"
    );
    assert_eq!(
        anthropic::render_error(401, "x")["error"]["type"],
        "authentication_error"
    );
    // A rendered error, read back by the classifier, keeps its kind.
    for (status, kind) in [
        (429, ErrorKind::RateLimited),
        (401, ErrorKind::Auth),
        (404, ErrorKind::NotFound),
    ] {
        for body in [
            openai::render_error(status, "m", None),
            anthropic::render_error(status, "m"),
        ] {
            let e =
                resilient_llm::classify(status, &Headers::new(), body.to_string().as_bytes(), 0);
            assert_eq!(e.kind, kind);
            assert_eq!(e.message, "m");
        }
    }
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        prop_oneof![
            Just("user".to_string()),
            Just("assistant".to_string()),
            Just("tool".to_string()),
            Just("text".to_string()),
            Just("tool_use".to_string()),
            Just("tool_result".to_string()),
            Just("function".to_string()),
            Just("image_url".to_string()),
            Just("image".to_string()),
            Just("thinking".to_string()),
            Just("redacted_thinking".to_string()),
            Just("json_schema".to_string()),
            Just("enabled".to_string()),
            Just("base64".to_string()),
            Just("data:image/png;base64,AA".to_string()),
            Just("high".to_string()),
            ".{0,6}"
        ]
        .prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        let keys = prop_oneof![
            Just("model".to_string()),
            Just("messages".to_string()),
            Just("role".to_string()),
            Just("content".to_string()),
            Just("type".to_string()),
            Just("text".to_string()),
            Just("tool_calls".to_string()),
            Just("function".to_string()),
            Just("tools".to_string()),
            Just("tool_choice".to_string()),
            Just("system".to_string()),
            Just("input".to_string()),
            Just("stop".to_string()),
            Just("image_url".to_string()),
            Just("url".to_string()),
            Just("source".to_string()),
            Just("thinking".to_string()),
            Just("thinking_blocks".to_string()),
            Just("signature".to_string()),
            Just("budget_tokens".to_string()),
            Just("reasoning_effort".to_string()),
            Just("response_format".to_string()),
            Just("json_schema".to_string()),
            Just("output_format".to_string()),
            Just("schema".to_string()),
            Just("cache_control".to_string()),
            Just("max_tokens".to_string()),
            Just("parallel_tool_calls".to_string()),
            ".{0,6}"
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(keys, inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn no_bytes_make_an_inbound_parser_panic(body in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = openai::parse_request(&body);
        let _ = anthropic::parse_request(&body);
    }

    #[test]
    fn no_json_shape_makes_a_parser_or_renderer_panic(v in arb_json()) {
        if let Ok(req) = openai::request_from_value(&v) {
            let _ = anthropic_provider().encode(&req, "m");
            let _ = openai_provider().encode(&req, "m");
        }
        if let Ok(req) = anthropic::request_from_value(&v) {
            let _ = anthropic_provider().encode(&req, "m");
            let _ = openai_provider().encode(&req, "m");
        }
        let body = v.to_string();
        if let Ok(Read::Answer(resp)) = openai::decode_response(body.as_bytes()) {
            let _ = anthropic::render_response(&resp, "id");
        }
        if let Ok(Read::Answer(resp)) = anthropic::decode_response(body.as_bytes()) {
            let _ = openai::render_response(&resp, "id", 0);
        }
    }
}
