//! The edge proxy's request handling on the fake platform: routing, auth,
//! limits, both client formats, failover headers, errors and config
//! problems. No ports, no sleeps.

use resilient_llm::gateway::{config_error, Gateway, Inbound, Outbound, Setup};
use resilient_llm::testing::{block_on, reply, FakePlatform};
use resilient_llm::{Body, Headers, MemoryStore, Platform};
use serde_json::{json, Value};

const KEY: &str = "client-key-123";

fn config() -> Value {
    json!({
        "providers": {
            "primary": { "kind": "openai", "baseUrl": "https://primary.test", "apiKeyEnv": "PRIMARY_KEY" },
            "backup": { "kind": "anthropic", "baseUrl": "https://backup.test", "apiKeyEnv": "BACKUP_KEY" }
        },
        "routes": {
            "default": [
                { "provider": "primary", "model": "gpt-big" },
                { "provider": "backup", "model": "claude-small" }
            ],
            "fast": [ { "provider": "backup", "model": "claude-small" } ]
        },
        "retry": { "maxAttempts": 2, "baseDelayMs": 10, "maxDelayMs": 100 },
        "breaker": { "failureThreshold": 2, "cooldownMs": 10000 },
        "limits": { "maxRequestBytes": 2000 },
        "gateway": { "clientKeysEnv": ["GATEWAY_KEY"] }
    })
}

fn secret(name: &str) -> Option<String> {
    match name {
        "PRIMARY_KEY" => Some("sk-primary-secret".into()),
        "BACKUP_KEY" => Some("sk-backup-secret".into()),
        "GATEWAY_KEY" => Some(KEY.into()),
        _ => None,
    }
}

fn gateway(p: &FakePlatform, config: &Value) -> Gateway<FakePlatform, MemoryStore> {
    let setup = Setup::load(Some(&config.to_string()), &secret).expect("valid config");
    let store = MemoryStore::new(setup.breaker());
    setup.into_gateway(p.clone(), store)
}

fn openai_ok(model: &str, text: &str) -> String {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": model,
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": text }, "finish_reason": "stop" }],
        "usage": { "prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5 }
    })
    .to_string()
}

fn anthropic_ok(model: &str, text: &str) -> String {
    json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": model,
        "content": [{ "type": "text", "text": text }],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": { "input_tokens": 3, "output_tokens": 2 }
    })
    .to_string()
}

fn req(method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Inbound {
    Inbound {
        method: method.into(),
        path: path.into(),
        headers: headers.iter().copied().collect::<Headers>(),
        body: Body::full(body.as_bytes().to_vec()),
    }
}

/// An authorized `POST /v1/chat/completions` of `body`.
fn chat_completions(body: &str) -> Inbound {
    req("POST", "/v1/chat/completions", &[BEARER], body)
}

fn openai_chat(model: &str) -> String {
    json!({ "model": model, "messages": [{ "role": "user", "content": "hi" }] }).to_string()
}

fn anthropic_chat(model: &str) -> String {
    json!({ "model": model, "max_tokens": 50, "messages": [{ "role": "user", "content": "hi" }] })
        .to_string()
}

const BEARER: (&str, &str) = ("authorization", "Bearer client-key-123");

fn run(p: &FakePlatform, g: &Gateway<FakePlatform, MemoryStore>, r: Inbound) -> (Outbound, Value) {
    let out = block_on(p, g.handle(r));
    let body: Value = serde_json::from_slice(&out.body).expect("a JSON body");
    (out, body)
}

#[test]
fn healthy_openai_request() {
    let p = FakePlatform::new().at(1_700_000_000_000);
    p.script(
        "https://primary.test",
        [reply(200).body(openai_ok("gpt-big-2025", "hello"))],
    );
    let g = gateway(&p, &config());
    let (out, body) = run(&p, &g, chat_completions(&openai_chat("default")));
    assert_eq!(out.status, 200, "{body}");
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["choices"][0]["message"]["content"], "hello");
    assert_eq!(body["model"], "gpt-big-2025", "the model that answered");
    assert_eq!(out.headers.get("x-served-by"), Some("primary/gpt-big"));
    assert_eq!(out.headers.get("x-attempts"), Some("1"));
    assert!(out
        .headers
        .get("x-request-id")
        .is_some_and(|id| id.len() == 20));
    // The provider got its own key, never the client's.
    let sent = &p.requests()[0];
    assert_eq!(
        sent.headers.get("authorization"),
        Some("Bearer sk-primary-secret")
    );
    let log: Value = serde_json::from_str(&out.log).unwrap();
    assert_eq!(log["servedBy"], "primary/gpt-big");
    assert_eq!(log["route"], "default");
    assert_eq!(log["status"], 200);
    assert!(!out.log.contains("secret") && !out.log.contains(KEY));
}

#[test]
fn an_anthropic_client_is_served_by_an_openai_provider() {
    let p = FakePlatform::new();
    p.script(
        "https://primary.test",
        [reply(200).body(openai_ok("gpt-big", "translated"))],
    );
    let g = gateway(&p, &config());
    let (out, body) = run(
        &p,
        &g,
        req(
            "POST",
            "/v1/messages",
            &[("x-api-key", KEY), ("x-request-id", "req-abcdef12")],
            &anthropic_chat("default"),
        ),
    );
    assert_eq!(out.status, 200, "{body}");
    assert_eq!(body["type"], "message");
    assert_eq!(body["content"][0]["text"], "translated");
    assert_eq!(body["id"], "msg_req-abcdef12");
    assert_eq!(out.headers.get("x-request-id"), Some("req-abcdef12"));
}

#[test]
fn failover_reports_the_fallback_and_every_attempt() {
    let p = FakePlatform::new();
    p.script("https://primary.test", [reply(503), reply(503)]);
    p.script(
        "https://backup.test",
        [reply(200).body(anthropic_ok("claude-small-1", "from backup"))],
    );
    let g = gateway(&p, &config());
    let (out, body) = run(&p, &g, chat_completions(&openai_chat("default")));
    assert_eq!(out.status, 200, "{body}");
    assert_eq!(body["model"], "claude-small-1");
    assert_eq!(out.headers.get("x-served-by"), Some("backup/claude-small"));
    assert_eq!(out.headers.get("x-attempts"), Some("3"));
    let log: Value = serde_json::from_str(&out.log).unwrap();
    assert_eq!(log["trail"].as_array().unwrap().len(), 3);
    assert_eq!(log["trail"][0]["outcome"], "server");
}

#[test]
fn everything_failing_is_a_503_with_the_attempts_and_retry_after() {
    let p = FakePlatform::new();
    p.script(
        "https://primary.test",
        [reply(429).header("retry-after", "7"), reply(503)],
    );
    p.script("https://backup.test", [reply(529), reply(529)]);
    let g = gateway(&p, &config());
    let (out, body) = run(&p, &g, chat_completions(&openai_chat("default")));
    assert_eq!(out.status, 503, "{body}");
    assert_eq!(body["error"]["code"], "all_providers_failed");
    assert_eq!(body["error"]["type"], "server_error");
    // The 429 asks for longer than maxDelayMs: failed over at once.
    assert_eq!(body["error"]["attempts"].as_array().unwrap().len(), 3);
    assert_eq!(out.headers.get("retry-after"), Some("7"));
    let (out, body) = run(
        &p,
        &g,
        req("POST", "/v1/messages", &[BEARER], &anthropic_chat("fast")),
    );
    assert_eq!(out.status, 503);
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "api_error");
}

#[test]
fn a_content_filter_refusal_is_returned_as_is() {
    let p = FakePlatform::new();
    let refusal = json!({"error": {"message": "Your request was rejected by our safety system", "type": "invalid_request_error", "code": "content_policy_violation"}});
    p.script(
        "https://primary.test",
        [reply(400).body(refusal.to_string())],
    );
    let g = gateway(&p, &config());
    let (out, body) = run(&p, &g, chat_completions(&openai_chat("default")));
    assert_eq!(out.status, 400, "{body}");
    assert_eq!(body["error"]["code"], "content_policy_violation");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("safety system"));
    assert_eq!(p.requests().len(), 1, "neither retried nor failed over");
}

#[test]
fn auth_is_required_and_answered_in_the_clients_format() {
    let p = FakePlatform::new();
    let g = gateway(&p, &config());
    let (out, body) = run(
        &p,
        &g,
        req("POST", "/v1/chat/completions", &[], &openai_chat("default")),
    );
    assert_eq!(out.status, 401);
    assert_eq!(body["error"]["type"], "authentication_error");
    let (out, body) = run(
        &p,
        &g,
        req(
            "POST",
            "/v1/messages",
            &[("x-api-key", "client-key-124")],
            &anthropic_chat("default"),
        ),
    );
    assert_eq!(out.status, 401);
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "authentication_error");
    let (out, _) = run(
        &p,
        &g,
        req(
            "GET",
            "/health",
            &[("authorization", "Bearer client-key-12")],
            "",
        ),
    );
    assert_eq!(out.status, 401);
    let (out, _) = run(
        &p,
        &g,
        req(
            "GET",
            "/v1/models",
            &[("authorization", "Basic client-key-123")],
            "",
        ),
    );
    assert_eq!(out.status, 401);
    assert!(p.requests().is_empty());
    let log: Value = serde_json::from_str(&out.log).unwrap();
    assert_eq!(log["error"], "unauthorized");
}

#[test]
fn bad_input_gets_the_right_status_in_the_right_format() {
    let p = FakePlatform::new();
    let g = gateway(&p, &config());
    let cases: Vec<(Inbound, u16, &str)> = vec![
        (
            req("POST", "/v1/chat/completions", &[BEARER], "{not json"),
            400,
            "openai",
        ),
        (
            req("POST", "/v1/messages", &[BEARER], "{not json"),
            400,
            "anthropic",
        ),
        (chat_completions(r#"{"model":"default"}"#), 400, "openai"),
        (
            req(
                "POST",
                "/v1/messages",
                &[BEARER],
                r#"{"model":"default","max_tokens":5}"#,
            ),
            400,
            "anthropic",
        ),
        (
            chat_completions(&openai_chat("no-such-model")),
            404,
            "openai",
        ),
        (
            req(
                "POST",
                "/v1/messages",
                &[BEARER],
                &anthropic_chat("no-such-model"),
            ),
            404,
            "anthropic",
        ),
        (
            req("GET", "/v1/chat/completions", &[BEARER], ""),
            405,
            "openai",
        ),
        (req("PUT", "/v1/messages", &[BEARER], ""), 405, "anthropic"),
        (req("GET", "/v2/nothing", &[BEARER], ""), 404, "openai"),
        (
            req("POST", "/v1/chat/completions", &[BEARER], &"x".repeat(2001)),
            413,
            "openai",
        ),
        (
            req(
                "POST",
                "/v1/messages",
                &[BEARER, ("content-length", "999999")],
                "",
            ),
            413,
            "anthropic",
        ),
    ];
    for (r, status, format) in cases {
        let what = format!("{} {}", r.method, r.path);
        let (out, body) = run(&p, &g, r);
        assert_eq!(out.status, status, "{what}: {body}");
        match format {
            "openai" => assert!(body["error"]["message"].is_string(), "{what}: {body}"),
            _ => assert_eq!(body["type"], "error", "{what}: {body}"),
        }
        if status == 405 {
            assert!(out.headers.get("allow").is_some());
        }
    }
    assert!(p.requests().is_empty(), "nothing was forwarded");
}

#[test]
fn health_and_models_list_the_configuration() {
    let p = FakePlatform::new();
    p.script("https://primary.test", [reply(503), reply(503)]);
    p.script(
        "https://backup.test",
        [reply(200).body(anthropic_ok("claude-small", "ok"))],
    );
    let g = gateway(&p, &config());
    run(&p, &g, chat_completions(&openai_chat("default")));
    let (out, body) = run(&p, &g, req("GET", "/health", &[BEARER], ""));
    assert_eq!(out.status, 200);
    let primary = &body["providers"][1];
    assert_eq!(primary["provider"], "primary");
    assert_eq!(primary["lastFailure"]["kind"], "server");
    assert!(primary["latencyMs"]["p99"].is_number());
    let (_, body) = run(&p, &g, req("GET", "/v1/models", &[BEARER], ""));
    let ids: Vec<&str> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["default", "fast"]);
    let (_, body) = run(
        &p,
        &g,
        req(
            "GET",
            "/v1/models",
            &[BEARER, ("anthropic-version", "2023-06-01")],
            "",
        ),
    );
    assert_eq!(body["data"][0]["type"], "model");
}

#[test]
fn config_problems_are_all_reported_with_their_paths_and_no_secret() {
    let mut c = config();
    c["routes"]["default"][1]["provider"] = json!("nope");
    c["gateway"]["clientKeysEnv"] = json!(["GATEWAY_KEY", "MISSING_KEY"]);
    c["breaker"]["cooldownMs"] = json!(0);
    let err = Setup::load(Some(&c.to_string()), &secret)
        .err()
        .expect("invalid");
    let text = err.to_string();
    assert!(
        text.contains("routes.default[1].provider: unknown provider \"nope\""),
        "{text}"
    );
    assert!(
        text.contains("gateway.clientKeysEnv[1]: secret \"MISSING_KEY\" is not set"),
        "{text}"
    );
    assert!(text.contains("breaker.cooldownMs"), "{text}");
    assert!(!text.contains("sk-") && !text.contains(KEY));
    let out = config_error(&err, "/v1/messages", &Headers::new(), "rid");
    assert_eq!(out.status, 500);
    let body: Value = serde_json::from_slice(&out.body).unwrap();
    assert_eq!(body["type"], "error");
    // Missing entirely, or no keys without the explicit opt-out.
    assert!(Setup::load(None, &secret)
        .err()
        .unwrap()
        .to_string()
        .contains("CONFIG: not set"));
    let mut c = config();
    c["gateway"] = json!({});
    let text = Setup::load(Some(&c.to_string()), &secret)
        .err()
        .unwrap()
        .to_string();
    assert!(
        text.contains("gateway.clientKeysEnv: no client keys"),
        "{text}"
    );
    let bad = Setup::load(Some("{\"providers\": 5}"), &secret)
        .err()
        .unwrap()
        .to_string();
    assert!(bad.contains("providers"), "{bad}");
}

#[test]
fn the_demo_opt_out_accepts_anyone_and_says_so_in_every_log_line() {
    let p = FakePlatform::new();
    p.script(
        "https://primary.test",
        [reply(200).body(openai_ok("gpt-big", "hi"))],
    );
    let mut c = config();
    c["gateway"] = json!({ "allowUnauthenticated": true });
    let g = gateway(&p, &c);
    assert!(g.auth().is_open());
    let (out, _) = run(
        &p,
        &g,
        req("POST", "/v1/chat/completions", &[], &openai_chat("default")),
    );
    assert_eq!(out.status, 200);
    let log: Value = serde_json::from_str(&out.log).unwrap();
    assert_eq!(log["authDisabled"], true);
}

mod no_panics {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]
        #[test]
        fn any_input_gets_an_answer(
            method in prop::sample::select(vec!["GET", "POST", "PUT", "", "DELETE"]),
            path in prop::sample::select(vec!["/v1/chat/completions", "/v1/messages", "/health", "/v1/models", "/", "//", "/v1/messages/"]),
            body in prop::collection::vec(any::<u8>(), 0..300),
            json_body in "[{}\\[\\]\":,a-z0-9 ]{0,80}",
            key in prop::sample::select(vec!["", "Bearer client-key-123", "Bearer ", "client-key-123"]),
        ) {
            let p = FakePlatform::new();
            let g = gateway(&p, &config());
            let h = [("authorization", key), ("content-length", "12x")];
            for b in [body, json_body.into_bytes()] {
                let r = Inbound { method: method.into(), path: path.into(), headers: h.iter().copied().collect(), body: Body::full(b) };
                let out = block_on(&p, g.handle(r));
                prop_assert!([200u16, 400, 401, 404, 405, 413, 503].contains(&out.status), "{}", out.status);
                prop_assert!(serde_json::from_slice::<Value>(&out.body).is_ok());
            }
            let _ = p.now();
        }
    }
}
