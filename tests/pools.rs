//! The providers' rate-limit pools, as their answers' headers say them, on
//! the fake clock: an OpenAI answer's `x-ratelimit-*` and an Anthropic
//! answer's `anthropic-ratelimit-*` show in `Client::health()`, the
//! gateway's `/health` and `/metrics`; a 429 and a stream's opening update
//! them; a provider that sends none shows none.

mod common;

use std::future::poll_fn;

use common::fixture;
use prometheus_parse::{Scrape, Value as Sample};
use resilient_llm::gateway::{Gateway, Inbound, Piece, Setup};
use resilient_llm::testing::{block_on, reply, FakePlatform};
use resilient_llm::{Body, Headers, MemoryStore, PoolReading, Quota};
use serde_json::{json, Value};

/// 2023-11-14T22:13:20Z, the time the fixtures' resets are written from.
const NOW: u64 = 1_700_000_000_000;

fn gateway(p: &FakePlatform) -> Gateway<FakePlatform, MemoryStore> {
    let config = json!({
        "providers": {
            "oai": { "kind": "openai", "baseUrl": "https://oai.test", "apiKey": "sk-o" },
            "claude": { "kind": "anthropic", "baseUrl": "https://claude.test", "apiKey": "sk-c" },
            "quiet": { "kind": "openai", "baseUrl": "https://quiet.test", "apiKey": "sk-q" }
        },
        "routes": {
            "default": [
                { "provider": "oai", "model": "gpt-big" },
                { "provider": "claude", "model": "claude-small" }
            ],
            "quiet": [ { "provider": "quiet", "model": "m" } ]
        },
        "retry": { "maxAttempts": 1 },
        "gateway": { "allowUnauthenticated": true }
    });
    let setup = Setup::load(Some(&config.to_string()), &|_| None).expect("valid config");
    let store = MemoryStore::new(setup.breaker());
    setup.into_gateway(p.clone(), store)
}

fn post(body: Value) -> Inbound {
    Inbound {
        method: "POST".into(),
        path: "/v1/chat/completions".into(),
        headers: [("content-type", "application/json")]
            .into_iter()
            .collect::<Headers>(),
        body: Body::full(body.to_string().into_bytes()),
    }
}

fn get(path: &str) -> Inbound {
    Inbound {
        method: "GET".into(),
        path: path.into(),
        headers: Headers::new(),
        body: Body::full(Vec::new()),
    }
}

fn chat(model: &str) -> Inbound {
    post(json!({ "model": model, "messages": [{ "role": "user", "content": "hi" }] }))
}

/// Answers `r` and reads a stream's body to its end.
fn run(p: &FakePlatform, g: &Gateway<FakePlatform, MemoryStore>, r: Inbound) -> u16 {
    let mut out = block_on(p, g.handle(r));
    if let Some(mut stream) = out.stream.take() {
        block_on(p, async {
            while let Some(piece) = poll_fn(|cx| stream.as_mut().poll_next(cx)).await {
                if let Piece::Log(line) = piece {
                    assert!(!line.is_empty());
                }
            }
        });
    }
    out.status
}

/// The pool `Client::health()` shows for `model` at `provider`.
fn pool_of(
    g: &Gateway<FakePlatform, MemoryStore>,
    provider: &str,
    model: &str,
) -> Option<PoolReading> {
    let health = g.client().health();
    let h = health
        .iter()
        .find(|h| h.provider == provider)
        .expect("provider");
    h.models
        .iter()
        .find(|m| m.model == model)
        .expect("model")
        .pool
}

fn quota(limit: Option<u64>, remaining: Option<u64>, reset_at: Option<u64>) -> Quota {
    Quota {
        limit,
        remaining,
        reset_at,
    }
}

fn health_json(p: &FakePlatform, g: &Gateway<FakePlatform, MemoryStore>) -> Value {
    let out = block_on(p, g.handle(get("/health")));
    assert_eq!(out.status, 200);
    serde_json::from_slice(&out.body).expect("JSON")
}

/// `/health`'s model entry `model` of `provider`.
fn model_json(health: &Value, provider: &str, model: &str) -> Value {
    let providers = health["providers"].as_array().expect("providers");
    let h = providers
        .iter()
        .find(|h| h["provider"] == provider)
        .expect("provider");
    let models = h["models"].as_array().expect("models");
    models
        .iter()
        .find(|m| m["model"] == model)
        .expect("model")
        .clone()
}

fn scrape(p: &FakePlatform, g: &Gateway<FakePlatform, MemoryStore>) -> (String, Scrape) {
    let out = block_on(p, g.handle(get("/metrics")));
    assert_eq!(out.status, 200);
    let text = String::from_utf8(out.body).expect("utf-8");
    let lines = text.lines().map(|l| Ok(l.to_string()));
    (text.clone(), Scrape::parse(lines).expect("parses"))
}

/// The gauge `name` of `model` at `provider`.
fn gauge(s: &Scrape, name: &str, provider: &str, model: &str) -> Option<f64> {
    s.samples
        .iter()
        .filter(|x| x.metric == name)
        .find(|x| {
            x.labels.get("provider") == Some(provider) && x.labels.get("model") == Some(model)
        })
        .map(|x| match &x.value {
            Sample::Gauge(v) | Sample::Untyped(v) => *v,
            other => panic!("{name}: not a gauge: {other:?}"),
        })
}

#[test]
fn pools_from_answers_show_in_health_and_metrics() {
    let p = FakePlatform::new().at(NOW);
    let g = gateway(&p);
    assert_eq!(pool_of(&g, "oai", "gpt-big"), None, "nothing said yet");

    // An OpenAI answer with its x-ratelimit-* headers.
    p.script("https://oai.test", [fixture("openai/ok_ratelimit_headers")]);
    assert_eq!(run(&p, &g, chat("default")), 200);
    let oai = PoolReading {
        said_at: NOW,
        requests: quota(Some(10_000), Some(9_999), Some(NOW + 360_000)),
        tokens: quota(Some(30_000_000), Some(29_999_947), Some(NOW + 3_723_500)),
        ..PoolReading::default()
    };
    assert_eq!(pool_of(&g, "oai", "gpt-big"), Some(oai));

    // A minute on, OpenAI refuses with a 429 whose headers say the
    // requests pool is empty; Anthropic answers, with its own headers.
    p.advance(std::time::Duration::from_secs(60));
    let later = NOW + 60_000;
    p.script(
        "https://oai.test",
        [reply(429)
            .header("content-type", "application/json")
            .header("retry-after", "20")
            .header("x-ratelimit-limit-requests", "10000")
            .header("x-ratelimit-remaining-requests", "0")
            .header("x-ratelimit-reset-requests", "20s")
            .body(r#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#)],
    );
    p.script(
        "https://claude.test",
        [fixture("anthropic/ok_ratelimit_headers")],
    );
    assert_eq!(run(&p, &g, chat("default")), 200);
    let limited = pool_of(&g, "oai", "gpt-big").expect("the 429 said it");
    assert_eq!(limited.said_at, later);
    assert_eq!(
        limited.requests,
        quota(Some(10_000), Some(0), Some(later + 20_000))
    );
    assert_eq!(
        limited.retry_after_until,
        Some(later + 20_000),
        "its Retry-After marks the pool empty until then"
    );
    assert!(
        limited.tokens.is_empty(),
        "the last answer said nothing of tokens"
    );
    let claude = pool_of(&g, "claude", "claude-small").expect("Anthropic's headers");
    assert_eq!(claude.said_at, later);
    assert_eq!(claude.requests.remaining, Some(3_999));
    // Its resets are the times the headers name (written from NOW), not
    // durations from when they were said.
    assert_eq!(
        claude.output_tokens,
        quota(Some(80_000), Some(80_000), Some(NOW + 7_000))
    );
    assert_eq!(claude.input_tokens.limit, Some(400_000));

    // A provider that says nothing shows no pool; its entry keeps its shape.
    p.script("https://quiet.test", [fixture("openai/ok_text")]);
    assert_eq!(run(&p, &g, chat("quiet")), 200);
    assert_eq!(pool_of(&g, "quiet", "m"), None);

    // /health: the same, in JSON (resets in ms since the Unix epoch).
    let health = health_json(&p, &g);
    assert_eq!(
        model_json(&health, "oai", "gpt-big")["pool"],
        json!({ "saidAt": later, "requests": { "limit": 10_000, "remaining": 0, "resetAt": later + 20_000 },
                "retryAfterUntil": later + 20_000 })
    );
    let claude_json = model_json(&health, "claude", "claude-small");
    assert_eq!(
        claude_json["pool"]["tokens"],
        json!({ "limit": 480_000, "remaining": 479_000, "resetAt": NOW })
    );
    assert_eq!(
        claude_json["pool"]["outputTokens"]["resetAt"],
        json!(NOW + 7_000)
    );
    let quiet = model_json(&health, "quiet", "m");
    assert_eq!(quiet.get("pool"), None, "{quiet}");
    assert_eq!(quiet["requests"], 1, "the other fields as they were");

    // /metrics: gauges by provider and model.
    let (text, s) = scrape(&p, &g);
    let at = |name: &str, provider: &str, model: &str| gauge(&s, name, provider, model);
    assert_eq!(
        at("llm_gateway_pool_remaining_requests", "oai", "gpt-big"),
        Some(0.0),
        "{text}"
    );
    assert_eq!(
        at("llm_gateway_pool_limit_requests", "oai", "gpt-big"),
        Some(10_000.0)
    );
    assert_eq!(
        at(
            "llm_gateway_pool_requests_reset_timestamp_seconds",
            "oai",
            "gpt-big"
        ),
        Some((later + 20_000) as f64 / 1000.0)
    );
    assert_eq!(
        at("llm_gateway_pool_remaining_tokens", "oai", "gpt-big"),
        None,
        "not said by the 429"
    );
    assert_eq!(
        at(
            "llm_gateway_pool_remaining_requests",
            "claude",
            "claude-small"
        ),
        Some(3_999.0)
    );
    assert_eq!(
        at(
            "llm_gateway_pool_remaining_tokens",
            "claude",
            "claude-small"
        ),
        Some(479_000.0)
    );
    assert_eq!(
        at("llm_gateway_pool_limit_tokens", "claude", "claude-small"),
        Some(480_000.0)
    );
    assert_eq!(
        at(
            "llm_gateway_pool_tokens_reset_timestamp_seconds",
            "claude",
            "claude-small"
        ),
        Some(NOW as f64 / 1000.0)
    );
    assert_eq!(
        at("llm_gateway_pool_remaining_requests", "quiet", "m"),
        None
    );
}

#[test]
fn a_stream_opening_updates_its_pool() {
    let p = FakePlatform::new().at(NOW);
    let g = gateway(&p);
    let chunks = [
        r#"data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-big","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":null}]}"#,
        r#"data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-big","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        "data: [DONE]",
    ]
    .map(|c| format!("{c}\n\n"));
    p.script(
        "https://oai.test",
        [reply(200)
            .header("content-type", "text/event-stream")
            .header("x-ratelimit-remaining-requests", "41")
            .header("x-ratelimit-remaining-tokens", "9000")
            .header("x-ratelimit-reset-tokens", "1.5s")
            .chunks(chunks)],
    );
    let body = json!({ "model": "default", "stream": true, "messages": [{ "role": "user", "content": "hi" }] });
    assert_eq!(run(&p, &g, post(body)), 200);
    let pool = pool_of(&g, "oai", "gpt-big").expect("the stream's headers");
    assert_eq!(pool.requests, quota(None, Some(41), None));
    assert_eq!(pool.tokens, quota(None, Some(9_000), Some(NOW + 1_500)));
}
