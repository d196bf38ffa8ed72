//! A streamed request kept alive while nothing is committed (issue 13,
//! part 5): past `keepaliveMs` without a first item the gateway answers
//! `200 text/event-stream` and writes what the client's format ignores
//! (an SSE comment for OpenAI clients, Anthropic `ping` events) until the
//! answer, or its error event, comes.

use resilient_llm::gateway::{Gateway, Inbound, Outbound, Piece, Setup};
use resilient_llm::testing::{block_on, reply, FakePlatform, Reply};
use resilient_llm::{Body, Headers, MemoryStore, Platform};
use serde_json::{json, Value};
use std::future::poll_fn;

fn gateway(p: &FakePlatform, extra: Value) -> Gateway<FakePlatform, MemoryStore> {
    let mut config = json!({
        "providers": {
            "primary": { "kind": "openai", "baseUrl": "https://primary.test", "apiKeyEnv": "K" },
            "backup": { "kind": "anthropic", "baseUrl": "https://backup.test", "apiKeyEnv": "K" }
        },
        "routes": { "default": [ { "provider": "primary", "model": "gpt-big" }, { "provider": "backup", "model": "claude-small" } ] },
        "retry": { "maxAttempts": 3, "baseDelayMs": 10, "maxDelayMs": 5000 },
        "keepaliveMs": 500,
        "gateway": { "allowUnauthenticated": true }
    });
    if let (Some(c), Some(e)) = (config.as_object_mut(), extra.as_object()) {
        c.extend(e.clone());
    }
    let setup = Setup::load(Some(&config.to_string()), &|_| Some("sk-test".into())).expect("valid");
    let store = MemoryStore::new(setup.breaker());
    setup.into_gateway(p.clone(), store)
}

fn openai_sse(parts: &[&str]) -> Reply {
    let chunk = |delta: Value, finish: Value| {
        let c = json!({ "id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-big",
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
    out.push("data: [DONE]\n\n".into());
    reply(200)
        .header("content-type", "text/event-stream")
        .chunks(out)
}

fn busy() -> Reply {
    reply(503)
        .header("retry-after", "1")
        .body(r#"{"error":{"message":"overloaded","type":"server_error"}}"#)
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

/// The response, each piece of its body with the time it came, and the
/// end-of-stream log line.
fn run(
    p: &FakePlatform,
    g: &Gateway<FakePlatform, MemoryStore>,
    r: Inbound,
) -> (Outbound, Vec<(u64, String)>, Option<String>) {
    let mut out = block_on(p, g.handle(r));
    let sent_at = p.now();
    let Some(mut stream) = out.stream.take() else {
        return (out, Vec::new(), None);
    };
    let mut pieces = vec![(sent_at, String::new())];
    let mut log = None;
    block_on(p, async {
        while let Some(piece) = poll_fn(|cx| stream.as_mut().poll_next(cx)).await {
            match piece {
                Piece::Bytes(b) => pieces.push((p.now(), String::from_utf8(b).unwrap())),
                Piece::Log(l) => log = Some(l),
            }
        }
    });
    (out, pieces, log)
}

#[test]
fn an_openai_client_gets_keepalive_comments_while_the_gateway_retries() {
    let p = FakePlatform::new();
    // Busy twice, Retry-After 1 s each: the answer starts at 2 s.
    p.script(
        "https://primary.test",
        [busy(), busy(), openai_sse(&["Hel", "lo"])],
    );
    let g = gateway(&p, json!({}));
    let body = json!({ "model": "default", "stream": true, "messages": [{ "role": "user", "content": "hi" }] });
    let (out, pieces, log) = run(&p, &g, post("/v1/chat/completions", body));
    assert_eq!(out.status, 200);
    assert_eq!(
        out.headers.get("content-type"),
        Some("text/event-stream; charset=utf-8")
    );
    assert_eq!(
        out.headers.get("x-attempts"),
        None,
        "not known when the headers went"
    );
    assert_eq!(
        pieces[0].0, 500,
        "the response went out when the wait passed keepaliveMs"
    );
    let kept: Vec<u64> = pieces
        .iter()
        .filter(|(_, b)| b == ": keepalive\n\n")
        .map(|(at, _)| *at)
        .collect();
    assert_eq!(
        kept,
        [500, 1000, 1500],
        "one at once, then one every 500 ms until the answer"
    );
    let all: String = pieces.iter().map(|(_, b)| b.as_str()).collect();
    let answer = &all[all.find("data:").unwrap()..];
    assert!(!answer.contains("keepalive"), "none once the answer flows");
    assert!(
        answer.contains("\"Hel\"") && answer.contains("\"lo\""),
        "{answer}"
    );
    assert!(answer.ends_with("data: [DONE]\n\n"), "{answer}");
    assert_eq!(p.requests_to("https://primary.test"), 3);
    let log: Value = serde_json::from_str(&log.unwrap()).unwrap();
    assert_eq!(log["outcome"], "complete");
    assert_eq!(log["attempts"], 3);
}

#[test]
fn an_anthropic_client_gets_pings_then_an_error_event_when_nothing_answers() {
    let p = FakePlatform::new();
    p.script("https://primary.test", [busy(), busy(), busy()]);
    p.script(
        "https://backup.test",
        [reply(401).body(
            r#"{"type":"error","error":{"type":"authentication_error","message":"bad key"}}"#,
        )],
    );
    let g = gateway(&p, json!({}));
    let body = json!({ "model": "default", "max_tokens": 10, "stream": true, "messages": [{ "role": "user", "content": "hi" }] });
    let (out, pieces, log) = run(&p, &g, post("/v1/messages", body));
    assert_eq!(out.status, 200, "the headers went before the failure");
    let all: String = pieces.iter().map(|(_, b)| b.as_str()).collect();
    let pings = all
        .matches("event: ping\ndata: {\"type\": \"ping\"}\n\n")
        .count();
    assert_eq!(
        pings, 3,
        "at 500, 1000 and 1500 ms; the last failure at 2000: {all}"
    );
    assert!(
        !all.contains("message_start") && !all.contains("message_stop"),
        "{all}"
    );
    let tail = &all[all.rfind("event: ").unwrap()..];
    assert!(tail.starts_with("event: error\n"), "{all}");
    assert!(
        tail.contains("authentication_error") || tail.contains("bad key"),
        "{tail}"
    );
    let log: Value = serde_json::from_str(&log.unwrap()).unwrap();
    assert_eq!(log["outcome"], "interrupted");
}

#[test]
fn a_failure_before_keepalive_ms_is_still_an_http_status() {
    let p = FakePlatform::new();
    p.script(
        "https://primary.test",
        [reply(400).body(r#"{"error":{"message":"bad","type":"invalid_request_error"}}"#)],
    );
    let g = gateway(&p, json!({ "keepaliveMs": 5000 }));
    let body = json!({ "model": "default", "stream": true, "messages": [{ "role": "user", "content": "hi" }] });
    let (out, pieces, _) = run(&p, &g, post("/v1/chat/completions", body));
    assert_eq!(out.status, 400);
    assert!(pieces.is_empty());
}
