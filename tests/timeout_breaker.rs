//! Timeouts and the breaker, on the fake clock: requests too big for a provider to finish in
//! `timeoutMs` do not open its breaker while it finishes the others; a provider that finishes
//! nothing, small requests included, still opens (the rule: `src/policy/timeouts.rs`).

use std::time::Duration;

use resilient_llm::testing::{block_on, hang, reply, FakePlatform, Reply};
use resilient_llm::{ChatRequest, Client, Config, ErrorKind, Message, StateName};
use serde_json::json;

fn client(p: &FakePlatform) -> Client<FakePlatform> {
    let cfg = json!({
        "providers": {
            "a": {"kind": "openai", "baseUrl": "https://a.test"},
            "b": {"kind": "openai", "baseUrl": "https://b.test"}
        },
        "routes": {"r": [{"provider": "a", "model": "m"}, {"provider": "b", "model": "m"}]},
        "retry": {"maxAttempts": 1},
        "breaker": {"failureThreshold": 3, "minimumCalls": 6},
        "timeoutMs": 1000
    });
    Config::parse(&cfg.to_string())
        .unwrap()
        .client(p.clone(), vec![], &|_: &str| Some("sk-test".to_string()))
        .unwrap()
}

fn ask(words: usize) -> ChatRequest {
    let mut req = ChatRequest::new(vec![Message::user("word ".repeat(words))]);
    req.model = Some("r".into());
    req.max_tokens = Some(100);
    req
}

fn ok() -> Reply {
    reply(200).body(
        json!({"id": "c1", "object": "chat.completion", "model": "m",
               "choices": [{"index": 0, "finish_reason": "stop",
                            "message": {"role": "assistant", "content": "hi"}}],
               "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}})
        .to_string(),
    )
}

fn state(c: &Client<FakePlatform>) -> StateName {
    c.health()
        .into_iter()
        .find(|h| h.provider == "a")
        .unwrap()
        .state
}

/// Sends `req`; tells which provider answered and whether `a` timed out.
fn send(p: &FakePlatform, c: &Client<FakePlatform>, req: ChatRequest) -> (String, bool) {
    let r = block_on(p, c.chat(req)).unwrap();
    let timed_out = r
        .attempts
        .iter()
        .any(|a| a.provider == "a" && a.error().is_some_and(|e| e.kind == ErrorKind::Timeout));
    (r.served_by.provider, timed_out)
}

#[test]
fn requests_too_big_to_finish_in_time_leave_a_serving_provider_closed() {
    let p = FakePlatform::new();
    let c = client(&p);
    p.script("https://b.test", (0..20).map(|_| ok()));
    p.script("https://a.test", (0..3).map(|_| ok()));
    for _ in 0..3 {
        assert_eq!(send(&p, &c, ask(50)).0, "a");
    }
    // One client's five huge requests: a cannot finish them in time.
    p.script("https://a.test", (0..5).map(|_| hang()));
    for _ in 0..5 {
        assert_eq!(send(&p, &c, ask(100_000)), ("b".to_string(), true));
    }
    assert_eq!(state(&c), StateName::Closed);
    // a still serves everyone else.
    p.script("https://a.test", [ok()]);
    assert_eq!(send(&p, &c, ask(50)).0, "a");
}

#[test]
fn a_provider_that_times_out_small_requests_too_opens() {
    let p = FakePlatform::new();
    let c = client(&p);
    p.script("https://b.test", (0..20).map(|_| ok()));
    p.script("https://a.test", (0..3).map(|_| ok()));
    for _ in 0..3 {
        send(&p, &c, ask(50));
    }
    // a dies: requests it finished before now time out.
    p.script("https://a.test", (0..10).map(|_| hang()));
    for _ in 0..3 {
        assert_eq!(send(&p, &c, ask(40)), ("b".to_string(), true));
    }
    assert_eq!(state(&c), StateName::Open);
    assert_eq!(send(&p, &c, ask(40)), ("b".to_string(), false), "skipped");
    // After the cooldown, a probe times out too: open again.
    p.advance(Duration::from_secs(11));
    assert_eq!(send(&p, &c, ask(100_000)), ("b".to_string(), true));
    assert_eq!(state(&c), StateName::Open);
}

#[test]
fn a_provider_that_finishes_nothing_opens_without_a_history() {
    let p = FakePlatform::new();
    let c = client(&p);
    p.script("https://b.test", (0..20).map(|_| ok()));
    p.script("https://a.test", (0..20).map(|_| hang()));
    // Six requests finished none (minimumCalls): from the sixth on they
    // count, and three open it.
    for i in 0..7 {
        assert_eq!(send(&p, &c, ask(50)), ("b".to_string(), true), "{i}");
        assert_eq!(state(&c), StateName::Closed, "{i}");
    }
    send(&p, &c, ask(50));
    assert_eq!(state(&c), StateName::Open);
}
