//! Streaming through the gateway (`"stream": true` on both endpoints), on the
//! fake platform: server-sent events in the client's format, failover before
//! the commit point as an ordinary error, an interruption after it as the
//! client's error event, never a clean end.

use std::future::poll_fn;

use resilient_llm::gateway::{Gateway, Inbound, Outbound, Piece, Setup};
use resilient_llm::testing::{block_on, reply, BodyEnd, FakePlatform, Reply};
use resilient_llm::{Body, Headers, MemoryStore, Platform};
use resilient_llm::{SseDecoder, SseEvent};
use serde_json::{json, Value};

fn gateway(p: &FakePlatform, max_attempts: u32) -> Gateway<FakePlatform, MemoryStore> {
    let config = json!({
        "providers": {
            "primary": { "kind": "openai", "baseUrl": "https://primary.test", "apiKeyEnv": "K" },
            "backup": { "kind": "anthropic", "baseUrl": "https://backup.test", "apiKeyEnv": "K" }
        },
        "routes": { "default": [ { "provider": "primary", "model": "gpt-big" }, { "provider": "backup", "model": "claude-small" } ] },
        "retry": { "maxAttempts": max_attempts, "baseDelayMs": 10, "maxDelayMs": 100 },
        "gateway": { "allowUnauthenticated": true }
    });
    let setup = Setup::load(Some(&config.to_string()), &|_| Some("sk-test".into())).expect("valid");
    let store = MemoryStore::new(setup.breaker());
    setup.into_gateway(p.clone(), store)
}

fn openai_sse(model: &str, parts: &[&str]) -> Vec<String> {
    let chunk = |delta: Value, finish: Value| {
        let c = json!({ "id": "c", "object": "chat.completion.chunk", "created": 1, "model": model,
                        "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }] });
        format!("data: {c}\n\n")
    };
    let mut out = vec![chunk(
        json!({ "role": "assistant", "content": "" }),
        Value::Null,
    )];
    out.extend(
        parts
            .iter()
            .map(|p| chunk(json!({ "content": p }), Value::Null)),
    );
    out.push(chunk(json!({}), json!("stop")));
    let usage = json!({ "id": "c", "object": "chat.completion.chunk", "created": 1, "model": model, "choices": [],
                        "usage": { "prompt_tokens": 4, "completion_tokens": 6, "total_tokens": 10 } });
    out.push(format!("data: {usage}\n\n"));
    out.push("data: [DONE]\n\n".into());
    out
}

fn sse(chunks: Vec<String>) -> Reply {
    reply(200)
        .header("content-type", "text/event-stream")
        .chunks(chunks)
}

fn post(path: &str, body: Value) -> Inbound {
    Inbound {
        method: "POST".into(),
        path: path.into(),
        headers: [("content-type", "application/json")]
            .into_iter()
            .collect::<Headers>(),
        body: Body::full(body.to_string().into_bytes()),
    }
}

/// The response, its SSE events and its end-of-stream log line.
fn run(
    p: &FakePlatform,
    g: &Gateway<FakePlatform, MemoryStore>,
    r: Inbound,
) -> (Outbound, Vec<SseEvent>, Option<String>) {
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
                Piece::Log(l) => log = Some(l),
            }
        }
    });
    let mut events = Vec::new();
    let mut d = SseDecoder::default();
    d.feed(&bytes, &mut events).expect("SSE");
    events.extend(d.finish());
    (out, events, log)
}

fn data(events: &[SseEvent]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e.data != "[DONE]")
        .map(|e| serde_json::from_str(&e.data).expect("JSON data"))
        .collect()
}

#[test]
fn an_openai_client_gets_openai_chunks_with_usage_when_asked() {
    let p = FakePlatform::new();
    p.script(
        "https://primary.test",
        [sse(openai_sse("gpt-big-2025", &["Hel", "lo"]))],
    );
    let g = gateway(&p, 2);
    let body = json!({ "model": "default", "stream": true, "stream_options": { "include_usage": true },
                       "messages": [{ "role": "user", "content": "hi" }] });
    let (out, events, log) = run(&p, &g, post("/v1/chat/completions", body));
    assert_eq!(out.status, 200);
    assert_eq!(
        out.headers.get("content-type"),
        Some("text/event-stream; charset=utf-8")
    );
    assert_eq!(out.headers.get("x-served-by"), Some("primary/gpt-big"));
    assert_eq!(events.last().map(|e| e.data.as_str()), Some("[DONE]"));
    let chunks = data(&events);
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "Hello");
    assert!(
        chunks.iter().all(|c| c["model"] == "gpt-big-2025"),
        "the answering model"
    );
    assert_eq!(chunks.last().unwrap()["usage"]["completion_tokens"], 6);
    let log: Value = serde_json::from_str(&log.expect("an end line")).unwrap();
    assert_eq!(log["outcome"], "complete");
}

#[test]
fn an_anthropic_client_is_served_by_an_openai_provider_as_anthropic_events() {
    let p = FakePlatform::new();
    p.script(
        "https://primary.test",
        [sse(openai_sse("gpt-big", &["one ", "two"]))],
    );
    let g = gateway(&p, 2);
    let body = json!({ "model": "default", "max_tokens": 100, "stream": true, "messages": [{ "role": "user", "content": "hi" }] });
    let (out, events, _) = run(&p, &g, post("/v1/messages", body));
    assert_eq!(out.status, 200);
    let names: Vec<&str> = events.iter().filter_map(|e| e.event.as_deref()).collect();
    assert_eq!(names.first(), Some(&"message_start"));
    assert_eq!(names.last(), Some(&"message_stop"));
    let text: String = data(&events)
        .iter()
        .filter_map(|d| d["delta"]["text"].as_str())
        .collect();
    assert_eq!(text, "one two");
    let delta = data(&events)
        .into_iter()
        .find(|d| d["type"] == "message_delta")
        .unwrap();
    assert_eq!(delta["delta"]["stop_reason"], "end_turn");
    assert_eq!(delta["usage"]["output_tokens"], 6);
}

#[test]
fn a_failure_before_the_first_token_fails_over_or_is_a_plain_error() {
    let p = FakePlatform::new();
    p.script("https://primary.test", [reply(503), reply(503)]);
    p.script(
        "https://backup.test",
        [reply(529)
            .body(r#"{"type":"error","error":{"type":"overloaded_error","message":"busy"}}"#)],
    );
    let g = gateway(&p, 2);
    let body = json!({ "model": "default", "stream": true, "messages": [{ "role": "user", "content": "hi" }] });
    let (out, events, _) = run(&p, &g, post("/v1/chat/completions", body));
    assert!(events.is_empty());
    assert_eq!(out.status, 503, "nothing was sent yet: an HTTP error");
    let err: Value = serde_json::from_slice(&out.body).unwrap();
    assert_eq!(err["error"]["code"], "all_providers_failed");
    assert_eq!(out.headers.get("x-attempts"), Some("4"));
}

#[test]
fn an_interrupted_stream_ends_with_an_error_event_and_no_done() {
    let p = FakePlatform::new();
    let cut = sse(openai_sse("gpt-big", &["The ", "answer ", "is"])).cut_after(2, BodyEnd::Reset);
    p.script("https://primary.test", [cut]);
    // The backup cannot take over either.
    p.script(
        "https://backup.test",
        [reply(500).body(r#"{"type":"error","error":{"type":"api_error","message":"down"}}"#)],
    );
    let g = gateway(&p, 1);
    let body = json!({ "model": "default", "stream": true, "messages": [{ "role": "user", "content": "hi" }] });
    let (out, events, log) = run(&p, &g, post("/v1/chat/completions", body));
    assert_eq!(out.status, 200, "committed before the cut");
    assert!(
        events.iter().all(|e| e.data != "[DONE]"),
        "never a clean end"
    );
    let chunks = data(&events);
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "The ");
    let last = chunks.last().unwrap();
    assert!(
        last["error"]["message"].as_str().unwrap().contains("reset"),
        "names the original failure: {last}"
    );
    assert!(
        chunks
            .iter()
            .all(|c| c["choices"][0]["finish_reason"].is_null()),
        "no finish after an incomplete answer"
    );
    let log: Value = serde_json::from_str(&log.unwrap()).unwrap();
    assert_eq!(log["outcome"], "interrupted");
}

#[test]
fn an_interrupted_anthropic_stream_ends_with_an_error_event() {
    let p = FakePlatform::new();
    p.script(
        "https://primary.test",
        [sse(openai_sse("gpt-big", &["a", "b", "c"])).cut_after(2, BodyEnd::Stall)],
    );
    p.script(
        "https://backup.test",
        [reply(401).body(
            r#"{"type":"error","error":{"type":"authentication_error","message":"bad key"}}"#,
        )],
    );
    let g = gateway(&p, 1);
    let body = json!({ "model": "default", "max_tokens": 10, "stream": true, "messages": [{ "role": "user", "content": "hi" }] });
    let (_, events, _) = run(&p, &g, post("/v1/messages", body));
    let names: Vec<&str> = events.iter().filter_map(|e| e.event.as_deref()).collect();
    assert_eq!(names.last(), Some(&"error"));
    assert!(!names.contains(&"message_stop"));
    let err = data(&events).pop().unwrap();
    assert_eq!(err["type"], "error");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("stalled"),
        "{err}"
    );
}

#[test]
fn a_malformed_chunk_fails_the_attempt_is_continued_and_counted_in_the_end_log_line() {
    // It may have held part of the answer: the attempt is retried and the
    // answer continued, never delivered without it as if complete.
    let p = FakePlatform::new();
    let mut chunks = openai_sse("gpt-big", &["a", "b"]);
    chunks.insert(2, "data: {\"choices\": [ broken\n\n".into());
    p.script(
        "https://primary.test",
        [sse(chunks), sse(openai_sse("gpt-big", &["a", "b"]))],
    );
    let g = gateway(&p, 2);
    let body = json!({ "model": "default", "stream": true, "messages": [{ "role": "user", "content": "hi" }] });
    let (_, events, log) = run(&p, &g, post("/v1/chat/completions", body));
    assert_eq!(events.last().map(|e| e.data.as_str()), Some("[DONE]"));
    let text: String = data(&events)
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "ab");
    let log: Value = serde_json::from_str(&log.unwrap()).unwrap();
    assert_eq!(log["malformedChunks"], 1);
    assert_eq!(log["outcome"], "complete");
}

/// The gateway keeps a stream's idle deadline with one timer that outlives
/// its reads: a stream whose chunks each come well within the deadline runs
/// to its end however long it lasts in all, and a silence after data is
/// still cut at the deadline counted from the last chunk.
#[test]
fn the_idle_deadline_runs_from_the_last_chunk_not_from_the_first() {
    let config = |p: &FakePlatform| {
        let config = json!({
            "providers": {
                "primary": { "kind": "openai", "baseUrl": "https://primary.test", "apiKeyEnv": "K" }
            },
            "routes": { "default": [ { "provider": "primary", "model": "gpt-big" } ] },
            "retry": { "maxAttempts": 1 },
            "idleTimeoutMs": 1000,
            "gateway": { "allowUnauthenticated": true }
        });
        let setup = Setup::load(Some(&config.to_string()), &|_| Some("sk-test".into())).unwrap();
        let store = MemoryStore::new(setup.breaker());
        setup.into_gateway(p.clone(), store)
    };
    let body = json!({ "model": "default", "stream": true, "messages": [{ "role": "user", "content": "hi" }] });
    let parts = ["a", "b", "c", "d", "e", "f", "g", "h"];

    let p = FakePlatform::new();
    p.script(
        "https://primary.test",
        [sse(openai_sse("gpt-big", &parts)).chunk_delay(std::time::Duration::from_millis(700))],
    );
    let started = p.now();
    let (out, events, log) = run(&p, &config(&p), post("/v1/chat/completions", body.clone()));
    assert_eq!(out.status, 200);
    assert!(
        p.now() - started >= 7000,
        "the chunks took {} ms in all",
        p.now() - started
    );
    assert_eq!(events.last().map(|e| e.data.as_str()), Some("[DONE]"));
    let text: String = data(&events)
        .iter()
        .filter_map(|d| d["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, parts.concat());
    let log: Value = serde_json::from_str(&log.unwrap()).unwrap();
    assert_eq!(log["outcome"], "complete");

    let p = FakePlatform::new();
    let stalls = sse(openai_sse("gpt-big", &parts))
        .chunk_delay(std::time::Duration::from_millis(700))
        .cut_after(5, BodyEnd::Stall);
    p.script("https://primary.test", [stalls]);
    let started = p.now();
    let (out, events, _) = run(&p, &config(&p), post("/v1/chat/completions", body));
    assert_eq!(out.status, 200);
    // Five chunks 700 ms apart, then 1000 ms of silence.
    assert_eq!(p.now() - started, 5 * 700 + 1000);
    let err = data(&events).pop().unwrap();
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no data for 1000 ms"),
        "{err}"
    );
}
