//! Streamed answers and the response cache, on the fake platform: a stream
//! that completed is stored and replayed (to a stream or whole); one cut,
//! continued after its commit point, refused, or sent with `no-store` is
//! never stored.

use std::future::poll_fn;

use resilient_llm::gateway::{Gateway, Inbound, Outbound, Piece, Setup};
use resilient_llm::testing::{block_on, reply, BodyEnd, FakePlatform, Reply};
use resilient_llm::{Body, Headers, MemoryStore};
use resilient_llm::{SseDecoder, SseEvent};
use serde_json::{json, Value};

const PRIMARY: &str = "https://primary.test";

fn gateway(p: &FakePlatform, max_attempts: u32) -> Gateway<FakePlatform, MemoryStore> {
    gateway_with(p, max_attempts, json!({}))
}

fn gateway_with(
    p: &FakePlatform,
    max_attempts: u32,
    extra: Value,
) -> Gateway<FakePlatform, MemoryStore> {
    let mut config = json!({
        "providers": {
            "primary": { "kind": "openai", "baseUrl": PRIMARY, "apiKeyEnv": "K",
                "models": { "gpt": { "inputPricePerMtok": 2, "outputPricePerMtok": 8 } } }
        },
        "routes": { "default": [ { "provider": "primary", "model": "gpt" } ] },
        "cache": { "default": { "ttlSeconds": 60, "staleIfErrorSeconds": 600 } },
        "retry": { "maxAttempts": max_attempts, "baseDelayMs": 10, "maxDelayMs": 100 },
        "breaker": { "failureThreshold": 100 },
        "gateway": { "allowUnauthenticated": true }
    });
    if let (Some(c), Some(e)) = (config.as_object_mut(), extra.as_object()) {
        c.extend(e.clone());
    }
    let setup = Setup::load(Some(&config.to_string()), &|_| Some("sk-test".into())).expect("valid");
    let store = MemoryStore::new(setup.breaker());
    setup.into_gateway(p.clone(), store)
}

/// An OpenAI stream of `parts`, ending with `finish` (and usage, `[DONE]`).
fn openai_sse(parts: &[&str], finish: &str) -> Vec<String> {
    let chunk = |delta: Value, finish: Value| {
        let c = json!({ "id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-2026",
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
    out.push(chunk(json!({}), json!(finish)));
    let usage = json!({ "id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-2026",
        "choices": [], "usage": { "prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500 } });
    out.push(format!("data: {usage}\n\n"));
    out.push("data: [DONE]\n\n".into());
    out
}

fn sse(chunks: Vec<String>) -> Reply {
    reply(200)
        .header("content-type", "text/event-stream")
        .chunks(chunks)
}

fn ask(stream: bool, extra: &[(&str, &str)]) -> Inbound {
    let mut body =
        json!({ "model": "default", "messages": [{ "role": "user", "content": "the answer?" }] });
    if stream {
        body["stream"] = json!(true);
        body["stream_options"] = json!({ "include_usage": true });
    }
    let mut headers: Headers = [("content-type", "application/json")].into_iter().collect();
    for (n, v) in extra {
        headers.insert(n, *v);
    }
    Inbound {
        method: "POST".into(),
        path: "/v1/chat/completions".into(),
        headers,
        body: Body::full(body.to_string().into_bytes()),
    }
}

/// The response, its body's bytes (a stream read to its end) and its last
/// log line (a stream's end line, else the request's).
fn run(
    p: &FakePlatform,
    g: &Gateway<FakePlatform, MemoryStore>,
    r: Inbound,
) -> (Outbound, String, Value) {
    let mut out = block_on(p, g.handle(r));
    let mut bytes = std::mem::take(&mut out.body);
    let mut log = out.log.clone();
    if let Some(mut stream) = out.stream.take() {
        block_on(p, async {
            while let Some(piece) = poll_fn(|cx| stream.as_mut().poll_next(cx)).await {
                match piece {
                    Piece::Bytes(b) => bytes.extend(b),
                    Piece::Log(l) => log = l,
                }
            }
        });
    }
    let line = serde_json::from_str(&log).unwrap_or(Value::Null);
    (out, String::from_utf8(bytes).expect("UTF-8"), line)
}

/// The text an OpenAI stream said.
fn said(text: &str) -> String {
    let mut events: Vec<SseEvent> = Vec::new();
    let mut d = SseDecoder::default();
    d.feed(text.as_bytes(), &mut events).expect("SSE");
    events.extend(d.finish());
    events
        .iter()
        .filter(|e| e.data != "[DONE]")
        .filter_map(|e| serde_json::from_str::<Value>(&e.data).ok())
        .filter_map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect()
}

#[test]
fn a_completed_stream_is_stored_and_replayed_to_a_stream_and_whole() {
    let p = FakePlatform::new().at(1_800_000_000_000);
    p.script(PRIMARY, [sse(openai_sse(&["forty", "-two"], "stop"))]);
    let g = gateway(&p, 1);
    let (out, body, end) = run(&p, &g, ask(true, &[]));
    assert_eq!(out.headers.get("x-cache"), Some("miss"));
    assert_eq!(said(&body), "forty-two");
    assert!(
        end["cacheStoredBytes"].as_u64().is_some_and(|n| n > 0),
        "{end}"
    );

    p.advance(std::time::Duration::from_secs(3));
    let (out, body, line) = run(&p, &g, ask(true, &[]));
    assert_eq!(p.requests_to(PRIMARY), 1, "served from the cache");
    assert_eq!(out.headers.get("x-cache"), Some("hit"));
    assert_eq!(out.headers.get("age"), Some("3"));
    assert_eq!(said(&body), "forty-two");
    assert!(
        body.contains("\"completion_tokens\":500"),
        "usage as reported: {body}"
    );
    assert!(body.trim_end().ends_with("data: [DONE]"));
    assert_eq!(line["cache"], "hit");
    // 1000 input tokens at $2/Mtok, 500 output at $8/Mtok.
    assert_eq!(out.headers.get("x-cost-saved-usd"), Some("0.006"));

    let (out, body, _) = run(&p, &g, ask(false, &[]));
    assert_eq!(p.requests_to(PRIMARY), 1);
    assert_eq!(out.headers.get("x-cache"), Some("hit"));
    let answer: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(answer["choices"][0]["message"]["content"], "forty-two");
    assert_eq!(answer["choices"][0]["finish_reason"], "stop");
    assert_eq!(answer["usage"]["prompt_tokens"], 1000);
}

#[test]
fn a_cut_or_refused_stream_is_not_stored() {
    let p = FakePlatform::new();
    let cut = sse(openai_sse(&["The ", "answer ", "is"], "stop")).cut_after(2, BodyEnd::Reset);
    p.script(
        PRIMARY,
        [
            cut,
            sse(openai_sse(&["filtered"], "content_filter")),
            sse(openai_sse(&["fine"], "stop")),
        ],
    );
    let g = gateway(&p, 1);
    let (_, _, end) = run(&p, &g, ask(true, &[]));
    assert_eq!(end["outcome"], "interrupted");
    assert!(end.get("cacheStoredBytes").is_none(), "{end}");
    let (out, body, end) = run(&p, &g, ask(true, &[]));
    assert_eq!(
        out.headers.get("x-cache"),
        Some("miss"),
        "nothing was stored"
    );
    assert_eq!(said(&body), "filtered");
    assert!(end.get("cacheStoredBytes").is_none(), "refused: {end}");
    let (out, body, _) = run(&p, &g, ask(true, &[]));
    assert_eq!(out.headers.get("x-cache"), Some("miss"));
    assert_eq!(said(&body), "fine");
    assert_eq!(p.requests_to(PRIMARY), 3);
}

#[test]
fn a_stream_continued_after_its_commit_point_is_not_stored() {
    let p = FakePlatform::new();
    let cut = sse(openai_sse(&["The ", "answer ", "is"], "stop")).cut_after(2, BodyEnd::Reset);
    p.script(
        PRIMARY,
        [cut, sse(openai_sse(&["The ", "answer ", "is"], "stop"))],
    );
    let g = gateway(&p, 2);
    let (_, body, end) = run(&p, &g, ask(true, &[]));
    assert_eq!(said(&body), "The answer is", "continued whole");
    assert_eq!(end["outcome"], "complete");
    assert!(end.get("cacheStoredBytes").is_none(), "{end}");
    p.script(PRIMARY, [sse(openai_sse(&["again"], "stop"))]);
    let (out, body, _) = run(&p, &g, ask(true, &[]));
    assert_eq!(out.headers.get("x-cache"), Some("miss"));
    assert_eq!(said(&body), "again");
}

#[test]
fn a_stream_sent_with_no_store_is_not_stored() {
    let p = FakePlatform::new();
    p.script(
        PRIMARY,
        [
            sse(openai_sse(&["one"], "stop")),
            sse(openai_sse(&["two"], "stop")),
        ],
    );
    let g = gateway(&p, 1);
    let (_, _, end) = run(&p, &g, ask(true, &[("cache-control", "no-store")]));
    assert!(end.get("cacheStoredBytes").is_none(), "{end}");
    let (out, body, _) = run(&p, &g, ask(true, &[]));
    assert_eq!(out.headers.get("x-cache"), Some("miss"));
    assert_eq!(said(&body), "two");
}

#[test]
fn a_stored_stream_is_served_stale_when_the_route_fails() {
    let p = FakePlatform::new().at(1_800_000_000_000);
    p.script(PRIMARY, [sse(openai_sse(&["kept"], "stop")), reply(503)]);
    let g = gateway(&p, 1);
    run(&p, &g, ask(true, &[]));
    p.advance(std::time::Duration::from_secs(120));
    let (out, body, line) = run(&p, &g, ask(true, &[]));
    assert_eq!(p.requests_to(PRIMARY), 2, "past its TTL: asked again");
    assert_eq!(out.status, 200);
    assert_eq!(out.headers.get("x-cache"), Some("stale"));
    assert_eq!(said(&body), "kept");
    assert!(
        body.ends_with(": x-cache stale: every provider failed; this answer is 120 s old\n\n"),
        "{body}"
    );
    assert_eq!(line["cache"], "stale");
    assert!(!line["trail"].as_array().expect("the failures").is_empty());
}

#[test]
fn a_stale_answer_comes_in_the_stream_kept_alive_while_the_route_failed() {
    let p = FakePlatform::new().at(1_800_000_000_000);
    let busy = || reply(503).header("retry-after", "1");
    p.script(
        PRIMARY,
        [sse(openai_sse(&["kept"], "stop")), busy(), busy(), busy()],
    );
    let g = gateway_with(
        &p,
        3,
        json!({ "keepaliveMs": 500,
            "retry": { "maxAttempts": 3, "baseDelayMs": 10, "maxDelayMs": 5000 } }),
    );
    run(&p, &g, ask(true, &[]));
    p.advance(std::time::Duration::from_secs(90));
    let (out, body, end) = run(&p, &g, ask(true, &[]));
    assert_eq!(p.requests_to(PRIMARY), 4, "three tries, a second apart");
    assert_eq!(out.status, 200, "committed to keep the connection alive");
    assert!(body.starts_with(": keepalive\n\n"), "{body}");
    assert_eq!(said(&body), "kept");
    assert!(!body.contains("\"error\""), "no error event: {body}");
    assert!(
        body.ends_with(": x-cache stale: every provider failed; this answer is 90 s old\n\n"),
        "{body}"
    );
    assert_eq!(end["outcome"], "stale");
    assert_eq!(end["error"], "server");

    // The same failure without a stale answer to give is the error event.
    let other = Inbound {
        body: Body::full(
            json!({ "model": "default", "stream": true, "messages": [{ "role": "user", "content": "new" }] })
                .to_string()
                .into_bytes(),
        ),
        ..ask(true, &[])
    };
    p.script(PRIMARY, [busy(), busy(), busy()]);
    let (_, body, end) = run(&p, &g, other);
    assert!(body.contains("\"error\""), "{body}");
    assert_eq!(end["outcome"], "interrupted");

    // The stale answer counts as stale once the stream knew, not as the
    // miss its response went out as; the others as the misses they were.
    let get = Inbound {
        method: "GET".into(),
        path: "/metrics".into(),
        headers: Headers::new(),
        body: Body::full(Vec::new()),
    };
    let text = String::from_utf8(block_on(&p, g.handle(get)).body).unwrap();
    let count = |result: &str| {
        let name = format!("llm_gateway_cache_requests_total{{result=\"{result}\"}} ");
        let line = text.lines().find(|l| l.starts_with(&name));
        line.map(|l| l[name.len()..].to_string())
    };
    assert_eq!(count("stale").as_deref(), Some("1"), "{text}");
    assert_eq!(count("miss").as_deref(), Some("2"), "{text}");
    assert!(
        text.contains("llm_gateway_cache_saved_usd_total 0.006\n"),
        "the stale answer saved its 1,000 + 500 tokens at $2 + $8: {text}"
    );
}

#[test]
fn a_stream_passed_through_is_replayed_as_the_providers_own_events() {
    let p = FakePlatform::new().at(1_800_000_000_000);
    // Fields and an event the gateway does not know, which a re-encoded
    // answer would lose.
    let mut chunks = openai_sse(&["forty", "-two"], "stop");
    chunks[1] = chunks[1].replace("\"created\"", "\"system_fingerprint\":\"fp_7\",\"created\"");
    chunks.insert(2, ": provider comment\n\n".into());
    let sent: String = chunks.concat();
    p.script(PRIMARY, [sse(chunks.clone())]);
    let g = gateway(&p, 1);
    let (_, first, _) = run(&p, &g, ask(true, &[]));
    // Passed through as it came, the gateway's cost comment after it.
    assert_eq!(first, format!("{sent}: cost usd=0.006 answer=0.006\n\n"));

    let (out, again, _) = run(&p, &g, ask(true, &[]));
    assert_eq!(p.requests_to(PRIMARY), 1);
    assert_eq!(out.headers.get("x-cache"), Some("hit"));
    assert_eq!(again, sent, "the provider's own events, byte for byte");

    // A client that did not ask for usage (the same question: the key
    // leaves `stream_options` out) is not given the usage-only chunk.
    let mut plain = ask(true, &[]);
    plain.body = Body::full(
        json!({ "model": "default", "stream": true,
                "messages": [{ "role": "user", "content": "the answer?" }] })
        .to_string()
        .into_bytes(),
    );
    let (out, without, _) = run(&p, &g, plain);
    assert_eq!(out.headers.get("x-cache"), Some("hit"));
    let usage = chunks.iter().find(|c| c.contains("\"usage\"")).unwrap();
    assert_eq!(without, sent.replace(usage.as_str(), ""));
    assert!(without.contains("fp_7") && without.ends_with("data: [DONE]\n\n"));
}
