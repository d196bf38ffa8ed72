//! Hedged requests on the fake clock (issue 13, part 3): the next entry
//! asked when the first has not answered by `after`; the first answer
//! wins, the other's fetch is aborted and recorded as cancelled (no
//! breaker failure); a budget bounds the extra load; callers opt out.

use std::time::Duration;

use resilient_llm::testing::{block_on, reply, FakePlatform, Reply};
use resilient_llm::{AttemptOutcome, CallOptions, Config, Platform};
use serde_json::json;

#[path = "common/hedge.rs"]
mod route;
use route::{client, req};

fn answer(model: &str) -> Reply {
    let body = json!({ "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": model,
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": model }, "finish_reason": "stop" }],
        "usage": { "prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5 } });
    reply(200)
        .header("content-type", "application/json")
        .body(body.to_string())
}

fn outcomes(reply: &resilient_llm::Reply) -> Vec<(String, AttemptOutcome)> {
    reply
        .attempts
        .iter()
        .map(|a| (a.provider.clone(), a.outcome.clone()))
        .collect()
}

#[test]
fn a_hedge_that_answers_first_wins_and_the_slow_attempt_is_aborted_and_cancelled() {
    let p = FakePlatform::new();
    p.script(
        "https://first.test",
        [answer("m1").delay(Duration::from_secs(3))],
    );
    p.script(
        "https://second.test",
        [answer("m2").delay(Duration::from_millis(200))],
    );
    let c = client(&p, json!({ "after": 500 }));
    let r = block_on(&p, c.chat(req())).unwrap();
    assert_eq!(r.served_by.provider, "second");
    assert_eq!(
        p.now(),
        700,
        "the hedge went at 500 ms and answered 200 ms later"
    );
    assert_eq!(
        outcomes(&r),
        [
            ("first".to_string(), AttemptOutcome::Cancelled),
            ("second".to_string(), AttemptOutcome::Success)
        ]
    );
    let cancelled = &r.attempts[0];
    assert_eq!(
        (cancelled.number, cancelled.duration),
        (1, Duration::from_millis(700))
    );
    assert!(
        cancelled.usage.is_none(),
        "its answer never came: no usage to report"
    );
    assert!(p.aborted() >= 1, "the slow fetch was aborted");
    assert_eq!(p.requests_to("https://third.test"), 0, "maxExtra 1");
    // Cancelled is no verdict: the first provider's breaker and figures
    // heard nothing of it.
    let health = serde_json::to_value(c.health()).unwrap();
    assert_eq!(health[0]["provider"], "first");
    assert_eq!(health[0]["requests"], 0);
    assert_eq!(health[0]["consecutiveFailures"], 0);
    assert_eq!(health[0]["state"], "closed");
}

#[test]
fn the_first_attempt_answering_before_its_hedge_wins_and_the_hedge_is_cancelled() {
    let p = FakePlatform::new();
    p.script(
        "https://first.test",
        [answer("m1").delay(Duration::from_millis(800))],
    );
    p.script(
        "https://second.test",
        [answer("m2").delay(Duration::from_secs(2))],
    );
    let c = client(&p, json!({ "after": 500 }));
    let r = block_on(&p, c.chat(req())).unwrap();
    assert_eq!(r.served_by.provider, "first");
    assert_eq!(p.now(), 800);
    assert_eq!(
        outcomes(&r),
        [
            ("first".to_string(), AttemptOutcome::Success),
            ("second".to_string(), AttemptOutcome::Cancelled)
        ]
    );
    assert_eq!(r.attempts[1].duration, Duration::from_millis(300));
}

#[test]
fn no_hedge_goes_out_for_an_answer_inside_the_delay() {
    let p = FakePlatform::new();
    p.script(
        "https://first.test",
        [answer("m1").delay(Duration::from_millis(100))],
    );
    let c = client(&p, json!({ "after": 500 }));
    let r = block_on(&p, c.chat(req())).unwrap();
    assert_eq!(r.served_by.provider, "first");
    assert_eq!(p.requests().len(), 1);
}

#[test]
fn a_hedged_entry_that_fails_leaves_the_first_to_answer() {
    let p = FakePlatform::new();
    p.script(
        "https://first.test",
        [answer("m1").delay(Duration::from_secs(1))],
    );
    p.script(
        "https://second.test",
        [reply(401).body(r#"{"error":{"message":"bad key","type":"invalid_api_key"}}"#)],
    );
    let c = client(&p, json!({ "after": 500 }));
    let r = block_on(&p, c.chat(req())).unwrap();
    assert_eq!(r.served_by.provider, "first");
    assert_eq!(p.now(), 1000);
    assert!(
        matches!(r.attempts[1].outcome, AttemptOutcome::Failure { .. }),
        "{:?}",
        r.attempts
    );
}

#[test]
fn when_every_asked_entry_fails_the_walk_goes_on_past_them() {
    let p = FakePlatform::new();
    let bad = || reply(401).body(r#"{"error":{"message":"bad key","type":"invalid_api_key"}}"#);
    p.script("https://first.test", [bad().delay(Duration::from_secs(1))]);
    p.script("https://second.test", [bad()]);
    p.script("https://third.test", [answer("m3")]);
    let c = client(&p, json!({ "after": 500 }));
    let r = block_on(&p, c.chat(req())).unwrap();
    assert_eq!(r.served_by.provider, "third");
    assert_eq!(p.requests().len(), 3, "each entry asked once");
}

#[test]
fn the_budget_bounds_hedges_to_its_share_of_requests() {
    // An outage: every first attempt takes 2 s. A 0.1 share with one hedge
    // saved up at most: the first request hedges, then one in ten (the
    // eleventh): 2 in 20, where hedging all would double the load.
    let p = FakePlatform::new();
    p.script(
        "https://first.test",
        (0..20).map(|_| answer("m1").delay(Duration::from_secs(2))),
    );
    p.script("https://second.test", (0..20).map(|_| answer("m2")));
    let c = client(&p, json!({ "after": 500, "budget": 0.1 }));
    let served: Vec<String> = (0..20)
        .map(|_| block_on(&p, c.chat(req())).unwrap().served_by.provider)
        .collect();
    let hedged = p.requests_to("https://second.test");
    assert_eq!(hedged, 2, "{served:?}");
    assert_eq!(served[0], "second");
    assert_eq!(served[10], "second");
    assert_eq!(served.iter().filter(|s| *s == "second").count(), 2);
    assert_eq!(p.requests_to("https://first.test"), 20);
}

#[test]
fn a_caller_opts_out_of_hedging() {
    let p = FakePlatform::new();
    p.script(
        "https://first.test",
        [answer("m1").delay(Duration::from_secs(2))],
    );
    p.script("https://second.test", [answer("m2")]);
    let c = client(&p, json!({ "after": 500 }));
    let opts = CallOptions {
        no_hedge: true,
        ..CallOptions::default()
    };
    let r = block_on(&p, c.chat_with(req(), opts)).unwrap();
    assert_eq!(r.served_by.provider, "first");
    assert_eq!(p.requests_to("https://second.test"), 0);
}

#[test]
fn after_p95_waits_for_the_entrys_own_figures() {
    let p = FakePlatform::new();
    // No p95 yet: no hedge. Then 300 ms answers make the p95 300 ms.
    p.script(
        "https://first.test",
        (0..5).map(|_| answer("m1").delay(Duration::from_millis(300))),
    );
    p.script(
        "https://first.test",
        [answer("m1").delay(Duration::from_secs(5))],
    );
    p.script("https://second.test", [answer("m2")]);
    let c = client(&p, json!({ "after": "p95", "maxExtra": 1, "budget": 1 }));
    for _ in 0..5 {
        assert_eq!(
            block_on(&p, c.chat(req())).unwrap().served_by.provider,
            "first"
        );
    }
    assert_eq!(p.requests_to("https://second.test"), 0);
    let started = p.now();
    let r = block_on(&p, c.chat(req())).unwrap();
    assert_eq!(r.served_by.provider, "second");
    assert_eq!(p.now() - started, 300, "hedged at the entry's p95");
}

#[test]
fn hedge_settings_are_checked() {
    let cfg = json!({
        "providers": { "a": { "kind": "openai" } },
        "routes": { "default": [ { "provider": "a", "model": "m" } ] },
        "hedge": { "nowhere": { "after": 0, "maxExtra": 0, "budget": 1.5 } }
    });
    let err = Config::parse(&cfg.to_string())
        .unwrap()
        .validate(&|_| Some("k".into()), &[])
        .err()
        .unwrap()
        .to_string();
    for needle in [
        "hedge.nowhere: unknown route \"nowhere\"",
        "hedge.nowhere.after: must be greater than 0",
        "hedge.nowhere.maxExtra: must be between 1 and 10",
        "hedge.nowhere.budget: must be greater than 0 and at most 1",
    ] {
        assert!(err.contains(needle), "{needle} in {err}");
    }
    let bad = json!({ "hedge": { "default": { "after": "p50" } } });
    assert!(Config::parse(&bad.to_string()).is_err());
}
