//! Every limit on what reaches the gateway, one test each: what a client
//! sends (body, JSON nesting, message count, names, headers) is refused with
//! a 400/413 in the client's format before anything is sent upstream; what
//! an upstream streams (length, duration) ends the stream with the client's
//! error event. And keys quoted in upstream errors never reach the client
//! or the log. On the fake platform: no ports, no sleeps.

use std::future::poll_fn;
use std::time::Duration;

use resilient_llm::gateway::limits::{
    MAX_HEADER_BYTES, MAX_JSON_DEPTH, MAX_MESSAGES, MAX_NAME_BYTES,
};
use resilient_llm::gateway::{Gateway, Inbound, Outbound, Piece, Setup};
use resilient_llm::testing::{block_on, reply, FakePlatform};
use resilient_llm::{
    Body, Headers, MemoryStore, SseDecoder, SseEvent, TransportError, MAX_STREAM_BYTES,
};
use serde_json::{json, Value};

#[path = "common/trickle.rs"]
mod trickle;
use trickle::trickle;

const OPENAI_KEY: &str = "sk-proj-Primary0123456789Secret";
const ANTHROPIC_KEY: &str = "sk-ant-api03-Backup0123456789Key";

fn gateway(p: &FakePlatform, max_request_bytes: usize) -> Gateway<FakePlatform, MemoryStore> {
    let config = json!({
        "providers": {
            "primary": { "kind": "openai", "baseUrl": "https://primary.test", "apiKeyEnv": "OPENAI_KEY" },
            "backup": { "kind": "anthropic", "baseUrl": "https://backup.test", "apiKeyEnv": "ANTHROPIC_KEY" }
        },
        "routes": {
            "default": [ { "provider": "primary", "model": "gpt-big" } ],
            "claude": [ { "provider": "backup", "model": "claude-small" } ]
        },
        "retry": { "maxAttempts": 1 },
        "limits": { "maxRequestBytes": max_request_bytes },
        "gateway": { "allowUnauthenticated": true }
    });
    let secret = |name: &str| match name {
        "OPENAI_KEY" => Some(OPENAI_KEY.to_string()),
        "ANTHROPIC_KEY" => Some(ANTHROPIC_KEY.to_string()),
        _ => None,
    };
    let setup = Setup::load(Some(&config.to_string()), &secret).expect("valid config");
    let store = MemoryStore::new(setup.breaker());
    setup.into_gateway(p.clone(), store)
}

fn post(path: &str, headers: &[(&str, &str)], body: impl Into<Vec<u8>>) -> Inbound {
    Inbound {
        method: "POST".into(),
        path: path.into(),
        headers: headers.iter().copied().collect::<Headers>(),
        body: Body::full(body.into()),
    }
}

fn openai(body: &Value) -> Inbound {
    post("/v1/chat/completions", &[], body.to_string())
}

fn anthropic(body: &Value) -> Inbound {
    post("/v1/messages", &[], body.to_string())
}

fn openai_ok() -> String {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-big",
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": "ok" }, "finish_reason": "stop" }],
        "usage": { "prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4 }
    })
    .to_string()
}

fn run(p: &FakePlatform, g: &Gateway<FakePlatform, MemoryStore>, r: Inbound) -> (Outbound, Value) {
    let out = block_on(p, g.handle(r));
    let body = serde_json::from_slice(&out.body).unwrap_or(Value::Null);
    (out, body)
}

/// A refusal in OpenAI's error shape, with `status`; its message.
fn openai_error(out: &Outbound, body: &Value, status: u16) -> String {
    assert_eq!(out.status, status, "{body}");
    let message = body["error"]["message"].as_str().expect("an OpenAI error");
    message.to_string()
}

/// A refusal in Anthropic's error shape, with `status`; its message.
fn anthropic_error(out: &Outbound, body: &Value, status: u16) -> String {
    assert_eq!(out.status, status, "{body}");
    assert_eq!(body["type"], "error", "{body}");
    body["error"]["message"]
        .as_str()
        .expect("an Anthropic error")
        .to_string()
}

#[test]
fn a_body_over_the_limit_is_a_413_even_unannounced_and_in_pieces() {
    let p = FakePlatform::new();
    let g = gateway(&p, 1000);
    // No content-length: the body comes in chunks, and reading stops at the limit.
    let chunks = (0..100).map(|_| Ok::<_, TransportError>(vec![b' '; 100]));
    let r = Inbound {
        body: Body::stream(futures_util::stream::iter(chunks)),
        ..post("/v1/messages", &[], "")
    };
    let (out, body) = run(&p, &g, r);
    anthropic_error(&out, &body, 413);
    assert!(p.requests().is_empty());
}

/// `{"model", "messages", "tools": [{… "parameters": {"a": [[…]]}}]}`
/// nested `depth` levels deep in all.
fn nested(depth: usize) -> String {
    // The root, tools, the tool, function, parameters: five levels.
    let arrays = depth - 5;
    format!(
        r#"{{"model":"default","messages":[{{"role":"user","content":"hi"}}],"tools":[{{"type":"function","function":{{"name":"f","parameters":{{"a":{}{}}}}}}}]}}"#,
        "[".repeat(arrays),
        "]".repeat(arrays)
    )
}

#[test]
fn json_nested_deeper_than_the_limit_is_a_400() {
    let p = FakePlatform::new();
    p.script("https://primary.test", [reply(200).body(openai_ok())]);
    let g = gateway(&p, 1 << 20);
    let (out, body) = run(
        &p,
        &g,
        post("/v1/chat/completions", &[], nested(MAX_JSON_DEPTH)),
    );
    assert_eq!(out.status, 200, "the deepest nesting taken: {body}");
    let (out, body) = run(
        &p,
        &g,
        post("/v1/chat/completions", &[], nested(MAX_JSON_DEPTH + 1)),
    );
    let message = openai_error(&out, &body, 400);
    assert!(message.contains("recursion limit"), "{message}");
    // Far deeper is refused the same way, without building what it nests.
    let (out, body) = run(&p, &g, post("/v1/messages", &[], "[".repeat(200_000)));
    anthropic_error(&out, &body, 400);
    assert_eq!(p.requests().len(), 1);
}

#[test]
fn more_messages_than_the_limit_is_a_400() {
    let p = FakePlatform::new();
    let g = gateway(&p, 8 << 20);
    let messages = vec![json!({ "role": "user", "content": "" }); MAX_MESSAGES + 1];
    let body = json!({ "model": "claude", "max_tokens": 5, "messages": messages });
    let (out, body) = run(&p, &g, anthropic(&body));
    let message = anthropic_error(&out, &body, 400);
    assert!(message.contains("at most 100000"), "{message}");
    assert!(p.requests().is_empty());
}

#[test]
fn names_longer_than_the_limit_are_a_400() {
    let p = FakePlatform::new();
    p.script("https://primary.test", [reply(200).body(openai_ok())]);
    let g = gateway(&p, 1 << 20);
    let long = "m".repeat(MAX_NAME_BYTES + 1);
    let hi = json!([{ "role": "user", "content": "hi" }]);
    let cases = [
        json!({ "model": long, "messages": hi }),
        json!({ "model": "default", "messages": hi,
                "tools": [{ "type": "function", "function": { "name": long, "parameters": {} } }] }),
        json!({ "model": "default", "messages": [
            { "role": "user", "content": "hi" },
            { "role": "assistant", "tool_calls": [{ "id": long, "type": "function",
                "function": { "name": "f", "arguments": "{}" } }] },
            { "role": "tool", "tool_call_id": long, "content": "x" },
        ] }),
    ];
    for case in &cases {
        let (out, body) = run(&p, &g, openai(case));
        let message = openai_error(&out, &body, 400);
        assert!(message.contains("at most 256"), "{message}");
        assert!(!message.contains(&long), "the name is not echoed");
    }
    assert!(p.requests().is_empty());
    // A name of the limit's length is taken.
    let at_limit = "m".repeat(MAX_NAME_BYTES);
    let ok = json!({ "model": "default", "messages": hi,
                     "tools": [{ "type": "function", "function": { "name": at_limit, "parameters": {} } }] });
    let (out, body) = run(&p, &g, openai(&ok));
    assert_eq!(out.status, 200, "{body}");
}

#[test]
fn a_header_longer_than_the_limit_is_a_400_that_does_not_echo_it() {
    let p = FakePlatform::new();
    let g = gateway(&p, 1 << 20);
    let long = format!("Bearer {}", "k".repeat(MAX_HEADER_BYTES));
    let body = json!({ "model": "claude", "max_tokens": 5, "messages": [{ "role": "user", "content": "hi" }] });
    for name in ["authorization", "anthropic-beta", "x-request-timeout-ms"] {
        let r = post("/v1/messages", &[(name, &long)], body.to_string());
        let (out, reply) = run(&p, &g, r);
        let message = anthropic_error(&out, &reply, 400);
        assert!(message.contains(name), "{message}");
        assert!(!message.contains("kkkk") && !out.log.contains("kkkk"));
    }
    let fits = "x".repeat(MAX_HEADER_BYTES);
    p.script(
        "https://backup.test",
        [reply(401)
            .body(r#"{"type":"error","error":{"type":"authentication_error","message":"no"}}"#)],
    );
    let (out, _) = run(
        &p,
        &g,
        post(
            "/v1/messages",
            &[("anthropic-beta", &fits)],
            body.to_string(),
        ),
    );
    assert_eq!(out.status, 503, "a header of the limit's length is taken");
    assert_eq!(p.requests().len(), 1);
}

/// The streamed answer's events and its end-of-stream log line.
fn stream(
    p: &FakePlatform,
    g: &Gateway<FakePlatform, MemoryStore>,
    r: Inbound,
) -> (Vec<SseEvent>, Value) {
    let mut out = block_on(p, g.handle(r));
    let mut s = out.stream.take().expect("a stream");
    let mut bytes = Vec::new();
    let mut log = Value::Null;
    block_on(p, async {
        while let Some(piece) = poll_fn(|cx| s.as_mut().poll_next(cx)).await {
            match piece {
                Piece::Bytes(b) => bytes.extend(b),
                Piece::Log(l) => log = serde_json::from_str(&l).unwrap(),
            }
        }
    });
    let mut events = Vec::new();
    let mut d = SseDecoder::default();
    d.feed(&bytes, &mut events).expect("SSE");
    events.extend(d.finish());
    (events, log)
}

fn first_chunk() -> String {
    let c = json!({ "id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-big",
                    "choices": [{ "index": 0, "delta": { "role": "assistant", "content": "Hel" }, "finish_reason": null }] });
    format!("data: {c}\n\n")
}

fn streamed(model: &str) -> Value {
    json!({ "model": model, "stream": true, "max_tokens": 5, "messages": [{ "role": "user", "content": "hi" }] })
}

#[test]
fn an_upstream_stream_longer_than_the_limit_ends_in_an_error_event() {
    let p = FakePlatform::new();
    // One event, then keep-alive comments past the limit, never an end.
    let line = format!(": {}\n", "x".repeat(1021)); // 1 KiB
    let mib = line.repeat(1024);
    let chunks = std::iter::once(first_chunk()).chain(std::iter::repeat_n(
        mib,
        (MAX_STREAM_BYTES >> 20) as usize + 1,
    ));
    p.script(
        "https://primary.test",
        [reply(200)
            .header("content-type", "text/event-stream")
            .chunks(chunks)],
    );
    let g = gateway(&p, 1 << 20);
    // An Anthropic client, so the stream is translated and the end is the gateway's own event.
    let (events, log) = stream(&p, &g, anthropic(&streamed("default")));
    let last = events.last().expect("events");
    assert_eq!(last.event.as_deref(), Some("error"), "{last:?}");
    assert!(last.data.contains("longer than"), "{}", last.data);
    assert!(!events
        .iter()
        .any(|e| e.event.as_deref() == Some("message_stop")));
    assert_ne!(log["outcome"], "complete", "{log}");
}

#[test]
fn an_upstream_stream_that_never_ends_is_cut_at_the_deadline() {
    let start = 1_700_000_000_000;
    let p = FakePlatform::new().at(start);
    // A keep-alive every 5 s, within the idle timeout, for ten minutes.
    let chunks =
        std::iter::once(first_chunk()).chain(std::iter::repeat_n(": ping\n\n".to_string(), 120));
    p.script(
        "https://primary.test",
        [reply(200)
            .header("content-type", "text/event-stream")
            .chunks(chunks)
            .chunk_delay(Duration::from_secs(5))],
    );
    let g = gateway(&p, 1 << 20);
    let (events, log) = stream(&p, &g, openai(&streamed("default")));
    let elapsed = resilient_llm::Platform::now(&p) - start;
    assert!(
        (60_000..=61_000).contains(&elapsed),
        "ended after {elapsed} ms"
    );
    let last: Value = serde_json::from_str(&events.last().unwrap().data).unwrap();
    assert!(last["error"]["message"].is_string(), "{last}");
    assert_ne!(log["outcome"], "complete", "{log}");
}

#[test]
fn keys_quoted_in_upstream_errors_never_reach_the_client_or_the_log() {
    let p = FakePlatform::new();
    let masked = format!(
        "{}...{}",
        &OPENAI_KEY[..8],
        &OPENAI_KEY[OPENAI_KEY.len() - 4..]
    );
    // A proxy echoing the Authorization header, and OpenAI's own masked form.
    p.script(
        "https://primary.test",
        [reply(401).body(
            json!({ "error": { "message": format!(
                "Incorrect API key provided: {masked}. Header was: Authorization: Bearer {OPENAI_KEY}"
            ), "type": "invalid_request_error", "code": "invalid_api_key" } })
            .to_string(),
        )],
    );
    let backup_masked = format!("sk-ant-****{}", &ANTHROPIC_KEY[ANTHROPIC_KEY.len() - 4..]);
    let error_event = json!({ "type": "error", "error": { "type": "overloaded_error",
        "message": format!("overloaded; key {backup_masked} / {ANTHROPIC_KEY}") } });
    p.script(
        "https://backup.test",
        [reply(200)
            .header("content-type", "text/event-stream")
            .body(format!("event: error\ndata: {error_event}\n\n"))],
    );
    let g = gateway(&p, 1 << 20);
    let (out, body) = run(
        &p,
        &g,
        openai(&json!({ "model": "default", "messages": [{ "role": "user", "content": "hi" }] })),
    );
    assert_eq!(out.status, 503, "{body}");
    let (out2, body2) = run(&p, &g, anthropic(&streamed("claude")));
    assert!(out2.status >= 500, "{body2}");
    for text in [body.to_string(), out.log, body2.to_string(), out2.log] {
        for secret in [
            OPENAI_KEY,
            ANTHROPIC_KEY,
            &masked,
            &backup_masked,
            "cret",
            "9Key",
        ] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
    }
    for text in [body.to_string(), body2.to_string()] {
        assert!(text.contains("***"), "the redaction shows: {text}");
    }
}

#[test]
fn a_body_sent_a_byte_every_3_s_is_a_408_after_60_s() {
    use resilient_llm::Platform;
    let p = FakePlatform::new();
    let g = gateway(&p, 1 << 20);
    let body = json!({"model": "default", "messages": [{"role": "user", "content": "hi"}]});
    let bytes = body.to_string().into_bytes();
    let r = Inbound {
        body: trickle(&p, bytes.len(), Duration::from_secs(3), bytes.clone()),
        ..anthropic(&body)
    };
    let started = p.now();
    let (out, reply) = run(&p, &g, r);
    let message = anthropic_error(&out, &reply, 408);
    assert!(message.contains("did not arrive within 60 s"), "{message}");
    assert_eq!(p.now() - started, 60_000);
    assert!(p.requests().is_empty());
    // In OpenAI's shape for an OpenAI client.
    let r = Inbound {
        body: trickle(&p, bytes.len(), Duration::from_secs(3), bytes.clone()),
        ..openai(&body)
    };
    let (out, reply) = run(&p, &g, r);
    openai_error(&out, &reply, 408);
}

#[test]
fn a_slow_body_that_arrives_within_the_deadline_is_served() {
    let p = FakePlatform::new();
    p.script("https://primary.test", [reply(200).body(openai_ok())]);
    let g = gateway(&p, 1 << 20);
    let body = json!({"model": "default", "messages": [{"role": "user", "content": "hi"}]});
    let bytes = body.to_string().into_bytes();
    // Every byte 0.5 s apart: under a minute in all.
    assert!(bytes.len() < 120);
    let r = Inbound {
        body: trickle(&p, bytes.len(), Duration::from_millis(500), bytes),
        ..openai(&body)
    };
    let (out, reply) = run(&p, &g, r);
    assert_eq!(out.status, 200, "{reply}");
}
