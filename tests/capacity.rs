//! Steering by the providers' rate-limit headers before any 429, on the
//! fake clock: an entry whose provider said its pool cannot take the next
//! request goes behind one that can, until its reset; a lone entry, or a
//! route where no entry can, is asked as before.

use std::time::Duration;

use resilient_llm::gateway::{Gateway, Inbound, Setup};
use resilient_llm::testing::{block_on, reply, FakePlatform, Reply};
use resilient_llm::{Body, Headers, MemoryStore};
use serde_json::{json, Value};

fn gateway(p: &FakePlatform, routes: Value) -> Gateway<FakePlatform, MemoryStore> {
    gateway_steering(p, routes, true)
}

fn gateway_steering(
    p: &FakePlatform,
    routes: Value,
    steer: bool,
) -> Gateway<FakePlatform, MemoryStore> {
    let config = json!({
        "steerByCapacity": steer,
        "providers": {
            "a": { "kind": "openai", "baseUrl": "https://a.test", "apiKey": "sk-a" },
            "b": { "kind": "openai", "baseUrl": "https://b.test", "apiKey": "sk-b" }
        },
        "routes": routes,
        "retry": { "maxAttempts": 1 },
        "gateway": { "allowUnauthenticated": true }
    });
    let setup = Setup::load(Some(&config.to_string()), &|_| None).expect("valid config");
    let store = MemoryStore::new(setup.breaker());
    setup.into_gateway(p.clone(), store)
}

fn two() -> Value {
    json!({ "default": [ { "provider": "a", "model": "m" }, { "provider": "b", "model": "m" } ] })
}

/// An answer from `who`, with `headers`.
fn answer(who: &str, headers: &[(&str, &str)]) -> Reply {
    let body = json!({
        "id": "c", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": who }, "finish_reason": "stop" }],
        "usage": { "prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5 }
    });
    headers
        .iter()
        .fold(reply(200).body(body.to_string()), |r, (n, v)| {
            r.header(n, v)
        })
}

/// Asks the default route with `max_tokens`; who answered.
fn ask(p: &FakePlatform, g: &Gateway<FakePlatform, MemoryStore>, max_tokens: u32) -> String {
    let body = json!({ "model": "default", "max_tokens": max_tokens,
                       "messages": [{ "role": "user", "content": "hello there" }] })
    .to_string();
    let mut headers = Headers::new();
    headers.append("content-length", body.len().to_string());
    let out = block_on(
        p,
        g.handle(Inbound {
            method: "POST".into(),
            path: "/v1/chat/completions".into(),
            headers,
            body: Body::full(body.into_bytes()),
        }),
    );
    assert_eq!(out.status, 200, "{}", String::from_utf8_lossy(&out.body));
    let body: Value = serde_json::from_slice(&out.body).expect("json");
    body["choices"][0]["message"]["content"]
        .as_str()
        .expect("text")
        .to_string()
}

const LOW_TOKENS: &[(&str, &str)] = &[
    ("x-ratelimit-limit-tokens", "10000"),
    ("x-ratelimit-remaining-tokens", "300"),
    ("x-ratelimit-reset-tokens", "30s"),
];

#[test]
fn a_pool_that_cannot_take_the_request_goes_behind_until_its_reset() {
    let p = FakePlatform::new().at(1_700_000_000_000);
    p.script(
        "https://a.test",
        [answer("a", LOW_TOKENS), answer("a", &[])],
    );
    p.script("https://b.test", [answer("b", &[])]);
    let g = gateway(&p, two());
    assert_eq!(ask(&p, &g, 100), "a", "nothing said yet");
    // 300 tokens left: a request that may use 100 fits, one of 1,000 does not.
    assert_eq!(ask(&p, &g, 1000), "b", "steered before any 429");
    assert_eq!(p.requests_to("https://a.test"), 1, "a was not asked");
    p.advance(Duration::from_secs(30));
    assert_eq!(ask(&p, &g, 1000), "a", "full again at its reset");
    assert_eq!(p.requests_to("https://a.test"), 2);
}

#[test]
fn a_request_the_pool_can_take_stays_in_route_order() {
    let p = FakePlatform::new();
    p.script(
        "https://a.test",
        [answer("a", LOW_TOKENS), answer("a", &[])],
    );
    let g = gateway(&p, two());
    assert_eq!(ask(&p, &g, 100), "a");
    assert_eq!(ask(&p, &g, 100), "a", "100 + the input fit in 300");
}

#[test]
fn requests_below_the_reserve_steer_too() {
    let p = FakePlatform::new();
    let spent = [
        ("x-ratelimit-limit-requests", "1000"),
        ("x-ratelimit-remaining-requests", "10"),
        ("x-ratelimit-reset-requests", "2s"),
    ];
    p.script("https://a.test", [answer("a", &spent), answer("a", &[])]);
    p.script("https://b.test", [answer("b", &[])]);
    let g = gateway(&p, two());
    assert_eq!(ask(&p, &g, 10), "a");
    // 10 left of 1,000: below the reserve of 1 % + 1.
    assert_eq!(ask(&p, &g, 10), "b");
    p.advance(Duration::from_secs(2));
    assert_eq!(ask(&p, &g, 10), "a");
}

#[test]
fn a_lone_entry_or_a_route_where_none_can_is_asked_as_before() {
    let p = FakePlatform::new();
    p.script(
        "https://a.test",
        [answer("a", LOW_TOKENS), answer("a", &[])],
    );
    let g = gateway(
        &p,
        json!({ "default": [ { "provider": "a", "model": "m" } ] }),
    );
    assert_eq!(ask(&p, &g, 10), "a");
    assert_eq!(ask(&p, &g, 1000), "a", "nothing to steer to: asked anyway");

    let p = FakePlatform::new();
    p.script(
        "https://a.test",
        [answer("a", LOW_TOKENS), answer("a", &[])],
    );
    p.script("https://b.test", [answer("b", LOW_TOKENS)]);
    let g = gateway(&p, two());
    assert_eq!(ask(&p, &g, 10), "a");
    // b has said nothing yet: it can.
    assert_eq!(ask(&p, &g, 1000), "b");
    // Now neither can take 1,000: the route's order stands.
    assert_eq!(ask(&p, &g, 1000), "a");
}

fn tier() -> Value {
    json!({ "default": [ { "provider": "a", "model": "m", "priority": 1, "weight": 1 },
                         { "provider": "b", "model": "m", "priority": 1, "weight": 1 } ] })
}

/// A tenth of a's requests left, for a minute: enough to take a request.
const TENTH_LEFT: &[(&str, &str)] = &[
    ("x-ratelimit-limit-requests", "1000"),
    ("x-ratelimit-remaining-requests", "100"),
    ("x-ratelimit-reset-requests", "1m0s"),
];

#[test]
fn tier_weights_follow_the_share_of_each_pool_left() {
    // Every draw is 0.3: of weights 1 and 1, a comes first (0.6 < 1); of
    // 0.1 and 1, b does (0.33 is past a's 0.1).
    let p = FakePlatform::new().random([0.3]);
    p.script(
        "https://a.test",
        [answer("a", TENTH_LEFT), answer("a", &[])],
    );
    p.script("https://b.test", [answer("b", &[])]);
    let g = gateway(&p, tier());
    assert_eq!(ask(&p, &g, 10), "a", "equal weights, nothing said");
    assert_eq!(ask(&p, &g, 10), "b", "a's weight is a tenth now");
    assert_eq!(p.requests_to("https://a.test"), 1);
    p.advance(Duration::from_secs(60));
    assert_eq!(ask(&p, &g, 10), "a", "refilled: its weight is whole again");
}

#[test]
fn steering_off_leaves_429s_alone_to_move_traffic() {
    let p = FakePlatform::new().random([0.3]);
    p.script(
        "https://a.test",
        [
            answer("a", TENTH_LEFT),
            answer("a", LOW_TOKENS),
            answer("a", &[]),
        ],
    );
    let g = gateway_steering(&p, tier(), false);
    assert_eq!(ask(&p, &g, 10), "a");
    assert_eq!(ask(&p, &g, 10), "a", "weights as configured");
    // 300 tokens left: steered, this would go to b.
    assert_eq!(ask(&p, &g, 1000), "a", "not steered by the pool");
    assert_eq!(p.requests_to("https://b.test"), 0);
}
