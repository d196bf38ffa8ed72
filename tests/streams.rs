//! Streaming with failover on the fake platform: scripted chunked bodies
//! (cut after k chunks, stalls, malformed chunks, no `[DONE]`, slow first
//! token, prefill accepted or refused). The text a caller assembles is the
//! complete answer or ends in an error, never a truncated success.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use resilient_llm::testing::{block_on, fail, reply, BodyEnd, FakePlatform, Reply};
use resilient_llm::Config;
use resilient_llm::{
    CallOptions, ChatRequest, Client, Delta, Error, ErrorKind, Event, FinishReason, Message,
    Platform, TransportErrorKind, Usage,
};
use serde_json::json;

const ANSWER: [&str; 4] = ["The quick ", "brown fox ", "jumps over ", "the lazy dog."];

fn openai_chunk(model: &str, delta: serde_json::Value, finish: Option<&str>) -> String {
    let c = json!({ "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model,
                    "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }] });
    format!("data: {c}\n\n")
}

/// An OpenAI stream of `parts`, then finish, usage and `[DONE]`: one chunk
/// per SSE event.
fn openai_stream(model: &str, parts: &[&str]) -> Vec<String> {
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
    let usage = json!({ "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model,
                        "choices": [], "usage": { "prompt_tokens": 11, "completion_tokens": 22, "total_tokens": 33 } });
    out.push(format!("data: {usage}\n\n"));
    out.push("data: [DONE]\n\n".into());
    out
}

fn anthropic_event(name: &str, data: serde_json::Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// An Anthropic stream of `parts`.
fn anthropic_stream(model: &str, parts: &[&str]) -> Vec<String> {
    let mut out = vec![
        anthropic_event(
            "message_start",
            json!({ "type": "message_start", "message": { "id": "msg_1", "type": "message",
            "role": "assistant", "content": [], "model": model, "stop_reason": null,
            "usage": { "input_tokens": 9, "output_tokens": 1 } } }),
        ),
        anthropic_event(
            "content_block_start",
            json!({ "type": "content_block_start", "index": 0,
            "content_block": { "type": "text", "text": "" } }),
        ),
        anthropic_event("ping", json!({ "type": "ping" })),
    ];
    out.extend(parts.iter().map(|p| {
        anthropic_event(
            "content_block_delta",
            json!({ "type": "content_block_delta", "index": 0,
            "delta": { "type": "text_delta", "text": p } }),
        )
    }));
    out.push(anthropic_event(
        "content_block_stop",
        json!({ "type": "content_block_stop", "index": 0 }),
    ));
    out.push(anthropic_event("message_delta", json!({ "type": "message_delta",
        "delta": { "stop_reason": "end_turn", "stop_sequence": null }, "usage": { "output_tokens": 15 } })));
    out.push(anthropic_event(
        "message_stop",
        json!({ "type": "message_stop" }),
    ));
    out
}

fn sse(chunks: Vec<String>) -> Reply {
    reply(200)
        .header("content-type", "text/event-stream")
        .chunks(chunks)
}

fn secret(_: &str) -> Option<String> {
    Some("sk-test".into())
}

/// `first` then `second`, each a provider of the given kind at its own URL.
fn client(
    p: &FakePlatform,
    first: &str,
    second: &str,
    extra: serde_json::Value,
) -> Client<FakePlatform> {
    let mut cfg = json!({
        "providers": {
            "first": { "kind": first, "baseUrl": "https://first.test" },
            "second": { "kind": second, "baseUrl": "https://second.test" }
        },
        "routes": { "default": [ { "provider": "first", "model": "model-1" }, { "provider": "second", "model": "model-2" } ] }
    });
    if let (Some(c), Some(e)) = (cfg.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            c.insert(k.clone(), v.clone());
        }
    }
    Config::parse(&cfg.to_string())
        .unwrap()
        .client(p.clone(), vec![], &secret)
        .unwrap()
}

fn req() -> ChatRequest {
    ChatRequest::new(vec![Message::user("Tell me about the fox.")])
}

/// Everything the caller sees: the deltas, then the error if one ended it.
struct Seen {
    deltas: Vec<Delta>,
    error: Option<Error>,
    committed_at_error: bool,
}

impl Seen {
    fn text(&self) -> String {
        self.deltas
            .iter()
            .filter_map(|d| match d {
                Delta::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    fn complete(&self) -> bool {
        self.error.is_none() && self.deltas.last() == Some(&Delta::Done)
    }
}

fn run(p: &FakePlatform, c: &Client<FakePlatform>, req: ChatRequest) -> Seen {
    block_on(p, async {
        let mut s = match c.stream(req, CallOptions::default()) {
            Ok(s) => s,
            Err(e) => {
                return Seen {
                    deltas: vec![],
                    error: Some(e),
                    committed_at_error: false,
                }
            }
        };
        let mut deltas = Vec::new();
        while let Some(item) = s.next().await {
            match item {
                Ok(d) => deltas.push(d),
                Err(e) => {
                    return Seen {
                        deltas,
                        error: Some(e),
                        committed_at_error: s.committed(),
                    }
                }
            }
        }
        Seen {
            deltas,
            error: None,
            committed_at_error: false,
        }
    })
}

#[test]
fn a_healthy_stream_is_delivered_with_model_finish_and_usage() {
    let p = FakePlatform::new();
    p.script(
        "https://first.test",
        [sse(openai_stream("gpt-4o-2024-08-06", &ANSWER))],
    );
    let c = client(&p, "openai", "anthropic", json!({}));
    let seen = run(&p, &c, req());
    assert!(seen.complete(), "{:?}", seen.error);
    assert_eq!(seen.text(), ANSWER.concat());
    assert_eq!(
        seen.deltas[0],
        Delta::Start {
            model: Some("gpt-4o-2024-08-06".into())
        }
    );
    let n = seen.deltas.len();
    assert_eq!(
        seen.deltas[n - 3],
        Delta::Finish {
            reason: FinishReason::Stop
        }
    );
    assert_eq!(
        seen.deltas[n - 2],
        Delta::Usage {
            usage: Usage {
                input_tokens: 11,
                output_tokens: 22,
                ..Usage::default()
            }
        }
    );
    let body: serde_json::Value = serde_json::from_slice(&p.requests()[0].body).unwrap();
    assert_eq!(body["stream"], true);
}

#[test]
fn a_cut_stream_is_continued_with_prefill_where_the_model_accepts_it() {
    let p = FakePlatform::new().random([0.0]);
    let whole = anthropic_stream("claude-x", &ANSWER);
    // Cut after message_start, block start, ping and two text deltas.
    p.script(
        "https://first.test",
        [
            sse(whole.clone()).cut_after(5, BodyEnd::Reset),
            sse(anthropic_stream(
                "claude-x",
                &["jumps over ", "the lazy dog."],
            )),
        ],
    );
    let c = client(&p, "anthropic", "openai", json!({}));
    let seen = run(&p, &c, req());
    assert!(seen.complete(), "{:?}", seen.error);
    assert_eq!(seen.text(), ANSWER.concat(), "delivered once, no repeats");
    let second: serde_json::Value = serde_json::from_slice(&p.requests()[1].body).unwrap();
    let last = second["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "assistant");
    assert!(
        last["content"].to_string().contains("The quick brown fox "),
        "{last}"
    );
    let usage = seen.deltas.iter().find_map(|d| match d {
        Delta::Usage { usage } => Some(*usage),
        _ => None,
    });
    assert_eq!(
        usage,
        Some(Usage {
            input_tokens: 9,
            output_tokens: 15,
            ..Usage::default()
        }),
        "only the answering attempt counts"
    );
}

#[test]
fn without_prefill_a_restart_forwards_only_what_extends_the_delivered_text() {
    let p = FakePlatform::new().random([0.0]);
    p.script(
        "https://first.test",
        [
            sse(openai_stream("m", &ANSWER)).cut_after(3, BodyEnd::Reset),
            sse(openai_stream("m", &ANSWER)),
        ],
    );
    let c = client(&p, "openai", "anthropic", json!({}));
    let seen = run(&p, &c, req());
    assert!(seen.complete(), "{:?}", seen.error);
    assert_eq!(seen.text(), ANSWER.concat());
    let second: serde_json::Value = serde_json::from_slice(&p.requests()[1].body).unwrap();
    assert_eq!(
        second["messages"].as_array().unwrap().len(),
        1,
        "no prefill sent to a model without it"
    );
}

#[test]
fn a_restart_that_diverges_fails_over_and_a_hopeless_stream_ends_in_an_error_naming_the_cut() {
    let p = FakePlatform::new().random([0.0]);
    p.script(
        "https://first.test",
        [
            sse(openai_stream("m", &ANSWER)).cut_after(3, BodyEnd::Reset),
            sse(openai_stream("m", &["A different ", "answer."])),
        ],
    );
    p.script("https://second.test", [fail(TransportErrorKind::Refused)]);
    let c = client(
        &p,
        "openai",
        "openai",
        json!({ "retry": { "maxAttempts": 2 } }),
    );
    let seen = run(&p, &c, req());
    assert!(!seen.complete());
    assert!(seen.committed_at_error);
    assert_eq!(seen.text(), "The quick brown fox ");
    assert!(
        !seen.deltas.contains(&Delta::Done),
        "never a clean end after an incomplete answer"
    );
    match seen.error {
        Some(Error::Interrupted {
            error, delivered, ..
        }) => {
            assert_eq!(
                error.kind,
                ErrorKind::Transport,
                "the original failure: {error}"
            );
            assert_eq!(delivered, "The quick brown fox ".len());
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_thirty_second_stall_is_finished_by_the_fallback_well_inside_45_seconds() {
    let p = FakePlatform::new().random([0.0]);
    // The first provider stalls mid-answer: the provider that went silent
    // is not asked again, the next entry continues from the prefill.
    let rest = ["jumps over ", "the lazy dog."];
    p.script(
        "https://first.test",
        [sse(anthropic_stream("claude-x", &ANSWER)).cut_after(5, BodyEnd::Stall)],
    );
    p.script(
        "https://second.test",
        [sse(anthropic_stream("claude-y", &rest))],
    );
    let c = client(&p, "anthropic", "anthropic", json!({}));
    let seen = run(&p, &c, req());
    assert!(seen.complete(), "{:?}", seen.error);
    assert_eq!(seen.text(), ANSWER.concat());
    // One idle deadline (10 s), not one per retry at the silent provider.
    assert!(p.now() < 15_000, "finished at {} ms", p.now());
    assert_eq!(
        p.requests_to("https://first.test"),
        1,
        "no retry at the stalled provider"
    );
    assert!(p.aborted() >= 1, "the stalled body was dropped");
    let last: serde_json::Value = serde_json::from_slice(&p.requests()[1].body).unwrap();
    let prefill = last["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .to_string();
    assert!(
        prefill.contains("The quick brown fox "),
        "the fallback continues the delivered text: {prefill}"
    );
}

#[test]
fn a_provider_twenty_seconds_late_with_its_first_token_is_abandoned_for_the_fallback() {
    let p = FakePlatform::new();
    p.script(
        "https://first.test",
        [sse(openai_stream("slow", &ANSWER)).delay(Duration::from_secs(20))],
    );
    p.script("https://second.test", [sse(openai_stream("fast", &ANSWER))]);
    let c = client(&p, "openai", "openai", json!({}));
    let seen = run(&p, &c, req());
    assert!(seen.complete());
    assert_eq!(
        seen.deltas[0],
        Delta::Start {
            model: Some("fast".into())
        }
    );
    assert_eq!(p.now(), 10_000, "the default first-token deadline");
}

#[test]
fn first_token_deadline_counts_from_the_request_not_from_the_headers() {
    let p = FakePlatform::new();
    // Headers at once, then nothing for 12 s.
    p.script(
        "https://first.test",
        [sse(openai_stream("slow", &ANSWER)).chunk_delay(Duration::from_secs(12))],
    );
    p.script("https://second.test", [sse(openai_stream("fast", &ANSWER))]);
    let c = client(
        &p,
        "openai",
        "openai",
        json!({ "routes": { "default": [
        { "provider": "first", "model": "m", "firstTokenTimeoutMs": 3000 }, { "provider": "second", "model": "m" } ] } }),
    );
    let seen = run(&p, &c, req());
    assert!(seen.complete());
    assert_eq!(p.now(), 3000);
    assert_eq!(
        seen.deltas[0],
        Delta::Start {
            model: Some("fast".into())
        }
    );
}

#[test]
fn a_malformed_chunk_fails_the_attempt_and_the_answer_is_continued_whole() {
    // It may have held part of the answer (this one did): skipping it would
    // end an answer looking complete without it.
    let p = FakePlatform::new();
    let mut chunks = openai_stream("m", &ANSWER);
    chunks.insert(
        2,
        "data: {\"choices\": [{\"delta\": {\"content\": \"trunc\n\n".into(),
    );
    p.script(
        "https://first.test",
        [sse(chunks), sse(openai_stream("m", &ANSWER))],
    );
    let log = Rc::new(RefCell::new(0));
    let sink = log.clone();
    let cfg = Config::parse(
        &json!({ "providers": { "first": { "kind": "openai", "baseUrl": "https://first.test" } },
        "routes": { "default": [ { "provider": "first", "model": "m" } ] } })
        .to_string(),
    )
    .unwrap();
    let c = cfg
        .client_builder(p.clone(), vec![], &secret)
        .unwrap()
        .observer(move |e| {
            if matches!(e, Event::MalformedChunk { .. }) {
                *sink.borrow_mut() += 1;
            }
        })
        .build();
    let seen = run(&p, &c, req());
    assert!(seen.complete(), "{:?}", seen.error);
    assert_eq!(seen.text(), ANSWER.concat());
    assert_eq!(*log.borrow(), 1);
}

#[test]
fn a_body_ending_without_done_but_with_a_finish_is_final_at_once() {
    let p = FakePlatform::new();
    let mut chunks = openai_stream("m", &ANSWER);
    chunks.pop(); // no [DONE]
    p.script("https://first.test", [sse(chunks)]);
    let c = client(&p, "openai", "openai", json!({}));
    let seen = run(&p, &c, req());
    assert!(seen.complete(), "{:?}", seen.error);
    assert_eq!(p.now(), 0, "no idle wait");
    assert!(seen.deltas.contains(&Delta::Usage {
        usage: Usage {
            input_tokens: 11,
            output_tokens: 22,
            ..Usage::default()
        }
    }));
}

#[test]
fn a_body_ending_without_a_finish_is_not_a_complete_answer() {
    let p = FakePlatform::new().random([0.0]);
    let mut chunks = openai_stream("m", &ANSWER);
    chunks.truncate(4); // role, three parts; no finish, no usage, no [DONE]
    p.script(
        "https://first.test",
        [sse(chunks), sse(openai_stream("m", &ANSWER))],
    );
    let c = client(&p, "openai", "openai", json!({}));
    let seen = run(&p, &c, req());
    assert!(seen.complete(), "{:?}", seen.error);
    assert_eq!(
        seen.text(),
        ANSWER.concat(),
        "continued by a restart, nothing repeated"
    );
    assert_eq!(p.requests().len(), 2);
}

#[test]
fn before_the_commit_point_the_whole_failure_table_applies() {
    let p = FakePlatform::new().random([0.5]);
    p.script("https://first.test", [reply(503), reply(503), reply(503)]);
    p.script(
        "https://second.test",
        [sse(openai_stream("backup", &ANSWER))],
    );
    let c = client(&p, "openai", "openai", json!({}));
    let seen = run(&p, &c, req());
    assert!(seen.complete());
    assert_eq!(
        p.sleeps(),
        [Duration::from_millis(100), Duration::from_millis(200)]
    );
    assert_eq!(
        seen.deltas[0],
        Delta::Start {
            model: Some("backup".into())
        }
    );

    let p = FakePlatform::new();
    let refusal = json!({ "error": { "message": "bad request", "type": "invalid_request_error", "code": null } });
    p.script("https://first.test", [reply(400).body(refusal.to_string())]);
    let c = client(&p, "openai", "openai", json!({}));
    let seen = run(&p, &c, req());
    assert!(!seen.committed_at_error);
    assert!(
        matches!(seen.error, Some(Error::Rejected { .. })),
        "{:?}",
        seen.error
    );
    assert_eq!(p.requests().len(), 1);
}

#[test]
fn a_refused_prefill_restarts_and_never_masks_the_original_failure() {
    let p = FakePlatform::new().random([0.0]);
    let prefill_refused = json!({ "type": "error", "error": { "type": "invalid_request_error",
        "message": "This model does not support assistant message prefill." } });
    p.script(
        "https://first.test",
        [
            sse(anthropic_stream("claude-x", &ANSWER)).cut_after(5, BodyEnd::Reset),
            reply(400).body(prefill_refused.to_string()),
            sse(anthropic_stream("claude-x", &ANSWER)),
        ],
    );
    let c = client(&p, "anthropic", "anthropic", json!({}));
    let seen = run(&p, &c, req());
    assert!(seen.complete(), "{:?}", seen.error);
    assert_eq!(seen.text(), ANSWER.concat());

    // Everything fails after the cut: the error names the cut, not the refusal.
    let p = FakePlatform::new().random([0.0]);
    p.script(
        "https://first.test",
        [
            sse(anthropic_stream("claude-x", &ANSWER)).cut_after(5, BodyEnd::Reset),
            reply(400).body(prefill_refused.to_string()),
        ],
    );
    p.script(
        "https://second.test",
        [reply(400).body(prefill_refused.to_string())],
    );
    let c = client(
        &p,
        "anthropic",
        "anthropic",
        json!({ "retry": { "maxAttempts": 1 } }),
    );
    let seen = run(&p, &c, req());
    match seen.error {
        Some(Error::Interrupted { error, .. }) => {
            assert_eq!(error.kind, ErrorKind::Transport, "{error}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn dropping_the_stream_aborts_the_upstream_request() {
    let p = FakePlatform::new();
    p.script(
        "https://first.test",
        [sse(openai_stream("m", &ANSWER)).chunk_delay(Duration::from_secs(1))],
    );
    let c = client(&p, "openai", "openai", json!({}));
    block_on(&p, async {
        let mut s = c.stream(req(), CallOptions::default()).unwrap();
        let first = s.next().await;
        assert!(matches!(first, Some(Ok(Delta::Start { .. }))));
    });
    assert_eq!(p.aborted(), 1);
}

#[test]
fn streams_feed_the_breaker_and_the_health_report() {
    let p = FakePlatform::new();
    p.script(
        "https://first.test",
        [sse(openai_stream("m", &ANSWER))
            .delay(Duration::from_millis(250))
            .chunk_delay(Duration::from_millis(50))],
    );
    let c = client(&p, "openai", "openai", json!({}));
    assert!(run(&p, &c, req()).complete());
    let h = c
        .health()
        .into_iter()
        .find(|h| h.provider == "first")
        .unwrap();
    assert_eq!(h.requests, 1);
    assert_eq!(
        h.ttft_ms.p50,
        Some(250 + 50 + 50),
        "headers, role chunk, first text chunk"
    );
    assert!(h.tokens_per_sec.is_some());
}

#[test]
fn a_stream_dropped_during_its_half_open_probe_gives_the_permit_back() {
    let p = FakePlatform::new();
    p.script(
        "https://first.test",
        [
            reply(503),
            resilient_llm::testing::hang(),
            sse(openai_stream("m", &ANSWER)),
        ],
    );
    p.script("https://second.test", [sse(openai_stream("b", &ANSWER))]);
    let c = client(
        &p,
        "openai",
        "openai",
        json!({ "retry": { "maxAttempts": 1 }, "breaker": { "failureThreshold": 1 } }),
    );
    assert!(
        run(&p, &c, req()).complete(),
        "served by the second; the first's breaker opens"
    );
    p.advance(Duration::from_secs(10));
    let aborted = p.aborted();
    block_on(&p, async {
        let mut s = c.stream(req(), CallOptions::default()).unwrap();
        let outer = p.sleep(Duration::from_millis(500));
        assert!(
            resilient_llm::timeout(outer, s.next()).await.is_err(),
            "the probe hangs"
        );
    });
    assert_eq!(
        p.aborted(),
        aborted + 1,
        "dropping the stream aborted the probe"
    );
    let seen = run(&p, &c, req());
    assert_eq!(
        seen.deltas[0],
        Delta::Start {
            model: Some("m".into())
        },
        "a new probe was granted"
    );
    assert_eq!(p.requests_to("https://first.test"), 3);
}

#[test]
fn concurrent_streams_stop_calling_a_dead_provider_before_their_verdicts_are_in() {
    // Six streams at once meet a dead first provider (threshold 3, three
    // attempts each): with the requests failing now counted, none retries.
    let p = FakePlatform::new();
    let dead = || reply(503).delay(Duration::from_millis(10));
    p.script("https://first.test", (0..18).map(|_| dead()));
    p.script(
        "https://second.test",
        (0..6).map(|_| sse(openai_stream("b", &ANSWER))),
    );
    let c = client(
        &p,
        "openai",
        "openai",
        json!({ "breaker": { "failureThreshold": 3 } }),
    );
    let drain = || async {
        let mut s = c.stream(req(), CallOptions::default()).unwrap();
        let mut text = String::new();
        while let Some(item) = s.next().await {
            if let Delta::Text { text: t } = item.unwrap() {
                text.push_str(&t);
            }
        }
        text
    };
    let texts = block_on(&p, futures_util::future::join_all((0..6).map(|_| drain())));
    assert!(texts.iter().all(|t| t == &ANSWER.concat()));
    assert_eq!(p.requests_to("https://first.test"), 6, "one attempt each");
    let first = c.health().into_iter().find(|h| h.provider == "first");
    assert_eq!(
        first.unwrap().state,
        resilient_llm::StateName::Open,
        "the verdicts opened it"
    );
}
