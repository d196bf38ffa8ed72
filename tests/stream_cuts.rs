//! A provider stream that ends, by its own end event or by its body's end,
//! with no finish reason is a cut (issue 27, item 2): continued on the next
//! attempt or ended with an error, never completed with a made-up reason.
//! One scenario per stream decoder: OpenAI (`[DONE]`), Anthropic
//! (`message_stop`), Bedrock Converse (`metadata` after a `messageStop`
//! without `stopReason`), Gemini (the body's end).

#[path = "vertex/support.rs"]
mod support;

#[path = "common/anthropic_sse.rs"]
mod anthropic_sse;
use anthropic_sse::anthropic;

use resilient_llm::bedrock::eventstream::encode_frame;
use resilient_llm::testing::{block_on, reply, FakePlatform, Reply};
use resilient_llm::{
    CallOptions, ChatRequest, Client, Config, Delta, Error, ErrorKind, FinishReason, Message,
};
use serde_json::{json, Value};

fn openai_chunk(delta: Value, finish: Value) -> String {
    let c = json!({ "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                    "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }] });
    format!("data: {c}\n\n")
}

/// One token, then `[DONE]` with no finish reason before it.
fn openai_cut(token: &str) -> Vec<String> {
    vec![
        openai_chunk(json!({ "role": "assistant", "content": "" }), Value::Null),
        openai_chunk(json!({ "content": token }), Value::Null),
        "data: [DONE]\n\n".into(),
    ]
}

fn openai_whole(parts: &[&str]) -> Vec<String> {
    let mut out = vec![openai_chunk(
        json!({ "role": "assistant", "content": "" }),
        Value::Null,
    )];
    out.extend(
        parts
            .iter()
            .map(|p| openai_chunk(json!({ "content": p }), Value::Null)),
    );
    out.push(openai_chunk(json!({}), json!("length")));
    out.push("data: [DONE]\n\n".into());
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

/// A route of the given providers (kind, URL), one attempt each.
fn client(p: &FakePlatform, entries: &[(&str, &str)]) -> Client<FakePlatform> {
    let mut providers = serde_json::Map::new();
    let mut route = Vec::new();
    for (i, (kind, url)) in entries.iter().enumerate() {
        let id = format!("p{i}");
        providers.insert(id.clone(), json!({ "kind": kind, "baseUrl": url }));
        route.push(json!({ "provider": id, "model": format!("model-{i}") }));
    }
    let cfg = json!({ "providers": providers, "routes": { "default": route },
                      "retry": { "maxAttempts": 1 } });
    Config::parse(&cfg.to_string())
        .unwrap()
        .client(p.clone(), vec![], &secret)
        .unwrap()
}

fn req() -> ChatRequest {
    ChatRequest::new(vec![Message::user("Tell me about the fox.")])
}

/// The deltas the caller got, and the error that ended them.
fn run(
    p: &FakePlatform,
    c: &Client<FakePlatform>,
    req: ChatRequest,
) -> (Vec<Delta>, Option<Error>) {
    block_on(p, async {
        let mut s = match c.stream(req, CallOptions::default()) {
            Ok(s) => s,
            Err(e) => return (vec![], Some(e)),
        };
        let mut out = Vec::new();
        while let Some(item) = s.next().await {
            match item {
                Ok(d) => out.push(d),
                Err(e) => return (out, Some(e)),
            }
        }
        (out, None)
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

fn finishes(deltas: &[Delta]) -> Vec<&FinishReason> {
    deltas
        .iter()
        .filter_map(|d| match d {
            Delta::Finish { reason } => Some(reason),
            _ => None,
        })
        .collect()
}

/// The stream ended in an error after `delivered`, with no finish reason
/// and no clean end: the cut is named.
fn assert_cut(deltas: &[Delta], error: Option<Error>, delivered: &str) {
    assert_eq!(text(deltas), delivered);
    assert!(finishes(deltas).is_empty(), "no made-up reason: {deltas:?}");
    assert!(!deltas.contains(&Delta::Done), "no clean end: {deltas:?}");
    match error {
        Some(Error::Interrupted {
            error,
            delivered: n,
            ..
        }) => {
            assert_eq!(n, delivered.len());
            assert_eq!(error.kind, ErrorKind::Transport, "{error}");
            assert!(error.message.contains("no finish reason"), "{error}");
        }
        other => panic!("an interrupted stream, not {other:?}"),
    }
}

#[test]
fn an_openai_done_without_a_finish_reason_ends_in_an_error_not_a_stop() {
    let p = FakePlatform::new().random([0.0]);
    p.script("https://first.test", [sse(openai_cut("The quick "))]);
    let c = client(&p, &[("openai", "https://first.test")]);
    let (deltas, error) = run(&p, &c, req());
    assert_cut(&deltas, error, "The quick ");
}

#[test]
fn an_openai_done_without_a_finish_reason_is_continued_on_the_next_entry() {
    let p = FakePlatform::new().random([0.0]);
    p.script("https://first.test", [sse(openai_cut("The quick "))]);
    p.script(
        "https://second.test",
        [sse(openai_whole(&["The quick ", "brown fox."]))],
    );
    let c = client(
        &p,
        &[
            ("openai", "https://first.test"),
            ("openai", "https://second.test"),
        ],
    );
    let (deltas, error) = run(&p, &c, req());
    assert!(error.is_none(), "{error:?}");
    assert_eq!(text(&deltas), "The quick brown fox.", "nothing repeated");
    assert_eq!(
        finishes(&deltas),
        [&FinishReason::Length],
        "the reason the answer's end gave, once"
    );
    assert_eq!(deltas.last(), Some(&Delta::Done));
    assert_eq!(p.requests().len(), 2);
}

#[test]
fn an_anthropic_message_stop_without_a_stop_reason_ends_in_an_error_not_end_turn() {
    for stop in [None, Some(Value::Null)] {
        let p = FakePlatform::new().random([0.0]);
        p.script(
            "https://first.test",
            [sse(anthropic("Hello", stop.clone()))],
        );
        let c = client(&p, &[("anthropic", "https://first.test")]);
        let (deltas, error) = run(&p, &c, req());
        assert_cut(&deltas, error, "Hello");
    }
}

#[test]
fn an_anthropic_message_stop_after_its_stop_reason_is_complete() {
    let p = FakePlatform::new();
    p.script(
        "https://first.test",
        [sse(anthropic("Hello", Some(json!("max_tokens"))))],
    );
    let c = client(&p, &[("anthropic", "https://first.test")]);
    let (deltas, error) = run(&p, &c, req());
    assert!(error.is_none(), "{error:?}");
    assert_eq!(finishes(&deltas), [&FinishReason::Length]);
    assert_eq!(deltas.last(), Some(&Delta::Done));
}

#[test]
fn an_anthropic_cut_is_continued_on_the_next_entry_with_its_real_reason() {
    let p = FakePlatform::new().random([0.0]);
    p.script("https://first.test", [sse(anthropic("Hel", None))]);
    p.script(
        "https://second.test",
        [sse(anthropic("lo", Some(json!("end_turn"))))],
    );
    let c = client(
        &p,
        &[
            ("anthropic", "https://first.test"),
            ("anthropic", "https://second.test"),
        ],
    );
    let (deltas, error) = run(&p, &c, req());
    assert!(error.is_none(), "{error:?}");
    assert_eq!(text(&deltas), "Hello", "continued by prefill");
    assert_eq!(finishes(&deltas), [&FinishReason::Stop]);
    let second: Value = serde_json::from_slice(&p.requests()[1].body).unwrap();
    let last = second["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["role"], "assistant", "{second}");
}

const NOVA: &str = "us.amazon.nova-pro-v1:0";

fn bedrock_client(p: &FakePlatform) -> Client<FakePlatform> {
    let cfg = json!({
        "providers": { "bedrock": { "kind": "bedrock", "region": "us-east-1",
                                    "baseUrl": "https://bedrock.test" } },
        "routes": { "default": [ { "provider": "bedrock", "model": NOVA } ] },
        "retry": { "maxAttempts": 1 }
    });
    let secret = |name: &str| match name {
        "AWS_ACCESS_KEY_ID" => Some("AKIDEXAMPLE".to_string()),
        "AWS_SECRET_ACCESS_KEY" => Some("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".to_string()),
        _ => None,
    };
    Config::parse(&cfg.to_string())
        .unwrap()
        .client(p.clone(), vec![], &secret)
        .unwrap()
}

fn bedrock_stream(stop: Value) -> Vec<Vec<u8>> {
    [
        ("messageStart", json!({ "role": "assistant" })),
        (
            "contentBlockDelta",
            json!({ "contentBlockIndex": 0, "delta": { "text": "Hi" } }),
        ),
        ("contentBlockStop", json!({ "contentBlockIndex": 0 })),
        ("messageStop", stop),
        (
            "metadata",
            json!({ "usage": { "inputTokens": 4, "outputTokens": 1, "totalTokens": 5 } }),
        ),
    ]
    .iter()
    .map(|(name, payload)| {
        encode_frame(
            &[
                (":event-type", name),
                (":content-type", "application/json"),
                (":message-type", "event"),
            ],
            payload.to_string().as_bytes(),
        )
    })
    .collect()
}

#[test]
fn a_bedrock_converse_stream_ending_without_a_stop_reason_ends_in_an_error() {
    let p = FakePlatform::new().at(1_764_590_400_000).random([0.0]);
    p.script(
        "https://bedrock.test/",
        [reply(200).chunks(bedrock_stream(json!({})))],
    );
    let c = bedrock_client(&p);
    let (deltas, error) = run(&p, &c, req());
    assert_cut(&deltas, error, "Hi");

    // With its stopReason, as Bedrock always sends it, the same stream is whole.
    p.script(
        "https://bedrock.test/",
        [reply(200).chunks(bedrock_stream(json!({ "stopReason": "end_turn" })))],
    );
    let (deltas, error) = run(&p, &c, req());
    assert!(error.is_none(), "{error:?}");
    assert_eq!(finishes(&deltas), [&FinishReason::Stop]);
}

#[test]
fn a_gemini_stream_ending_without_a_finish_reason_ends_in_an_error() {
    use support::{ask, token_reply, NOW, TOKEN_URI, VERTEX};
    let p = FakePlatform::new().at(NOW).random([0.0]);
    let c = support::client(&p);
    p.script(TOKEN_URI, [token_reply(3600)]);
    let url = format!("{VERTEX}/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse");
    let chunk = json!({ "candidates": [{ "content": { "role": "model", "parts": [{ "text": "Hel" }] } }],
                        "modelVersion": "gemini-2.5-flash" });
    p.script(&url, [sse(vec![format!("data: {chunk}\r\n\r\n")])]);
    let (deltas, error) = run(&p, &c, ask("gemini"));
    assert_cut(&deltas, error, "Hel");
}
