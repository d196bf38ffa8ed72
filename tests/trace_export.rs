//! Spans exported over OTLP/HTTP by the gateway, on the fake platform: the
//! export's body decoded with the official protobuf messages
//! (`opentelemetry-proto`) and checked against the GenAI conventions — the
//! server span of a request continued from the caller's trace, one client
//! span per attempt under it whose id is the one its `traceparent` named,
//! the failover between them; a breaker's moves on the attempts that made
//! them; a stream's spans at its end; a caller's
//! "not sampled" kept; a dead collector costing the answer nothing.
#![cfg(feature = "otlp")]

use std::future::poll_fn;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::trace::v1::{span::SpanKind, Span};
use prost::Message;
use resilient_llm::gateway::{Gateway, Inbound, Outbound, Piece, Setup};
use resilient_llm::testing::{block_on, hang, reply, FakePlatform, Reply};
use resilient_llm::{Body, Headers, MemoryStore};
use serde_json::{json, Value};

const PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
const TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const COLLECTOR: &str = "https://otel.test";
const TOKEN: &str = "Bearer otlp-secret-token";

fn gateway(p: &FakePlatform) -> Gateway<FakePlatform, MemoryStore> {
    gateway_with(p, json!({}))
}

/// The gateway with `extra`'s top-level settings added to the test's.
fn gateway_with(p: &FakePlatform, extra: Value) -> Gateway<FakePlatform, MemoryStore> {
    let mut config = json!({
        "providers": {
            "primary": { "kind": "openai", "baseUrl": "https://primary.test", "apiKey": "sk-p" },
            "backup": { "kind": "anthropic", "baseUrl": "https://backup.test:8443", "apiKey": "sk-b" }
        },
        "routes": { "default": [ { "provider": "primary", "model": "gpt" },
                                 { "provider": "backup", "model": "claude" } ] },
        "retry": { "maxAttempts": 2, "baseDelayMs": 100, "maxDelayMs": 100 },
        "gateway": { "allowUnauthenticated": true },
        "tracing": { "export": {
            "endpoint": format!("{COLLECTOR}/v1/traces"),
            "headersEnv": { "authorization": "OTLP_AUTH" },
            "serviceName": "edge-test", "timeoutMs": 2000
        } }
    });
    for (k, v) in extra.as_object().expect("an object") {
        config[k] = v.clone();
    }
    let secret = |name: &str| (name == "OTLP_AUTH").then(|| TOKEN.to_string());
    let setup = Setup::load(Some(&config.to_string()), &secret).expect("valid config");
    let store = MemoryStore::new(setup.breaker());
    setup.into_gateway(p.clone(), store)
}

fn ask(traceparent: Option<&str>, stream: bool) -> Inbound {
    let mut h: Headers = [("content-type", "application/json")].into_iter().collect();
    if let Some(tp) = traceparent {
        h.insert("traceparent", tp);
    }
    let body = json!({ "model": "default", "stream": stream,
                       "messages": [{ "role": "user", "content": "a secret question" }] });
    Inbound {
        method: "POST".into(),
        path: "/v1/chat/completions".into(),
        headers: h,
        body: Body::full(body.to_string().into_bytes()),
    }
}

fn anthropic_ok() -> String {
    json!({ "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-3",
            "content": [{ "type": "text", "text": "hello" }], "stop_reason": "end_turn",
            "usage": { "input_tokens": 3, "output_tokens": 1 } })
    .to_string()
}

fn openai_ok() -> String {
    json!({ "id": "x", "model": "gpt", "choices": [{ "index": 0, "finish_reason": "stop",
            "message": { "role": "assistant", "content": "ok" } }] })
    .to_string()
}

/// An OpenAI stream from `model` of `parts`, one chunk each, then its
/// finish and `[DONE]`.
fn openai_sse(model: &str, parts: &[&str]) -> Reply {
    let chunk = |delta: Value, finish: Option<&str>| {
        let c = json!({ "id": "c1", "model": model,
                        "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }] });
        format!("data: {c}\n\n")
    };
    let mut events: Vec<String> = parts
        .iter()
        .enumerate()
        .map(|(i, text)| match i {
            0 => chunk(json!({ "role": "assistant", "content": text }), None),
            _ => chunk(json!({ "content": text }), None),
        })
        .collect();
    events.push(chunk(json!({}), Some("stop")));
    events.push("data: [DONE]\n\n".to_string());
    reply(200)
        .header("content-type", "text/event-stream")
        .chunks(events)
}

/// The answer, its body (a stream read to its end) and its last log line.
fn run(p: &FakePlatform, g: &Gateway<FakePlatform, MemoryStore>, r: Inbound) -> (Outbound, String) {
    let mut out = block_on(p, g.handle(r));
    let mut log = out.log.clone();
    if let Some(mut stream) = out.stream.take() {
        block_on(p, async {
            while let Some(piece) = poll_fn(|cx| stream.as_mut().poll_next(cx)).await {
                if let Piece::Log(l) = piece {
                    log = l;
                }
            }
        });
    }
    (out, log)
}

/// Runs the gateway's pending export and decodes what reached the
/// collector.
fn exported(p: &FakePlatform, g: &Gateway<FakePlatform, MemoryStore>) -> Vec<Span> {
    let export = g.export_traces().expect("spans wait");
    block_on(p, export);
    let sent = p.requests();
    let r = sent
        .iter()
        .rev()
        .find(|r| r.url.starts_with(COLLECTOR))
        .expect("an export");
    assert_eq!(r.url, format!("{COLLECTOR}/v1/traces"));
    assert_eq!(
        r.headers.get("content-type"),
        Some("application/x-protobuf")
    );
    assert_eq!(r.headers.get("authorization"), Some(TOKEN));
    let req = ExportTraceServiceRequest::decode(r.body.as_slice()).expect("OTLP protobuf");
    let rs = &req.resource_spans[0];
    let res = rs.resource.as_ref().unwrap();
    assert_eq!(str_attr(&res.attributes, "service.name"), Some("edge-test"));
    let scope = &rs.scope_spans[0];
    assert_eq!(scope.scope.as_ref().unwrap().name, "resilient-llm");
    scope.spans.clone()
}

fn attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a Any> {
    attrs
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref()?.value.as_ref())
}

fn str_attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a str> {
    match attr(attrs, key)? {
        Any::StringValue(s) => Some(s),
        _ => None,
    }
}

fn int_attr(attrs: &[KeyValue], key: &str) -> Option<i64> {
    match attr(attrs, key)? {
        Any::IntValue(i) => Some(*i),
        _ => None,
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The span id each provider request's `traceparent` named, in order.
fn sent_spans(p: &FakePlatform) -> Vec<String> {
    p.requests()
        .iter()
        .filter(|r| !r.url.starts_with(COLLECTOR))
        .filter_map(|r| Some(r.headers.get("traceparent")?.split('-').nth(2)?.to_string()))
        .collect()
}

#[test]
fn a_failover_is_one_server_span_and_an_attempt_span_per_attempt_under_it() {
    let p = FakePlatform::new();
    p.script("https://primary.test", [reply(503), reply(503)]);
    p.script("https://backup.test", [reply(200).body(anthropic_ok())]);
    p.script(COLLECTOR, [reply(200)]);
    let g = gateway(&p);
    let (out, log) = run(&p, &g, ask(Some(PARENT), false));
    assert_eq!(out.status, 200);
    assert!(!log.contains("otlp-secret"), "{log}");
    let spans = exported(&p, &g);
    assert_eq!(spans.len(), 4, "the request and its three attempts");

    let server = &spans[0];
    assert_eq!(hex(&server.trace_id), TRACE);
    assert_eq!(
        hex(&server.parent_span_id),
        "b7ad6b7169203331",
        "the caller's span"
    );
    assert_eq!(server.kind, SpanKind::Server as i32);
    assert_eq!(server.name, "POST /v1/chat/completions");
    let a = &server.attributes;
    assert_eq!(str_attr(a, "gen_ai.operation.name"), Some("chat"));
    assert_eq!(str_attr(a, "gen_ai.request.model"), Some("default"));
    assert_eq!(str_attr(a, "http.request.method"), Some("POST"));
    assert_eq!(int_attr(a, "http.response.status_code"), Some(200));
    assert_eq!(int_attr(a, "resilient_llm.attempts"), Some(3));
    let events: Vec<&str> = server.events.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(events, ["retry", "failover"]);
    let retry = &server.events[0];
    let waited = p.sleeps()[0].as_millis() as i64; // the jittered backoff
    assert!(waited > 0);
    assert_eq!(
        int_attr(&retry.attributes, "resilient_llm.delay_ms"),
        Some(waited)
    );
    assert_eq!(str_attr(&retry.attributes, "error.type"), Some("server"));
    let failover = &server.events[1];
    assert_eq!(
        str_attr(&failover.attributes, "resilient_llm.from"),
        Some("primary/gpt")
    );
    assert_eq!(
        str_attr(&failover.attributes, "resilient_llm.to"),
        Some("backup/claude")
    );

    let attempts = &spans[1..];
    let ids: Vec<String> = attempts.iter().map(|s| hex(&s.span_id)).collect();
    assert_eq!(
        ids,
        sent_spans(&p),
        "each attempt's span is the one its traceparent named"
    );
    for s in attempts {
        assert_eq!(s.kind, SpanKind::Client as i32);
        assert_eq!(s.parent_span_id, server.span_id);
        assert_eq!(s.trace_id, server.trace_id);
        assert!(s.start_time_unix_nano >= server.start_time_unix_nano);
        assert!(s.end_time_unix_nano <= server.end_time_unix_nano);
    }
    let (first, second, last) = (&attempts[0], &attempts[1], &attempts[2]);
    assert_eq!(first.name, "chat gpt");
    assert_eq!(
        str_attr(&first.attributes, "gen_ai.provider.name"),
        Some("openai")
    );
    assert_eq!(
        str_attr(&first.attributes, "server.address"),
        Some("primary.test")
    );
    assert_eq!(str_attr(&first.attributes, "error.type"), Some("server"));
    assert_eq!(
        str_attr(&first.attributes, "resilient_llm.breaker.state"),
        Some("closed")
    );
    assert_eq!(
        int_attr(&first.attributes, "resilient_llm.attempt"),
        Some(1)
    );
    assert_eq!(
        int_attr(&second.attributes, "resilient_llm.attempt"),
        Some(2)
    );
    assert_eq!(first.status.as_ref().unwrap().code, 2, "an error status");

    let l = &last.attributes;
    assert_eq!(last.name, "chat claude");
    assert_eq!(str_attr(l, "gen_ai.provider.name"), Some("anthropic"));
    assert_eq!(str_attr(l, "server.address"), Some("backup.test"));
    assert_eq!(int_attr(l, "server.port"), Some(8443));
    assert_eq!(str_attr(l, "gen_ai.request.model"), Some("claude"));
    assert_eq!(str_attr(l, "gen_ai.response.model"), Some("claude-3"));
    assert_eq!(str_attr(l, "gen_ai.response.id"), Some("msg_1"));
    assert_eq!(int_attr(l, "gen_ai.usage.input_tokens"), Some(3));
    assert_eq!(int_attr(l, "gen_ai.usage.output_tokens"), Some(1));
    assert_eq!(attr(l, "error.type"), None);
    match attr(l, "gen_ai.response.finish_reasons") {
        Some(Any::ArrayValue(a)) => {
            assert_eq!(a.values[0].value, Some(Any::StringValue("stop".into())))
        }
        other => panic!("finish reasons: {other:?}"),
    }
    // Message contents are never recorded.
    let all = format!("{spans:?}");
    assert!(
        !all.contains("secret question") && !all.contains("hello"),
        "{all}"
    );
    assert!(g.export_traces().is_none(), "nothing left to send");
}

#[test]
fn a_stream_ends_its_spans_at_its_end() {
    let p = FakePlatform::new();
    let sse = openai_sse("gpt-live", &["hi"]).chunk_delay(std::time::Duration::from_millis(40));
    p.script("https://primary.test", [sse]);
    p.script(COLLECTOR, [reply(200)]);
    let g = gateway(&p);
    let mut out = block_on(&p, g.handle(ask(None, true)));
    assert_eq!(out.status, 200);
    assert!(
        g.export_traces().is_none(),
        "no span before the stream's end"
    );
    let mut stream = out.stream.take().expect("a stream");
    block_on(&p, async {
        while poll_fn(|cx| stream.as_mut().poll_next(cx)).await.is_some() {}
    });
    let spans = exported(&p, &g);
    assert_eq!(spans.len(), 2);
    let (server, attempt) = (&spans[0], &spans[1]);
    assert!(server.parent_span_id.is_empty(), "a trace started here");
    let names: Vec<&str> = server.events.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["stream.commit"]);
    assert!(
        server.end_time_unix_nano >= server.events[0].time_unix_nano + 80_000_000,
        "the span ends at the stream's end, not its commit"
    );
    assert_eq!(attempt.end_time_unix_nano, server.end_time_unix_nano);
    assert_eq!(
        str_attr(&attempt.attributes, "resilient_llm.outcome"),
        Some("ok")
    );
}

#[test]
fn a_callers_not_sampled_trace_is_not_recorded() {
    let p = FakePlatform::new();
    p.script("https://primary.test", [reply(200).body(openai_ok())]);
    let g = gateway(&p);
    let unsampled = PARENT.replace("-01", "-00");
    let (out, _) = run(&p, &g, ask(Some(&unsampled), false));
    assert_eq!(out.status, 200);
    assert!(g.export_traces().is_none());
    let sent = p.requests()[0]
        .headers
        .get("traceparent")
        .unwrap()
        .to_string();
    assert!(
        sent.ends_with("-00"),
        "the provider sees it is not sampled: {sent}"
    );
}

#[test]
fn a_dead_collector_costs_the_answer_nothing_and_is_counted() {
    let p = FakePlatform::new();
    p.script("https://primary.test", [reply(200).body(openai_ok())]);
    p.script(COLLECTOR, [hang()]);
    let g = gateway(&p);
    let (out, _) = run(&p, &g, ask(None, false));
    assert_eq!(out.status, 200, "answered before any export");
    let export = g.export_traces().expect("spans wait");
    block_on(&p, export); // the collector never answers: the timeout ends it
    let metrics = run(
        &p,
        &g,
        Inbound {
            method: "GET".into(),
            path: "/metrics".into(),
            headers: Headers::new(),
            body: Body::full(Vec::new()),
        },
    );
    let text = String::from_utf8(metrics.0.body).unwrap();
    assert!(
        text.contains("llm_gateway_trace_export_failures_total 1"),
        "{text}"
    );
    assert!(
        text.contains("llm_gateway_trace_spans_total{result=\"dropped\"} 2"),
        "{text}"
    );
}

/// The attempt span's events, by name, with the breaker's move if any.
fn moves(s: &Span) -> Vec<(String, Option<&str>, Option<&str>)> {
    s.events
        .iter()
        .map(|e| {
            let a = &e.attributes;
            let from = str_attr(a, "resilient_llm.breaker.from");
            (
                e.name.clone(),
                from,
                str_attr(a, "resilient_llm.breaker.to"),
            )
        })
        .collect()
}

/// `s` was let through in state `from` and its verdict moved the breaker
/// on to `to`: its one event.
fn assert_moved(s: &Span, from: &str, to: &str) {
    let admitted = str_attr(&s.attributes, "resilient_llm.breaker.state");
    assert_eq!(admitted, Some(from));
    let moved = ("breaker.transition".to_string(), Some(from), Some(to));
    assert_eq!(moves(s), [moved]);
}

#[test]
fn a_breaker_move_is_an_event_of_the_attempt_that_made_it() {
    let p = FakePlatform::new();
    p.script(
        "https://primary.test",
        [reply(503), reply(200).body(openai_ok())],
    );
    p.script("https://backup.test", [reply(200).body(anthropic_ok())]);
    p.script(COLLECTOR, [reply(200), reply(200)]);
    let g = gateway_with(
        &p,
        json!({ "retry": { "maxAttempts": 1 },
                "breaker": { "failureThreshold": 1, "cooldownMs": 1000 } }),
    );
    let (out, _) = run(&p, &g, ask(None, false));
    assert_eq!(out.status, 200);
    let spans = exported(&p, &g);
    assert_eq!(spans.len(), 3, "the request, the failure, the failover");
    let tripped = &spans[1];
    assert_moved(tripped, "closed", "open");
    assert_eq!(
        tripped.events[0].time_unix_nano, tripped.end_time_unix_nano,
        "at the verdict, the attempt's end"
    );
    assert!(
        moves(&spans[2]).is_empty(),
        "the backup's breaker stayed closed"
    );

    p.advance(std::time::Duration::from_millis(1_500));
    let (out, _) = run(&p, &g, ask(None, false));
    assert_eq!(out.status, 200);
    let spans = exported(&p, &g);
    assert_eq!(spans.len(), 2, "the probe answered");
    assert_moved(&spans[1], "half_open", "closed");
}

/// The gateway, recording message contents.
fn capturing(p: &FakePlatform) -> Gateway<FakePlatform, MemoryStore> {
    gateway_with(
        p,
        json!({ "tracing": { "export": {
            "endpoint": format!("{COLLECTOR}/v1/traces"),
            "headersEnv": { "authorization": "OTLP_AUTH" },
            "serviceName": "edge-test", "captureContent": true
        } } }),
    )
}

#[test]
fn contents_are_recorded_only_when_the_configuration_says_so() {
    let p = FakePlatform::new();
    p.script("https://primary.test", [reply(200).body(openai_ok())]);
    p.script(COLLECTOR, [reply(200)]);
    let g = capturing(&p);
    let (out, log) = run(&p, &g, ask(None, false));
    assert_eq!(out.status, 200);
    assert!(!log.contains("secret question"), "never in the log: {log}");
    let spans = exported(&p, &g);
    let input = str_attr(&spans[0].attributes, "gen_ai.input.messages").expect("recorded");
    let input: Value = serde_json::from_str(input).expect("JSON");
    assert_eq!(
        input,
        json!([{ "role": "user", "parts": [{ "type": "text", "content": "a secret question" }] }])
    );
    let output = str_attr(&spans[1].attributes, "gen_ai.output.messages").expect("recorded");
    let output: Value = serde_json::from_str(output).expect("JSON");
    assert_eq!(
        output,
        json!([{ "role": "assistant", "finish_reason": "stop",
                 "parts": [{ "type": "text", "content": "ok" }] }])
    );
}

#[test]
fn a_streams_recorded_output_is_the_text_it_gave() {
    let p = FakePlatform::new();
    let sse = openai_sse("gpt", &["hel", "lo"]);
    p.script("https://primary.test", [sse]);
    p.script(COLLECTOR, [reply(200)]);
    let g = capturing(&p);
    let (out, _) = run(&p, &g, ask(None, true));
    assert_eq!(out.status, 200);
    let spans = exported(&p, &g);
    assert!(str_attr(&spans[0].attributes, "gen_ai.input.messages").is_some());
    let output = str_attr(&spans[1].attributes, "gen_ai.output.messages").expect("recorded");
    let output: Value = serde_json::from_str(output).unwrap();
    assert_eq!(output[0]["parts"][0]["content"], "hello");
}
