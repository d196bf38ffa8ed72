//! Hedged streams on the fake clock (issue 13, part 3): a stream whose
//! first attempt has handed nothing to the caller by `after` is asked of
//! the next entry too; the first stream to reach its commit point wins,
//! the other's fetch is aborted and recorded as cancelled (no breaker
//! failure, its reported tokens kept); the budget and the opt-out apply as
//! for whole answers.

use std::time::Duration;

use resilient_llm::testing::{block_on, reply, FakePlatform, Reply};
use resilient_llm::{Attempt, AttemptOutcome, CallOptions, Client, Config, Delta, Error, Platform};
use serde_json::{json, Value};

#[path = "common/hedge.rs"]
mod route;
use route::{client, client_with, req};

fn chunk(model: &str, delta: Value, finish: Option<&str>) -> String {
    let c = json!({ "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model,
                    "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }] });
    format!("data: {c}\n\n")
}

/// A stream answering `model`'s name, with its usage.
fn stream(model: &str) -> Reply {
    saying(model, model)
}

/// A stream of `model` answering `text`, with its usage.
fn saying(model: &str, text: &str) -> Reply {
    let usage = json!({ "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model,
        "choices": [], "usage": { "prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5 } });
    reply(200)
        .header("content-type", "text/event-stream")
        .chunks([
            chunk(model, json!({ "role": "assistant", "content": "" }), None),
            chunk(model, json!({ "content": text }), None),
            chunk(model, json!({}), Some("stop")),
            format!("data: {usage}\n\n"),
            "data: [DONE]\n\n".to_string(),
        ])
}

/// The stream read to its end: its text, who answered, every attempt.
struct Read {
    text: String,
    served_by: Option<String>,
    attempts: Vec<Attempt>,
    error: Option<Error>,
}

fn read(p: &FakePlatform, c: &Client<FakePlatform>, opts: CallOptions) -> Read {
    block_on(p, async {
        let mut s = c.stream(req(), opts).unwrap();
        let (mut text, mut error) = (String::new(), None);
        while let Some(item) = s.next().await {
            match item {
                Ok(Delta::Text { text: t }) => text.push_str(&t),
                Ok(_) => {}
                Err(e) => error = Some(e),
            }
        }
        let attempts = match &error {
            Some(e) => e.attempts().to_vec(),
            None => s.attempts().to_vec(),
        };
        Read {
            text,
            served_by: s.served_by().map(|b| b.provider.clone()),
            attempts,
            error,
        }
    })
}

fn outcomes(attempts: &[Attempt]) -> Vec<(String, AttemptOutcome)> {
    attempts
        .iter()
        .map(|a| (a.provider.clone(), a.outcome.clone()))
        .collect()
}

#[test]
fn a_hedge_whose_first_token_comes_first_wins_and_the_slow_stream_is_aborted_and_cancelled() {
    let p = FakePlatform::new();
    p.script(
        "https://first.test",
        [stream("m1").delay(Duration::from_secs(3))],
    );
    p.script(
        "https://second.test",
        [stream("m2").delay(Duration::from_millis(200))],
    );
    let c = client(&p, json!({ "after": 500 }));
    let r = read(&p, &c, CallOptions::default());
    assert!(r.error.is_none(), "{:?}", r.error);
    assert_eq!(
        (r.text.as_str(), r.served_by.as_deref()),
        ("m2", Some("second"))
    );
    assert_eq!(p.now(), 700, "hedged at 500 ms, first token 200 ms later");
    assert_eq!(
        outcomes(&r.attempts),
        [
            ("first".to_string(), AttemptOutcome::Cancelled),
            ("second".to_string(), AttemptOutcome::Success)
        ]
    );
    let cancelled = &r.attempts[0];
    assert_eq!(
        (cancelled.number, cancelled.duration, cancelled.usage),
        (1, Duration::from_millis(700), None)
    );
    assert!(p.aborted() >= 1, "the slow fetch was aborted");
    assert_eq!(p.requests_to("https://third.test"), 0, "maxExtra 1");
    let health = serde_json::to_value(c.health()).unwrap();
    assert_eq!(health[0]["provider"], "first");
    assert_eq!(
        health[0]["requests"], 0,
        "a cancelled attempt is no verdict"
    );
    assert_eq!(health[0]["consecutiveFailures"], 0);
    assert_eq!(health[0]["state"], "closed");
}

#[test]
fn a_first_stream_that_commits_before_its_hedge_wins_and_the_hedge_is_cancelled() {
    let p = FakePlatform::new();
    // Headers at once, the first token at 800 ms: the hedge goes at 500.
    p.script(
        "https://first.test",
        [stream("m1").chunk_delay(Duration::from_millis(400))],
    );
    p.script(
        "https://second.test",
        [stream("m2").delay(Duration::from_secs(2))],
    );
    let c = client(&p, json!({ "after": 500 }));
    let r = read(&p, &c, CallOptions::default());
    assert_eq!(
        (r.text.as_str(), r.served_by.as_deref()),
        ("m1", Some("first"))
    );
    assert_eq!(
        p.requests_to("https://second.test"),
        1,
        "the hedge went out"
    );
    // In the order they were recorded: the hedge's when it was dropped, the
    // winner's when its stream completed.
    assert_eq!(
        outcomes(&r.attempts),
        [
            ("second".to_string(), AttemptOutcome::Cancelled),
            ("first".to_string(), AttemptOutcome::Success)
        ]
    );
    assert!(p.aborted() >= 1, "the hedge's fetch was aborted");
}

#[test]
fn a_loser_with_its_body_open_is_aborted_mid_body_and_a_failed_hedge_leaves_the_first() {
    // The first stream's headers come at once; its first token only after
    // 1 s. The hedge asks the rest of the route (failing over there as a
    // stream does) and fails everywhere (bad keys): out of the race, the
    // first stream still answers.
    let p = FakePlatform::new();
    p.script(
        "https://first.test",
        [stream("m1").chunk_delay(Duration::from_millis(500))],
    );
    let bad = || reply(401).body(r#"{"error":{"message":"bad key","type":"invalid_api_key"}}"#);
    p.script("https://second.test", [bad()]);
    p.script("https://third.test", [bad()]);
    let c = client(&p, json!({ "after": 300 }));
    let r = read(&p, &c, CallOptions::default());
    assert_eq!(r.served_by.as_deref(), Some("first"));
    assert_eq!(r.text, "m1");
    let failed: Vec<&str> = r
        .attempts
        .iter()
        .filter(|a| matches!(a.outcome, AttemptOutcome::Failure { .. }))
        .map(|a| a.provider.as_str())
        .collect();
    assert_eq!(failed, ["second", "third"]);
    assert_eq!(p.requests().len(), 3, "each entry asked once");

    // Now the hedge wins while the first stream's body is open.
    let p = FakePlatform::new();
    p.script(
        "https://first.test",
        [stream("m1").chunk_delay(Duration::from_secs(2))],
    );
    p.script("https://second.test", [stream("m2")]);
    let c = client(&p, json!({ "after": 300 }));
    let r = read(&p, &c, CallOptions::default());
    assert_eq!(r.served_by.as_deref(), Some("second"));
    assert_eq!(
        r.attempts[0].outcome,
        AttemptOutcome::Cancelled,
        "{:?}",
        r.attempts
    );
    assert!(p.aborted() >= 1, "the open body was dropped");
}

#[test]
fn when_every_stream_fails_before_its_commit_point_the_error_names_every_attempt() {
    let p = FakePlatform::new();
    let bad = || reply(503).body(r#"{"error":{"message":"down","type":"server_error"}}"#);
    p.script("https://first.test", [bad().delay(Duration::from_secs(1))]);
    p.script("https://second.test", [bad()]);
    p.script("https://third.test", [bad()]);
    let c = client_with(
        &p,
        json!({ "after": 500 }),
        json!({ "retry": { "maxAttempts": 1 } }),
    );
    let r = read(&p, &c, CallOptions::default());
    assert!(
        matches!(r.error, Some(Error::AllProvidersFailed(_))),
        "{:?}",
        r.error
    );
    // The hedge took the rest of the route; the first stream stopped at its
    // own entry: each entry asked once.
    assert_eq!(p.requests().len(), 3);
    let mut asked: Vec<String> = r.attempts.iter().map(|a| a.provider.clone()).collect();
    asked.sort();
    assert_eq!(asked, ["first", "second", "third"]);
}

#[test]
fn the_budget_bounds_stream_hedges_and_callers_opt_out() {
    let p = FakePlatform::new();
    p.script(
        "https://first.test",
        (0..21).map(|_| stream("m1").delay(Duration::from_secs(2))),
    );
    p.script("https://second.test", (0..21).map(|_| stream("m2")));
    let c = client(&p, json!({ "after": 500, "budget": 0.1 }));
    let served: Vec<Option<String>> = (0..20)
        .map(|_| read(&p, &c, CallOptions::default()).served_by)
        .collect();
    let second = Some("second".to_string());
    assert_eq!(p.requests_to("https://second.test"), 2, "{served:?}");
    assert_eq!((&served[0], &served[10]), (&second, &second));
    assert_eq!(p.requests_to("https://first.test"), 20);

    let opts = CallOptions {
        no_hedge: true,
        ..CallOptions::default()
    };
    let r = read(&p, &c, opts);
    assert_eq!(r.served_by.as_deref(), Some("first"));
    assert_eq!(p.requests_to("https://second.test"), 2, "no hedge went out");
}

#[test]
fn every_legs_attempts_are_booked_once_whichever_stream_wins() {
    let p = FakePlatform::new();
    let c = Config::parse(
        &json!({
            "providers": {
                "first": { "kind": "openai", "baseUrl": "https://first.test" },
                "second": { "kind": "openai", "baseUrl": "https://second.test" }
            },
            "routes": { "default": [ { "provider": "first", "model": "m1" },
                                     { "provider": "second", "model": "m2" } ] },
            "hedge": { "default": { "after": 500 } },
            "cost": { "prices": {
                "first/m1": { "inputPerMtok": 1000, "outputPerMtok": 1000 },
                "second/m2": { "inputPerMtok": 1000, "outputPerMtok": 1000 } } }
        })
        .to_string(),
    )
    .unwrap()
    .client(p.clone(), vec![], &|_| Some("sk-test".into()))
    .unwrap();
    // The hedge wins one, the first stream the other.
    p.script(
        "https://first.test",
        [stream("m1").delay(Duration::from_secs(3)), stream("m1")],
    );
    p.script("https://second.test", [stream("m2")]);
    for winner in ["second", "first"] {
        let r = read(&p, &c, CallOptions::default());
        assert_eq!(r.served_by.as_deref(), Some(winner));
    }
    let totals = serde_json::to_value(c.cost_totals()).unwrap();
    // 3 input and 2 output tokens at $1000 per million: $0.005 an answer,
    // each booked once; the cancelled attempt reported nothing.
    assert_eq!(
        totals,
        json!([
            { "provider": "first", "model": "m1", "usd": 0.005, "attempts": 1 },
            { "provider": "second", "model": "m2", "usd": 0.005, "attempts": 1 }
        ])
    );
}

#[test]
fn a_winner_cut_after_its_commit_point_is_continued_on_the_entries_after_it() {
    // The first stream wins the race (the hedge to the second is slower),
    // then is cut mid-answer: it is continued on the next entry, as any
    // stream is, although a rival had taken that entry during the race.
    let p = FakePlatform::new();
    p.script(
        "https://first.test",
        [stream("m1")
            .chunk_delay(Duration::from_millis(400))
            .cut_after(2, resilient_llm::testing::BodyEnd::Reset)],
    );
    p.script(
        "https://second.test",
        [
            stream("m2").delay(Duration::from_secs(2)),
            saying("m2", "m1"),
        ],
    );
    let c = client(&p, json!({ "after": 300 }));
    let r = read(&p, &c, CallOptions::default());
    assert!(r.error.is_none(), "{:?}", r.error);
    assert_eq!(r.served_by.as_deref(), Some("first"));
    assert_eq!(
        p.requests_to("https://second.test"),
        2,
        "the hedge, then the continuation"
    );
    assert_eq!(r.text, "m1");
    let last = r.attempts.last().unwrap();
    assert_eq!(
        (last.provider.as_str(), &last.outcome),
        ("second", &AttemptOutcome::Success)
    );
}
