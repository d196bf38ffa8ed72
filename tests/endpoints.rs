//! The endpoints besides chat through the gateway, on the fake platform:
//! embeddings failed over within one embedding model, count_tokens sent to
//! the providers that serve it, model lists in both shapes. No ports, no
//! sleeps.

use resilient_llm::gateway::{Gateway, Inbound, Outbound, Setup};
use resilient_llm::testing::{block_on, reply, FakePlatform};
use resilient_llm::{Body, Headers, MemoryStore};
use serde_json::{json, Value};

const BEARER: (&str, &str) = ("authorization", "Bearer client-key-123");
const SMALL: &str = "text-embedding-3-small";

fn config() -> Value {
    let small = json!({ "family": SMALL, "dimensions": 3 });
    json!({
        "providers": {
            "oai": { "kind": "openai", "baseUrl": "https://oai.test", "apiKeyEnv": "OAI_KEY" },
            "az": { "kind": "openai-compatible", "preset": "azure", "baseUrl": "https://az.test",
                    "apiKeyEnv": "AZ_KEY" },
            "ant": { "kind": "anthropic", "baseUrl": "https://ant.test", "apiKeyEnv": "ANT_KEY" },
            "ant2": { "kind": "anthropic", "baseUrl": "https://ant2.test", "apiKeyEnv": "ANT_KEY" }
        },
        "routes": {
            "default": [
                { "provider": "oai", "model": "gpt-big" },
                { "provider": "ant", "model": "claude-a" },
                { "provider": "ant2", "model": "claude-b" }
            ],
            "embed": [
                { "provider": "oai", "model": SMALL, "embeddings": small },
                { "provider": "az", "model": "small-deployment", "embeddings": small }
            ],
            "gpt": [ { "provider": "oai", "model": "gpt-big" } ]
        },
        "retry": { "maxAttempts": 2, "baseDelayMs": 10, "maxDelayMs": 100 },
        "breaker": { "failureThreshold": 2, "cooldownMs": 10000 },
        "gateway": { "clientKeysEnv": ["GATEWAY_KEY"] }
    })
}

fn secret(name: &str) -> Option<String> {
    match name {
        "OAI_KEY" => Some("sk-oai-secret".into()),
        "AZ_KEY" => Some("az-secret".into()),
        "ANT_KEY" => Some("sk-ant-secret".into()),
        "GATEWAY_KEY" => Some("client-key-123".into()),
        _ => None,
    }
}

fn gateway(p: &FakePlatform) -> Gateway<FakePlatform, MemoryStore> {
    let setup = Setup::load(Some(&config().to_string()), &secret).expect("valid config");
    let store = MemoryStore::new(setup.breaker());
    setup.into_gateway(p.clone(), store)
}

fn post(path: &str, headers: &[(&str, &str)], body: &Value) -> Inbound {
    Inbound {
        method: "POST".into(),
        path: path.into(),
        headers: headers.iter().copied().collect::<Headers>(),
        body: Body::full(body.to_string().into_bytes()),
    }
}

fn get(path: &str, headers: &[(&str, &str)]) -> Inbound {
    Inbound {
        method: "GET".into(),
        path: path.into(),
        headers: headers.iter().copied().collect::<Headers>(),
        body: Body::full(Vec::new()),
    }
}

fn run(p: &FakePlatform, g: &Gateway<FakePlatform, MemoryStore>, r: Inbound) -> (Outbound, Value) {
    let out = block_on(p, g.handle(r));
    let body: Value = serde_json::from_slice(&out.body).expect("a JSON body");
    (out, body)
}

fn vectors(model: &str) -> String {
    json!({
        "object": "list", "model": model,
        "data": [
            { "object": "embedding", "index": 0, "embedding": [0.25, -0.5, 1.0] },
            { "object": "embedding", "index": 1, "embedding": [0.0, 0.5, -1.0] }
        ],
        "usage": { "prompt_tokens": 4, "total_tokens": 4 }
    })
    .to_string()
}

const OVERLOADED: &str =
    r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;

#[test]
fn embeddings_fail_over_on_529_to_an_entry_of_the_same_model() {
    let p = FakePlatform::new();
    p.script(
        "https://oai.test",
        [reply(529).body(OVERLOADED), reply(529).body(OVERLOADED)],
    );
    let answer = vectors("small-deployment");
    p.script("https://az.test", [reply(200).body(answer.clone())]);
    let g = gateway(&p);
    let body = json!({ "model": "embed", "input": ["a", "b"], "encoding_format": "float",
                       "dimensions": 3, "user": "u1" });
    let headers = [BEARER, ("idempotency-key", "k-1")];
    let out = block_on(&p, g.handle(post("/v1/embeddings", &headers, &body)));
    assert_eq!(out.status, 200, "{}", String::from_utf8_lossy(&out.body));
    assert_eq!(
        out.body,
        answer.as_bytes(),
        "the provider's answer, as it came"
    );
    assert_eq!(out.headers.get("x-served-by"), Some("az/small-deployment"));
    assert_eq!(out.headers.get("x-attempts"), Some("3"));

    let sent = p.requests();
    assert_eq!(sent.len(), 3);
    assert_eq!(sent[0].url, "https://oai.test/v1/embeddings");
    assert_eq!(
        sent[0].headers.get("authorization"),
        Some("Bearer sk-oai-secret")
    );
    assert_eq!(
        sent[2].url,
        "https://az.test/openai/deployments/small-deployment/embeddings?api-version=2024-10-21"
    );
    assert_eq!(sent[2].headers.get("api-key"), Some("az-secret"));
    assert_eq!(sent[2].headers.get("idempotency-key"), Some("k-1"));
    assert_eq!(
        sent[2].headers.get("authorization"),
        None,
        "never the client's key"
    );
    let first: Value = serde_json::from_slice(&sent[0].body).unwrap();
    let last: Value = serde_json::from_slice(&sent[2].body).unwrap();
    assert_eq!(first["model"], SMALL);
    assert_eq!(last["model"], "small-deployment");
    for key in ["input", "encoding_format", "dimensions", "user"] {
        assert_eq!(last[key], body[key], "{key} passed through");
    }
    assert!(!out.log.contains("secret"), "{}", out.log);
    assert!(out.log.contains(r#""route":"embed""#), "{}", out.log);
}

#[test]
fn embeddings_share_the_providers_breaker() {
    let p = FakePlatform::new();
    p.script("https://oai.test", (0..4).map(|_| reply(503).body("{}")));
    p.script(
        "https://az.test",
        (0..3).map(|_| reply(200).body(vectors("a"))),
    );
    let g = gateway(&p);
    let body = json!({ "model": "embed", "input": "a" });
    for _ in 0..3 {
        let (out, _) = run(&p, &g, post("/v1/embeddings", &[BEARER], &body));
        assert_eq!(out.status, 200);
    }
    // One verdict per request: two failed requests opened oai's breaker
    // (threshold 2), and the third skipped it without a call.
    assert_eq!(p.requests_to("https://oai.test"), 4);
    let (_, health) = run(&p, &g, get("/health", &[BEARER]));
    let oai = health["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["provider"] == "oai")
        .unwrap();
    assert_eq!(oai["state"], "open", "{oai}");
}

#[test]
fn embeddings_refuse_chat_routes_and_bad_input_in_openai_format() {
    let p = FakePlatform::new();
    let g = gateway(&p);
    let (out, body) = run(
        &p,
        &g,
        post(
            "/v1/embeddings",
            &[BEARER],
            &json!({ "model": "gpt", "input": "a" }),
        ),
    );
    assert_eq!(out.status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not an embeddings route"),
        "{body}"
    );
    let (out, body) = run(
        &p,
        &g,
        post(
            "/v1/embeddings",
            &[BEARER],
            &json!({ "model": "embed", "input": 5 }),
        ),
    );
    assert_eq!(out.status, 400);
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("input:"));
    let (out, _) = run(
        &p,
        &g,
        post(
            "/v1/embeddings",
            &[BEARER],
            &json!({ "model": "nope", "input": "a" }),
        ),
    );
    assert_eq!(out.status, 404);
    let (out, _) = run(
        &p,
        &g,
        post(
            "/v1/embeddings",
            &[],
            &json!({ "model": "embed", "input": "a" }),
        ),
    );
    assert_eq!(out.status, 401);
    let chat = json!({ "model": "embed", "messages": [{ "role": "user", "content": "hi" }] });
    let (out, body) = run(&p, &g, post("/v1/chat/completions", &[BEARER], &chat));
    assert_eq!(out.status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("serves embeddings"),
        "{body}"
    );
    let stream = json!({ "model": "embed", "stream": true, "max_tokens": 5,
                         "messages": [{ "role": "user", "content": "hi" }] });
    let (out, body) = run(&p, &g, post("/v1/messages", &[BEARER], &stream));
    assert_eq!(
        (out.status, body["type"].as_str()),
        (400, Some("error")),
        "{body}"
    );
    assert!(p.requests().is_empty(), "nothing was sent");
}

#[test]
fn count_tokens_skips_providers_without_it_and_fails_over() {
    let p = FakePlatform::new();
    p.script(
        "https://ant.test",
        [reply(529).body(OVERLOADED), reply(529).body(OVERLOADED)],
    );
    p.script(
        "https://ant2.test",
        [reply(200).body(r#"{"input_tokens":17}"#)],
    );
    let g = gateway(&p);
    let body = json!({ "model": "default", "system": "be brief",
                       "messages": [{ "role": "user", "content": "hi" }] });
    let (out, answer) = run(
        &p,
        &g,
        post(
            "/v1/messages/count_tokens",
            &[
                ("x-api-key", "client-key-123"),
                ("anthropic-version", "2023-06-01"),
                ("anthropic-beta", "token-counting-2024-11-01"),
            ],
            &body,
        ),
    );
    assert_eq!(out.status, 200, "{answer}");
    assert_eq!(answer, json!({ "input_tokens": 17 }));
    assert_eq!(out.headers.get("x-served-by"), Some("ant2/claude-b"));
    assert_eq!(
        p.requests_to("https://oai.test"),
        0,
        "OpenAI counts no tokens"
    );
    let sent = p.requests();
    assert_eq!(sent[0].url, "https://ant.test/v1/messages/count_tokens");
    assert_eq!(sent[2].headers.get("x-api-key"), Some("sk-ant-secret"));
    assert_eq!(sent[2].headers.get("anthropic-version"), Some("2023-06-01"));
    assert_eq!(
        sent[2].headers.get("anthropic-beta"),
        Some("token-counting-2024-11-01")
    );
    let last: Value = serde_json::from_slice(&sent[2].body).unwrap();
    assert_eq!(last["model"], "claude-b");
    assert_eq!(last["system"], "be brief");
}

#[test]
fn count_tokens_errors_come_in_anthropic_format() {
    let p = FakePlatform::new();
    let g = gateway(&p);
    let (out, body) = run(
        &p,
        &g,
        post(
            "/v1/messages/count_tokens",
            &[BEARER],
            &json!({ "model": "gpt", "messages": [{ "role": "user", "content": "hi" }] }),
        ),
    );
    assert_eq!(out.status, 400, "{body}");
    assert_eq!(body["type"], "error");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("serves count_tokens"));
    let (out, body) = run(
        &p,
        &g,
        post(
            "/v1/messages/count_tokens",
            &[BEARER],
            &json!({ "model": "default" }),
        ),
    );
    assert_eq!(out.status, 400);
    assert_eq!(body["type"], "error");
    // Every entry failing: the chain's error, in the client's format.
    p.script(
        "https://ant.test",
        [reply(500).body("{}"), reply(500).body("{}")],
    );
    p.script(
        "https://ant2.test",
        [reply(500).body("{}"), reply(500).body("{}")],
    );
    let (out, body) = run(
        &p,
        &g,
        post(
            "/v1/messages/count_tokens",
            &[BEARER],
            &json!({ "model": "default", "messages": [{ "role": "user", "content": "hi" }] }),
        ),
    );
    assert!(out.status >= 500, "{body}");
    assert_eq!(body["type"], "error");
}

#[test]
fn models_list_and_one_in_both_shapes() {
    let p = FakePlatform::new();
    let g = gateway(&p);
    let (out, list) = run(&p, &g, get("/v1/models", &[BEARER]));
    assert_eq!(out.status, 200);
    assert_eq!(list["object"], "list");
    let ids: Vec<&str> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["default", "embed", "gpt"]);
    assert_eq!(
        list["data"][1]["entries"],
        json!(["oai/text-embedding-3-small", "az/small-deployment"])
    );
    assert_eq!(list["data"][1]["embeddings"]["family"], SMALL);
    assert!(!list.to_string().contains("secret") && !list.to_string().contains(".test"));

    let anthropic = [BEARER, ("anthropic-version", "2023-06-01")];
    let (_, list) = run(&p, &g, get("/v1/models", &anthropic));
    assert_eq!(list["data"][0]["type"], "model");
    assert_eq!(list["first_id"], "default");
    assert_eq!(list["last_id"], "gpt");
    assert_eq!(list["has_more"], false);

    let (out, one) = run(&p, &g, get("/v1/models/embed", &[BEARER]));
    assert_eq!(out.status, 200);
    assert_eq!(
        (one["id"].clone(), one["object"].clone()),
        (json!("embed"), json!("model"))
    );
    let (_, one) = run(&p, &g, get("/v1/models/gpt", &anthropic));
    assert_eq!(one["display_name"], "gpt");
    let (out, err) = run(&p, &g, get("/v1/models/nope", &anthropic));
    assert_eq!(out.status, 404);
    assert_eq!(err["error"]["type"], "not_found_error", "{err}");
    let (out, _) = run(&p, &g, get("/v1/models/embed", &[]));
    assert_eq!(out.status, 401);
}
