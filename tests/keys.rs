//! Several API keys of one provider as a tier (`apiKeyEnvs`), through the
//! real OpenAI adapter on the fake platform: the expansion's ids and
//! errors, a 429 on one key moving to its mate, shares by weight.

mod common;

use std::time::Duration;

use common::fixture;
use resilient_llm::testing::{block_on, FakePlatform};
use resilient_llm::{ChatRequest, Config, Message};
use serde_json::{json, Value};

fn secret(name: &str) -> Option<String> {
    match name {
        "KEY_A" => Some("sk-test-a".into()),
        "KEY_B" => Some("sk-test-b".into()),
        "BACKUP_KEY" => Some("sk-test-backup".into()),
        _ => None,
    }
}

fn document(keys: Value, route: Value) -> Value {
    json!({
        "providers": {
            "openai": { "kind": "openai", "baseUrl": "https://openai.test",
                        "apiKeyEnvs": keys,
                        "models": { "gpt-4o": { "inputPricePerMtok": 2.5,
                                                "outputPricePerMtok": 10.0 } } },
            "backup": { "kind": "openai", "baseUrl": "https://backup.test",
                        "apiKeyEnv": "BACKUP_KEY" }
        },
        "routes": { "default": route },
        "retry": { "maxAttempts": 1 }
    })
}

fn config(keys: Value, route: Value) -> Config {
    Config::parse(&document(keys, route).to_string()).expect("parses")
}

fn plain_route() -> Value {
    json!([{ "provider": "openai", "model": "gpt-4o" },
           { "provider": "backup", "model": "gpt-4o" }])
}

fn req() -> ChatRequest {
    ChatRequest::new(vec![Message::user("hello")])
}

/// The problems of a configuration that must not validate, as text.
fn problems(cfg: Config) -> String {
    match cfg.validate(&secret, &[]) {
        Ok(_) => panic!("the configuration passed"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn each_key_is_an_upstream_and_the_entry_a_tier_of_them() {
    let cfg = config(
        json!(["KEY_A", { "env": "KEY_B", "weight": 3 }]),
        plain_route(),
    );
    let v = cfg.validate(&secret, &[]).expect("valid");
    let ids: Vec<&str> = v.providers.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["backup", "openai#1", "openai#2"]);
    let chain = &v.policies.routes["default"];
    let view: Vec<(&str, Option<u32>, u32)> = chain
        .iter()
        .map(|e| (e.provider.as_str(), e.priority, e.weight))
        .collect();
    // A route without priorities: the tier sits at the entry's place and
    // the backup keeps its place after it.
    assert_eq!(
        view,
        [
            ("openai#1", Some(0), 1),
            ("openai#2", Some(0), 3),
            ("backup", Some(1), 1)
        ]
    );
    // The configured model's own route is the tier too, and both keys
    // carry the provider's prices.
    let own: Vec<&str> = v.policies.routes["gpt-4o"]
        .iter()
        .map(|e| e.provider.as_str())
        .collect();
    assert_eq!(own, ["openai#1", "openai#2"]);
    for id in ["openai#1", "openai#2"] {
        assert!(v.cost.prices.get(id, "gpt-4o").is_some(), "{id} priced");
    }
    // The provider's breaker settings hold for each key.
    let mut tuned = document(
        json!(["KEY_A", { "env": "KEY_B", "weight": 3 }]),
        plain_route(),
    );
    tuned["breakers"] = json!({ "openai": { "failureThreshold": 7 } });
    let tuned = Config::parse(&tuned.to_string()).expect("parses");
    let v = tuned.validate(&secret, &[]).expect("valid");
    let breakers: Vec<(&str, u32)> = v
        .breakers
        .iter()
        .map(|(id, b)| (id.as_str(), b.failure_threshold))
        .collect();
    assert_eq!(breakers, [("openai#1", 7), ("openai#2", 7)]);
    // An entry's priority and weight carry over: weight × key weight.
    let cfg = config(
        json!(["KEY_A", { "env": "KEY_B", "weight": 3 }]),
        json!([{ "provider": "backup", "model": "m", "priority": 1 },
               { "provider": "openai", "model": "gpt-4o", "priority": 2, "weight": 2 }]),
    );
    let v = cfg.validate(&secret, &[]).expect("valid");
    let view: Vec<(&str, Option<u32>, u32)> = v.policies.routes["default"]
        .iter()
        .map(|e| (e.provider.as_str(), e.priority, e.weight))
        .collect();
    assert_eq!(
        view,
        [
            ("backup", Some(1), 1),
            ("openai#1", Some(2), 2),
            ("openai#2", Some(2), 6)
        ]
    );
}

#[test]
fn key_list_mistakes_are_reported_with_their_paths() {
    let text = problems(config(json!([]), plain_route()));
    assert!(
        text.contains("providers.openai.apiKeyEnvs: must name at least one secret"),
        "{text}"
    );
    let text = problems(config(json!(["KEY_A", "MISSING"]), plain_route()));
    assert!(
        text.contains("providers.openai.apiKeyEnvs[1]: secret \"MISSING\" is not set"),
        "{text}"
    );
    assert!(!text.contains("openai#"), "{text}");
    let text = problems(config(
        json!(["KEY_A", "KEY_A", { "env": "KEY_B", "weight": 0 }]),
        plain_route(),
    ));
    for needle in [
        "providers.openai.apiKeyEnvs[1]: secret \"KEY_A\" is named twice",
        "providers.openai.apiKeyEnvs[2].weight: must be 1 to 10000",
    ] {
        assert!(text.contains(needle), "{needle} in {text}");
    }
    let mut both = json!({
        "providers": { "openai": { "kind": "openai", "apiKeyEnv": "KEY_A",
                                   "apiKeyEnvs": ["KEY_B"] },
                       "openai#1": { "kind": "openai", "apiKeyEnv": "KEY_A" } },
        "routes": { "default": [{ "provider": "openai", "model": "m" }] }
    });
    let text = problems(Config::parse(&both.to_string()).expect("parses"));
    for needle in [
        "providers.openai.apiKeyEnvs: give apiKeyEnv or apiKeyEnvs, not both",
        "providers.openai.apiKeyEnvs: key 1 would be upstream \"openai#1\", which is another provider's id",
    ] {
        assert!(text.contains(needle), "{needle} in {text}");
    }
    both["providers"]["openai"]["apiKey"] = json!("sk-inline-secret");
    let text = problems(Config::parse(&both.to_string()).expect("parses"));
    assert!(
        text.contains("providers.openai.apiKeyEnvs: give apiKey or apiKeyEnvs, not both"),
        "{text}"
    );
    assert!(!text.contains("sk-inline-secret"), "{text}");
    // A weighted key's own fields are checked.
    let e = Config::parse(
        &json!({ "providers": { "openai": { "kind": "openai",
            "apiKeyEnvs": [{ "env": "KEY_A", "wieght": 2 }] } } })
        .to_string(),
    )
    .expect_err("an unknown field");
    assert!(
        e.to_string()
            .contains("providers.openai.apiKeyEnvs[0]: a secret name, or { \"env\""),
        "{e}"
    );
}

#[test]
fn an_embeddings_route_checks_a_keyed_provider_like_any_other() {
    let json = |kind: &str| {
        json!({
            "providers": { "p": { "kind": kind, "apiKeyEnvs": ["KEY_A", "KEY_B"] } },
            "routes": { "embed": [{ "provider": "p", "model": "e",
                "embeddings": { "family": "text-embedding-3-small", "dimensions": 1536 } }] }
        })
        .to_string()
    };
    let ok = Config::parse(&json("openai")).expect("parses");
    let v = ok.validate(&secret, &[]).expect("openai serves embeddings");
    assert_eq!(v.policies.routes["embed"].len(), 2, "a tier of both keys");
    let text = problems(Config::parse(&json("anthropic")).expect("parses"));
    assert!(
        text.contains("routes.embed[0].provider: provider \"p\" does not serve embeddings"),
        "{text}"
    );
}

fn authorization(p: &FakePlatform, i: usize) -> String {
    p.requests()[i]
        .headers
        .get("authorization")
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_429_on_one_key_moves_to_its_mate_with_a_breaker_each() {
    // Draw 0.1: key 1 first (weights 1:1).
    let p = FakePlatform::new().at(1_000).random([0.1]);
    p.script(
        "https://openai.test",
        [
            fixture("openai/rate_limited_429"),
            fixture("openai/ok_text"),
            fixture("openai/ok_text"),
            fixture("openai/ok_text"),
        ],
    );
    let cfg = config(json!(["KEY_A", "KEY_B"]), plain_route());
    let client = cfg.client(p.clone(), vec![], &secret).expect("valid");
    let r = block_on(&p, client.chat(req())).expect("an answer");
    assert_eq!(r.served_by.provider, "openai#2", "served by the mate");
    assert!(p.sleeps().is_empty(), "no Retry-After waited out");
    assert_eq!(authorization(&p, 0), "Bearer sk-test-a");
    assert_eq!(authorization(&p, 1), "Bearer sk-test-b");
    // Held back for its Retry-After (1.5 s): the mate serves although key 1
    // is drawn first.
    let r = block_on(&p, client.chat(req())).expect("an answer");
    assert_eq!(r.served_by.provider, "openai#2");
    assert_eq!(authorization(&p, 2), "Bearer sk-test-b");
    p.advance(Duration::from_secs(2));
    let r = block_on(&p, client.chat(req())).expect("an answer");
    assert_eq!(r.served_by.provider, "openai#1", "its share is back");
    assert_eq!(authorization(&p, 3), "Bearer sk-test-a");
    assert_eq!(p.requests_to("https://backup.test"), 0);
    // Health has a row per key, named by id; no key in it.
    let health = client.health();
    let rows: Vec<(&str, u64, u64)> = health
        .iter()
        .map(|h| (h.provider.as_str(), h.requests, h.failures))
        .collect();
    assert_eq!(
        rows,
        [("backup", 0, 0), ("openai#1", 2, 1), ("openai#2", 2, 0)]
    );
    assert!(!format!("{health:?}").contains("sk-test"));
}

#[test]
fn provider_slash_model_names_the_keys_tier() {
    let p = FakePlatform::new().at(1_000).random([0.9]);
    p.script(
        "https://openai.test",
        [fixture("openai/ok_text"), fixture("openai/ok_text")],
    );
    let cfg = config(json!(["KEY_A", "KEY_B"]), plain_route());
    let client = cfg.client(p.clone(), vec![], &secret).expect("valid");
    let mut r = req();
    r.model = Some("openai/gpt-4o".into());
    let reply = block_on(&p, client.chat(r)).expect("an answer");
    assert_eq!(reply.served_by.provider, "openai#2", "draw 0.9: key 2");
    assert_eq!(reply.served_by.model, "gpt-4o");
    let mut r = req();
    r.model = Some("openai/unlisted".into());
    assert!(block_on(&p, client.chat(r)).is_err(), "unlisted model");
    let mut any = cfg.clone();
    any.allow_any_model = true;
    let open = any.client(p.clone(), vec![], &secret).expect("valid");
    let mut r = req();
    r.model = Some("openai/unlisted".into());
    let reply = block_on(&p, open.chat(r)).expect("an answer");
    assert!(reply.served_by.provider.starts_with("openai#"));
    assert_eq!(reply.served_by.model, "unlisted");
}

#[test]
fn keys_share_load_by_weight() {
    let n = 2_000;
    // Evenly spread draws: key 1 (weight 1) is first for draws below 1/4.
    let draws: Vec<f64> = (0..n).map(|i| (i as f64 + 0.5) / n as f64).collect();
    let p = FakePlatform::new().at(1_000).random(draws);
    p.script(
        "https://openai.test",
        (0..n).map(|_| fixture("openai/ok_text")),
    );
    let cfg = config(
        json!(["KEY_A", { "env": "KEY_B", "weight": 3 }]),
        plain_route(),
    );
    let client = cfg.client(p.clone(), vec![], &secret).expect("valid");
    let mut first = 0;
    for _ in 0..n {
        let r = block_on(&p, client.chat(req())).expect("an answer");
        if r.served_by.provider == "openai#1" {
            first += 1;
        }
    }
    let share = first as f64 / n as f64;
    assert!((share - 0.25).abs() < 0.05, "key 1's share {share}");
}

#[test]
fn the_gateway_names_the_key_that_served_and_never_a_key() {
    use resilient_llm::gateway::{Inbound, Setup};
    use resilient_llm::{Body, Headers, MemoryStore};

    let p = FakePlatform::new().at(1_000).random([0.1]);
    p.script(
        "https://openai.test",
        [
            fixture("openai/rate_limited_429"),
            fixture("openai/ok_text"),
        ],
    );
    let mut cfg = json!({
        "providers": { "openai": { "kind": "openai", "baseUrl": "https://openai.test",
                                   "apiKeyEnvs": ["KEY_A", "KEY_B"] } },
        "routes": { "default": [{ "provider": "openai", "model": "gpt-4o" }] },
        "gateway": { "allowUnauthenticated": true }
    });
    let setup = Setup::load(Some(&cfg.to_string()), &secret).expect("valid config");
    let store = MemoryStore::new(setup.breaker());
    let g = setup.into_gateway(p.clone(), store);
    let inbound = |method: &str, path: &str, body: &str| Inbound {
        method: method.into(),
        path: path.into(),
        headers: Headers::default(),
        body: Body::full(body.as_bytes().to_vec()),
    };
    let body = json!({ "model": "default", "messages": [{ "role": "user", "content": "hi" }] });
    let out = block_on(
        &p,
        g.handle(inbound("POST", "/v1/chat/completions", &body.to_string())),
    );
    assert_eq!(out.status, 200);
    assert_eq!(out.headers.get("x-served-by"), Some("openai#2/gpt-4o"));
    assert!(!out.log.contains("sk-test"), "{}", out.log);
    let health = block_on(&p, g.handle(inbound("GET", "/health", "")));
    let text = String::from_utf8_lossy(&health.body).to_string();
    let doc: Value = serde_json::from_str(&text).expect("JSON");
    let rows: Vec<(&str, &str)> = doc["providers"]
        .as_array()
        .expect("providers")
        .iter()
        .map(|h| {
            (
                h["provider"].as_str().unwrap_or_default(),
                h["lastFailure"]["kind"].as_str().unwrap_or("none"),
            )
        })
        .collect();
    assert_eq!(rows, [("openai#1", "rate_limited"), ("openai#2", "none")]);
    assert!(!text.contains("sk-test"), "{text}");
    // A configuration mistake names the secret, never a key's value.
    cfg["providers"]["openai"]["apiKeyEnvs"] = json!(["KEY_A", "KEY_A"]);
    let Err(e) = Setup::load(Some(&cfg.to_string()), &secret) else {
        panic!("the configuration passed");
    };
    let shown = format!("{e:?}");
    assert!(
        shown.contains("apiKeyEnvs[1]") && !shown.contains("sk-test"),
        "{shown}"
    );
}
