//! The OpenAI Responses API as a client format (`POST /v1/responses`):
//! requests translated for Messages and Chat Completions providers (recorded
//! fixtures both ways), answers and streams rendered as Response objects and
//! typed events, failover, an interrupted stream's honest end, and requests
//! needing stored state refused. On the fake platform: no ports, no sleeps.

use std::future::poll_fn;

use resilient_llm::format::anthropic;
use resilient_llm::format::responses::{self, render_response, Echo};
use resilient_llm::gateway::{Gateway, Inbound, Outbound, Piece, Setup};
use resilient_llm::testing::{block_on, reply, BodyEnd, FakePlatform, Reply};
use resilient_llm::{Anthropic, Headers, MemoryStore, OpenAi};
use resilient_llm::{Body, PresetName, Provider, Secret, SseDecoder, SseEvent};
use serde_json::{json, Value};

fn read(path: &str) -> Value {
    let full = format!(
        "{}/tests/fixtures/responses/{path}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"));
    serde_json::from_str(&text).unwrap()
}

fn encoded(p: &dyn Provider, req: &resilient_llm::ChatRequest) -> Value {
    serde_json::from_slice(&p.encode(req, "the-model").unwrap().body).unwrap()
}

/// `actual` equals the fixture `path`; on a difference, the actual value
/// is printed in full for review.
fn assert_fixture(path: &str, actual: &Value) {
    let expected = read(path);
    assert!(
        *actual == expected,
        "{path} differs; actual:\n{}",
        serde_json::to_string_pretty(actual).unwrap()
    );
}

#[test]
fn a_responses_request_is_translated_for_messages_and_chat_completions() {
    let req = responses::request_from_value(&read("request_agent.json")).unwrap();
    assert!(req.untranslated.is_empty(), "{:?}", req.untranslated);
    let anthropic = Anthropic::new("a").api_key(Secret::new("k"));
    assert_fixture("request_agent.anthropic.json", &encoded(&anthropic, &req));
    let openai = OpenAi::new("o", PresetName::OpenAi).api_key(Secret::new("k"));
    assert_fixture("request_agent.openai.json", &encoded(&openai, &req));
}

#[test]
fn an_anthropic_answer_is_rendered_as_a_response_object() {
    let f: Value = serde_json::from_str(
        &std::fs::read_to_string(format!(
            "{}/tests/fixtures/anthropic/ok_tool_use.json",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap(),
    )
    .unwrap();
    let body = serde_json::to_vec(&f["body"]).unwrap();
    let resilient_llm::format::Read::Answer(answer) = anthropic::decode_response(&body).unwrap()
    else {
        panic!("an answer")
    };
    let request = read("request_agent.json");
    let echo = Echo::of(request.as_object().unwrap());
    assert_fixture(
        "answer_tool_use.response.json",
        &render_response(&answer, "req1", 1700000000, &echo),
    );
}

#[test]
fn hosted_tools_and_stored_state_are_refused_by_a_translation_with_their_path() {
    let anthropic = Anthropic::new("a").api_key(Secret::new("k"));
    for (extra, path) in [
        (
            json!({"previous_response_id": "resp_1"}),
            "previous_response_id",
        ),
        (json!({"store": true}), "store"),
        (json!({"tools": [{"type": "web_search"}]}), "tools[0].type"),
    ] {
        let mut body = json!({"model": "m", "input": "hi"});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let req = responses::request_from_value(&body).unwrap();
        let err = anthropic.encode(&req, "m").unwrap_err();
        assert!(err.message.starts_with(path), "{path}: {}", err.message);
    }
}

// ------------------------------------------------------------------ gateway

fn gateway(p: &FakePlatform, max_attempts: u32) -> Gateway<FakePlatform, MemoryStore> {
    let config = json!({
        "providers": {
            "primary": { "kind": "anthropic", "baseUrl": "https://primary.test", "apiKeyEnv": "K" },
            "backup": { "kind": "openai", "baseUrl": "https://backup.test", "apiKeyEnv": "K" },
            "compat": { "kind": "openai-compatible", "preset": "vllm", "baseUrl": "https://compat.test", "apiKeyEnv": "K" }
        },
        "routes": {
            "default": [ { "provider": "primary", "model": "claude-big" }, { "provider": "backup", "model": "gpt-small" } ],
            "translated": [ { "provider": "primary", "model": "claude-big" }, { "provider": "compat", "model": "llama" } ],
            "claude": [ { "provider": "primary", "model": "claude-big" } ],
            "gpt": [ { "provider": "backup", "model": "gpt-small" } ],
            "gpt_then_claude": [ { "provider": "backup", "model": "gpt-small" }, { "provider": "primary", "model": "claude-big" } ]
        },
        "retry": { "maxAttempts": max_attempts, "baseDelayMs": 10, "maxDelayMs": 100 },
        "gateway": { "allowUnauthenticated": true }
    });
    let setup = Setup::load(Some(&config.to_string()), &|_| Some("sk-test".into())).expect("valid");
    let store = MemoryStore::new(setup.breaker());
    setup.into_gateway(p.clone(), store)
}

fn post(body: Value) -> Inbound {
    Inbound {
        method: "POST".into(),
        path: "/v1/responses".into(),
        headers: [("content-type", "application/json")]
            .into_iter()
            .collect::<Headers>(),
        body: Body::full(body.to_string().into_bytes()),
    }
}

fn anthropic_ok(text: &str) -> Reply {
    reply(200).body(
        json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-big-1",
            "content": [{ "type": "text", "text": text }],
            "stop_reason": "end_turn", "stop_sequence": null,
            "usage": { "input_tokens": 3, "output_tokens": 2 }
        })
        .to_string(),
    )
}

fn openai_ok(text: &str) -> Reply {
    reply(200).body(
        json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-small-1",
            "choices": [{ "index": 0, "message": { "role": "assistant", "content": text }, "finish_reason": "stop" }],
            "usage": { "prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5 }
        })
        .to_string(),
    )
}

fn overloaded() -> Reply {
    reply(529).body(r#"{"type":"error","error":{"type":"overloaded_error","message":"busy"}}"#)
}

fn anthropic_sse(parts: &[&str]) -> Vec<String> {
    let ev = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
    let mut out = vec![
        ev(
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "model": "claude-big-1", "content": [], "stop_reason": null,
            "usage": {"input_tokens": 4, "output_tokens": 1}}}),
        ),
        ev(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}),
        ),
    ];
    for p in parts {
        out.push(ev(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}}),
        ));
    }
    out.push(ev(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    out.push(ev("message_delta", json!({"type": "message_delta",
        "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 6}})));
    out.push(ev("message_stop", json!({"type": "message_stop"})));
    out
}

fn sse(chunks: Vec<String>) -> Reply {
    reply(200)
        .header("content-type", "text/event-stream")
        .chunks(chunks)
}

fn json_of(out: &Outbound) -> Value {
    serde_json::from_slice(&out.body).unwrap()
}

/// The response, its SSE events (data parsed) and its end-of-stream log line.
fn run(
    p: &FakePlatform,
    g: &Gateway<FakePlatform, MemoryStore>,
    r: Inbound,
) -> (Outbound, Vec<(String, Value)>, Option<String>) {
    let mut out = block_on(p, g.handle(r));
    let Some(mut stream) = out.stream.take() else {
        return (out, Vec::new(), None);
    };
    let mut bytes = Vec::new();
    let mut log = None;
    block_on(p, async {
        while let Some(piece) = poll_fn(|cx| stream.as_mut().poll_next(cx)).await {
            match piece {
                Piece::Bytes(b) => bytes.extend(b),
                Piece::Log(l) => log = Some(l),
            }
        }
    });
    let mut events: Vec<SseEvent> = Vec::new();
    let mut d = SseDecoder::default();
    d.feed(&bytes, &mut events).expect("SSE");
    events.extend(d.finish());
    let events = events
        .into_iter()
        .map(|e| {
            let data: Value = serde_json::from_str(&e.data).expect("JSON data");
            let name = e.event.clone().expect("a named event");
            assert_eq!(data["type"], name.as_str(), "event name and type agree");
            (name, data)
        })
        .collect();
    (out, events, log)
}

fn text_of(events: &[(String, Value)]) -> String {
    events
        .iter()
        .filter(|(n, _)| n == "response.output_text.delta")
        .filter_map(|(_, d)| d["delta"].as_str())
        .collect()
}

#[test]
fn a_whole_answer_is_a_response_object_in_the_clients_format() {
    let p = FakePlatform::new();
    p.script("https://primary.test", [anthropic_ok("Hello")]);
    let g = gateway(&p, 2);
    let (out, _, _) = run(
        &p,
        &g,
        post(json!({"model": "default", "input": "hi", "instructions": "be kind"})),
    );
    assert_eq!(out.status, 200);
    assert_eq!(out.headers.get("x-served-by"), Some("primary/claude-big"));
    let v = json_of(&out);
    assert_eq!(v["object"], "response");
    assert_eq!(v["status"], "completed");
    assert_eq!(v["model"], "claude-big-1");
    assert_eq!(v["output"][0]["type"], "message");
    assert_eq!(v["output"][0]["content"][0]["text"], "Hello");
    assert_eq!(v["usage"]["input_tokens"], 3);
    assert_eq!(v["instructions"], "be kind");
    let sent: Value = serde_json::from_slice(&p.requests()[0].body).unwrap();
    assert_eq!(
        sent["system"], "be kind",
        "instructions are the system prompt"
    );
    assert_eq!(sent["messages"][0]["content"][0]["text"], "hi");
}

#[test]
fn an_overloaded_provider_fails_over_to_a_chat_completions_entry() {
    let p = FakePlatform::new();
    p.script("https://primary.test", [overloaded(), overloaded()]);
    p.script("https://compat.test", [openai_ok("from compat")]);
    let g = gateway(&p, 2);
    let (out, _, _) = run(&p, &g, post(json!({"model": "translated", "input": "hi"})));
    assert_eq!(out.status, 200);
    assert_eq!(out.headers.get("x-served-by"), Some("compat/llama"));
    assert_eq!(out.headers.get("x-attempts"), Some("3"));
    let v = json_of(&out);
    assert_eq!(v["output"][0]["content"][0]["text"], "from compat");
    let req = &p.requests()[2];
    assert_eq!(req.url, "https://compat.test/v1/chat/completions");
    let sent: Value = serde_json::from_slice(&req.body).unwrap();
    assert_eq!(sent["messages"][0]["content"], "hi", "Chat Completions");
}

fn response_object(id: &str, text: &str) -> String {
    json!({
        "id": id, "object": "response", "created_at": 1, "status": "completed", "model": "gpt-small-2",
        "output": [{"type": "message", "id": "msg_p", "status": "completed", "role": "assistant",
                    "content": [{"type": "output_text", "text": text, "annotations": []}]}],
        "error": null, "incomplete_details": null, "store": true, "provider_only_field": 1,
        "usage": {"input_tokens": 4, "output_tokens": 2, "total_tokens": 6}
    })
    .to_string()
}

#[test]
fn an_openai_entry_is_sent_the_clients_body_and_its_answer_comes_back_as_it_came() {
    let p = FakePlatform::new();
    let answer = response_object("resp_provider_1", "passed");
    p.script("https://backup.test", [reply(200).body(answer.clone())]);
    let g = gateway(&p, 2);
    let body = json!({"model": "default", "input": "hi", "include": ["reasoning.encrypted_content"],
                      "tools": [{"type": "web_search"}], "future_field": {"x": 1}});
    let (out, _, _) = run(&p, &g, post(body));
    assert_eq!(out.status, 200);
    assert_eq!(out.headers.get("x-served-by"), Some("backup/gpt-small"));
    assert_eq!(
        out.body,
        answer.as_bytes(),
        "the provider's body, byte for byte"
    );
    // The Anthropic entry first in the route cannot be given a hosted tool.
    assert_eq!(p.requests().len(), 1);
    let req = &p.requests()[0];
    assert_eq!(req.url, "https://backup.test/v1/responses");
    let sent: Value = serde_json::from_slice(&req.body).unwrap();
    assert_eq!(sent["model"], "gpt-small", "the entry's model");
    assert_eq!(sent["input"], "hi");
    assert_eq!(
        sent["tools"][0]["type"], "web_search",
        "hosted tools go as sent"
    );
    assert_eq!(sent["future_field"]["x"], 1, "unknown fields too");
}

#[test]
fn a_passed_through_stream_is_read_and_given_as_the_providers_own_events() {
    let p = FakePlatform::new();
    let ev = |kind: &str, data: Value| {
        let mut data = data;
        data["type"] = json!(kind);
        format!("event: {kind}\ndata: {data}\n\n")
    };
    p.script(
        "https://backup.test",
        [sse(vec![
            ev("response.created", json!({"response": {"id": "resp_p", "model": "gpt-small-2", "status": "in_progress", "output": []}})),
            ev("response.output_item.added", json!({"output_index": 0, "item": {"type": "message", "id": "m", "content": []}})),
            ev("response.output_text.delta", json!({"output_index": 0, "content_index": 0, "delta": "Hel"})),
            ev("response.output_text.delta", json!({"output_index": 0, "content_index": 0, "delta": "lo"})),
            ev("response.completed", json!({"response": {"id": "resp_p", "status": "completed", "output": [],
                "usage": {"input_tokens": 4, "output_tokens": 2, "total_tokens": 6}}})),
        ])],
    );
    let g = gateway(&p, 2);
    let (out, events, _) = run(
        &p,
        &g,
        post(json!({"model": "gpt", "input": "hi", "stream": true})),
    );
    assert_eq!(out.status, 200);
    assert_eq!(p.requests()[0].url, "https://backup.test/v1/responses");
    let sent: Value = serde_json::from_slice(&p.requests()[0].body).unwrap();
    assert_eq!(sent["stream"], true);
    assert_eq!(text_of(&events), "Hello");
    let (name, done) = events.last().unwrap();
    assert_eq!(name, "response.completed");
    // The provider's own events: its response id, its completion as it
    // wrote it (this one names no model; its `response.created` did).
    assert_eq!(events[0].1["response"]["model"], "gpt-small-2");
    assert_eq!(done["response"]["id"], "resp_p");
    assert_eq!(done["response"]["usage"]["output_tokens"], 2);
}

/// A Responses provider's stream: its own ids, every event numbered, an
/// event type and a field the gateway does not know.
fn responses_sse(parts: &[&str]) -> Vec<String> {
    let mut seq = 0;
    let mut ev = |kind: &str, data: Value| {
        let mut data = data;
        data["type"] = json!(kind);
        data["sequence_number"] = json!(seq);
        seq += 1;
        format!("event: {kind}\ndata: {data}\n\n")
    };
    let head = json!({"id": "resp_up9", "object": "response", "created_at": 5, "model": "gpt-small-2",
        "status": "in_progress", "output": [], "instructions": "be brief"});
    let mut out = vec![
        ev("response.created", json!({ "response": head })),
        ev("response.in_progress", json!({ "response": head })),
        ev(
            "response.output_item.added",
            json!({"output_index": 0, "item": {"type": "message",
            "id": "msg_up9", "status": "in_progress", "role": "assistant", "content": []}}),
        ),
        ev(
            "response.future_event",
            json!({"output_index": 0, "novel": {"x": 1}}),
        ),
    ];
    let mut text = String::new();
    for p in parts {
        text.push_str(p);
        out.push(ev(
            "response.output_text.delta",
            json!({"item_id": "msg_up9", "output_index": 0,
            "content_index": 0, "delta": p, "obfuscation": "q7"}),
        ));
    }
    let item = json!({"type": "message", "id": "msg_up9", "status": "completed", "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}]});
    out.push(ev(
        "response.output_item.done",
        json!({"output_index": 0, "item": item}),
    ));
    let mut done = head.clone();
    done["status"] = json!("completed");
    done["output"] = json!([item]);
    done["usage"] = json!({"input_tokens": 4, "output_tokens": 3, "total_tokens": 7});
    out.push(ev("response.completed", json!({ "response": done })));
    out
}

/// The response, its body's bytes as the client reads them, and its log line.
fn run_bytes(
    p: &FakePlatform,
    g: &Gateway<FakePlatform, MemoryStore>,
    r: Inbound,
) -> (Outbound, Vec<u8>, Option<String>) {
    let mut out = block_on(p, g.handle(r));
    let (mut bytes, mut log) = (Vec::new(), None);
    if let Some(mut stream) = out.stream.take() {
        block_on(p, async {
            while let Some(piece) = poll_fn(|cx| stream.as_mut().poll_next(cx)).await {
                match piece {
                    Piece::Bytes(b) => bytes.extend(b),
                    Piece::Log(l) => log = Some(l),
                }
            }
        });
    }
    (out, bytes, log)
}

#[test]
fn a_responses_providers_stream_reaches_the_client_byte_for_byte() {
    let p = FakePlatform::new();
    let upstream = responses_sse(&["Hel", "lo"]);
    p.script("https://backup.test", [sse(upstream.clone())]);
    let g = gateway(&p, 2);
    let (out, bytes, log) = run_bytes(
        &p,
        &g,
        post(json!({"model": "gpt", "input": "hi", "stream": true})),
    );
    assert_eq!(out.status, 200);
    assert_eq!(p.requests()[0].url, "https://backup.test/v1/responses");
    assert_eq!(
        String::from_utf8(bytes).unwrap(),
        upstream.concat(),
        "the provider's events, its ids and unknown events included"
    );
    // The gateway still read it: the end and the tokens are logged.
    let log: Value = serde_json::from_str(&log.expect("a log line")).unwrap();
    assert_eq!(log["outcome"], "complete", "{log}");
    assert_eq!(log["usage"]["outputTokens"], 3, "{log}");
}

#[test]
fn a_cut_responses_stream_is_continued_after_the_providers_events() {
    let p = FakePlatform::new();
    // Cut after created, in_progress, added, the unknown event and "The ".
    let cut = sse(responses_sse(&["The ", "answer ", "is"])).cut_after(5, BodyEnd::Reset);
    p.script("https://backup.test", [cut]);
    p.script(
        "https://primary.test",
        [sse(anthropic_sse(&["answer is 42"]))],
    );
    let g = gateway(&p, 2);
    let (out, events, log) = run(
        &p,
        &g,
        post(json!({"model": "gpt_then_claude", "input": "hi", "stream": true})),
    );
    assert_eq!(out.status, 200);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names.iter().filter(|n| **n == "response.created").count(),
        1,
        "{names:?}"
    );
    assert_eq!(names.last(), Some(&"response.completed"), "{names:?}");
    for (i, (_, d)) in events.iter().enumerate() {
        assert_eq!(d["sequence_number"], i, "numbered on from the provider's");
    }
    assert_eq!(text_of(&events), "The answer is 42");
    let added: Vec<&Value> = events
        .iter()
        .filter(|(n, _)| n == "response.output_item.added")
        .map(|(_, d)| &d["item"]["id"])
        .collect();
    assert_eq!(added, [&json!("msg_up9")], "the continuation goes on in it");
    let done: Vec<&Value> = events
        .iter()
        .filter(|(n, _)| n == "response.output_item.done")
        .map(|(_, d)| &d["item"])
        .collect();
    assert_eq!(done.len(), 1, "every item added is done");
    assert_eq!(done[0]["id"], "msg_up9");
    let done = &events.last().unwrap().1["response"];
    assert_eq!(done["id"], "resp_up9", "the provider's response, continued");
    assert_eq!(done["instructions"], "be brief");
    assert_eq!(done["status"], "completed");
    assert_eq!(done["output"][0]["content"][0]["text"], "The answer is 42");
    let log: Value = serde_json::from_str(&log.unwrap()).unwrap();
    assert_eq!(log["outcome"], "complete");

    // Not continued: the provider's response ends failed, numbered on.
    let p = FakePlatform::new();
    let cut = sse(responses_sse(&["The ", "answer ", "is"])).cut_after(5, BodyEnd::Reset);
    p.script("https://backup.test", [cut]);
    let g = gateway(&p, 1);
    let (out, events, log) = run(
        &p,
        &g,
        post(json!({"model": "gpt", "input": "hi", "stream": true})),
    );
    assert_eq!(out.status, 200, "committed before the cut");
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert!(!names.contains(&"response.completed"), "never a clean end");
    assert_eq!(names[names.len() - 2..], ["response.failed", "error"]);
    for (i, (_, d)) in events.iter().enumerate() {
        assert_eq!(d["sequence_number"], i);
    }
    let (_, failed) = &events[events.len() - 2];
    assert_eq!(failed["response"]["id"], "resp_up9");
    assert_eq!(failed["response"]["status"], "failed");
    assert!(events.last().unwrap().1["error"]["message"].is_string());
    let log: Value = serde_json::from_str(&log.unwrap()).unwrap();
    assert_eq!(log["outcome"], "interrupted");
}

#[test]
fn a_stream_is_typed_events_ending_in_response_completed() {
    let p = FakePlatform::new();
    p.script("https://primary.test", [sse(anthropic_sse(&["Hel", "lo"]))]);
    let g = gateway(&p, 2);
    let (out, events, log) = run(
        &p,
        &g,
        post(json!({"model": "default", "input": "hi", "stream": true})),
    );
    assert_eq!(out.status, 200);
    assert_eq!(
        out.headers.get("content-type"),
        Some("text/event-stream; charset=utf-8")
    );
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names[..4],
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added"
        ]
    );
    assert_eq!(names.last(), Some(&"response.completed"));
    for (i, (_, d)) in events.iter().enumerate() {
        assert_eq!(d["sequence_number"], i, "numbered in order");
    }
    assert_eq!(text_of(&events), "Hello");
    let done = &events.last().unwrap().1["response"];
    assert_eq!(done["status"], "completed");
    assert_eq!(done["output"][0]["content"][0]["text"], "Hello");
    assert_eq!(done["usage"]["output_tokens"], 6);
    let log: Value = serde_json::from_str(&log.unwrap()).unwrap();
    assert_eq!(log["outcome"], "complete");
}

#[test]
fn a_stream_cut_after_the_commit_point_is_continued_or_ends_failed_never_completed() {
    // Continued: a second attempt goes on from the text already sent, and
    // the answer ends whole.
    let p = FakePlatform::new();
    let cut = sse(anthropic_sse(&["The ", "answer ", "is"])).cut_after(3, BodyEnd::Reset);
    p.script(
        "https://primary.test",
        [cut, sse(anthropic_sse(&["answer is 42"]))],
    );
    let g = gateway(&p, 2);
    let body = json!({"model": "default", "input": "hi", "stream": true});
    let (out, events, _) = run(&p, &g, post(body.clone()));
    assert_eq!(out.status, 200);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.last(), Some(&"response.completed"), "{names:?}");
    assert!(!names.contains(&"response.failed"));
    assert_eq!(text_of(&events), "The answer is 42");
    let again: Value = serde_json::from_slice(&p.requests()[1].body).unwrap();
    let last = &again["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "assistant", "the text sent is the prefill");
    assert_eq!(
        events.last().unwrap().1["response"]["output"][0]["content"][0]["text"],
        text_of(&events).as_str()
    );

    // Not continued: the backup fails too, and the stream ends failed.
    let p = FakePlatform::new();
    let cut = sse(anthropic_sse(&["The ", "answer ", "is"])).cut_after(3, BodyEnd::Reset);
    p.script("https://primary.test", [cut]);
    p.script(
        "https://backup.test",
        [reply(500).body(r#"{"error":{"message":"down"}}"#)],
    );
    let g = gateway(&p, 1);
    let (out, events, log) = run(&p, &g, post(body));
    assert_eq!(out.status, 200, "committed before the cut");
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert!(!names.contains(&"response.completed"), "never a clean end");
    assert_eq!(names[names.len() - 2..], ["response.failed", "error"]);
    assert_eq!(text_of(&events), "The ");
    let (_, failed) = &events[events.len() - 2];
    assert_eq!(failed["response"]["status"], "failed");
    assert!(
        failed["response"]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("reset"),
        "names the original failure: {failed}"
    );
    let (_, error) = events.last().unwrap();
    assert!(error["error"]["message"].is_string(), "SDKs raise on it");
    let log: Value = serde_json::from_str(&log.unwrap()).unwrap();
    assert_eq!(log["outcome"], "interrupted");
}

#[test]
fn a_request_needing_stored_state_goes_only_to_an_entry_that_holds_it() {
    let p = FakePlatform::new();
    p.script(
        "https://backup.test",
        [reply(200).body(response_object("resp_2", "again"))],
    );
    let g = gateway(&p, 2);
    let body = json!({"model": "default", "input": "more", "previous_response_id": "resp_1"});
    let (out, _, _) = run(&p, &g, post(body));
    assert_eq!(out.status, 200);
    assert_eq!(out.headers.get("x-served-by"), Some("backup/gpt-small"));
    let urls: Vec<_> = p.requests().iter().map(|r| r.url.clone()).collect();
    assert_eq!(
        urls,
        ["https://backup.test/v1/responses"],
        "the Anthropic entry is skipped"
    );
    let sent: Value = serde_json::from_slice(&p.requests()[0].body).unwrap();
    assert_eq!(sent["previous_response_id"], "resp_1");
}

#[test]
fn a_request_needing_stored_state_no_entry_holds_is_a_clear_400() {
    let p = FakePlatform::new();
    let g = gateway(&p, 2);
    for body in [
        json!({"model": "translated", "input": "hi", "previous_response_id": "resp_1"}),
        json!({"model": "claude", "input": "hi", "store": true}),
    ] {
        let (out, _, _) = run(&p, &g, post(body.clone()));
        assert_eq!(out.status, 400, "{body}");
        let v = json_of(&out);
        assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
        let message = v["error"]["message"].as_str().unwrap();
        let field = if body.get("store").is_some() {
            "store"
        } else {
            "previous_response_id"
        };
        assert!(message.contains(field), "{message}");
    }
    assert!(p.requests().is_empty(), "no provider was sent it");
}

#[test]
fn a_malformed_request_is_an_openai_error() {
    let p = FakePlatform::new();
    let g = gateway(&p, 2);
    let (out, _, _) = run(&p, &g, post(json!({"model": "default", "input": 7})));
    assert_eq!(out.status, 400);
    let v = json_of(&out);
    assert_eq!(v["error"]["message"], "input: expected string or array");
    assert_eq!(v["error"]["code"], "invalid_request");
    let (out, _, _) = run(
        &p,
        &g,
        Inbound {
            method: "GET".into(),
            ..post(json!({}))
        },
    );
    assert_eq!(out.status, 405);
}
