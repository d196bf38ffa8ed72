//! From one JSON configuration to a working client over the real adapters,
//! on the fake platform; and configuration mistakes, reported with paths.

mod common;

use std::time::Duration;

use common::fixture;
use resilient_llm::testing::{block_on, FakePlatform};
use resilient_llm::Config;
use resilient_llm::{ChatRequest, Error, ErrorKind, Message};
use serde_json::json;

fn secret(name: &str) -> Option<String> {
    match name {
        "OPENAI_API_KEY" => Some("sk-test-openai".into()),
        "ANTHROPIC_API_KEY" => Some("sk-ant-test".into()),
        _ => None,
    }
}

fn config() -> Config {
    config_with(json!({ "maxAttempts": 2 }))
}

/// The configuration with `retry` as given.
fn config_with(retry: serde_json::Value) -> Config {
    Config::parse(
        &json!({
            "providers": {
                "openai": { "kind": "openai", "baseUrl": "https://openai.test",
                            "models": { "gpt-4o": { "contextWindow": 128000 } } },
                "anthropic": { "kind": "anthropic", "baseUrl": "https://anthropic.test" }
            },
            "routes": {
                "default": [
                    { "provider": "openai", "model": "gpt-4o", "label": "primary" },
                    { "provider": "anthropic", "model": "claude-sonnet-4-5", "timeoutMs": 5000 }
                ]
            },
            "retry": retry,
            "breaker": { "failureThreshold": 2 },
            "timeoutMs": 10000
        })
        .to_string(),
    )
    .expect("parses")
}

fn req() -> ChatRequest {
    ChatRequest::new(vec![Message::system("be brief"), Message::user("hello")])
}

#[test]
fn a_configured_chain_fails_over_from_openai_to_anthropic() {
    let p = FakePlatform::new().random([0.5]);
    p.script(
        "https://openai.test",
        [
            fixture("openai/server_error_500"),
            fixture("openai/server_error_500"),
        ],
    );
    p.script("https://anthropic.test", [fixture("anthropic/ok_text")]);
    let client = config().client(p.clone(), vec![], &secret).unwrap();
    let r = block_on(&p, client.chat(req())).unwrap();
    assert_eq!(r.response.text, "Hello! How can I help?");
    assert_eq!(
        r.response.model, "claude-sonnet-4-5-20250929",
        "the model that answered"
    );
    assert_eq!(r.served_by.provider, "anthropic");
    assert_eq!(
        r.attempts.len(),
        3,
        "two attempts at openai (maxAttempts 2), one at anthropic"
    );
    let sent = p.requests();
    assert_eq!(sent[0].url, "https://openai.test/v1/chat/completions");
    assert_eq!(
        sent[0].headers.get("authorization"),
        Some("Bearer sk-test-openai")
    );
    assert_eq!(sent[2].url, "https://anthropic.test/v1/messages");
    let body: serde_json::Value = serde_json::from_slice(&sent[2].body).unwrap();
    assert_eq!(body["system"], "be brief", "system lifted for Anthropic");
    assert_eq!(body["model"], "claude-sonnet-4-5");
}

#[test]
fn a_rate_limit_with_retry_after_is_honoured_through_the_real_adapter() {
    let p = FakePlatform::new();
    p.script(
        "https://openai.test",
        [
            fixture("openai/rate_limited_429"),
            fixture("openai/ok_text"),
        ],
    );
    // Waiting as long as a Retry-After asks (up to maxDelayMs), as before
    // rateLimitWaitMs: the fixture asks for 1.5 s.
    let retry = json!({ "maxAttempts": 2, "rateLimitWaitMs": 10000 });
    let client = config_with(retry)
        .client(p.clone(), vec![], &secret)
        .unwrap();
    let r = block_on(&p, client.chat(req())).unwrap();
    assert_eq!(r.served_by.provider, "openai");
    let after = r.attempts[0]
        .error()
        .and_then(|e| e.retry_after)
        .expect("retry-after read");
    assert_eq!(after, Duration::from_millis(1500));
    assert_eq!(p.sleeps(), [after]);
}

#[test]
fn a_rate_limit_longer_than_the_wait_moves_on_when_a_later_entry_can_serve() {
    let p = FakePlatform::new();
    p.script("https://openai.test", [fixture("openai/rate_limited_429")]);
    p.script("https://anthropic.test", [fixture("anthropic/ok_text")]);
    // The default rateLimitWaitMs (1 s) is shorter than the 1.5 s asked.
    let client = config().client(p.clone(), vec![], &secret).unwrap();
    let r = block_on(&p, client.chat(req())).unwrap();
    assert_eq!(r.served_by.provider, "anthropic");
    assert!(p.sleeps().is_empty(), "no wait: {:?}", p.sleeps());
    assert_eq!(p.requests_to("https://openai.test"), 1);

    // A wait within rateLimitWaitMs is still taken.
    let p = FakePlatform::new();
    p.script(
        "https://openai.test",
        [
            fixture("openai/rate_limited_429"),
            fixture("openai/ok_text"),
        ],
    );
    let retry = json!({ "maxAttempts": 2, "rateLimitWaitMs": 2000 });
    let client = config_with(retry)
        .client(p.clone(), vec![], &secret)
        .unwrap();
    let r = block_on(&p, client.chat(req())).unwrap();
    assert_eq!(r.served_by.provider, "openai");
    assert_eq!(p.sleeps(), [Duration::from_millis(1500)]);
}

#[test]
fn a_rate_limited_last_entry_is_still_waited_for() {
    let p = FakePlatform::new();
    p.script(
        "https://openai.test",
        [
            fixture("openai/rate_limited_429"),
            fixture("openai/ok_text"),
        ],
    );
    let config = Config::parse(
        &json!({
            "providers": { "openai": { "kind": "openai", "baseUrl": "https://openai.test" } },
            "routes": { "default": [ { "provider": "openai", "model": "gpt-4o" } ] },
            "retry": { "maxAttempts": 2 }
        })
        .to_string(),
    )
    .expect("parses");
    let client = config.client(p.clone(), vec![], &secret).unwrap();
    let r = block_on(&p, client.chat(req())).unwrap();
    assert_eq!(r.served_by.provider, "openai");
    assert_eq!(
        p.sleeps(),
        [Duration::from_millis(1500)],
        "nothing else can serve"
    );
}

#[test]
fn insufficient_quota_and_context_length_fail_over_at_once() {
    for name in ["openai/insufficient_quota_429", "openai/context_length_400"] {
        let p = FakePlatform::new();
        p.script("https://openai.test", [fixture(name)]);
        p.script("https://anthropic.test", [fixture("anthropic/ok_text")]);
        let client = config().client(p.clone(), vec![], &secret).unwrap();
        let r = block_on(&p, client.chat(req())).unwrap();
        assert_eq!(p.requests_to("https://openai.test"), 1, "{name}");
        assert_eq!(r.served_by.provider, "anthropic", "{name}");
    }
}

#[test]
fn a_content_policy_refusal_comes_back_unchanged() {
    let p = FakePlatform::new();
    p.script(
        "https://openai.test",
        [fixture("openai/content_policy_400")],
    );
    let client = config().client(p.clone(), vec![], &secret).unwrap();
    let e = block_on(&p, client.chat(req())).unwrap_err();
    let Error::Rejected { error, .. } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(error.kind, ErrorKind::ContentFilter);
    assert_eq!(e.status(), 400);
    assert_eq!(p.requests_to("https://anthropic.test"), 0);
}

#[test]
fn a_configured_model_is_a_route_and_provider_slash_model_names_one_entry() {
    let p = FakePlatform::new();
    p.script(
        "https://openai.test",
        [fixture("openai/ok_text"), fixture("openai/ok_text")],
    );
    p.script("https://anthropic.test", [fixture("anthropic/ok_text")]);
    let client = config().client(p.clone(), vec![], &secret).unwrap();
    let mut r = req();
    r.model = Some("gpt-4o".into());
    assert_eq!(
        block_on(&p, client.chat(r)).unwrap().served_by.provider,
        "openai"
    );
    let mut r = req();
    r.model = Some("anthropic/claude-sonnet-4-5".into());
    let reply = block_on(&p, client.chat(r)).unwrap();
    assert_eq!(reply.served_by.model, "claude-sonnet-4-5");
    // A model no route lists is not reached unless allowAnyModel says so.
    let mut r = req();
    r.model = Some("anthropic/claude-haiku-4-5".into());
    assert!(matches!(
        block_on(&p, client.chat(r.clone())),
        Err(Error::UnknownRoute(_))
    ));
    let mut any = config();
    any.allow_any_model = true;
    p.script("https://anthropic.test", [fixture("anthropic/ok_text")]);
    let open = any.client(p.clone(), vec![], &secret).unwrap();
    let reply = block_on(&p, open.chat(r)).unwrap();
    assert_eq!(reply.served_by.model, "claude-haiku-4-5");
    let mut r = req();
    r.model = Some("nobody/x".into());
    assert!(matches!(
        block_on(&p, client.chat(r)),
        Err(Error::UnknownRoute(_))
    ));
}

#[test]
fn policies_come_from_the_configuration() {
    let p = FakePlatform::new();
    let client = config().client(p, vec![], &secret).unwrap();
    assert_eq!(client.policy().attempt_timeout, Duration::from_secs(10));
    assert_eq!(client.policy().retry.max_attempts, 2);
    assert_eq!(
        client.routes()["default"][1].timeout,
        Some(Duration::from_secs(5))
    );
    assert_eq!(client.default_route(), Some("default"));
}

#[test]
fn every_mistake_is_reported_at_once_with_its_path() {
    let cfg = Config::parse(
        &json!({
            "providers": { "openai": { "kind": "openai", "apiKeyEnv": "MISSING_KEY" } },
            "routes": {
                "default": [ { "provider": "x", "model": "m" }, { "provider": "openai", "model": "" } ],
                "empty": []
            },
            "retry": { "maxAttempts": 0, "baseDelayMs": 20000 },
            "breaker": { "failureRate": 1.5 },
            "defaultRoute": "nope"
        })
        .to_string(),
    )
    .unwrap();
    let err = cfg
        .client(FakePlatform::new(), vec![], &secret)
        .err()
        .expect("invalid");
    let paths: Vec<&str> = err.issues.iter().map(|i| i.path.as_str()).collect();
    for expected in [
        "providers.openai.apiKeyEnv",
        "routes.default[0].provider",
        "routes.default[1].model",
        "routes.empty",
        "retry.maxAttempts",
        "retry.baseDelayMs",
        "breaker.failureRate",
        "defaultRoute",
    ] {
        assert!(
            paths.contains(&expected),
            "{expected} missing from {paths:?}"
        );
    }
    let text = err.to_string();
    assert!(
        text.contains("routes.default[0].provider: unknown provider \"x\""),
        "{text}"
    );
    assert!(
        text.contains("MISSING_KEY") && !text.contains("sk-"),
        "names the secret, never a value: {text}"
    );
}

#[test]
fn a_type_mistake_names_its_path() {
    let e =
        Config::parse(r#"{"routes":{"default":[{"provider":"a","model":"m","timeoutMs":"5"}]}}"#)
            .unwrap_err();
    assert_eq!(e.issues[0].path, "routes.default[0].timeoutMs");
    let e = Config::parse(r#"{"retry":{"maxAttempt":3}}"#).unwrap_err();
    assert_eq!(e.issues[0].path, "retry.maxAttempt");
    assert!(
        e.issues[0].message.contains("unknown field"),
        "{}",
        e.issues[0].message
    );
    let e = Config::parse("{").unwrap_err();
    assert_eq!(e.issues.len(), 1);
}

#[test]
fn the_documented_configuration_is_valid() {
    // The first JSON block of the README ("Configuration essentials") and of
    // docs/configuration.md, the reference it links to.
    for doc in [
        include_str!("../README.md"),
        include_str!("../docs/configuration.md"),
    ] {
        let start = doc.find("```json\n").expect("a json block") + "```json\n".len();
        let end = start + doc[start..].find("```").expect("its end");
        let cfg = Config::parse(&doc[start..end]).expect("parses");
        let all_keys = |_: &str| Some("sk-placeholder".to_string());
        let client = cfg
            .client(FakePlatform::new(), vec![], &all_keys)
            .expect("valid");
        assert_eq!(client.routes()["default"].len(), 3);
        assert!(
            client.routes().contains_key("claude-sonnet-4-5"),
            "a configured model is a route"
        );
    }
}

#[test]
fn a_base_url_written_with_its_api_root_is_called_at_the_same_endpoint() {
    // As the OpenAI SDK, vLLM, Ollama and OpenRouter docs write base URLs:
    // with the `/v1` (or `/api/v1`, `/openai/v1`) the adapter appends itself.
    let cfg = Config::parse(
        &json!({
            "providers": {
                "openai": { "kind": "openai", "baseUrl": "https://openai.test/v1", "apiKey": "sk-a" },
                "anthropic": { "kind": "anthropic", "baseUrl": "https://anthropic.test/v1/", "apiKey": "sk-b" },
                "router": { "kind": "openai-compatible", "preset": "openrouter",
                            "baseUrl": "https://router.test/api/v1", "apiKey": "sk-c" },
                "groq": { "kind": "openai-compatible", "preset": "groq",
                          "baseUrl": "https://groq.test/openai/v1", "apiKey": "sk-d" },
                "vllm": { "kind": "openai-compatible", "preset": "vllm", "baseUrl": "http://vllm.test:8000/v1" },
                "prefixed": { "kind": "openai-compatible", "preset": "custom",
                              "baseUrl": "http://proxy.test/tenant/v1" },
                "deepseek": { "kind": "openai-compatible", "preset": "deepseek",
                              "baseUrl": "https://deepseek.test/v1", "apiKey": "sk-e" },
                "plain": { "kind": "openai", "baseUrl": "https://plain.test", "apiKey": "sk-f" }
            },
            "routes": {
                "openai": [{ "provider": "openai", "model": "m" }],
                "anthropic": [{ "provider": "anthropic", "model": "m" }],
                "router": [{ "provider": "router", "model": "m" }],
                "groq": [{ "provider": "groq", "model": "m" }],
                "vllm": [{ "provider": "vllm", "model": "m" }],
                "prefixed": [{ "provider": "prefixed", "model": "m" }],
                "deepseek": [{ "provider": "deepseek", "model": "m" }],
                "plain": [{ "provider": "plain", "model": "m" }]
            }
        })
        .to_string(),
    )
    .unwrap();
    let p = FakePlatform::new();
    let expected = [
        ("openai", "https://openai.test/v1/chat/completions"),
        ("anthropic", "https://anthropic.test/v1/messages"),
        ("router", "https://router.test/api/v1/chat/completions"),
        ("groq", "https://groq.test/openai/v1/chat/completions"),
        ("vllm", "http://vllm.test:8000/v1/chat/completions"),
        ("prefixed", "http://proxy.test/tenant/v1/chat/completions"),
        // DeepSeek's path has no `/v1` of its own: the base URL is kept whole.
        ("deepseek", "https://deepseek.test/v1/chat/completions"),
        ("plain", "https://plain.test/v1/chat/completions"),
    ];
    for (route, url) in expected {
        let ok = if route == "anthropic" {
            "anthropic/ok_text"
        } else {
            "openai/ok_text"
        };
        p.script(url, [fixture(ok)]);
        let client = cfg.client(p.clone(), vec![], &secret).unwrap();
        let mut r = req();
        r.model = Some(route.into());
        let r = block_on(&p, client.chat(r));
        assert!(
            r.is_ok(),
            "{route}: {:?}",
            p.requests().last().map(|q| q.url.clone())
        );
        assert_eq!(p.requests().last().unwrap().url, url, "{route}");
    }
}

#[test]
fn providers_without_a_route_are_refused_at_config_time() {
    let cfg = |extra: serde_json::Value| {
        let mut c = json!({
            "providers": { "openai": { "kind": "openai", "apiKey": "sk-a" } }
        });
        c.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        Config::parse(&c.to_string()).unwrap()
    };
    let err = cfg(json!({}))
        .client(FakePlatform::new(), vec![], &secret)
        .err()
        .expect("nothing could be called: refused");
    assert_eq!(err.issues.len(), 1, "{err}");
    assert_eq!(err.issues[0].path, "routes");
    assert!(
        err.issues[0].message.contains("\"provider\": \"openai\""),
        "shows how to write one: {err}"
    );
    // A listed model is a route; allowAnyModel reaches `provider/model`.
    for reachable in [
        json!({ "providers": { "openai": { "kind": "openai", "apiKey": "sk-a", "models": { "gpt-4o": {} } } } }),
        json!({ "allowAnyModel": true }),
        json!({ "routes": { "default": [{ "provider": "openai", "model": "gpt-4o" }] } }),
    ] {
        let r = cfg(reachable.clone()).client(FakePlatform::new(), vec![], &secret);
        assert!(r.is_ok(), "{reachable}: {:?}", r.err());
    }
}
