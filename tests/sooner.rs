//! Routing that learns, on the fake clock: streams abandoned for a slow
//! pace before their commit point, entries demoted for their latency and
//! restored through exploration (issue 13, parts 2 and 5).

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use resilient_llm::testing::{block_on, reply, FakePlatform, Reply};
use resilient_llm::{
    AttemptOutcome, CallOptions, ChatRequest, Client, Config, Delta, ErrorKind, Event, Message,
};
use serde_json::{json, Value};

fn openai_chunk(model: &str, delta: Value, finish: Option<&str>) -> String {
    let c = json!({ "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model,
                    "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }] });
    format!("data: {c}\n\n")
}

fn openai_stream(model: &str, parts: &[&str]) -> Reply {
    let mut out = vec![openai_chunk(
        model,
        json!({ "role": "assistant", "content": "" }),
        None,
    )];
    out.extend(
        parts
            .iter()
            .map(|p| openai_chunk(model, json!({ "content": p }), None)),
    );
    out.push(openai_chunk(model, json!({}), Some("stop")));
    out.push("data: [DONE]\n\n".into());
    reply(200)
        .header("content-type", "text/event-stream")
        .chunks(out)
}

fn openai_answer(model: &str, text: &str) -> Reply {
    let body = json!({ "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": model,
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": text }, "finish_reason": "stop" }],
        "usage": { "prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5 } });
    reply(200)
        .header("content-type", "application/json")
        .body(body.to_string())
}

/// `first` then `second`, both OpenAI-style, with `extra` merged into the
/// configuration and `entry` into the first entry.
fn client(p: &FakePlatform, extra: Value, entry: Value) -> Client<FakePlatform> {
    let mut first = json!({ "provider": "first", "model": "m1" });
    if let (Some(f), Some(e)) = (first.as_object_mut(), entry.as_object()) {
        f.extend(e.clone());
    }
    let mut cfg = json!({
        "providers": {
            "first": { "kind": "openai", "baseUrl": "https://first.test" },
            "second": { "kind": "openai", "baseUrl": "https://second.test" }
        },
        "routes": { "default": [ first, { "provider": "second", "model": "m2" } ] }
    });
    if let (Some(c), Some(e)) = (cfg.as_object_mut(), extra.as_object()) {
        c.extend(e.clone());
    }
    Config::parse(&cfg.to_string())
        .unwrap()
        .client(p.clone(), vec![], &|_| Some("sk-test".into()))
        .unwrap()
}

fn req() -> ChatRequest {
    ChatRequest::new(vec![Message::user("Tell me about the fox.")])
}

/// The deltas of one stream, or the error that ended it.
fn stream(p: &FakePlatform, c: &Client<FakePlatform>) -> (Vec<Delta>, Vec<resilient_llm::Attempt>) {
    block_on(p, async {
        let mut s = c.stream(req(), CallOptions::default()).unwrap();
        let mut deltas = Vec::new();
        while let Some(item) = s.next().await {
            deltas.push(item.unwrap());
        }
        (deltas, s.attempts().to_vec())
    })
}

fn text(deltas: &[Delta]) -> String {
    deltas
        .iter()
        .filter_map(|d| match d {
            Delta::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

const PARTS: [&str; 4] = ["The quick ", "brown fox ", "jumps over ", "the lazy dog."];

#[test]
fn a_stream_whose_first_tokens_come_too_slowly_is_abandoned_before_the_commit_point() {
    let p = FakePlatform::new();
    // 8 tokens at 10 tokens/s or better: due 800 ms after the first content;
    // this provider brings about 3 tokens a second.
    p.script(
        "https://first.test",
        [openai_stream("slow", &PARTS).chunk_delay(Duration::from_secs(1))],
    );
    p.script("https://second.test", [openai_stream("fast", &PARTS)]);
    let c = client(
        &p,
        json!({}),
        json!({ "minTokensPerSecond": 10, "rateWindowTokens": 8 }),
    );
    let (deltas, attempts) = stream(&p, &c);
    assert_eq!(
        deltas[0],
        Delta::Start {
            model: Some("fast".into())
        }
    );
    assert_eq!(
        text(&deltas),
        PARTS.concat(),
        "nothing of the slow attempt went out"
    );
    assert_eq!(deltas.last(), Some(&Delta::Done));
    assert_eq!(
        p.requests_to("https://first.test"),
        1,
        "not retried: it fails over"
    );
    assert!(p.aborted() >= 1, "the slow body was dropped");
    match &attempts[0].outcome {
        AttemptOutcome::Failure { error } => {
            assert_eq!(error.kind, ErrorKind::Timeout);
            assert!(error.message.contains("too slow"), "{error}");
        }
        other => panic!("{other:?}"),
    }
    // Abandoned when the pace fell due: the first content at 2 s (role
    // chunk at 1 s, text at 2 s), due 800 ms later.
    assert_eq!(attempts[0].duration, Duration::from_millis(2_800));
}

#[test]
fn a_stream_that_keeps_its_pace_is_held_only_until_the_window_fills() {
    let p = FakePlatform::new();
    p.script(
        "https://first.test",
        [openai_stream("steady", &PARTS).chunk_delay(Duration::from_millis(100))],
    );
    let c = client(
        &p,
        json!({}),
        json!({ "minTokensPerSecond": 10, "rateWindowTokens": 8 }),
    );
    let (deltas, attempts) = stream(&p, &c);
    assert_eq!(
        deltas[0],
        Delta::Start {
            model: Some("steady".into())
        }
    );
    assert_eq!(text(&deltas), PARTS.concat());
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].outcome, AttemptOutcome::Success);
}

#[test]
fn an_answer_shorter_than_the_window_is_delivered_whole() {
    let p = FakePlatform::new();
    p.script(
        "https://first.test",
        [openai_stream("short", &["Yes."]).chunk_delay(Duration::from_millis(100))],
    );
    // 20 tokens (the default window) at 5 tokens/s: due 4 s after "Yes.".
    let c = client(
        &p,
        json!({ "latency": { "minTokensPerSecond": 5 } }),
        json!({}),
    );
    let (deltas, attempts) = stream(&p, &c);
    assert_eq!(text(&deltas), "Yes.");
    assert_eq!(attempts.len(), 1, "a short answer is not a slow one");
}

#[test]
fn a_pace_setting_that_cannot_work_is_a_configuration_error() {
    let cfg = json!({
        "providers": { "a": { "kind": "openai" } },
        "routes": { "default": [ { "provider": "a", "model": "m", "rateWindowTokens": 5 },
                                 { "provider": "a", "model": "n", "minTokensPerSecond": -1 } ] },
        "latency": { "explore": 2, "minSamples": 60 }
    });
    let err = Config::parse(&cfg.to_string())
        .unwrap()
        .validate(&|_| Some("k".into()), &[])
        .err()
        .unwrap()
        .to_string();
    for needle in [
        "routes.default[0].rateWindowTokens: needs minTokensPerSecond",
        "routes.default[1].minTokensPerSecond: must be greater than 0",
        "latency.explore: must be between 0 and 1",
        "latency.minSamples: must not exceed window",
    ] {
        assert!(err.contains(needle), "{needle} in {err}");
    }
}

/// Who answered each of `n` whole requests.
fn serve(p: &FakePlatform, c: &Client<FakePlatform>, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| block_on(p, c.chat(req())).unwrap().served_by.provider)
        .collect()
}

#[test]
fn a_slow_entry_is_demoted_and_comes_back_through_exploration_once_it_recovers() {
    let events: Rc<RefCell<Vec<String>>> = Rc::default();
    // Random 0.5 is above the 10 % exploration share: the demoted order.
    let p = FakePlatform::new();
    let cfg = json!({ "latency": { "window": 10, "minSamples": 5, "explore": 0.1 } });
    let seen = Rc::clone(&events);
    let c = Config::parse(
        &json!({
            "providers": {
                "first": { "kind": "openai", "baseUrl": "https://first.test" },
                "second": { "kind": "openai", "baseUrl": "https://second.test" }
            },
            "routes": { "default": [ { "provider": "first", "model": "m1", "latencySloMs": 1000 },
                                     { "provider": "second", "model": "m2" } ] },
            "latency": cfg["latency"]
        })
        .to_string(),
    )
    .unwrap()
    .client_builder(p.clone(), vec![], &|_| Some("sk-test".into()))
    .unwrap()
    .observer(move |e| match e {
        Event::Demoted(s) | Event::Restored(s) => seen.borrow_mut().push(format!(
            "{} {}/{} p95={} slo={}",
            serde_json::to_value(e).unwrap()["type"].as_str().unwrap(),
            s.provider,
            s.model,
            s.p95_ms,
            s.slo_ms
        )),
        _ => {}
    })
    .build();
    // Healthy but slow: 2 s an answer against a 1 s objective.
    let slow = (0..5).map(|_| openai_answer("m1", "slow").delay(Duration::from_secs(2)));
    p.script("https://first.test", slow);
    p.script(
        "https://second.test",
        (0..20).map(|_| openai_answer("m2", "fast")),
    );
    assert_eq!(
        serve(&p, &c, 5),
        ["first"; 5],
        "too few samples to judge before the fifth"
    );
    assert_eq!(*events.borrow(), ["demoted first/m1 p95=2000 slo=1000"]);
    assert_eq!(
        serve(&p, &c, 5),
        ["second"; 5],
        "demoted: tried after the entry that meets its objective"
    );
    assert_eq!(p.requests_to("https://first.test"), 5);
    let health = serde_json::to_value(c.health()).unwrap();
    assert_eq!(
        health[0]["demoted"],
        json!([{ "model": "m1", "measure": "latency", "p95Ms": 2000 }])
    );
    assert!(
        health[1].get("demoted").is_none(),
        "none listed when none is"
    );

    // Recovered. Exploring requests (random below 0.1) keep the configured
    // order: the first entry answers them, fast now, and its window refills.
    p.script(
        "https://first.test",
        (0..10).map(|_| openai_answer("m1", "fast")),
    );
    let c = &c;
    let explored: Vec<String> = (0..10)
        .map(|_| {
            let p2 = p.clone();
            // One draw per request while an entry is demoted.
            let p2 = p2.random([0.05]);
            block_on(&p2, c.chat(req())).unwrap().served_by.provider
        })
        .collect();
    assert_eq!(explored, ["first"; 10]);
    assert_eq!(
        *events.borrow(),
        [
            "demoted first/m1 p95=2000 slo=1000",
            "restored first/m1 p95=0 slo=1000"
        ]
    );
    assert!(serde_json::to_value(c.health()).unwrap()[0]
        .get("demoted")
        .is_none());
    // Restored: the configured order again, without a random draw.
    p.script("https://first.test", [openai_answer("m1", "back")]);
    let p = p.random([0.99]);
    assert_eq!(serve(&p, c, 1), ["first"]);
}
