//! Translation of content the neutral request once refused: images (base64
//! and URL, in user messages and tool results), prompt-cache breakpoints
//! and cached-token usage, both ways.

use resilient_llm::format::{anthropic, openai};
use resilient_llm::{Anthropic, BufferedResponse, Headers, OpenAi, PresetName, Provider, Secret};
use serde_json::{json, Value};

fn anthropic_provider() -> Anthropic {
    Anthropic::new("anthropic").api_key(Secret::new("k"))
}

fn openai_provider() -> OpenAi {
    OpenAi::new("openai", PresetName::OpenAi).api_key(Secret::new("k"))
}

fn body(p: &dyn Provider, req: &resilient_llm::ChatRequest) -> Value {
    serde_json::from_slice(&p.encode(req, "m").unwrap().body).unwrap()
}

fn fixture(path: &str) -> BufferedResponse {
    let full = format!("{}/tests/fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
    let f: Value = serde_json::from_str(&std::fs::read_to_string(full).unwrap()).unwrap();
    BufferedResponse {
        status: 200,
        headers: Headers::new(),
        body: serde_json::to_vec(&f["body"]).unwrap(),
    }
}

fn anthropic_opts() -> anthropic::EncodeOptions {
    anthropic::EncodeOptions {
        default_max_tokens: 1024,
        structured_output: anthropic::StructuredOutput::Tool,
    }
}

#[test]
fn openai_image_parts_become_anthropic_image_blocks() {
    let req = openai::parse_request(
        br#"{"model":"r","messages":[{"role":"user","content":[
            {"type":"text","text":"What is in these?"},
            {"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}},
            {"type":"image_url","image_url":{"url":"https://img.example/cat.jpg","detail":"high"}}
        ]}]}"#,
    )
    .unwrap();
    assert!(req.untranslated.is_empty());
    let b = body(&anthropic_provider(), &req);
    assert_eq!(
        b["messages"],
        json!([{"role": "user", "content": [
            {"type": "text", "text": "What is in these?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
            {"type": "image", "source": {"type": "url", "url": "https://img.example/cat.jpg"}}
        ]}])
    );
    // `detail` has no Anthropic equivalent: left out, and named.
    let wire = anthropic::encode_request(&req, "m", anthropic_opts()).unwrap();
    assert_eq!(wire.omitted, ["messages[0].content[2].detail"]);
}

#[test]
fn anthropic_image_blocks_become_openai_image_parts_tool_results_included() {
    let req = anthropic::parse_request(
        br#"{"model":"r","max_tokens":100,"messages":[
            {"role":"user","content":[
                {"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"/9j/4AAQ"}},
                {"type":"image","source":{"type":"url","url":"https://img.example/dog.png"}},
                {"type":"text","text":"Compare them, then take a screenshot."}]},
            {"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"screenshot","input":{}}]},
            {"role":"user","content":[
                {"type":"tool_result","tool_use_id":"toolu_1","content":[
                    {"type":"text","text":"taken"},
                    {"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBOR"}}]}]}
        ],
        "tools":[{"name":"screenshot","input_schema":{"type":"object"}}]}"#,
    )
    .unwrap();
    let b = body(&openai_provider(), &req);
    assert_eq!(
        b["messages"],
        json!([
            {"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQ"}},
                {"type": "image_url", "image_url": {"url": "https://img.example/dog.png"}},
                {"type": "text", "text": "Compare them, then take a screenshot."}
            ]},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "toolu_1", "type": "function", "function": {"name": "screenshot", "arguments": "{}"}}
            ]},
            {"role": "tool", "tool_call_id": "toolu_1", "content": "taken"},
            // A tool message holds text only: the tool's image follows it.
            {"role": "user", "content": [
                {"type": "text", "text": "Images returned by tool call toolu_1:"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBOR"}}
            ]}
        ])
    );
    // And back to Anthropic, the tool result holds its image again.
    let b = body(&anthropic_provider(), &req);
    assert_eq!(
        b["messages"][2]["content"][0],
        json!({"type": "tool_result", "tool_use_id": "toolu_1", "content": [
            {"type": "text", "text": "taken"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}}
        ]})
    );
}

#[test]
fn images_the_other_side_cannot_take_are_refused() {
    let req = openai::parse_request(
        br#"{"model":"r","messages":[{"role":"user","content":[
            {"type":"image_url","image_url":{"url":"data:image/png,notbase64"}}]}]}"#,
    )
    .unwrap();
    let e = anthropic_provider().encode(&req, "m").unwrap_err();
    assert_eq!(
        e.message,
        "messages[0].content[0].image_url.url: not available from anthropic"
    );
    let req = anthropic::parse_request(
        br#"{"model":"r","max_tokens":9,"messages":[{"role":"user","content":[
            {"type":"image","source":{"type":"file","file_id":"file_01"}}]}]}"#,
    )
    .unwrap();
    let e = openai_provider().encode(&req, "m").unwrap_err();
    assert_eq!(
        e.message,
        "messages[0].content[0].source.type: not available from openai"
    );
}

const CACHED: &[u8] = br#"{"model":"r","max_tokens":100,
    "system":[{"type":"text","text":"A long manual.","cache_control":{"type":"ephemeral","ttl":"1h"}}],
    "tools":[{"name":"look_up","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}],
    "messages":[{"role":"user","content":[
        {"type":"text","text":"Question one.","cache_control":{"type":"ephemeral"}},
        {"type":"text","text":"Question two."}]}]}"#;

#[test]
fn cache_control_is_kept_for_anthropic_and_named_as_omitted_for_openai() {
    let req = anthropic::parse_request(CACHED).unwrap();
    let b = body(&anthropic_provider(), &req);
    assert_eq!(
        b["system"],
        json!([{"type": "text", "text": "A long manual.", "cache_control": {"type": "ephemeral", "ttl": "1h"}}])
    );
    assert_eq!(b["tools"][0]["cache_control"], json!({"type": "ephemeral"}));
    assert_eq!(
        b["messages"][0]["content"],
        json!([
            {"type": "text", "text": "Question one.", "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "Question two."}
        ])
    );
    let wire = openai::encode_request(&req, "m", openai::EncodeOptions::default()).unwrap();
    assert_eq!(wire.omitted, ["cache_control"]);
    let b = serde_json::to_value(&wire).unwrap();
    assert_eq!(b["system"], Value::Null);
    assert_eq!(
        b["messages"][0],
        json!({"role": "system", "content": "A long manual."})
    );
    assert_eq!(b["tools"][0].get("cache_control"), None);
}

#[test]
fn openai_clients_cache_control_parts_reach_anthropic_and_prompt_cache_key_stays_openai() {
    let req = openai::parse_request(
        br#"{"model":"r","prompt_cache_key":"tenant-7","messages":[
            {"role":"system","content":[{"type":"text","text":"Manual.","cache_control":{"type":"ephemeral"}}]},
            {"role":"user","content":"Hi"}]}"#,
    )
    .unwrap();
    let b = body(&openai_provider(), &req);
    assert_eq!(b["prompt_cache_key"], "tenant-7");
    let wire = anthropic::encode_request(&req, "m", anthropic_opts()).unwrap();
    assert_eq!(wire.omitted, ["prompt_cache_key"]);
    let b = serde_json::to_value(&wire).unwrap();
    assert_eq!(
        b["system"],
        json!([{"type": "text", "text": "Manual.", "cache_control": {"type": "ephemeral"}}])
    );
    assert_eq!(b.get("prompt_cache_key"), None);
}

#[test]
fn cached_token_usage_maps_both_ways() {
    // Anthropic counts uncached input apart; the neutral input counts all.
    let resp = anthropic_provider()
        .decode(&fixture("anthropic/ok_thinking_cached.json"), 0)
        .unwrap();
    let u = resp.usage.unwrap();
    assert_eq!(
        (
            u.input_tokens,
            u.cached_input_tokens,
            u.cache_write_input_tokens
        ),
        (125, Some(100), Some(20))
    );
    let o = serde_json::to_value(openai::render_response(&resp, "c", 0)).unwrap();
    assert_eq!(
        o["usage"],
        json!({"prompt_tokens": 125, "completion_tokens": 50, "total_tokens": 175,
               "prompt_tokens_details": {"cached_tokens": 100}})
    );
    let a = serde_json::to_value(anthropic::render_response(&resp, "m").unwrap()).unwrap();
    assert_eq!(
        a["usage"],
        json!({"input_tokens": 5, "output_tokens": 50,
               "cache_read_input_tokens": 100, "cache_creation_input_tokens": 20})
    );
    // OpenAI's cached and reasoning details, to an Anthropic client.
    let resp = openai_provider()
        .decode(&fixture("openai/ok_reasoning_cached.json"), 0)
        .unwrap();
    let a = serde_json::to_value(anthropic::render_response(&resp, "m").unwrap()).unwrap();
    assert_eq!(
        a["usage"],
        json!({"input_tokens": 86, "output_tokens": 300, "cache_read_input_tokens": 1920})
    );
    let o = serde_json::to_value(openai::render_response(&resp, "c", 0)).unwrap();
    assert_eq!(
        o["usage"]["completion_tokens_details"],
        json!({"reasoning_tokens": 128})
    );
}

#[test]
fn an_answer_without_usage_renders_no_invented_zeros() {
    let mut resp = anthropic_provider()
        .decode(&fixture("anthropic/ok_thinking_cached.json"), 0)
        .unwrap();
    resp.usage = None;
    let a = serde_json::to_value(anthropic::render_response(&resp, "m").unwrap()).unwrap();
    assert_eq!(a.get("usage"), None);
    let o = serde_json::to_value(openai::render_response(&resp, "c", 0)).unwrap();
    assert_eq!(o.get("usage"), None);
}

fn sse_deltas(p: &dyn Provider, bytes: &[u8]) -> Vec<resilient_llm::Delta> {
    let mut d = resilient_llm::SseDecoder::default();
    let mut events = Vec::new();
    d.feed(bytes, &mut events).unwrap();
    events.extend(d.finish());
    events
        .iter()
        .flat_map(|e| p.decode_event(e).unwrap())
        .collect()
}

#[test]
fn streamed_cache_usage_reaches_either_client() {
    use resilient_llm::format::anthropic::stream::AnthropicStreamEncoder;
    use resilient_llm::format::openai::stream::OpenAiStreamEncoder;
    let anthropic_sse = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",",
        "\"role\":\"assistant\",\"content\":[],\"model\":\"claude-x\",\"usage\":{\"input_tokens\":5,",
        "\"cache_read_input_tokens\":100,\"cache_creation_input_tokens\":20,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":7}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );
    let deltas = sse_deltas(&anthropic_provider(), anthropic_sse.as_bytes());
    let mut e = OpenAiStreamEncoder::new("c".into(), 0, "claude-x".into(), true);
    let mut out = Vec::new();
    for d in &deltas {
        out.extend(e.delta(d));
    }
    out.extend(e.finish());
    let text = String::from_utf8(out).unwrap();
    let usage_chunk: Value = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str::<Value>(d).unwrap())
        .find(|v| v["usage"].is_object())
        .unwrap();
    assert_eq!(
        usage_chunk["usage"],
        json!({"prompt_tokens": 125, "completion_tokens": 7, "total_tokens": 132,
               "prompt_tokens_details": {"cached_tokens": 100}})
    );
    // An OpenAI stream's cached tokens, to an Anthropic client.
    let chunk = |v: Value| format!("data: {v}\n\n");
    let openai_sse = [
        chunk(json!({"model": "gpt-x", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "hi"}}]})),
        chunk(json!({"model": "gpt-x", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})),
        chunk(json!({"model": "gpt-x", "choices": [], "usage": {"prompt_tokens": 2006, "completion_tokens": 300,
            "prompt_tokens_details": {"cached_tokens": 1920}}})),
        "data: [DONE]\n\n".to_string(),
    ]
    .concat();
    let deltas = sse_deltas(&openai_provider(), openai_sse.as_bytes());
    let mut e = AnthropicStreamEncoder::new("m".into(), "gpt-x".into());
    let mut out = Vec::new();
    for d in &deltas {
        out.extend(e.delta(d));
    }
    out.extend(e.finish());
    let text = String::from_utf8(out).unwrap();
    let message_delta: Value = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str::<Value>(d).unwrap())
        .find(|v| v["type"] == "message_delta")
        .unwrap();
    assert_eq!(
        message_delta["usage"],
        json!({"input_tokens": 86, "output_tokens": 300, "cache_read_input_tokens": 1920})
    );
}

#[test]
fn a_json_answer_from_openai_reaches_an_anthropic_client_as_text() {
    let body = br#"{"model":"gpt-x","choices":[{"message":{"content":"{\"c\":24}"},"finish_reason":"stop"}]}"#;
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
    let a = serde_json::to_value(anthropic::render_response(&resp, "m").unwrap()).unwrap();
    assert_eq!(
        a["content"],
        json!([{"type": "text", "text": "{\"c\":24}"}])
    );
    assert_eq!(a["stop_reason"], "end_turn");
}
