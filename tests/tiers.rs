//! Weighted tiers on the fake platform: entries sharing a priority split
//! load by weight; the next tier serves only when the whole tier cannot; a
//! 429 moves traffic to the member's tier mates first.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use resilient_llm::testing::{block_on, err, ok, FakePlatform, ScriptedProvider, Step};
use resilient_llm::{
    ChatRequest, Client, Config, Entry, ErrorKind, Message, Policy, ProviderError, Upstream,
};

/// Uniform draws in [0, 1) from a fixed seed (xorshift64*), so the test is
/// the same on every run.
fn draws(n: usize) -> Vec<f64> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..n)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
        })
        .collect()
}

fn provider(p: &FakePlatform, name: &str, step: Step) -> (Upstream, Rc<Cell<usize>>) {
    let s = ScriptedProvider::new(p, name, [step]);
    let calls = s.calls();
    (Upstream::Custom(Box::new(s)), calls)
}

fn ask(c: &Client<FakePlatform>, p: &FakePlatform) -> String {
    let reply = block_on(p, c.chat(ChatRequest::new(vec![Message::user("hi")])));
    reply.expect("an answer").served_by.provider
}

#[test]
fn a_tier_splits_load_by_weight_within_five_percent_over_10000_requests() {
    let n = 10_000;
    let p = FakePlatform::new().at(1_000).random(draws(2 * n));
    let (a, a_calls) = provider(&p, "a", ok("a"));
    let (b, b_calls) = provider(&p, "b", ok("b"));
    let (c, c_calls) = provider(&p, "c", ok("c"));
    let (later, later_calls) = provider(&p, "later", ok("later"));
    let client = Client::builder(p.clone())
        .upstream("a", a)
        .upstream("b", b)
        .upstream("c", c)
        .upstream("later", later)
        .route(
            "default",
            vec![
                Entry::new("later", "m").priority(2),
                Entry::new("a", "m").priority(1).weight(5),
                Entry::new("b", "m").priority(1).weight(3),
                Entry::new("c", "m").priority(1).weight(2),
            ],
        )
        .build();
    for _ in 0..n {
        ask(&client, &p);
    }
    let total = n as f64;
    for (name, calls, expected) in [
        ("a", &a_calls, 0.5),
        ("b", &b_calls, 0.3),
        ("c", &c_calls, 0.2),
    ] {
        let share = calls.get() as f64 / total;
        assert!(
            (share - expected).abs() <= 0.05 * expected,
            "{name}: {share} of the load, expected {expected} ± 5 %"
        );
    }
    assert_eq!(
        later_calls.get(),
        0,
        "the next priority only when the tier cannot serve"
    );
}

#[test]
fn the_next_priority_serves_only_when_the_whole_tier_cannot() {
    let p = FakePlatform::new().at(1_000).random([0.1, 0.9]);
    let (a, a_calls) = provider(&p, "a", err(ErrorKind::Server, 503));
    let (b, b_calls) = provider(&p, "b", err(ErrorKind::Server, 503));
    let (later, _) = provider(&p, "later", ok("later"));
    let client = Client::builder(p.clone())
        .policy(Policy {
            retry: resilient_llm::RetryPolicy {
                max_attempts: 1,
                ..Default::default()
            },
            ..Policy::default()
        })
        .upstream("a", a)
        .upstream("b", b)
        .upstream("later", later)
        .route(
            "default",
            vec![
                Entry::new("a", "m").priority(1),
                Entry::new("b", "m").priority(1),
                Entry::new("later", "m").priority(2),
            ],
        )
        .build();
    assert_eq!(ask(&client, &p), "later");
    assert_eq!(
        (a_calls.get(), b_calls.get()),
        (1, 1),
        "both tier members tried first"
    );
}

#[test]
fn a_429_moves_traffic_to_its_tier_mates_first() {
    // Every draw puts `a` first (weights 1:1, draw 0.1).
    let p = FakePlatform::new().at(1_000).random([0.1]);
    let limited = Step::Fail(
        ProviderError::new(ErrorKind::RateLimited, "slow down")
            .with_status(429)
            .with_retry_after(Some(Duration::from_secs(5))),
    );
    let a = ScriptedProvider::new(&p, "a", [limited, ok("a")]);
    let a_calls = a.calls();
    let (b, b_calls) = provider(&p, "b", ok("b"));
    let client = Client::builder(p.clone())
        .upstream("a", Upstream::Custom(Box::new(a)))
        .upstream("b", b)
        .route(
            "default",
            vec![
                Entry::new("a", "m").priority(1),
                Entry::new("b", "m").priority(1),
            ],
        )
        .build();
    // The 429 moves on to the mate at once: no wait, no retry on `a`.
    assert_eq!(ask(&client, &p), "b");
    assert_eq!(a_calls.get(), 1);
    assert!(
        p.sleeps().is_empty(),
        "no Retry-After waited out: {:?}",
        p.sleeps()
    );
    // For its Retry-After, `a` comes after its mate although drawn first.
    for _ in 0..3 {
        assert_eq!(ask(&client, &p), "b");
    }
    assert_eq!(a_calls.get(), 1, "not called while held back");
    p.advance(Duration::from_secs(5));
    assert_eq!(
        ask(&client, &p),
        "a",
        "its share is back after the Retry-After"
    );
    assert_eq!(b_calls.get(), 4);
}

#[test]
fn a_429_without_tier_mates_is_retried_as_before() {
    let p = FakePlatform::new().at(1_000);
    let limited = Step::Fail(
        ProviderError::new(ErrorKind::RateLimited, "slow down")
            .with_status(429)
            .with_retry_after(Some(Duration::from_secs(1))),
    );
    let a = ScriptedProvider::new(&p, "a", [limited, ok("a")]);
    let (b, _) = provider(&p, "b", ok("b"));
    let client = Client::builder(p.clone())
        .upstream("a", Upstream::Custom(Box::new(a)))
        .upstream("b", b)
        .route(
            "default",
            vec![
                Entry::new("a", "m").priority(1),
                Entry::new("b", "m").priority(2),
            ],
        )
        .build();
    assert_eq!(ask(&client, &p), "a");
    assert_eq!(p.sleeps(), [Duration::from_secs(1)]);
}

#[test]
fn the_validator_checks_priorities_and_weights() {
    let json = r#"{
        "providers": { "a": { "kind": "openai" }, "b": { "kind": "openai" } },
        "routes": {
            "mixed": [{ "provider": "a", "model": "m", "priority": 1 }, { "provider": "b", "model": "m" }],
            "loose": [{ "provider": "a", "model": "m", "weight": 2 }],
            "zero": [{ "provider": "a", "model": "m", "priority": 1, "weight": 0 }],
            "huge": [{ "provider": "a", "model": "m", "priority": 1, "weight": 10001 }],
            "fine": [{ "provider": "a", "model": "m", "priority": 1, "weight": 3 },
                     { "provider": "b", "model": "m", "priority": 1 }]
        }
    }"#;
    let Err(err) = Config::parse(json)
        .expect("parses")
        .validate(&|_: &str| Some("k".to_string()), &[])
    else {
        panic!("the configuration passed");
    };
    let text = err.to_string();
    for needle in [
        "routes.mixed[1].priority: missing",
        "routes.loose[0].weight: needs a priority",
        "routes.zero[0].weight: must be 1 to 10000",
        "routes.huge[0].weight: must be 1 to 10000",
    ] {
        assert!(text.contains(needle), "{needle} in {text}");
    }
    assert!(!text.contains("routes.fine"), "{text}");
}
