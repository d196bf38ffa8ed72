//! The response cache for a Rust caller of `Client` (`cache::ResponseCache`),
//! on the fake platform: a miss then a hit, the stale answer when every entry
//! fails, tenants kept apart, and a route that does not cache.

use std::time::Duration;

use resilient_llm::cache::{CacheOutcome, ResponseCache};
use resilient_llm::testing::{block_on, reply, FakePlatform};
use resilient_llm::{CallOptions, ChatRequest, Client, Config, Error, Message};
use serde_json::json;

fn setup(p: &FakePlatform) -> (Client<FakePlatform>, ResponseCache) {
    let config = json!({
        "providers": { "primary": { "kind": "openai", "baseUrl": "https://primary.test", "apiKey": "sk-p" } },
        "routes": {
            "default": [ { "provider": "primary", "model": "gpt" } ],
            "plain": [ { "provider": "primary", "model": "gpt" } ]
        },
        "cache": { "default": { "ttlSeconds": 60, "staleIfErrorSeconds": 600 } },
        "retry": { "maxAttempts": 1 },
        "breaker": { "failureThreshold": 100 }
    });
    let v = Config::parse(&config.to_string())
        .expect("parses")
        .validate(&|_| None, &[])
        .expect("valid");
    let cache = ResponseCache::new(v.cache.clone(), v.cache_bounds);
    (v.into_builder(p.clone(), Vec::new()).build(), cache)
}

fn ok(text: &str) -> String {
    json!({ "id": "c", "object": "chat.completion", "created": 1, "model": "gpt-2026",
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": text }, "finish_reason": "stop" }] })
    .to_string()
}

fn ask(route: &str, text: &str) -> ChatRequest {
    let mut r = ChatRequest::new(vec![Message::user(text)]);
    r.model = Some(route.into());
    r
}

#[test]
fn a_miss_a_hit_then_stale_when_every_entry_fails() {
    let p = FakePlatform::new().at(1_800_000_000_000);
    p.script(
        "https://primary.test",
        [reply(200).body(ok("no")), reply(503), reply(503)],
    );
    let (client, cache) = setup(&p);
    let run = |r| block_on(&p, cache.chat(&client, r, CallOptions::default(), None));
    let first = run(ask("default", "spam?")).expect("answered");
    assert!(
        matches!(first.outcome, CacheOutcome::Miss),
        "{:?}",
        first.outcome
    );
    p.advance(Duration::from_secs(4));
    let hit = run(ask("default", "spam?")).expect("answered");
    assert!(
        matches!(hit.outcome, CacheOutcome::Hit { age_secs: 4 }),
        "{:?}",
        hit.outcome
    );
    assert_eq!(hit.reply.response.text, "no");
    assert!(hit.reply.attempts.is_empty());
    assert_eq!(hit.reply.served_by.provider, "primary");
    assert_eq!(p.requests_to("https://primary.test"), 1);

    p.advance(Duration::from_secs(60));
    let stale = run(ask("default", "spam?")).expect("the stale answer");
    match stale.outcome {
        CacheOutcome::Stale { age_secs, error } => {
            assert_eq!(age_secs, 64);
            assert!(matches!(*error, Error::AllProvidersFailed(_)));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(stale.reply.response.text, "no");
    assert!(
        run(ask("default", "another?")).is_err(),
        "nothing stored for it"
    );
}

#[test]
fn tenants_are_kept_apart_and_an_uncached_route_is_asked_every_time() {
    let p = FakePlatform::new();
    p.script(
        "https://primary.test",
        [
            reply(200).body(ok("a")),
            reply(200).body(ok("b")),
            reply(200).body(ok("c")),
            reply(200).body(ok("d")),
        ],
    );
    let (client, cache) = setup(&p);
    let run = |r, t: Option<&[u8]>| block_on(&p, cache.chat(&client, r, CallOptions::default(), t));
    run(ask("default", "q"), Some(b"alice")).expect("answered");
    let bob = run(ask("default", "q"), Some(b"bob")).expect("answered");
    assert!(matches!(bob.outcome, CacheOutcome::Miss));
    assert_eq!(bob.reply.response.text, "b");
    let alice = run(ask("default", "q"), Some(b"alice")).expect("answered");
    assert!(matches!(alice.outcome, CacheOutcome::Hit { .. }));
    assert_eq!(alice.reply.response.text, "a");
    let plain = run(ask("plain", "q"), None).expect("answered");
    assert!(matches!(plain.outcome, CacheOutcome::Uncached));
    let again = run(ask("plain", "q"), None).expect("answered");
    assert!(matches!(again.outcome, CacheOutcome::Uncached));
    assert_eq!(p.requests_to("https://primary.test"), 4);
}

#[test]
fn a_callers_controls_skip_the_lookup_the_write_or_shorten_the_ttl() {
    use resilient_llm::cache::Controls;
    let p = FakePlatform::new().at(1_800_000_000_000);
    let answers: Vec<_> = ["one", "two", "three", "four"]
        .iter()
        .map(|t| reply(200).body(ok(t)))
        .collect();
    p.script("https://primary.test", answers);
    let (client, cache) = setup(&p);
    let run = |controls| {
        let r = ask("default", "spam?");
        block_on(
            &p,
            cache.chat_controlled(&client, r, CallOptions::default(), None, controls),
        )
        .expect("answered")
    };
    let refresh = Controls {
        no_cache: true,
        ..Controls::default()
    };
    // Nothing stored yet, and no lookup: asked, and stored.
    let a = run(refresh);
    assert!(matches!(a.outcome, CacheOutcome::Bypass), "{:?}", a.outcome);
    let b = run(Controls::default());
    assert!(matches!(b.outcome, CacheOutcome::Hit { .. }));
    assert_eq!(b.reply.response.text, "one");
    // A fresh answer stored, yet no-cache asks again and keeps the new one.
    let c = run(refresh);
    assert_eq!(c.reply.response.text, "two");
    assert_eq!(run(Controls::default()).reply.response.text, "two");

    // no-store: asked (past the TTL), the answer not kept.
    p.advance(Duration::from_secs(61));
    let keep_out = Controls {
        no_store: true,
        ..Controls::default()
    };
    let d = run(keep_out);
    assert_eq!(d.reply.response.text, "three");
    assert!(matches!(d.outcome, CacheOutcome::Miss));
    // A TTL of 5 s asked: the answer is fresh for 5 s, not the route's 60.
    let short = Controls {
        ttl: Some(Duration::from_secs(5)),
        ..Controls::default()
    };
    assert_eq!(run(short).reply.response.text, "four");
    p.advance(Duration::from_secs(4));
    let e = run(Controls::default());
    assert!(matches!(e.outcome, CacheOutcome::Hit { age_secs: 4 }));
    assert_eq!(e.reply.response.text, "four");
    p.advance(Duration::from_secs(2));
    p.script("https://primary.test", [reply(200).body(ok("five"))]);
    assert_eq!(run(Controls::default()).reply.response.text, "five");
    assert_eq!(p.requests_to("https://primary.test"), 5);
}
