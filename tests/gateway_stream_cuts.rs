//! Through the gateway, on the fake platform: an upstream that sends one
//! token and then its end (`[DONE]`, `message_stop`) with no finish reason
//! is cut, for every client format, translated or passed through (issue
//! 27, item 2): the client gets its format's error event, or the answer
//! continued on the next entry, never a made-up stop reason or a clean
//! end; the end log line says `interrupted`, not `complete`. And a stream
//! whose client goes away still logs its end (item 7).

use std::cell::RefCell;
use std::future::poll_fn;
use std::rc::Rc;

use resilient_llm::gateway::{Gateway, Inbound, Outbound, Piece, Setup};
use resilient_llm::testing::{block_on, reply, FakePlatform, Reply};
use resilient_llm::{Body, Headers, MemoryStore};
use resilient_llm::{SseDecoder, SseEvent};
use serde_json::{json, Value};

#[path = "common/anthropic_sse.rs"]
mod anthropic_sse;
use anthropic_sse::{anthropic, event as anthropic_event};

fn gateway(p: &FakePlatform) -> Gateway<FakePlatform, MemoryStore> {
    let config = json!({
        "providers": {
            "oai": { "kind": "openai", "baseUrl": "https://oai.test", "apiKeyEnv": "K" },
            "ant": { "kind": "anthropic", "baseUrl": "https://ant.test", "apiKeyEnv": "K" }
        },
        "routes": {
            "oai": [ { "provider": "oai", "model": "gpt-x" } ],
            "ant": [ { "provider": "ant", "model": "claude-x" } ],
            "both": [ { "provider": "oai", "model": "gpt-x" }, { "provider": "ant", "model": "claude-x" } ]
        },
        "retry": { "maxAttempts": 1 },
        "gateway": { "allowUnauthenticated": true }
    });
    let setup = Setup::load(Some(&config.to_string()), &|_| Some("sk-test".into())).expect("valid");
    let store = MemoryStore::new(setup.breaker());
    setup.into_gateway(p.clone(), store)
}

fn openai_chunk(delta: Value, finish: Value) -> String {
    let c = json!({ "id": "chatcmpl-up", "object": "chat.completion.chunk", "created": 1, "model": "gpt-x",
                    "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }] });
    format!("data: {c}\n\n")
}

/// One token, then `[DONE]` with no finish reason.
fn openai_cut() -> Vec<String> {
    vec![
        openai_chunk(json!({ "role": "assistant", "content": "" }), Value::Null),
        openai_chunk(json!({ "content": "Hel" }), Value::Null),
        "data: [DONE]\n\n".into(),
    ]
}

fn openai_whole() -> Vec<String> {
    vec![
        openai_chunk(json!({ "role": "assistant", "content": "" }), Value::Null),
        openai_chunk(json!({ "content": "Hello" }), Value::Null),
        openai_chunk(json!({}), json!("stop")),
        "data: [DONE]\n\n".into(),
    ]
}

/// One token, then `message_stop` with no `message_delta` (no stop reason).
fn anthropic_cut() -> Vec<String> {
    anthropic("Hel", None)
}

/// A Responses stream: one text delta, then `[DONE]`, no `response.completed`.
fn responses_cut() -> Vec<String> {
    let ev = |name: &str, data: Value| anthropic_event(name, data);
    vec![
        ev(
            "response.created",
            json!({ "type": "response.created", "sequence_number": 0, "response": { "id": "resp_up",
                    "object": "response", "created_at": 1, "model": "gpt-x", "status": "in_progress", "output": [] } }),
        ),
        ev(
            "response.output_item.added",
            json!({ "type": "response.output_item.added", "sequence_number": 1, "output_index": 0,
                    "item": { "type": "message", "id": "msg_up", "role": "assistant", "content": [] } }),
        ),
        ev(
            "response.content_part.added",
            json!({ "type": "response.content_part.added", "sequence_number": 2, "output_index": 0,
                    "content_index": 0, "item_id": "msg_up", "part": { "type": "output_text", "text": "" } }),
        ),
        ev(
            "response.output_text.delta",
            json!({ "type": "response.output_text.delta", "sequence_number": 3, "output_index": 0,
                    "content_index": 0, "item_id": "msg_up", "delta": "Hel" }),
        ),
        "data: [DONE]\n\n".into(),
    ]
}

fn sse(chunks: Vec<String>) -> Reply {
    reply(200)
        .header("content-type", "text/event-stream")
        .chunks(chunks)
}

fn post(path: &str, route: &str) -> Inbound {
    let body = match path {
        "/v1/responses" => json!({ "model": route, "stream": true, "input": "hi" }),
        _ => json!({ "model": route, "stream": true, "max_tokens": 20,
                     "messages": [{ "role": "user", "content": "hi" }] }),
    };
    Inbound {
        method: "POST".into(),
        path: path.into(),
        headers: [("content-type", "application/json")]
            .into_iter()
            .collect::<Headers>(),
        body: Body::full(body.to_string().into_bytes()),
    }
}

/// The response, its SSE events and its end log line.
fn run(
    p: &FakePlatform,
    g: &Gateway<FakePlatform, MemoryStore>,
    r: Inbound,
) -> (Outbound, Vec<SseEvent>, Value) {
    let mut out = block_on(p, g.handle(r));
    let mut stream = out.stream.take().expect("a streamed answer");
    let mut bytes = Vec::new();
    let mut log = Value::Null;
    block_on(p, async {
        while let Some(piece) = poll_fn(|cx| stream.as_mut().poll_next(cx)).await {
            match piece {
                Piece::Bytes(b) => bytes.extend(b),
                Piece::Log(l) => log = serde_json::from_str(&l).unwrap(),
            }
        }
    });
    let mut events = Vec::new();
    let mut d = SseDecoder::default();
    d.feed(&bytes, &mut events).expect("SSE");
    events.extend(d.finish());
    (out, events, log)
}

fn json_data(events: &[SseEvent]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e.data != "[DONE]")
        .map(|e| serde_json::from_str(&e.data).expect("JSON data"))
        .collect()
}

/// What each client format must not see after a cut, and its error event.
fn assert_cut_for(path: &str, events: &[SseEvent], log: &Value, case: &str) {
    assert_eq!(log["msg"], "stream end", "{case}");
    assert_eq!(log["outcome"], "interrupted", "{case}: {log}");
    let data = json_data(events);
    match path {
        "/v1/chat/completions" => {
            assert!(
                events.iter().all(|e| e.data != "[DONE]"),
                "{case}: no [DONE]"
            );
            let text: String = data
                .iter()
                .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
                .collect();
            assert_eq!(text, "Hel", "{case}");
            assert!(
                data.iter()
                    .all(|c| c["choices"][0]["finish_reason"].is_null()),
                "{case}: no made-up finish_reason: {data:?}"
            );
            let last = data.last().unwrap();
            assert!(last["error"]["message"].is_string(), "{case}: {last}");
        }
        "/v1/messages" => {
            let names: Vec<&str> = events.iter().filter_map(|e| e.event.as_deref()).collect();
            assert!(!names.contains(&"message_stop"), "{case}: {names:?}");
            assert!(!names.contains(&"message_delta"), "{case}: {names:?}");
            assert_eq!(names.last(), Some(&"error"), "{case}: {names:?}");
            assert!(
                data.iter().all(|d| d["delta"]["stop_reason"].is_null()),
                "{case}: no made-up stop_reason"
            );
        }
        _ => {
            let names: Vec<&str> = events.iter().filter_map(|e| e.event.as_deref()).collect();
            assert!(
                events.iter().all(|e| e.data != "[DONE]"),
                "{case}: no [DONE]"
            );
            assert!(!names.contains(&"response.completed"), "{case}: {names:?}");
            assert!(names.contains(&"response.failed"), "{case}: {names:?}");
            assert_eq!(names.last(), Some(&"error"), "{case}: {names:?}");
        }
    }
}

/// A client path, the route it names, its upstream's stream and URL.
type Case = (
    &'static str,
    &'static str,
    fn() -> Vec<String>,
    &'static str,
);

#[test]
fn an_end_without_a_finish_reason_is_an_error_event_in_every_client_format() {
    let cases: [Case; 6] = [
        // Passed through: the provider speaks the client's dialect.
        (
            "/v1/chat/completions",
            "oai",
            openai_cut,
            "https://oai.test",
        ),
        ("/v1/messages", "ant", anthropic_cut, "https://ant.test"),
        ("/v1/responses", "oai", responses_cut, "https://oai.test"),
        // Translated.
        (
            "/v1/chat/completions",
            "ant",
            anthropic_cut,
            "https://ant.test",
        ),
        ("/v1/messages", "oai", openai_cut, "https://oai.test"),
        ("/v1/responses", "ant", anthropic_cut, "https://ant.test"),
    ];
    for (path, route, upstream, url) in cases {
        let p = FakePlatform::new().random([0.0]);
        p.script(url, [sse(upstream())]);
        let g = gateway(&p);
        let (out, events, log) = run(&p, &g, post(path, route));
        let case = format!("{path} via {route}");
        assert_eq!(out.status, 200, "{case}: committed before the cut");
        assert_cut_for(path, &events, &log, &case);
    }
}

#[test]
fn a_cut_openai_stream_passed_through_is_continued_on_the_next_entry() {
    let p = FakePlatform::new().random([0.0]);
    p.script("https://oai.test", [sse(openai_cut())]);
    p.script(
        "https://ant.test",
        [sse(anthropic("lo", Some(json!("end_turn"))))],
    );
    let g = gateway(&p);
    let (_, events, log) = run(&p, &g, post("/v1/chat/completions", "both"));
    let done: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.data == "[DONE]")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(done, [events.len() - 1], "one [DONE], at the very end");
    let data = json_data(&events);
    let text: String = data
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "Hello", "continued, nothing repeated");
    let reasons: Vec<&Value> = data
        .iter()
        .map(|c| &c["choices"][0]["finish_reason"])
        .filter(|r| !r.is_null())
        .collect();
    assert_eq!(
        reasons,
        [&json!("stop")],
        "the continuation's real end_turn"
    );
    assert_eq!(log["outcome"], "complete");
    assert_eq!(log["attempts"], 2);
}

#[test]
fn a_whole_openai_stream_still_ends_cleanly() {
    let p = FakePlatform::new();
    p.script("https://oai.test", [sse(openai_whole())]);
    let g = gateway(&p);
    let (_, events, log) = run(&p, &g, post("/v1/chat/completions", "oai"));
    assert_eq!(events.last().map(|e| e.data.as_str()), Some("[DONE]"));
    assert_eq!(log["outcome"], "complete");
}

/// A gateway whose dropped streams log into the returned lines.
fn logging_gateway(
    p: &FakePlatform,
) -> (Gateway<FakePlatform, MemoryStore>, Rc<RefCell<Vec<String>>>) {
    let lines = Rc::new(RefCell::new(Vec::new()));
    let sink = Rc::clone(&lines);
    let g = gateway(p).log_to(move |l| sink.borrow_mut().push(l.to_string()));
    (g, lines)
}

#[test]
fn a_stream_whose_client_goes_away_logs_its_end_as_client_closed() {
    let p = FakePlatform::new();
    // The upstream sends its first token, then nothing for a while.
    let mut chunks = openai_whole();
    chunks.truncate(2);
    p.script(
        "https://oai.test",
        [sse(chunks).cut_after(2, resilient_llm::testing::BodyEnd::Stall)],
    );
    let (g, lines) = logging_gateway(&p);
    let mut out = block_on(&p, g.handle(post("/v1/chat/completions", "oai")));
    assert_eq!(out.status, 200);
    let mut stream = out.stream.take().expect("a streamed answer");
    let first = block_on(&p, poll_fn(|cx| stream.as_mut().poll_next(cx)));
    assert!(matches!(first, Some(Piece::Bytes(_))), "{first:?}");
    assert!(lines.borrow().is_empty(), "nothing logged while it runs");
    drop(stream); // the client went away: the host stops reading
    let lines = lines.borrow();
    assert_eq!(lines.len(), 1, "{lines:?}");
    let line: Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(line["msg"], "stream end");
    assert_eq!(line["outcome"], "client_closed", "{line}");
    assert_eq!(line["attempts"], 1);
    assert_eq!(line["servedBy"], "oai/gpt-x");
}

#[test]
fn a_stream_read_to_its_end_hands_out_its_line_and_logs_nothing_more() {
    let p = FakePlatform::new();
    p.script("https://oai.test", [sse(openai_whole())]);
    let (g, lines) = logging_gateway(&p);
    let (_, _, log) = run(&p, &g, post("/v1/chat/completions", "oai"));
    assert_eq!(log["outcome"], "complete");
    assert!(lines.borrow().is_empty(), "{:?}", lines.borrow());
}

#[test]
fn a_stream_dropped_after_its_last_bytes_logs_the_line_it_ended_with() {
    let p = FakePlatform::new();
    p.script("https://oai.test", [sse(openai_whole())]);
    let (g, lines) = logging_gateway(&p);
    let mut out = block_on(&p, g.handle(post("/v1/chat/completions", "oai")));
    let mut stream = out.stream.take().expect("a streamed answer");
    // Read every byte, then go away before the log line is taken.
    block_on(&p, async {
        loop {
            match poll_fn(|cx| stream.as_mut().poll_next(cx)).await {
                Some(Piece::Bytes(b)) if b.ends_with(b"data: [DONE]\n\n") => break,
                Some(Piece::Bytes(_)) => {}
                other => panic!("{other:?}"),
            }
        }
    });
    drop(stream);
    let lines = lines.borrow();
    assert_eq!(lines.len(), 1, "{lines:?}");
    let line: Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(line["outcome"], "complete");
}
