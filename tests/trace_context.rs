//! W3C trace context through the gateway, on the fake platform: a client's
//! `traceparent` continued to every attempt (each with a span of its own,
//! the `tracestate` passed on), a trace started when it sent none or an
//! invalid one, the trace id in the log line and `x-trace-id`, and
//! `tracing.propagate: false` keeping it from the providers.

use resilient_llm::gateway::{Gateway, Inbound, Outbound, Setup};
use resilient_llm::testing::{block_on, reply, FakePlatform};
use resilient_llm::{Body, Headers, MemoryStore};
use serde_json::{json, Value};

const PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
const TRACE: &str = "0af7651916cd43dd8448eb211c80319c";

fn gateway(p: &FakePlatform, extra: Value) -> Gateway<FakePlatform, MemoryStore> {
    let mut config = json!({
        "providers": {
            "primary": { "kind": "openai", "baseUrl": "https://primary.test", "apiKey": "sk-p" },
            "backup": { "kind": "anthropic", "baseUrl": "https://backup.test", "apiKey": "sk-b" }
        },
        "routes": { "default": [ { "provider": "primary", "model": "gpt" },
                                 { "provider": "backup", "model": "claude" } ] },
        "retry": { "maxAttempts": 1 },
        "gateway": { "allowUnauthenticated": true }
    });
    if let (Some(c), Some(e)) = (config.as_object_mut(), extra.as_object()) {
        c.extend(e.clone());
    }
    let setup = Setup::load(Some(&config.to_string()), &|_| None).expect("valid config");
    let store = MemoryStore::new(setup.breaker());
    setup.into_gateway(p.clone(), store)
}

fn ask(headers: &[(&str, &str)], stream: bool) -> Inbound {
    let mut h: Headers = [("content-type", "application/json")].into_iter().collect();
    for (n, v) in headers {
        h.insert(n, *v);
    }
    let body = json!({ "model": "default", "stream": stream,
                       "messages": [{ "role": "user", "content": "hi" }] });
    Inbound {
        method: "POST".into(),
        path: "/v1/chat/completions".into(),
        headers: h,
        body: Body::full(body.to_string().into_bytes()),
    }
}

fn anthropic_ok() -> String {
    json!({ "id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
            "content": [{ "type": "text", "text": "hello" }], "stop_reason": "end_turn",
            "usage": { "input_tokens": 3, "output_tokens": 1 } })
    .to_string()
}

fn line(out: &Outbound) -> Value {
    serde_json::from_str(&out.log).expect("a JSON log line")
}

/// The `traceparent` each provider request carried, in order.
fn sent(p: &FakePlatform) -> Vec<(Option<String>, Option<String>)> {
    p.requests()
        .iter()
        .map(|r| {
            let get = |n: &str| r.headers.get(n).map(str::to_string);
            (get("traceparent"), get("tracestate"))
        })
        .collect()
}

#[test]
fn a_callers_trace_is_continued_to_every_attempt_each_with_a_span_of_its_own() {
    let p = FakePlatform::new().random([0.25, 0.5, 0.75, 0.125, 0.375, 0.625, 0.875]);
    p.script("https://primary.test", [reply(503)]);
    p.script("https://backup.test", [reply(200).body(anthropic_ok())]);
    let g = gateway(&p, json!({}));
    let state = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE";
    let out = block_on(
        &p,
        g.handle(ask(
            &[("traceparent", PARENT), ("tracestate", state)],
            false,
        )),
    );
    assert_eq!(out.status, 200);
    assert_eq!(out.headers.get("x-trace-id"), Some(TRACE));
    assert_eq!(line(&out)["traceId"], TRACE);
    let sent = sent(&p);
    assert_eq!(sent.len(), 2, "the primary's attempt, then the backup's");
    let mut spans = Vec::new();
    for (parent, st) in &sent {
        let parent = parent.as_deref().expect("a traceparent on every attempt");
        let fields: Vec<&str> = parent.split('-').collect();
        assert_eq!(fields.len(), 4, "{parent}");
        assert_eq!((fields[0], fields[1], fields[3]), ("00", TRACE, "01"));
        assert_eq!(fields[2].len(), 16);
        assert_ne!(fields[2], "b7ad6b7169203331", "the attempt's own span");
        spans.push(fields[2].to_string());
        assert_eq!(
            st.as_deref(),
            Some(state),
            "tracestate passed on as it came"
        );
    }
    assert_ne!(spans[0], spans[1], "each attempt its own span");
}

#[test]
fn without_a_valid_traceparent_a_trace_is_started() {
    for sent_by_client in [
        None,
        Some("00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01"),
    ] {
        let p = FakePlatform::new();
        p.script(
            "https://primary.test",
            [reply(200).body(
                json!({ "id": "c", "object": "chat.completion", "created": 1, "model": "gpt",
                        "choices": [{ "index": 0, "message": { "role": "assistant", "content": "hi" },
                                      "finish_reason": "stop" }] })
                .to_string(),
            )],
        );
        let g = gateway(&p, json!({}));
        let headers: Vec<(&str, &str)> = sent_by_client
            .map(|t| ("traceparent", t))
            .into_iter()
            .collect();
        let out = block_on(&p, g.handle(ask(&headers, false)));
        let id = out
            .headers
            .get("x-trace-id")
            .expect("a trace id")
            .to_string();
        assert_eq!(id.len(), 32);
        assert!(id
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        assert_ne!(id, "0".repeat(32));
        assert_ne!(id, TRACE, "an invalid traceparent is not continued");
        assert_eq!(line(&out)["traceId"], id.as_str());
        let (parent, state) = sent(&p).remove(0);
        let parent = parent.expect("a traceparent");
        assert!(parent.starts_with(&format!("00-{id}-")), "{parent}");
        assert!(parent.ends_with("-01"), "a started trace is sampled");
        assert_eq!(state, None);
    }
}

#[test]
fn a_stream_sends_it_too_and_propagate_false_keeps_it_from_the_providers() {
    let p = FakePlatform::new();
    let chunks = [
        "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\n",
        "data: [DONE]\n\n",
    ];
    let streamed = || {
        reply(200)
            .header("content-type", "text/event-stream")
            .chunks(chunks)
    };
    p.script("https://primary.test", [streamed(), streamed()]);
    let g = gateway(&p, json!({}));
    let mut out = block_on(&p, g.handle(ask(&[("traceparent", PARENT)], true)));
    out.stream.take();
    assert_eq!(out.headers.get("x-trace-id"), Some(TRACE));
    let (parent, _) = sent(&p).remove(0);
    assert!(parent
        .expect("a traceparent")
        .starts_with(&format!("00-{TRACE}-")));

    let p = FakePlatform::new();
    p.script("https://primary.test", [streamed()]);
    let g = gateway(&p, json!({ "tracing": { "propagate": false } }));
    let mut out = block_on(
        &p,
        g.handle(ask(&[("traceparent", PARENT), ("tracestate", "a=b")], true)),
    );
    out.stream.take();
    assert_eq!(
        out.headers.get("x-trace-id"),
        Some(TRACE),
        "still in the answer"
    );
    assert_eq!(sent(&p), [(None, None)], "nothing sent on");
}

#[test]
fn a_mistake_in_tracing_is_named_with_its_path() {
    let err = Setup::load(Some(r#"{"tracing":{"propagte":true}}"#), &|_| None)
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("tracing") && err.contains("propagte"), "{err}");
}

#[test]
fn the_other_endpoints_carry_it_too() {
    let p = FakePlatform::new();
    p.script(
        "https://backup.test",
        [reply(200).body(r#"{"input_tokens":17}"#)],
    );
    let g = gateway(&p, json!({}));
    let body = json!({ "model": "default", "messages": [{ "role": "user", "content": "hi" }] });
    let mut headers: Headers = [
        ("content-type", "application/json"),
        ("anthropic-version", "2023-06-01"),
        ("traceparent", PARENT),
    ]
    .into_iter()
    .collect();
    headers.insert("tracestate", "k=v");
    let out = block_on(
        &p,
        g.handle(Inbound {
            method: "POST".into(),
            path: "/v1/messages/count_tokens".into(),
            headers,
            body: Body::full(body.to_string().into_bytes()),
        }),
    );
    assert_eq!(out.status, 200);
    assert_eq!(out.headers.get("x-trace-id"), Some(TRACE));
    assert_eq!(line(&out)["traceId"], TRACE);
    let (parent, state) = sent(&p).remove(0);
    assert!(parent
        .expect("a traceparent")
        .starts_with(&format!("00-{TRACE}-")));
    assert_eq!(state.as_deref(), Some("k=v"));
}
