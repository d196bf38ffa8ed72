//! Quality escalation on the fake platform: validators from the
//! configuration, a rejected answer escalated to the next entry (and never
//! counted against the provider), the limits on escalation, what a route
//! answers when every answer was rejected, and streams buffered for
//! validation. No ports, no sleeps.

use std::rc::Rc;

use resilient_llm::gateway::{Gateway, Inbound, Outbound, Setup};
use resilient_llm::testing::{block_on, reply, FakePlatform};
use resilient_llm::{
    Attempt, Body, ChatRequest, Client, Config, Error, Headers, MemoryStore, Message, Quality,
    Validator,
};
use serde_json::{json, Value};

const KEY: &str = "client-key-123";
const BEARER: (&str, &str) = ("authorization", "Bearer client-key-123");

/// A cheap model first, a strong one second, a third as a last resort; the
/// route `extract` wants JSON with a `name`.
fn config(quality: Value) -> Value {
    json!({
        "providers": {
            "cheap": { "kind": "openai", "baseUrl": "https://cheap.test", "apiKeyEnv": "CHEAP_KEY" },
            "strong": { "kind": "anthropic", "baseUrl": "https://strong.test", "apiKeyEnv": "STRONG_KEY" },
            "last": { "kind": "openai", "baseUrl": "https://last.test", "apiKeyEnv": "CHEAP_KEY" }
        },
        "routes": {
            "extract": [
                { "provider": "cheap", "model": "cheap-1" },
                { "provider": "strong", "model": "strong-1" },
                { "provider": "last", "model": "last-1" }
            ],
            "plain": [ { "provider": "cheap", "model": "cheap-1" } ]
        },
        "retry": { "maxAttempts": 2, "baseDelayMs": 10, "maxDelayMs": 100 },
        "breaker": { "failureThreshold": 2, "cooldownMs": 10000 },
        "quality": quality,
        "gateway": { "clientKeysEnv": ["GATEWAY_KEY"] }
    })
}

/// Needs the `schema` feature (the `jsonSchema` validator): `cargo test --all-features` or
/// `--features testing,schema` runs the tests that use it.
#[cfg(feature = "schema")]
fn json_quality() -> Value {
    json!({ "extract": {
        "validators": [
            { "kind": "jsonSchema", "schema": {
                "type": "object", "required": ["name"],
                "properties": { "name": { "type": "string" } } } }
        ]
    }})
}

fn secret(name: &str) -> Option<String> {
    match name {
        "CHEAP_KEY" => Some("sk-cheap-secret".into()),
        "STRONG_KEY" => Some("sk-strong-secret".into()),
        "GATEWAY_KEY" => Some(KEY.into()),
        _ => None,
    }
}

fn gateway(p: &FakePlatform, config: &Value) -> Gateway<FakePlatform, MemoryStore> {
    let setup = Setup::load(Some(&config.to_string()), &secret).expect("valid config");
    let store = MemoryStore::new(setup.breaker());
    setup.into_gateway(p.clone(), store)
}

fn issues(config: &Value) -> Vec<(String, String)> {
    let cfg = Config::parse(&config.to_string()).expect("parses");
    match cfg.validate(&secret, &[]) {
        Ok(_) => Vec::new(),
        Err(e) => e.issues.into_iter().map(|i| (i.path, i.message)).collect(),
    }
}

fn openai_ok(model: &str, text: &str, finish: &str) -> String {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": model,
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": text }, "finish_reason": finish }],
        "usage": { "prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500 }
    })
    .to_string()
}

fn anthropic_ok(model: &str, text: &str) -> String {
    json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": model,
        "content": [{ "type": "text", "text": text }],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": { "input_tokens": 500, "output_tokens": 200 }
    })
    .to_string()
}

fn chat(model: &str, stream: bool) -> Inbound {
    let body = json!({ "model": model, "stream": stream,
                       "messages": [{ "role": "user", "content": "who?" }] });
    Inbound {
        method: "POST".into(),
        path: "/v1/chat/completions".into(),
        headers: [BEARER].into_iter().collect::<Headers>(),
        body: Body::full(body.to_string().into_bytes()),
    }
}

fn run(p: &FakePlatform, g: &Gateway<FakePlatform, MemoryStore>, r: Inbound) -> (Outbound, Value) {
    let out = block_on(p, g.handle(r));
    let body = serde_json::from_slice(&out.body).unwrap_or(Value::Null);
    (out, body)
}

fn log(out: &Outbound) -> Value {
    serde_json::from_str(&out.log).expect("a JSON log line")
}

// ------------------------------------------------------------ configuration

#[test]
#[cfg(feature = "schema")]
fn a_malformed_schema_is_a_config_error_at_its_place_in_the_schema() {
    let found = issues(&config(json!({ "extract": { "validators": [
        { "kind": "json" },
        { "kind": "jsonSchema", "schema": { "type": "object",
            "properties": { "age": { "type": "whole number" } } } }
    ]}})));
    assert_eq!(found.len(), 1, "{found:?}");
    let (path, message) = &found[0];
    assert_eq!(
        path,
        "quality.extract.validators[1].schema.properties.age.type"
    );
    assert!(
        message.starts_with("not a valid JSON Schema (draft 2020-12): "),
        "{message}"
    );
}

#[test]
fn every_quality_mistake_is_reported_with_its_path() {
    let found = issues(&config(json!({
        "extract": { "validators": [
            { "kind": "regex", "pattern": "(unclosed" },
            { "kind": "finishReason", "reject": ["length", "tired"] }
        ], "maxCostUsd": -1 },
        "nowhere": { "validators": [] }
    })));
    let paths: Vec<&str> = found.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "quality.extract.validators[0].pattern",
            "quality.extract.validators[1].reject[1]",
            "quality.extract.maxCostUsd",
            "quality.nowhere",
        ],
        "{found:?}"
    );
    assert!(found[0].1.starts_with("not a valid regex"), "{found:?}");
    assert_eq!(found[1].1, "unknown finish reason \"tired\"");
    assert_eq!(found[3].1, "unknown route \"nowhere\"");
}

#[test]
fn an_unknown_validator_kind_is_a_parse_error_with_its_path() {
    let text = config(json!({ "extract": { "validators": [{ "kind": "vibes" }] } })).to_string();
    let err = Config::parse(&text).unwrap_err();
    assert_eq!(err.issues[0].path, "quality.extract.validators[0].kind");
    assert!(
        err.issues[0].message.contains("unknown variant `vibes`"),
        "{err}"
    );
}

#[test]
#[cfg(feature = "schema")]
fn every_validator_kind_configures() {
    let found = issues(&config(json!({ "extract": { "validators": [
        { "kind": "json" },
        { "kind": "jsonSchema", "schema": { "type": "object" } },
        { "kind": "regex", "pattern": "^\\{" },
        { "kind": "minLength", "value": 2 },
        { "kind": "maxLength", "value": 2000 },
        { "kind": "finishReason", "reject": ["length", "max_tokens"] },
        { "kind": "notRefusal" }
    ], "maxEscalations": 1, "maxCostUsd": 0.05, "onExhausted": "error" }})));
    assert_eq!(found, []);
}

#[test]
#[cfg(not(feature = "schema"))]
fn the_json_schema_validator_is_refused_without_its_feature() {
    let found = issues(&config(json!({ "extract": { "validators": [
        { "kind": "json" },
        { "kind": "jsonSchema", "schema": { "type": "object" } }
    ]}})));
    assert_eq!(found.len(), 1, "{found:?}");
    let (path, message) = &found[0];
    assert_eq!(path, "quality.extract.validators[1]");
    assert!(
        message.starts_with("not in this build: cargo feature \"schema\""),
        "{message}"
    );
}

#[test]
fn every_validator_kind_but_json_schema_configures_in_every_build() {
    let found = issues(&config(json!({ "extract": { "validators": [
        { "kind": "json" },
        { "kind": "regex", "pattern": "^\\{" },
        { "kind": "minLength", "value": 2 },
        { "kind": "maxLength", "value": 2000 },
        { "kind": "finishReason", "reject": ["length", "max_tokens"] },
        { "kind": "notRefusal" }
    ], "maxEscalations": 1, "maxCostUsd": 0.05, "onExhausted": "error" }})));
    assert_eq!(found, []);
}

// --------------------------------------------------------------- escalation

#[test]
#[cfg(feature = "schema")]
fn invalid_json_from_the_cheap_model_escalates_to_the_strong_one() {
    let p = FakePlatform::new();
    p.script(
        "https://cheap.test",
        [reply(200).body(openai_ok(
            "cheap-1",
            "Sure! Here is the JSON: {name: Ada}",
            "stop",
        ))],
    );
    p.script(
        "https://strong.test",
        [reply(200).body(anthropic_ok("strong-1", r#"{"name":"Ada"}"#))],
    );
    let mut cfg = config(json_quality());
    cfg["providers"]["cheap"]["models"] =
        json!({ "cheap-1": { "inputPricePerMtok": 0.4, "outputPricePerMtok": 1.6 } });
    cfg["providers"]["strong"]["models"] =
        json!({ "strong-1": { "inputPricePerMtok": 3, "outputPricePerMtok": 15 } });
    let g = gateway(&p, &cfg);
    let (out, body) = run(&p, &g, chat("extract", false));
    assert_eq!(out.status, 200, "{body}");
    assert_eq!(
        body["choices"][0]["message"]["content"],
        r#"{"name":"Ada"}"#
    );
    assert_eq!(out.headers.get("x-served-by"), Some("strong/strong-1"));
    assert_eq!(out.headers.get("x-attempts"), Some("2"));
    let line = log(&out);
    assert_eq!(
        line["trail"][0]["outcome"]
            .as_str()
            .map(|s| s.split(':').next()),
        Some(Some("rejected"))
    );
    let outcome = line["trail"][0]["outcome"].as_str().unwrap();
    assert!(
        outcome.starts_with("rejected: jsonSchema: not JSON: "),
        "{outcome}"
    );
    assert_eq!(line["trail"][1]["outcome"], "ok");
    // The rejected answer's tokens were spent for nothing.
    assert_eq!(
        out.headers.get("x-discarded-usage"),
        Some("input_tokens=1000, output_tokens=500")
    );
    // Never retried: a provider that answered is asked once.
    assert_eq!(p.requests_to("https://cheap.test"), 1);
    // Both answers cost: the rejected cheap one (1000 in at $0.4, 500 out
    // at $1.6 per million: $0.0012) and the strong one (500 at $3, 200 at
    // $15: $0.0045), the answer's share only the strong one's.
    assert_eq!(out.headers.get("x-cost-usd"), Some("0.0057"));
    assert_eq!(out.headers.get("x-cost-usd-answer"), Some("0.0045"));
}

#[test]
#[cfg(feature = "schema")]
fn an_answer_that_passes_is_served_at_once() {
    let p = FakePlatform::new();
    p.script(
        "https://cheap.test",
        [reply(200).body(openai_ok("cheap-1", r#"{"name":"Ada"}"#, "stop"))],
    );
    let g = gateway(&p, &config(json_quality()));
    let (out, body) = run(&p, &g, chat("extract", false));
    assert_eq!(out.status, 200, "{body}");
    assert_eq!(out.headers.get("x-served-by"), Some("cheap/cheap-1"));
    assert_eq!(p.requests_to("https://strong.test"), 0);
    // A route without validators takes any answer.
    p.script(
        "https://cheap.test",
        [reply(200).body(openai_ok("cheap-1", "prose", "stop"))],
    );
    let (out, _) = run(&p, &g, chat("plain", false));
    assert_eq!(out.status, 200);
}

#[test]
#[cfg(feature = "schema")]
fn rejected_answers_are_counted_by_no_breaker_and_no_error_rate() {
    let p = FakePlatform::new();
    p.script(
        "https://cheap.test",
        (0..4).map(|_| reply(200).body(openai_ok("cheap-1", "not json", "stop"))),
    );
    p.script(
        "https://strong.test",
        (0..4).map(|_| reply(200).body(anthropic_ok("strong-1", r#"{"name":"Ada"}"#))),
    );
    let g = gateway(&p, &config(json_quality()));
    // Twice the breaker's threshold of rejections.
    for _ in 0..4 {
        let (out, _) = run(&p, &g, chat("extract", false));
        assert_eq!(out.status, 200);
    }
    assert_eq!(p.requests_to("https://cheap.test"), 4, "never skipped");
    let health = g.client().health();
    let cheap = health.iter().find(|h| h.provider == "cheap").unwrap();
    assert_eq!(cheap.state, resilient_llm::StateName::Closed);
    assert_eq!(cheap.consecutive_failures, 0);
    assert_eq!((cheap.requests, cheap.failures), (4, 0));
    assert_eq!(cheap.error_rate, 0.0);
}

#[test]
fn escalation_stops_at_max_escalations_and_gives_the_last_answer() {
    let p = FakePlatform::new();
    p.script(
        "https://cheap.test",
        [reply(200).body(openai_ok("cheap-1", "first", "stop"))],
    );
    p.script(
        "https://strong.test",
        [reply(200).body(anthropic_ok("strong-1", "second"))],
    );
    let quality = json!({ "extract": { "validators": [{ "kind": "json" }], "maxEscalations": 1 } });
    let g = gateway(&p, &config(quality));
    let (out, body) = run(&p, &g, chat("extract", false));
    assert_eq!(out.status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "second");
    assert_eq!(out.headers.get("x-served-by"), Some("strong/strong-1"));
    assert_eq!(p.requests_to("https://last.test"), 0, "one escalation only");
    let line = log(&out);
    let trail = line["trail"].as_array().unwrap();
    assert_eq!(trail.len(), 2);
    assert!(trail.iter().all(|t| t["outcome"]
        .as_str()
        .is_some_and(|o| o.starts_with("rejected: json: not JSON"))));
    // The answer given was not discarded; the first one was.
    assert_eq!(
        out.headers.get("x-discarded-usage"),
        Some("input_tokens=1000, output_tokens=500")
    );
}

#[test]
fn every_answer_rejected_with_on_exhausted_error_is_a_502_in_the_clients_format() {
    let p = FakePlatform::new();
    for (url, text) in [("https://cheap.test", "a"), ("https://last.test", "c")] {
        p.script(url, [reply(200).body(openai_ok("m", text, "length"))]);
    }
    p.script(
        "https://strong.test",
        [reply(200).body(anthropic_ok("strong-1", "b"))],
    );
    let quality = json!({ "extract": {
        "validators": [{ "kind": "minLength", "value": 5 }], "onExhausted": "error" } });
    let g = gateway(&p, &config(quality));
    let (out, body) = run(&p, &g, chat("extract", false));
    assert_eq!(out.status, 502, "{body}");
    assert_eq!(body["error"]["code"], "no_valid_answer");
    let message = body["error"]["message"].as_str().unwrap();
    assert_eq!(
        message,
        "no answer passed the route's validators (last: last/last-1: minLength: 1 characters, fewer than 5)"
    );
    assert_eq!(body["error"]["attempts"].as_array().map(Vec::len), Some(3));
    assert_eq!(out.headers.get("x-attempts"), Some("3"));
    assert_eq!(log(&out)["error"], "no_valid_answer");
}

#[test]
fn a_provider_failure_after_a_rejection_fails_over_and_keeps_the_rejected_answer() {
    let p = FakePlatform::new();
    p.script(
        "https://cheap.test",
        [reply(200).body(openai_ok("cheap-1", "cut sho", "length"))],
    );
    p.script("https://strong.test", [reply(401).body("{}")]);
    p.script(
        "https://last.test",
        [reply(503).body("{}"), reply(503).body("{}")],
    );
    let quality = json!({ "extract": {
        "validators": [{ "kind": "finishReason", "reject": ["length"] }] } });
    let g = gateway(&p, &config(quality));
    let (out, body) = run(&p, &g, chat("extract", false));
    assert_eq!(out.status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "cut sho");
    assert_eq!(out.headers.get("x-served-by"), Some("cheap/cheap-1"));
    let line = log(&out);
    let outcomes: Vec<&str> = line["trail"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(
        outcomes,
        [
            "rejected: finishReason: the model stopped for \"length\"",
            "auth",
            "server",
            "server"
        ]
    );
}

/// $1/$2 per million input/output tokens at cheap-1, $10/$30 at strong-1.
fn prices(a: &Attempt) -> Option<f64> {
    let (input, output) = match a.model.as_str() {
        "cheap-1" => (1.0, 2.0),
        "strong-1" => (10.0, 30.0),
        _ => return None,
    };
    let u = a.usage?;
    Some((u.input_tokens as f64 * input + u.output_tokens as f64 * output) / 1e6)
}

fn priced_client(p: &FakePlatform, cap: f64) -> Client<FakePlatform> {
    let cfg = Config::parse(&config(json!({})).to_string()).unwrap();
    cfg.client_builder(p.clone(), Vec::new(), &secret)
        .unwrap()
        .quality(
            "extract",
            Quality {
                validators: vec![Validator::Json],
                max_cost_usd: Some(cap),
                attempt_cost: Some(Rc::new(prices)),
                ..Quality::default()
            },
        )
        .build()
}

fn extract() -> ChatRequest {
    let mut r = ChatRequest::new(vec![Message::user("who?")]);
    r.model = Some("extract".into());
    r
}

#[test]
fn the_cost_cap_stops_escalation_once_spent() {
    // cheap-1's answer costs $0.002, strong-1's $0.011.
    let script = |p: &FakePlatform| {
        p.script(
            "https://cheap.test",
            [reply(200).body(openai_ok("cheap-1", "no", "stop"))],
        );
        p.script(
            "https://strong.test",
            [reply(200).body(anthropic_ok("strong-1", "still no"))],
        );
        p.script(
            "https://last.test",
            [reply(200).body(openai_ok("last-1", "{}", "stop"))],
        );
    };
    // Under $0.01: cheap's $0.002 allows one escalation, strong's brings
    // the total to $0.013 and stops the walk before the last entry.
    let p = FakePlatform::new();
    script(&p);
    let reply = block_on(&p, priced_client(&p, 0.01).chat(extract())).unwrap();
    assert_eq!(reply.served_by.provider, "strong");
    assert_eq!(reply.response.text, "still no");
    assert_eq!(p.requests_to("https://last.test"), 0);
    // Under $0.02 the third entry is reached, and its answer passes.
    let p = FakePlatform::new();
    script(&p);
    let reply = block_on(&p, priced_client(&p, 0.02).chat(extract())).unwrap();
    assert_eq!(reply.served_by.provider, "last");
    assert_eq!(reply.attempts.len(), 3);
    // Under $0.001 the cheap answer alone spends it: no escalation at all.
    let p = FakePlatform::new();
    script(&p);
    let reply = block_on(&p, priced_client(&p, 0.001).chat(extract())).unwrap();
    assert_eq!(reply.served_by.provider, "cheap");
    assert_eq!(p.requests_to("https://strong.test"), 0);
    assert!(reply.attempts[0].rejection().is_some());
}

#[test]
fn the_client_api_gives_the_rejections_in_its_attempts() {
    let p = FakePlatform::new();
    p.script(
        "https://cheap.test",
        [reply(200).body(openai_ok("cheap-1", "nope", "stop"))],
    );
    p.script(
        "https://strong.test",
        [reply(200).body(anthropic_ok("strong-1", "nope"))],
    );
    p.script(
        "https://last.test",
        [reply(200).body(openai_ok("last-1", "nope", "stop"))],
    );
    let quality =
        json!({ "extract": { "validators": [{ "kind": "json" }], "onExhausted": "error" } });
    let cfg = Config::parse(&config(quality).to_string()).unwrap();
    let client = cfg.client(p.clone(), Vec::new(), &secret).unwrap();
    let err = block_on(&p, client.chat(extract())).unwrap_err();
    let Error::NoValidAnswer { attempts } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(err.status(), 502);
    assert_eq!(attempts.len(), 3);
    assert!(attempts
        .iter()
        .all(|a| a.error().is_none() && a.rejection().is_some()));
    assert_eq!(
        attempts[1].to_string(),
        "strong/strong-1 #1 after 0 ms: rejected: json: not JSON: expected ident at line 1 column 2"
    );
}

// ---------------------------------------------------------------- streaming

#[test]
#[cfg(feature = "schema")]
fn a_stream_on_a_validated_route_is_buffered_then_sent_as_events() {
    let p = FakePlatform::new();
    p.script(
        "https://cheap.test",
        [reply(200).body(openai_ok("cheap-1", "{name: Ada}", "stop"))],
    );
    p.script(
        "https://strong.test",
        [reply(200).body(anthropic_ok("strong-1", r#"{"name":"Ada"}"#))],
    );
    let g = gateway(&p, &config(json_quality()));
    let (out, _) = run(&p, &g, chat("extract", true));
    assert_eq!(out.status, 200);
    assert_eq!(
        out.headers.get("content-type"),
        Some("text/event-stream; charset=utf-8")
    );
    assert_eq!(out.headers.get("x-served-by"), Some("strong/strong-1"));
    // The providers were asked for whole answers.
    for sent in p.requests() {
        let body: Value = serde_json::from_slice(&sent.body).unwrap();
        assert_ne!(body["stream"], true, "{body}");
    }
    let text = String::from_utf8(out.body.clone()).unwrap();
    let chunks: Vec<Value> = text
        .split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let content: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(content, r#"{"name":"Ada"}"#, "only the valid answer");
    assert_eq!(
        chunks.last().unwrap()["choices"][0]["finish_reason"],
        "stop"
    );
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    let line = log(&out);
    assert_eq!(line["stream"], true);
    assert_eq!(line["attempts"], 2);
}

#[test]
#[cfg(feature = "schema")]
fn an_anthropic_stream_on_a_validated_route_gets_messages_events() {
    let p = FakePlatform::new();
    p.script(
        "https://cheap.test",
        [reply(200).body(openai_ok("cheap-1", r#"{"name":"Ada"}"#, "stop"))],
    );
    let g = gateway(&p, &config(json_quality()));
    let body = json!({ "model": "extract", "stream": true, "max_tokens": 50,
                       "messages": [{ "role": "user", "content": "who?" }] });
    let out = block_on(
        &p,
        g.handle(Inbound {
            method: "POST".into(),
            path: "/v1/messages".into(),
            headers: [BEARER].into_iter().collect::<Headers>(),
            body: Body::full(body.to_string().into_bytes()),
        }),
    );
    assert_eq!(out.status, 200);
    let text = String::from_utf8(out.body).unwrap();
    let events: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("event: "))
        .collect();
    assert_eq!(
        events,
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    assert!(text.contains(r#"{\"name\":\"Ada\"}"#), "{text}");
}

#[test]
fn a_stream_whose_answers_all_fail_gets_the_json_error_before_any_event() {
    let p = FakePlatform::new();
    p.script(
        "https://cheap.test",
        [reply(200).body(openai_ok("cheap-1", "x", "stop"))],
    );
    let quality = json!({ "extract": { "validators": [{ "kind": "json" }],
                                       "maxEscalations": 0, "onExhausted": "error" } });
    let g = gateway(&p, &config(quality));
    let (out, body) = run(&p, &g, chat("extract", true));
    assert_eq!(out.status, 502, "{body}");
    assert_eq!(body["error"]["code"], "no_valid_answer");
    assert_eq!(p.requests_to("https://strong.test"), 0);
}
