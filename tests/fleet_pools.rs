//! Rate-limit pool readings shared fleet-wide (issue 30, item 4): two
//! isolates on one fleet object per model (fake link, fake platform). What
//! one isolate's provider said of its pool — in its headers, or a 429's
//! Retry-After — rides with that isolate's verdicts to the object and
//! comes back in the views, so the other isolate steers by it within one
//! refresh, without a call of its own.

use std::time::Duration;

use resilient_llm::fleet::fake::{FakeLink, FakeObject};
use resilient_llm::fleet::{Call, Fleet, View};
use resilient_llm::testing::{block_on, reply, FakePlatform, Reply};
use resilient_llm::{
    BreakerPolicy, ChatRequest, Client, Config, FleetStore, Message, Platform, PoolReading,
};
use serde_json::json;

const NOW: u64 = 1_700_000_000_000;

fn answer(who: &str, headers: &[(&str, &str)]) -> Reply {
    let body = json!({ "id": "c", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": who }, "finish_reason": "stop" }],
        "usage": { "prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5 } });
    headers.iter().fold(
        reply(200)
            .header("content-type", "application/json")
            .body(body.to_string()),
        |r, (n, v)| r.header(n, v),
    )
}

struct Isolate {
    client: Client<FakePlatform, FleetStore<FakeLink>>,
}

impl Isolate {
    fn new(p: &FakePlatform, obj: &FakeObject, name: &str) -> Self {
        let cfg = json!({
            "providers": {
                "a": { "kind": "openai", "baseUrl": "https://a.test" },
                "b": { "kind": "openai", "baseUrl": "https://b.test" }
            },
            "routes": { "default": [ { "provider": "a", "model": "m" },
                                     { "provider": "b", "model": "m" } ] },
            "retry": { "maxAttempts": 1 }
        });
        let client = Config::parse(&cfg.to_string())
            .unwrap()
            .client_builder(p.clone(), vec![], &|_| Some("sk-test".into()))
            .unwrap()
            .build_with_store(FleetStore::new(
                FakeLink::new(obj),
                name,
                BreakerPolicy::default(),
            ));
        Isolate { client }
    }

    /// One request of up to `max_tokens` and the background work after it
    /// (what the Worker hands to `waitUntil`); who answered.
    fn ask(&self, p: &FakePlatform, max_tokens: u32) -> String {
        let mut req = ChatRequest::new(vec![Message::user("hello there")]);
        req.max_tokens = Some(max_tokens);
        let reply = block_on(p, self.client.chat(req)).expect("an answer");
        self.pump(p);
        reply.served_by.provider
    }

    fn pump(&self, p: &FakePlatform) {
        self.client.store().flush_due(p.now());
        self.client.store().link().pump();
    }
}

const LOW_TOKENS: &[(&str, &str)] = &[
    ("x-ratelimit-limit-tokens", "10000"),
    ("x-ratelimit-remaining-tokens", "300"),
    ("x-ratelimit-reset-tokens", "30s"),
];

#[test]
fn one_isolates_reading_steers_another_that_never_saw_the_headers() {
    let p = FakePlatform::new().at(NOW);
    let obj = FakeObject::new(&p, BreakerPolicy::default());
    let one = Isolate::new(&p, &obj, "one");
    let two = Isolate::new(&p, &obj, "two");
    let link = one.client.store().link().counts();
    p.script(
        "https://a.test",
        [
            answer("a", &[]),
            answer("a", LOW_TOKENS),
            answer("a", &[]),
            answer("a", &[]),
        ],
    );
    p.script("https://b.test", [answer("b", &[])]);

    // Two warms its view of both entries before any reading exists.
    assert_eq!(two.ask(&p, 10), "a");
    assert_eq!(one.ask(&p, 10), "a", "300 tokens left, said to one");
    // The reading waits for the verdicts' batch: no call of its own.
    assert_eq!(link.reports.get(), 0);
    p.advance(Duration::from_secs(1));
    one.pump(&p);
    assert_eq!(link.reports.get(), 1, "one report: verdict and reading");
    let kept = obj.fleet("a/m").expect("a's object").pool.expect("kept");
    assert_eq!(kept.tokens.remaining, Some(300));
    assert_eq!(kept.said_at, NOW);

    // Two's view is a second old: its next request still decides by it
    // and refreshes it in the background (as breaker state travels); from
    // then on two steers by one's reading.
    assert_eq!(two.ask(&p, 10), "a", "decided by the stale view");
    assert_eq!(two.ask(&p, 1000), "b", "steered by what one was told");
    assert_eq!(p.requests_to("https://a.test"), 3);
    p.advance(Duration::from_secs(30));
    two.pump(&p);
    assert_eq!(two.ask(&p, 1000), "a", "full again at its reset");
}

#[test]
fn a_429s_retry_after_empties_the_pool_fleet_wide_until_then() {
    let p = FakePlatform::new().at(NOW);
    let obj = FakeObject::new(&p, BreakerPolicy::default());
    let one = Isolate::new(&p, &obj, "one");
    let two = Isolate::new(&p, &obj, "two");
    p.script(
        "https://a.test",
        [
            answer("a", &[]),
            reply(429)
                .header("content-type", "application/json")
                .header("retry-after", "20")
                .body(r#"{"error":{"message":"Rate limit reached","type":"requests"}}"#),
            answer("a", &[]),
        ],
    );
    p.script("https://b.test", [answer("b", &[]), answer("b", &[])]);
    assert_eq!(two.ask(&p, 10), "a");
    assert_eq!(one.ask(&p, 10), "b", "a said 429: failed over");
    p.advance(Duration::from_secs(1));
    one.pump(&p);
    two.pump(&p);
    let held = obj.fleet("a/m").unwrap().pool.expect("the 429's hold");
    assert_eq!(held.retry_after_until, Some(NOW + 20_000));
    // Two never saw the 429 (a Bedrock or Vertex pool is learnt this way).
    assert_eq!(two.ask(&p, 10), "b");
    assert_eq!(p.requests_to("https://a.test"), 2);
    p.advance(Duration::from_secs(20));
    two.pump(&p);
    assert_eq!(two.ask(&p, 10), "a", "its Retry-After has passed");
}

/// `tests/fixtures/fleet/<name>.json`.
fn fixture(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/fleet")
        .join(format!("{name}.json"));
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim_end()
        .to_string()
}

/// `text` with its top-level `pool` taken out, as JSON.
fn without_pool(text: &str) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_str(text).unwrap();
    v.as_object_mut().unwrap().remove("pool");
    v
}

#[test]
fn old_and_new_protocol_messages_read_each_other() {
    let reading: PoolReading = serde_json::from_value(json!({
        "saidAt": NOW,
        "requests": { "limit": 500, "remaining": 0, "resetAt": NOW + 90_500 },
        "retryAfterUntil": NOW + 20_000
    }))
    .unwrap();
    for (new, old) in [
        ("call-report-pool", "call-report"),
        ("view-pool", "view-closed"),
        ("stored-pool", "stored-closed"),
    ] {
        let text = fixture(new);
        // A new message is an old one with one more field, which an old
        // reader (none of these types denies unknown fields) passes over.
        assert_eq!(without_pool(&text), without_pool(&fixture(old)), "{new}");
        let with = |v: serde_json::Value| -> Option<PoolReading> {
            serde_json::from_value(v["pool"].clone()).ok()
        };
        assert_eq!(with(serde_json::from_str(&text).unwrap()), Some(reading));
        // The new types read both and write each as it was.
        match new {
            "call-report-pool" => {
                let call: Call = serde_json::from_str(&text).unwrap();
                assert_eq!(call.pool, Some(reading));
                assert_eq!(serde_json::to_string(&call).unwrap(), text);
                let old: Call = serde_json::from_str(&fixture(old)).unwrap();
                assert_eq!(old.pool, None);
            }
            "view-pool" => {
                let view: View = serde_json::from_str(&text).unwrap();
                assert_eq!(view.pool, Some(reading));
                assert_eq!(serde_json::to_string(&view).unwrap(), text);
                let old: View = serde_json::from_str(&fixture(old)).unwrap();
                assert_eq!(old.pool, None);
                assert_eq!(serde_json::to_string(&old).unwrap(), fixture("view-closed"));
            }
            _ => {
                let stored: Fleet = serde_json::from_str(&text).unwrap();
                assert_eq!(stored.pool, Some(reading));
                assert_eq!(serde_json::to_string(&stored).unwrap(), text);
                let old: Fleet = serde_json::from_str(&fixture(old)).unwrap();
                assert_eq!(old.pool, None);
            }
        }
    }
}

#[test]
fn the_object_keeps_the_newest_reading_whatever_order_reports_arrive_in() {
    let mut f = Fleet::new();
    let at = |said_at, remaining| PoolReading {
        said_at,
        requests: resilient_llm::Quota {
            limit: Some(100),
            remaining: Some(remaining),
            reset_at: None,
        },
        ..PoolReading::default()
    };
    f.note_pool(Some(at(2, 50)));
    f.note_pool(Some(at(1, 90)));
    f.note_pool(None);
    assert_eq!(f.pool, Some(at(2, 50)), "an older report's reading loses");
    f.note_pool(Some(at(3, 10)));
    assert_eq!(f.view(&BreakerPolicy::default(), 4).pool, Some(at(3, 10)));
}
