//! Same-format passthrough on the fake platform: what a provider of the
//! client's dialect receives (the client's body with every field, the
//! allow-listed headers, never the client's credentials), answers and
//! streams handed back whole, continuations that extend what went out, and
//! usage that is the provider's or absent, never invented.

use std::future::poll_fn;

use resilient_llm::gateway::{Gateway, Inbound, Outbound, Piece, Setup};
use resilient_llm::testing::{block_on, reply, BodyEnd, FakePlatform, Reply};
use resilient_llm::{
    Anthropic, Body, ChatRequest, Dialect, Headers, MemoryStore, Message, Native, OpenAi,
    PresetName, Provider, Secret,
};
use resilient_llm::{SseDecoder, SseEvent};
use serde_json::{json, Map, Value};

// ------------------------------------------------------------------ adapters

fn native(dialect: Dialect, body: Value, headers: &[(&str, &str)]) -> ChatRequest {
    let Value::Object(map) = body else {
        panic!("an object")
    };
    let mut req = ChatRequest::new(vec![Message::user("hi")]);
    req.native = Some(Box::new(Native {
        dialect,
        body: map,
        headers: headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
    }));
    req
}

fn sent(body: &[u8]) -> Value {
    serde_json::from_slice(body).unwrap()
}

#[test]
fn an_openai_provider_gets_the_clients_body_with_every_field_but_model_stream_and_usage() {
    let body = json!({
        "model": "route-name",
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"}}
        ]}],
        "max_tokens": 50,
        "n": 2,
        "logprobs": true,
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}},
        "stream_options": {"future_option": 1},
        "a_future_field": {"nested": [1, {"deep": null}]}
    });
    let mut req = native(
        Dialect::OpenAi,
        body.clone(),
        &[
            ("openai-beta", "assistants=v2"),
            ("anthropic-beta", "not-for-openai"),
            ("idempotency-key", "k-1"),
            ("authorization", "Bearer client-key"),
        ],
    );
    req.stream = true;
    let p = OpenAi::new("o", PresetName::OpenAi).api_key(Secret::new("sk-provider"));
    let http = p.encode(&req, "gpt-x").unwrap();
    let mut want = body;
    want["model"] = json!("gpt-x");
    want["stream"] = json!(true);
    want["stream_options"] = json!({"future_option": 1, "include_usage": true});
    // OpenAI's preset takes the limit as max_completion_tokens.
    let limit = want.as_object_mut().unwrap().remove("max_tokens").unwrap();
    want["max_completion_tokens"] = limit;
    assert_eq!(sent(&http.body), want);
    assert_eq!(http.headers.get("openai-beta"), Some("assistants=v2"));
    assert_eq!(http.headers.get("idempotency-key"), Some("k-1"));
    assert_eq!(http.headers.get("anthropic-beta"), None);
    assert_eq!(
        http.headers.get("authorization"),
        Some("Bearer sk-provider")
    );

    // Not streamed: no usage asked for, `stream` left as the client had it.
    req.stream = false;
    let whole = sent(&p.encode(&req, "gpt-x").unwrap().body);
    assert_eq!(whole.get("stream"), None);
    assert_eq!(whole["stream_options"], json!({"future_option": 1}));
}

#[test]
fn a_preset_that_refuses_stream_options_never_gets_them() {
    let body = json!({"model": "m", "messages": [], "stream_options": {"include_usage": true}});
    let mut req = native(Dialect::OpenAi, body, &[]);
    req.stream = true;
    let p = OpenAi::new("mistral", PresetName::Mistral);
    let sent = sent(&p.encode(&req, "mistral-small").unwrap().body);
    assert_eq!(sent.get("stream_options"), None);
    assert_eq!(sent["max_tokens"], Value::Null, "nothing added");
}

#[test]
fn usage_is_asked_for_when_the_client_wants_it_whatever_the_presets_default() {
    // An Anthropic client always gets usage; Ollama's preset asks for none.
    let mut req = native(
        Dialect::Anthropic,
        json!({"model": "m", "messages": []}),
        &[],
    );
    req.stream = true;
    let p = OpenAi::new("local", PresetName::Ollama);
    let body = sent(&p.encode(&req, "llama").unwrap().body);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    // A request from no client keeps the preset's default.
    let mut plain = ChatRequest::new(vec![Message::user("hi")]);
    plain.stream = true;
    let body = sent(&p.encode(&plain, "llama").unwrap().body);
    assert_eq!(body.get("stream_options"), None);
}

#[test]
fn an_anthropic_provider_gets_thinking_signatures_cache_control_and_server_tools_as_written() {
    let body = json!({
        "model": "route-name",
        "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
                {"type": "text", "text": "and this?", "cache_control": {"type": "ephemeral", "ttl": "1h"}}
            ]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "sig-abc=="},
                {"type": "text", "text": "a cat"}
            ]},
            {"role": "user", "content": "sure?"}
        ],
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 2}],
        "a_future_field": [true]
    });
    let mut req = native(
        Dialect::Anthropic,
        body.clone(),
        &[
            ("anthropic-beta", "interleaved-thinking-2025-05-14"),
            ("openai-beta", "not-for-anthropic"),
            ("x-api-key", "client-key"),
        ],
    );
    req.stream = true;
    let p = Anthropic::new("a")
        .api_key(Secret::new("sk-ant"))
        .header("anthropic-beta", "configured-beta")
        .default_max_tokens(777);
    let http = p.encode(&req, "claude-x").unwrap();
    let mut want = body;
    want["model"] = json!("claude-x");
    want["stream"] = json!(true);
    want["max_tokens"] = json!(777);
    assert_eq!(sent(&http.body), want);
    assert_eq!(
        http.headers.get("anthropic-beta"),
        Some("configured-beta,interleaved-thinking-2025-05-14")
    );
    assert_eq!(http.headers.get("openai-beta"), None);
    assert_eq!(http.headers.get("x-api-key"), Some("sk-ant"));
}

// ------------------------------------------------------------------ gateway

fn gateway(p: &FakePlatform, max_attempts: u32) -> Gateway<FakePlatform, MemoryStore> {
    let config = json!({
        "providers": {
            "oai": { "kind": "openai", "baseUrl": "https://oai.test", "apiKeyEnv": "OAI_KEY" },
            "ant": { "kind": "anthropic", "baseUrl": "https://ant.test", "apiKeyEnv": "ANT_KEY" },
            "local": { "kind": "openai-compatible", "preset": "ollama", "baseUrl": "https://local.test" }
        },
        "routes": {
            "gpt": [ { "provider": "oai", "model": "gpt-big" } ],
            "claude": [ { "provider": "ant", "model": "claude-big" } ],
            "local": [ { "provider": "local", "model": "llama" } ]
        },
        "retry": { "maxAttempts": max_attempts, "baseDelayMs": 10, "maxDelayMs": 100 },
        "gateway": { "clientKeysEnv": ["GATEWAY_KEY"] }
    });
    let secret = |name: &str| match name {
        "OAI_KEY" => Some("sk-oai-secret".to_string()),
        "ANT_KEY" => Some("sk-ant-secret".to_string()),
        "GATEWAY_KEY" => Some("gw-key".to_string()),
        _ => None,
    };
    let setup = Setup::load(Some(&config.to_string()), &secret).expect("valid");
    let store = MemoryStore::new(setup.breaker());
    setup.into_gateway(p.clone(), store)
}

fn post(path: &str, body: &Value, extra: &[(&str, &str)]) -> Inbound {
    let mut headers: Headers = [
        ("content-type", "application/json"),
        ("authorization", "Bearer gw-key"),
    ]
    .into_iter()
    .collect();
    for (n, v) in extra {
        headers.insert(n, *v);
    }
    Inbound {
        method: "POST".into(),
        path: path.into(),
        headers,
        body: Body::full(body.to_string().into_bytes()),
    }
}

fn sse(chunks: Vec<String>) -> Reply {
    reply(200)
        .header("content-type", "text/event-stream")
        .chunks(chunks)
}

/// The response, the bytes of its stream and the stream's end line.
fn run(
    p: &FakePlatform,
    g: &Gateway<FakePlatform, MemoryStore>,
    r: Inbound,
) -> (Outbound, Vec<u8>, Option<Value>) {
    let mut out = block_on(p, g.handle(r));
    let Some(mut stream) = out.stream.take() else {
        return (out, Vec::new(), None);
    };
    let mut bytes = Vec::new();
    let mut log = None;
    block_on(p, async {
        while let Some(piece) = poll_fn(|cx| stream.as_mut().poll_next(cx)).await {
            match piece {
                Piece::Bytes(b) => bytes.extend(b),
                Piece::Log(l) => log = Some(serde_json::from_str(&l).unwrap()),
            }
        }
    });
    (out, bytes, log)
}

fn events(bytes: &[u8]) -> Vec<SseEvent> {
    let mut events = Vec::new();
    let mut d = SseDecoder::default();
    d.feed(bytes, &mut events).expect("SSE");
    events.extend(d.finish());
    events
}

fn data(events: &[SseEvent]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e.data != "[DONE]")
        .map(|e| serde_json::from_str(&e.data).expect("JSON data"))
        .collect()
}

fn openai_chunk(delta: Value, finish: Value) -> String {
    let c = json!({"id": "chatcmpl-up", "object": "chat.completion.chunk", "created": 7,
                   "model": "gpt-big-0613", "system_fingerprint": "fp_1",
                   "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]});
    format!("data: {c}\n\n")
}

fn openai_stream(parts: &[&str], usage: bool) -> Vec<String> {
    let mut out = vec![openai_chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    out.extend(
        parts
            .iter()
            .map(|p| openai_chunk(json!({"content": p}), Value::Null)),
    );
    out.push(openai_chunk(json!({}), json!("stop")));
    if usage {
        let u = json!({"id": "chatcmpl-up", "object": "chat.completion.chunk", "created": 7,
                       "model": "gpt-big-0613", "choices": [],
                       "usage": {"prompt_tokens": 4, "completion_tokens": 6, "total_tokens": 10,
                                 "prompt_tokens_details": {"cached_tokens": 2}}});
        out.push(format!("data: {u}\n\n"));
    }
    out.push("data: [DONE]\n\n".into());
    out
}

fn anthropic_event(name: &str, data: Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

fn anthropic_start(input_tokens: u64) -> String {
    anthropic_event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_up", "type": "message",
               "role": "assistant", "model": "claude-big-2025", "content": [], "stop_reason": null,
               "stop_sequence": null, "future_message_field": {"x": 1},
               "usage": {"input_tokens": input_tokens, "output_tokens": 1,
                         "cache_read_input_tokens": 3}}}),
    )
}

fn text_delta(index: u32, text: &str) -> String {
    anthropic_event(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": index,
               "delta": {"type": "text_delta", "text": text}}),
    )
}

fn anthropic_text_start(index: u32) -> String {
    anthropic_event(
        "content_block_start",
        json!({"type": "content_block_start", "index": index,
               "content_block": {"type": "text", "text": ""}}),
    )
}

fn anthropic_end(output_tokens: u64) -> Vec<String> {
    vec![
        anthropic_event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        anthropic_event(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null},
                   "usage": {"output_tokens": output_tokens}}),
        ),
        anthropic_event("message_stop", json!({"type": "message_stop"})),
    ]
}

#[test]
fn an_openai_client_body_and_provider_headers_reach_an_openai_provider_untouched() {
    let p = FakePlatform::new();
    let answer = json!({"id": "chatcmpl-up", "object": "chat.completion", "created": 7,
        "model": "gpt-big-0613", "system_fingerprint": "fp_1",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "a", "refusal": null},
             "logprobs": {"content": [{"token": "a", "logprob": -0.1, "bytes": [97], "top_logprobs": []}]},
             "finish_reason": "stop"},
            {"index": 1, "message": {"role": "assistant", "content": "b"}, "logprobs": null, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7,
                  "prompt_tokens_details": {"cached_tokens": 4},
                  "completion_tokens_details": {"reasoning_tokens": 1}}})
    .to_string();
    p.script("https://oai.test", [reply(200).body(answer.clone())]);
    let g = gateway(&p, 1);
    let body = json!({"model": "gpt", "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 30, "seed": 7, "frequency_penalty": 0.5, "service_tier": "flex",
        "prompt_cache_key": "pk", "reasoning_effort": "low", "parallel_tool_calls": false, "user": "u-1"});
    let out = block_on(
        &p,
        g.handle(post(
            "/v1/chat/completions",
            &body,
            &[
                ("openai-beta", "b1"),
                ("idempotency-key", "idem-1"),
                ("cookie", "session=1"),
                ("x-api-key", "gw-key"),
            ],
        )),
    );
    assert_eq!(out.status, 200);
    assert_eq!(
        String::from_utf8(out.body).unwrap(),
        answer,
        "the provider's answer, byte for byte"
    );
    assert_eq!(out.headers.get("x-served-by"), Some("oai/gpt-big"));
    assert_eq!(out.headers.get("x-attempts"), Some("1"));
    let reqs = p.requests();
    let mut want = body;
    want["model"] = json!("gpt-big");
    let limit = want.as_object_mut().unwrap().remove("max_tokens").unwrap();
    want["max_completion_tokens"] = limit;
    assert_eq!(sent(&reqs[0].body), want);
    let h = &reqs[0].headers;
    assert_eq!(h.get("openai-beta"), Some("b1"));
    assert_eq!(h.get("idempotency-key"), Some("idem-1"));
    assert_eq!(h.get("authorization"), Some("Bearer sk-oai-secret"));
    for name in ["cookie", "x-api-key"] {
        assert_eq!(h.get(name), None, "{name} is never forwarded");
    }
    assert!(!format!("{:?}", h.iter().collect::<Vec<_>>()).contains("gw-key"));
}

#[test]
fn an_anthropic_client_body_reaches_an_anthropic_provider_and_its_answer_comes_back_whole() {
    let p = FakePlatform::new();
    let answer =
        json!({"id": "msg_up", "type": "message", "role": "assistant", "model": "claude-big-2025",
        "content": [{"type": "text", "text": "hi", "citations": null}],
        "stop_reason": "end_turn", "stop_sequence": null, "container": null,
        "usage": {"input_tokens": 9, "output_tokens": 2, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 7, "service_tier": "standard"}})
        .to_string();
    p.script("https://ant.test", [reply(200).body(answer.clone())]);
    let g = gateway(&p, 1);
    let body = json!({"model": "claude", "messages": [{"role": "user", "content": "hi"}],
                      "top_k": 5, "service_tier": "auto", "metadata": {"user_id": "u"}});
    let out = block_on(
        &p,
        g.handle(post(
            "/v1/messages",
            &body,
            &[
                ("anthropic-beta", "b2"),
                ("anthropic-version", "2023-06-01"),
            ],
        )),
    );
    assert_eq!(out.status, 200);
    assert_eq!(String::from_utf8(out.body).unwrap(), answer);
    let reqs = p.requests();
    let mut want = body;
    want["model"] = json!("claude-big");
    want["max_tokens"] = json!(4096);
    assert_eq!(sent(&reqs[0].body), want);
    assert_eq!(reqs[0].headers.get("anthropic-beta"), Some("b2"));
    assert_eq!(reqs[0].headers.get("x-api-key"), Some("sk-ant-secret"));
}

#[test]
fn an_anthropic_stream_goes_to_its_client_verbatim_unknown_events_included() {
    let p = FakePlatform::new();
    let mut chunks = vec![
        anthropic_start(10),
        anthropic_event("ping", json!({"type": "ping"})),
        anthropic_text_start(0),
        text_delta(0, "Hello"),
        anthropic_event(
            "future_event",
            json!({"type": "future_event", "what": [1, 2]}),
        ),
        text_delta(0, " world"),
    ];
    chunks.extend(anthropic_end(5));
    let upstream: Vec<u8> = chunks.concat().into_bytes();
    p.script("https://ant.test", [sse(chunks)]);
    let g = gateway(&p, 1);
    let body = json!({"model": "claude", "max_tokens": 20, "stream": true,
                      "messages": [{"role": "user", "content": "hi"}]});
    let (out, bytes, log) = run(&p, &g, post("/v1/messages", &body, &[]));
    assert_eq!(out.status, 200);
    assert_eq!(
        out.headers.get("x-attempts"),
        Some("1"),
        "the answering attempt counts"
    );
    assert_eq!(
        String::from_utf8(bytes).unwrap(),
        String::from_utf8(upstream).unwrap()
    );
    let sent = sent(&p.requests()[0].body);
    assert_eq!(sent["stream"], true);
    let log = log.unwrap();
    assert_eq!(log["outcome"], "complete");
    // Every input token, the 3 read from the cache included.
    assert_eq!(
        log["usage"],
        json!({"inputTokens": 13, "cachedInputTokens": 3, "outputTokens": 5})
    );
    assert_eq!(log["attempts"], 1);
}

#[test]
fn an_openai_stream_passes_through_and_hides_the_usage_chunk_it_did_not_ask_for() {
    let p = FakePlatform::new();
    p.script(
        "https://oai.test",
        [sse(openai_stream(&["Hel", "lo"], true))],
    );
    let g = gateway(&p, 1);
    let body = json!({"model": "gpt", "stream": true, "logprobs": false,
                      "messages": [{"role": "user", "content": "hi"}]});
    let (out, bytes, log) = run(&p, &g, post("/v1/chat/completions", &body, &[]));
    assert_eq!(out.status, 200);
    let want: String = openai_stream(&["Hel", "lo"], false).concat();
    assert_eq!(String::from_utf8(bytes).unwrap(), want);
    let sent = sent(&p.requests()[0].body);
    assert_eq!(
        sent["stream_options"],
        json!({"include_usage": true}),
        "the gateway asks"
    );
    let log = log.unwrap();
    assert_eq!(
        log["usage"],
        json!({"inputTokens": 4, "cachedInputTokens": 2, "outputTokens": 6}),
        "and counts"
    );

    // A client that asked gets the chunk as the provider wrote it.
    p.script(
        "https://oai.test",
        [sse(openai_stream(&["Hel", "lo"], true))],
    );
    let body = json!({"model": "gpt", "stream": true, "stream_options": {"include_usage": true},
                      "messages": [{"role": "user", "content": "hi"}]});
    let (_, bytes, _) = run(&p, &g, post("/v1/chat/completions", &body, &[]));
    assert_eq!(
        String::from_utf8(bytes).unwrap(),
        openai_stream(&["Hel", "lo"], true).concat()
    );
}

#[test]
fn a_cut_anthropic_stream_is_continued_with_blocks_that_extend_what_went_out() {
    let p = FakePlatform::new();
    let first = vec![
        anthropic_start(10),
        anthropic_text_start(0),
        text_delta(0, "The answer"),
    ];
    let passed = first.concat();
    let cut = sse(first).cut_after(3, BodyEnd::Reset);
    let mut second = vec![
        anthropic_start(12),
        anthropic_text_start(0),
        text_delta(0, " is 42."),
    ];
    second.extend(anthropic_end(4));
    p.script("https://ant.test", [cut, sse(second)]);
    let g = gateway(&p, 2);
    let body = json!({"model": "claude", "max_tokens": 20, "stream": true, "top_k": 3,
                      "messages": [{"role": "user", "content": "answer?"}]});
    let (out, bytes, log) = run(&p, &g, post("/v1/messages", &body, &[]));
    assert_eq!(out.status, 200);
    let text = String::from_utf8(bytes).unwrap();
    assert!(
        text.starts_with(&passed),
        "the first attempt's events, verbatim"
    );
    let rest = events(&text.as_bytes()[passed.len()..]);
    let names: Vec<&str> = rest.iter().filter_map(|e| e.event.as_deref()).collect();
    assert_eq!(
        names,
        [
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ],
        "no second message_start"
    );
    let rest = data(&rest);
    assert_eq!(rest[0]["index"], 0, "the open text block goes on");
    assert_eq!(rest[0]["delta"]["text"], " is 42.");
    assert_eq!(rest[1]["index"], 0);
    assert_eq!(rest[2]["delta"]["stop_reason"], "end_turn");
    // The continuation was asked as the client's own body, the delivered
    // text prefilled.
    let reqs = p.requests();
    let again = sent(&reqs[1].body);
    assert_eq!(again["top_k"], 3);
    assert_eq!(
        again["messages"][1],
        json!({"role": "assistant", "content": "The answer"})
    );
    // The cut attempt's tokens are counted, apart from the answer's.
    let log = log.unwrap();
    assert_eq!(
        log["discardedUsage"],
        json!({"inputTokens": 13, "cachedInputTokens": 3, "outputTokens": 1})
    );
    assert_eq!(
        log["usage"],
        json!({"inputTokens": 15, "cachedInputTokens": 3, "outputTokens": 4})
    );
    assert_eq!(log["attempts"], 2);
}

#[test]
fn a_cut_openai_stream_is_restarted_and_continued_under_the_same_id_and_model() {
    let p = FakePlatform::new();
    let whole = openai_stream(&["The ", "answer ", "is 42."], true);
    let passed = whole[..3].concat();
    let cut = sse(whole[..3].to_vec()).cut_after(3, BodyEnd::Reset);
    p.script("https://oai.test", [cut, sse(whole)]);
    let g = gateway(&p, 2);
    let body = json!({"model": "gpt", "stream": true, "stream_options": {"include_usage": true},
                      "messages": [{"role": "user", "content": "answer?"}]});
    let (out, bytes, log) = run(&p, &g, post("/v1/chat/completions", &body, &[]));
    assert_eq!(out.status, 200);
    let text = String::from_utf8(bytes).unwrap();
    assert!(text.starts_with(&passed));
    let rest = events(&text.as_bytes()[passed.len()..]);
    assert_eq!(rest.last().map(|e| e.data.as_str()), Some("[DONE]"));
    let chunks = data(&rest);
    let more: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(more, "is 42.", "only what extends the delivered text");
    for c in &chunks {
        assert_eq!(c["id"], "chatcmpl-up");
        assert_eq!(c["model"], "gpt-big-0613");
        assert_eq!(c["created"], 7);
    }
    let usage = chunks.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["completion_tokens"], 6);
    assert_eq!(log.unwrap()["outcome"], "complete");
    // A restart (no prefill for this model) asks the same body again.
    let reqs = p.requests();
    assert_eq!(sent(&reqs[1].body), sent(&reqs[0].body));
}

#[test]
fn a_provider_that_reports_no_usage_gets_none_invented() {
    let p = FakePlatform::new();
    // Ollama's preset asks for usage only for a client that wants it: an
    // Anthropic client does, but this server sends none.
    p.script("https://local.test", [sse(openai_stream(&["ok"], false))]);
    let g = gateway(&p, 1);
    let body = json!({"model": "local", "max_tokens": 20, "stream": true,
                      "messages": [{"role": "user", "content": "hi"}]});
    let (out, bytes, log) = run(&p, &g, post("/v1/messages", &body, &[]));
    assert_eq!(out.status, 200);
    let asked = sent(&p.requests()[0].body);
    assert_eq!(asked["stream_options"], json!({"include_usage": true}));
    let all = data(&events(&bytes));
    let start = all.iter().find(|d| d["type"] == "message_start").unwrap();
    assert_eq!(
        start["message"]["usage"],
        json!({"input_tokens": null, "output_tokens": null})
    );
    let delta = all.iter().find(|d| d["type"] == "message_delta").unwrap();
    assert_eq!(delta["usage"], json!({"output_tokens": null}), "no zeros");
    assert_eq!(log.unwrap()["usage"], Value::Null);

    // The same through Chat Completions: no usage chunk at all.
    p.script("https://oai.test", [sse(openai_stream(&["ok"], false))]);
    let body = json!({"model": "gpt", "stream": true, "stream_options": {"include_usage": true},
                      "messages": [{"role": "user", "content": "hi"}]});
    let (_, bytes, _) = run(&p, &g, post("/v1/chat/completions", &body, &[]));
    assert!(data(&events(&bytes))
        .iter()
        .all(|c| c["usage"].is_null() && c["choices"] != json!([])));
}

#[test]
fn a_request_in_the_other_dialect_is_still_translated() {
    let p = FakePlatform::new();
    p.script(
        "https://ant.test",
        [reply(200).body(
            json!({"id": "msg_up", "type": "message", "role": "assistant", "model": "claude-big-2025",
                   "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
                   "stop_sequence": null, "usage": {"input_tokens": 3, "output_tokens": 1}})
            .to_string(),
        )],
    );
    let g = gateway(&p, 1);
    let body = json!({"model": "claude", "messages": [{"role": "user", "content": "hi"}],
                      "max_tokens": 9, "seed": 1});
    let out = block_on(
        &p,
        g.handle(post(
            "/v1/chat/completions",
            &body,
            &[("idempotency-key", "i-2"), ("openai-beta", "x")],
        )),
    );
    assert_eq!(out.status, 200);
    let answer: Value = serde_json::from_slice(&out.body).unwrap();
    assert_eq!(answer["object"], "chat.completion");
    assert_eq!(answer["choices"][0]["message"]["content"], "hi");
    let reqs = p.requests();
    let sent: Map<String, Value> = serde_json::from_slice(&reqs[0].body).unwrap();
    assert_eq!(sent["model"], "claude-big");
    assert!(
        !sent.contains_key("seed"),
        "translated, not the OpenAI body"
    );
    assert_eq!(reqs[0].headers.get("idempotency-key"), Some("i-2"));
    assert_eq!(reqs[0].headers.get("openai-beta"), None);
}
