//! Streaming codecs: recorded provider streams decoded at every byte
//! boundary, translated into the other client format and read back with
//! the other provider's decoder, error paths that never look complete, and
//! no input or delta sequence that makes a codec panic or write a malformed
//! stream.

use std::collections::BTreeMap;

use proptest::prelude::*;
use resilient_llm::format::anthropic::stream::AnthropicStreamEncoder;
use resilient_llm::format::openai::stream::OpenAiStreamEncoder;
use resilient_llm::{
    Anthropic, ChatRequest, Delta, ErrorKind, FinishReason, Message, PresetName, Provider,
    ProviderError, Secret, Thinking, Usage,
};
use resilient_llm::{OpenAi, SseDecoder, SseEvent};
use serde_json::{json, Value};

fn read(path: &str) -> Vec<u8> {
    let full = format!("{}/tests/fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

fn openai() -> OpenAi {
    OpenAi::new("openai", PresetName::OpenAi).api_key(Secret::new("sk-test-secret"))
}

fn anthropic() -> Anthropic {
    Anthropic::new("anthropic").api_key(Secret::new("sk-ant-secret"))
}

/// The events of a byte stream fed in these chunks.
fn events(chunks: &[&[u8]]) -> Vec<SseEvent> {
    let mut d = SseDecoder::default();
    let mut out = Vec::new();
    for c in chunks {
        d.feed(c, &mut out).unwrap();
    }
    out.extend(d.finish());
    out
}

/// What a provider stream said, read the way the chain reads it: malformed
/// chunks skipped and counted, the first error ends it.
#[derive(Debug, Default, Clone, PartialEq)]
struct Stream {
    deltas: Vec<Delta>,
    malformed: usize,
    error: Option<ProviderError>,
}

fn decode(p: &dyn Provider, chunks: &[&[u8]]) -> Stream {
    let mut s = Stream::default();
    for ev in events(chunks) {
        match p.decode_event(&ev) {
            Ok(d) => s.deltas.extend(d),
            Err(e) if e.kind == ErrorKind::Decode => s.malformed += 1,
            Err(e) => {
                s.error = Some(e);
                break;
            }
        }
    }
    s
}

#[derive(Debug, Default, Clone, PartialEq)]
struct Call {
    id: String,
    name: String,
    arguments: String,
}

/// A stream's deltas put together, as a client would.
#[derive(Debug, Default, Clone, PartialEq)]
struct Answer {
    model: Option<String>,
    text: String,
    calls: Vec<Call>,
    finish: Option<FinishReason>,
    usage: Usage,
    done: bool,
    error: Option<ErrorKind>,
    thinking: Vec<Thinking>,
}

fn assemble(deltas: &[Delta], error: Option<&ProviderError>) -> Answer {
    let mut a = Answer {
        error: error.map(|e| e.kind),
        ..Answer::default()
    };
    let mut by_index: BTreeMap<u32, usize> = BTreeMap::new();
    for d in deltas {
        match d {
            Delta::Start { model } => a.model = model.clone().or(a.model.take()),
            Delta::Text { text } => a.text.push_str(text),
            Delta::ToolCall {
                index,
                id,
                name,
                arguments,
            } => {
                let at = *by_index.entry(*index).or_insert_with(|| {
                    a.calls.push(Call::default());
                    a.calls.len() - 1
                });
                let call = &mut a.calls[at];
                if let Some(id) = id {
                    call.id = id.clone();
                }
                if let Some(name) = name {
                    call.name = name.clone();
                }
                call.arguments.push_str(arguments);
            }
            Delta::Thinking(t) => {
                // Text extends the open block; a signature closes it.
                let open = a
                    .thinking
                    .last()
                    .is_some_and(|b| b.signature.is_none() && b.redacted.is_none());
                if t.redacted.is_some() || !open {
                    a.thinking.push(Thinking::default());
                }
                let block = a.thinking.last_mut().unwrap();
                block.text.push_str(&t.text);
                block.signature = t.signature.clone();
                block.redacted = t.redacted.clone();
            }
            Delta::Finish { reason } => a.finish = Some(reason.clone()),
            Delta::Usage { usage } => {
                if usage.input_tokens > 0 {
                    a.usage.input_tokens = usage.input_tokens;
                }
                if usage.output_tokens > 0 {
                    a.usage.output_tokens = usage.output_tokens;
                }
                for (to, from) in [
                    (&mut a.usage.cached_input_tokens, usage.cached_input_tokens),
                    (
                        &mut a.usage.cache_write_input_tokens,
                        usage.cache_write_input_tokens,
                    ),
                    (&mut a.usage.reasoning_tokens, usage.reasoning_tokens),
                ] {
                    if from.is_some() {
                        *to = from;
                    }
                }
            }
            Delta::Done => a.done = true,
        }
    }
    a
}

fn answer(s: &Stream) -> Answer {
    assemble(&s.deltas, s.error.as_ref())
}

fn call(id: &str, name: &str, arguments: &str) -> Call {
    Call {
        id: id.into(),
        name: name.into(),
        arguments: arguments.into(),
    }
}

fn usage(input_tokens: u64, output_tokens: u64) -> Usage {
    Usage {
        input_tokens,
        output_tokens,
        ..Usage::default()
    }
}

/// Counts with the cache (and reasoning) details a provider reported as
/// zero, as the recorded fixtures do.
fn with_zero_details(u: Usage, reasoning: bool) -> Usage {
    Usage {
        cached_input_tokens: Some(0),
        cache_write_input_tokens: (!reasoning).then_some(0),
        reasoning_tokens: reasoning.then_some(0),
        ..u
    }
}

fn openai_fixtures() -> Vec<(&'static str, Answer)> {
    vec![
        (
            "openai/stream_text_usage.sse",
            Answer {
                model: Some("gpt-4o-mini-2024-07-18".into()),
                text: "Hello! Grüße aus\nParis 🗼.".into(),
                finish: Some(FinishReason::Stop),
                usage: with_zero_details(usage(19, 10), true),
                done: true,
                ..Answer::default()
            },
        ),
        (
            "openai/stream_tool_calls.sse",
            Answer {
                model: Some("gpt-4o-2024-08-06".into()),
                calls: vec![
                    call(
                        "call_DdmO9pD3xa9XTPNJ32zg2hcA",
                        "get_weather",
                        r#"{"location": "Paris, FR"}"#,
                    ),
                    call(
                        "call_Xq7pL2mN4vB8cR1tY6wZ0aS3",
                        "get_time",
                        r#"{"timezone": "Europe/Paris"}"#,
                    ),
                ],
                finish: Some(FinishReason::ToolCalls),
                done: true,
                ..Answer::default()
            },
        ),
        (
            "openai/stream_error.sse",
            Answer {
                model: Some("gpt-4o-mini-2024-07-18".into()),
                text: "The answer is".into(),
                error: Some(ErrorKind::Server),
                ..Answer::default()
            },
        ),
        (
            "openai/stream_openrouter_error.sse",
            Answer {
                model: Some("openai/gpt-4o".into()),
                text: "Once upon".into(),
                error: Some(ErrorKind::Server),
                ..Answer::default()
            },
        ),
        (
            // The same, with no error object: still not a finished answer.
            "openai/stream_openrouter_finish_error.sse",
            Answer {
                model: Some("openai/gpt-4o".into()),
                text: "Once upon".into(),
                error: Some(ErrorKind::Server),
                ..Answer::default()
            },
        ),
        (
            "openai/stream_length_crlf.sse",
            Answer {
                model: Some("meta-llama/Llama-3.3-70B-Instruct".into()),
                text: "One, two, three".into(),
                finish: Some(FinishReason::Length),
                usage: usage(12, 3),
                done: true,
                ..Answer::default()
            },
        ),
    ]
}

fn anthropic_fixtures() -> Vec<(&'static str, Answer)> {
    vec![
        (
            "anthropic/stream_text.sse",
            Answer {
                model: Some("claude-sonnet-4-5-20250929".into()),
                text: "Hello! Grüße aus Paris 🗼.".into(),
                finish: Some(FinishReason::Stop),
                usage: with_zero_details(usage(25, 15), false),
                done: true,
                ..Answer::default()
            },
        ),
        (
            "anthropic/stream_tool_use.sse",
            Answer {
                model: Some("claude-sonnet-4-5-20250929".into()),
                text: "Okay, let's check the weather for San Francisco, CA:".into(),
                calls: vec![call(
                    "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
                    "get_weather",
                    r#"{"location": "San Francisco, CA", "unit": "fahrenheit"}"#,
                )],
                finish: Some(FinishReason::ToolCalls),
                usage: with_zero_details(usage(472, 89), false),
                done: true,
                ..Answer::default()
            },
        ),
        (
            "anthropic/stream_overloaded.sse",
            Answer {
                model: Some("claude-sonnet-4-5-20250929".into()),
                text: "Let me think".into(),
                usage: with_zero_details(usage(40, 1), false),
                error: Some(ErrorKind::Server),
                ..Answer::default()
            },
        ),
        (
            "anthropic/stream_thinking_max_tokens.sse",
            Answer {
                model: Some("claude-opus-4-1-20250805".into()),
                text: "1, 2, 3, 4".into(),
                thinking: vec![Thinking {
                    text: "Counting: 1, 2, 3".into(),
                    signature: Some("EqQBCgIYAhIM1gbcDa9GJwZA2b3h".into()),
                    redacted: None,
                }],
                finish: Some(FinishReason::Length),
                usage: with_zero_details(usage(120, 32), false),
                done: true,
                ..Answer::default()
            },
        ),
    ]
}

/// Every fixture decodes to its expected answer, and to the very same
/// deltas when its bytes arrive split at any one point (and at a sample of
/// two points).
fn decodes_at_every_split(p: &dyn Provider, fixtures: Vec<(&str, Answer)>) {
    for (path, expected) in fixtures {
        let bytes = read(path);
        let whole = decode(p, &[&bytes]);
        assert_eq!(whole.malformed, 0, "{path}");
        assert_eq!(answer(&whole), expected, "{path}");
        for i in 0..=bytes.len() {
            let (a, b) = bytes.split_at(i);
            assert_eq!(decode(p, &[a, b]), whole, "{path} split at {i}");
        }
        for i in (0..bytes.len()).step_by(11) {
            for j in (i..bytes.len()).step_by(17) {
                let parts = [&bytes[..i], &bytes[i..j], &bytes[j..]];
                assert_eq!(decode(p, &parts), whole, "{path} split at {i},{j}");
            }
        }
    }
}

#[test]
fn openai_fixtures_decode_at_every_byte_boundary() {
    decodes_at_every_split(&openai(), openai_fixtures());
}

#[test]
fn anthropic_fixtures_decode_at_every_byte_boundary() {
    decodes_at_every_split(&anthropic(), anthropic_fixtures());
}

/// The two client formats, each with the provider decoder that reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    OpenAi,
    Anthropic,
}

/// Renders a provider stream for a client of `format`, the way the chain
/// will: every delta, then `finish` (or `error` for a stream that failed).
fn render(format: Format, s: &Stream) -> Vec<u8> {
    match format {
        Format::OpenAi => {
            let mut e =
                OpenAiStreamEncoder::new("chatcmpl-gw".into(), 1_727_000_000, "alias".into(), true);
            let mut out: Vec<u8> = s.deltas.iter().flat_map(|d| e.delta(d)).collect();
            out.extend(match &s.error {
                Some(err) => e.error(err),
                None => e.finish(),
            });
            out
        }
        Format::Anthropic => {
            let mut e = AnthropicStreamEncoder::new("msg_gw".into(), "alias".into());
            let mut out: Vec<u8> = s.deltas.iter().flat_map(|d| e.delta(d)).collect();
            out.extend(match &s.error {
                Some(err) => e.error(err),
                None => e.finish(),
            });
            out
        }
    }
}

fn reader(format: Format) -> Box<dyn Provider> {
    match format {
        Format::OpenAi => Box::new(openai()),
        Format::Anthropic => Box::new(anthropic()),
    }
}

#[test]
fn every_fixture_survives_translation_into_either_client_format() {
    let all = [
        (Format::OpenAi, openai_fixtures()),
        (Format::Anthropic, anthropic_fixtures()),
    ];
    for (source, fixtures) in all {
        for (path, expected) in fixtures {
            let original = decode(reader(source).as_ref(), &[&read(path)]);
            for target in [Format::OpenAi, Format::Anthropic] {
                let bytes = render(target, &original);
                let back = decode(reader(target).as_ref(), &[&bytes]);
                assert_eq!(back.malformed, 0, "{path} as {target:?}");
                let mut expected = expected.clone();
                if target == Format::OpenAi && expected.error.is_some() {
                    // OpenAI reports usage only in the last chunk before [DONE].
                    expected.usage = Usage::default();
                }
                // Each format lacks one detail: Anthropic reasoning tokens,
                // OpenAI tokens written to the cache.
                match target {
                    Format::Anthropic => expected.usage.reasoning_tokens = None,
                    Format::OpenAi => expected.usage.cache_write_input_tokens = None,
                }
                assert_eq!(
                    answer(&back),
                    expected,
                    "{path} as {target:?}:\n{}",
                    String::from_utf8_lossy(&bytes)
                );
                let text = String::from_utf8_lossy(&bytes);
                let complete = match target {
                    Format::OpenAi => text.contains("data: [DONE]"),
                    Format::Anthropic => text.contains("event: message_stop"),
                };
                assert_eq!(complete, expected.error.is_none(), "{path} as {target:?}");
            }
        }
    }
}

#[test]
fn anthropic_tool_blocks_become_dense_openai_tool_calls() {
    let original = decode(&anthropic(), &[&read("anthropic/stream_tool_use.sse")]);
    let bytes = render(Format::OpenAi, &original);
    let chunks: Vec<Value> = events(&[&bytes])
        .iter()
        .filter(|e| e.data != "[DONE]")
        .map(|e| serde_json::from_str(&e.data).unwrap())
        .collect();
    let first = &chunks[0]["choices"][0]["delta"];
    assert_eq!(first["role"], "assistant");
    assert_eq!(first["content"], "Okay");
    assert!(chunks
        .iter()
        .all(|c| c["model"] == "claude-sonnet-4-5-20250929"));
    let calls: Vec<&Value> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"].get("tool_calls"))
        .collect();
    assert_eq!(
        calls[0],
        &json!([{"index": 0, "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "type": "function",
                 "function": {"name": "get_weather", "arguments": ""}}])
    );
    assert!(calls[1..]
        .iter()
        .all(|c| c[0]["index"] == 0 && c[0].get("id").is_none()));
    let last = &chunks[chunks.len() - 1];
    assert_eq!(last["choices"], json!([]));
    assert_eq!(
        last["usage"],
        json!({"prompt_tokens": 472, "completion_tokens": 89, "total_tokens": 561,
               "prompt_tokens_details": {"cached_tokens": 0}})
    );
}

#[test]
fn openai_tool_calls_become_anthropic_blocks_with_their_indices() {
    let original = decode(&openai(), &[&read("openai/stream_tool_calls.sse")]);
    let bytes = render(Format::Anthropic, &original);
    let evs = events(&[&bytes]);
    let names: Vec<&str> = evs.iter().filter_map(|e| e.event.as_deref()).collect();
    assert_eq!(names.first(), Some(&"message_start"));
    assert_eq!(names.last(), Some(&"message_stop"));
    let starts: Vec<Value> = evs
        .iter()
        .filter(|e| e.event.as_deref() == Some("content_block_start"))
        .map(|e| serde_json::from_str(&e.data).unwrap())
        .collect();
    assert_eq!(starts.len(), 2);
    assert_eq!(starts[0]["index"], 0);
    assert_eq!(starts[1]["index"], 1);
    assert_eq!(
        starts[1]["content_block"],
        json!({"type": "tool_use", "id": "call_Xq7pL2mN4vB8cR1tY6wZ0aS3", "name": "get_time", "input": {}})
    );
    let delta: Value = serde_json::from_str(
        &evs.iter()
            .find(|e| e.event.as_deref() == Some("message_delta"))
            .unwrap()
            .data,
    )
    .unwrap();
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
}

#[test]
fn error_events_are_classified_without_a_status() {
    let ev = |event: Option<&str>, data: &str| SseEvent {
        event: event.map(str::to_string),
        data: data.into(),
        ..SseEvent::default()
    };
    let e = anthropic()
        .decode_event(&ev(
            Some("error"),
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ))
        .unwrap_err();
    assert_eq!(
        (e.kind, e.status, e.code.as_deref(), e.message.as_str()),
        (
            ErrorKind::Server,
            None,
            Some("overloaded_error"),
            "Overloaded"
        )
    );
    let e = anthropic()
        .decode_event(&ev(
            None,
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#,
        ))
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::RateLimited);
    let e = openai()
        .decode_event(&ev(
            None,
            r#"{"error":{"message":"bad key sk-test-secret","type":"authentication_error"}}"#,
        ))
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Auth);
    assert_eq!(e.message, "bad key ***", "the key is redacted");
    // A compatible server's named error event with plain text, or nothing.
    let e = openai()
        .decode_event(&ev(Some("error"), "upstream died"))
        .unwrap_err();
    assert_eq!(
        (e.kind, e.message.as_str()),
        (ErrorKind::Server, "upstream died")
    );
    let e = anthropic()
        .decode_event(&ev(Some("error"), ""))
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Server);
}

#[test]
fn malformed_chunks_are_decode_errors_and_keep_alives_are_nothing() {
    let ev = |event: Option<&str>, data: &str| SseEvent {
        event: event.map(str::to_string),
        data: data.into(),
        ..SseEvent::default()
    };
    for p in [&openai() as &dyn Provider, &anthropic()] {
        let e = p.decode_event(&ev(None, "{\"choices\": [")).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Decode);
        assert!(
            e.message.starts_with("malformed JSON in a stream event"),
            "{e}"
        );
        assert_eq!(p.decode_event(&ev(None, "")).unwrap(), []);
    }
    let e = openai()
        .decode_event(&ev(None, r#"{"choices":[{"delta":{"content":5}}]}"#))
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Decode);
    assert!(e.message.contains("choices[0].delta.content"), "{e}");
    let a = anthropic();
    assert_eq!(a.decode_event(&ev(Some("ping"), "not json")).unwrap(), []);
    assert_eq!(
        a.decode_event(&ev(Some("future_event"), r#"{"type":"future_event"}"#))
            .unwrap(),
        []
    );
    assert_eq!(
        a.decode_event(&ev(None, r#"{"type":"message_stop"}"#))
            .unwrap(),
        [Delta::Done]
    );
    assert_eq!(
        openai().decode_event(&ev(None, " [DONE] ")).unwrap(),
        [Delta::Done]
    );
    let e = a
        .decode_event(&ev(
            Some("content_block_delta"),
            r#"{"type":"content_block_delta","delta":{"type":"text_delta","text":"x"}}"#,
        ))
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Decode);
    assert!(e.message.contains("index: required"), "{e}");
}

#[test]
fn encoders_end_an_error_with_the_error_event_only() {
    let err =
        ProviderError::new(ErrorKind::RateLimited, "slow down").with_code("rate_limit_exceeded");
    let mut o = OpenAiStreamEncoder::new("c".into(), 1, "m".into(), true);
    let mut out = o.delta(&Delta::Text {
        text: "partial".into(),
    });
    out.extend(o.delta(&Delta::Usage { usage: usage(3, 4) }));
    out.extend(o.error(&err));
    out.extend(o.finish());
    out.extend(o.delta(&Delta::Text {
        text: "late".into(),
    }));
    let evs = events(&[&out]);
    assert_eq!(evs.len(), 2);
    let last: Value = serde_json::from_str(&evs[1].data).unwrap();
    assert_eq!(
        last,
        json!({"error": {"message": "slow down", "type": "rate_limit_error", "code": "rate_limit_exceeded"}})
    );
    let text = String::from_utf8_lossy(&out);
    assert!(!text.contains("[DONE]") && !text.contains("late"), "{text}");
    assert_eq!(
        openai().decode_event(&evs[1]).unwrap_err().kind,
        ErrorKind::RateLimited
    );

    let mut a = AnthropicStreamEncoder::new("msg".into(), "m".into());
    let mut out = a.delta(&Delta::Text {
        text: "partial".into(),
    });
    out.extend(a.error(&err));
    out.extend(a.finish());
    let evs = events(&[&out]);
    let last = evs.last().unwrap();
    assert_eq!(last.event.as_deref(), Some("error"));
    let v: Value = serde_json::from_str(&last.data).unwrap();
    assert_eq!(
        v,
        json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}})
    );
    let text = String::from_utf8_lossy(&out);
    assert!(
        !text.contains("message_stop") && !text.contains("message_delta"),
        "{text}"
    );
    assert_eq!(
        anthropic().decode_event(last).unwrap_err().kind,
        ErrorKind::RateLimited
    );
}

#[test]
fn finishing_without_a_finish_reason_is_still_well_formed() {
    let deltas = [
        Delta::Start {
            model: Some("m2".into()),
        },
        Delta::Text { text: "a".into() },
        Delta::ToolCall {
            index: 0,
            id: None,
            name: Some("f".into()),
            arguments: "{".into(),
        },
    ];
    let mut o = OpenAiStreamEncoder::new("c".into(), 1, "m".into(), false);
    let mut out: Vec<u8> = deltas.iter().flat_map(|d| o.delta(d)).collect();
    out.extend(o.finish());
    check_openai(&out).unwrap();
    let back = decode(&openai(), &[&out]);
    let a = answer(&back);
    assert_eq!(
        (a.finish, a.done, a.calls[0].id.as_str()),
        (None, true, "call_0")
    );

    let mut e = AnthropicStreamEncoder::new("msg".into(), "m".into());
    let mut out: Vec<u8> = deltas.iter().flat_map(|d| e.delta(d)).collect();
    out.extend(e.finish());
    check_anthropic(&out).unwrap();
    let a = answer(&decode(&anthropic(), &[&out]));
    assert_eq!(
        (a.finish, a.done, a.model.as_deref()),
        (None, true, Some("m2"))
    );

    // Nothing at all, then finish: still a complete, empty answer.
    let mut o = OpenAiStreamEncoder::new("c".into(), 1, "m".into(), true);
    let out = o.finish();
    check_openai(&out).unwrap();
    let mut e = AnthropicStreamEncoder::new("msg".into(), "m".into());
    let out = e.finish();
    check_anthropic(&out).unwrap();
}

#[test]
fn requests_ask_for_a_stream_and_for_usage_where_the_preset_can() {
    let mut req = ChatRequest::new(vec![Message::user("hi")]);
    req.stream = true;
    let body = |p: &dyn Provider| -> Value {
        serde_json::from_slice(&p.encode(&req, "m").unwrap().body).unwrap()
    };
    let v = body(&anthropic());
    assert_eq!(v["stream"], true);
    let v = body(&openai());
    assert_eq!(
        (&v["stream"], &v["stream_options"]),
        (&json!(true), &json!({"include_usage": true}))
    );
    let v = body(&OpenAi::new("mistral", PresetName::Mistral));
    assert_eq!(v["stream"], true);
    assert!(v.get("stream_options").is_none());
}

// ------------------------------------------------------ well-formedness

/// Checks an OpenAI client stream: chunks of one choice, the role first,
/// tool calls numbered densely with id and name on their first fragment,
/// one finish reason, and exactly one ending (`[DONE]` or an error) last.
fn check_openai(bytes: &[u8]) -> Result<(), String> {
    let mut ended = false;
    let mut started = false;
    let mut calls = 0u64;
    let mut finishes = 0;
    for ev in events(&[bytes]) {
        if ended {
            return Err(format!("{:?} after the end", ev.data));
        }
        if ev.event.is_some() {
            return Err("an event name".into());
        }
        if ev.data == "[DONE]" {
            ended = true;
            continue;
        }
        let v: Value = serde_json::from_str(&ev.data).map_err(|e| e.to_string())?;
        if v.get("error").is_some() {
            ended = true;
            continue;
        }
        if v["object"] != "chat.completion.chunk" {
            return Err(format!("not a chunk: {v}"));
        }
        let choices = v["choices"].as_array().ok_or("no choices")?;
        let Some(choice) = choices.first() else {
            continue;
        };
        if choices.len() > 1 {
            return Err("several choices".into());
        }
        let delta = &choice["delta"];
        if !started && delta["role"] != "assistant" {
            return Err("the first chunk has no role".into());
        }
        started = true;
        for c in delta["tool_calls"].as_array().into_iter().flatten() {
            let i = c["index"].as_u64().ok_or("tool call without index")?;
            if i == calls {
                calls += 1;
                if !c["id"].is_string() || !c["function"]["name"].is_string() {
                    return Err(format!("first fragment without id or name: {c}"));
                }
            } else if i > calls {
                return Err(format!("tool call index {i} skips {calls}"));
            }
        }
        if !choice["finish_reason"].is_null() {
            finishes += 1;
        }
    }
    if !ended {
        return Err("no ending".into());
    }
    if finishes > 1 {
        return Err("several finish reasons".into());
    }
    Ok(())
}

/// Checks an Anthropic client stream: `message_start` first, blocks
/// started, fed and stopped one at a time with indices from 0, the right
/// delta type for each block, `message_delta` outside blocks, and exactly
/// one ending (`message_stop` after `message_delta`, or `error`) last.
fn check_anthropic(bytes: &[u8]) -> Result<(), String> {
    let mut started = false;
    let mut open: Option<(u64, String)> = None;
    let mut next = 0u64;
    let mut message_delta = false;
    let mut ended = false;
    for ev in events(&[bytes]) {
        let name = ev.event.clone().ok_or("an event without a name")?;
        if ended {
            return Err(format!("{name} after the end"));
        }
        let v: Value = serde_json::from_str(&ev.data).map_err(|e| e.to_string())?;
        if v["type"] != name.as_str() {
            return Err(format!("{name} with type {}", v["type"]));
        }
        match name.as_str() {
            "error" => ended = true,
            "message_start" if !started => started = true,
            _ if !started => return Err(format!("{name} before message_start")),
            "content_block_start" if open.is_none() && !message_delta => {
                if v["index"] != next {
                    return Err(format!("block {} started, {next} expected", v["index"]));
                }
                let kind = v["content_block"]["type"].as_str().unwrap_or_default();
                open = Some((next, kind.to_string()));
                next += 1;
            }
            "content_block_delta" => {
                let (i, kind) = open.as_ref().ok_or("a delta outside any block")?;
                let expected: &[&str] = match kind.as_str() {
                    "text" => &["text_delta"],
                    "thinking" => &["thinking_delta", "signature_delta"],
                    _ => &["input_json_delta"],
                };
                let kind_ok = v["delta"]["type"]
                    .as_str()
                    .is_some_and(|t| expected.contains(&t));
                if v["index"] != *i || !kind_ok {
                    return Err(format!("{v} in block {i} ({kind})"));
                }
            }
            "content_block_stop" => match open.take() {
                Some((i, _)) if v["index"] == i => {}
                _ => return Err(format!("{v} stops no open block")),
            },
            "message_delta" if open.is_none() && !message_delta => message_delta = true,
            "message_stop" if message_delta => ended = true,
            other => return Err(format!("{other} out of place")),
        }
    }
    if !bytes.is_empty() && !ended {
        return Err("no ending".into());
    }
    Ok(())
}

#[test]
fn the_checkers_refuse_malformed_streams() {
    let start = "event: message_start\ndata: {\"type\":\"message_start\"}\n\n";
    let delta = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n";
    let stop = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    assert!(check_anthropic(format!("{start}{delta}").as_bytes()).is_err());
    assert!(check_anthropic(format!("{start}{stop}").as_bytes()).is_err());
    assert!(check_anthropic(delta.as_bytes()).is_err());
    let chunk = r#"data: {"object":"chat.completion.chunk","choices":[{"delta":{"content":"x"}}]}"#;
    assert!(check_openai(format!("{chunk}\n\ndata: [DONE]\n\n").as_bytes()).is_err());
    assert!(check_openai(b"data: [DONE]\n\ndata: [DONE]\n\n").is_err());
    assert!(check_openai(b"").is_err());
}

#[test]
fn fixtures_render_as_well_formed_streams() {
    for (path, _) in openai_fixtures() {
        let s = decode(&openai(), &[&read(path)]);
        check_openai(&render(Format::OpenAi, &s)).unwrap();
        check_anthropic(&render(Format::Anthropic, &s)).unwrap();
    }
    for (path, _) in anthropic_fixtures() {
        let s = decode(&anthropic(), &[&read(path)]);
        check_openai(&render(Format::OpenAi, &s)).unwrap();
        check_anthropic(&render(Format::Anthropic, &s)).unwrap();
    }
}

// ------------------------------------------------------------ properties

const KEYS: &[&str] = &[
    "type",
    "index",
    "delta",
    "content_block",
    "message",
    "model",
    "usage",
    "input_tokens",
    "output_tokens",
    "choices",
    "tool_calls",
    "function",
    "arguments",
    "name",
    "id",
    "error",
    "content",
    "text",
    "partial_json",
    "stop_reason",
    "finish_reason",
    "role",
    "refusal",
    "prompt_tokens",
    "completion_tokens",
    "code",
    "object",
    "input",
    "thinking",
    "signature",
    "data",
    "reasoning_content",
    "reasoning",
    "thinking_blocks",
    "cache_read_input_tokens",
    "prompt_tokens_details",
    "cached_tokens",
];

const WORDS: &[&str] = &[
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "ping",
    "error",
    "text",
    "tool_use",
    "text_delta",
    "input_json_delta",
    "thinking_delta",
    "signature_delta",
    "thinking",
    "redacted_thinking",
    "assistant",
    "stop",
    "end_turn",
    "tool_calls",
    "overloaded_error",
    "[DONE]",
];

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        prop::sample::select(WORDS).prop_map(Value::from),
        ".{0,6}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(prop::sample::select(KEYS), inner, 0..6).prop_map(|m| {
                Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            }),
        ]
    })
}

fn event_name() -> impl Strategy<Value = Option<String>> {
    prop::option::of(prop_oneof![
        prop::sample::select(WORDS).prop_map(str::to_string),
        "[a-z_]{0,8}",
    ])
}

fn finish_reason() -> impl Strategy<Value = FinishReason> {
    prop_oneof![
        Just(FinishReason::Stop),
        Just(FinishReason::Length),
        Just(FinishReason::ToolCalls),
        Just(FinishReason::ContentFilter),
        // Not "error": in the OpenAI format that ends a failed answer.
        prop::sample::select(&["pause_turn", "eos", "unknown_reason"][..])
            .prop_map(|s| FinishReason::Other(s.to_string())),
    ]
}

fn delta() -> impl Strategy<Value = Delta> {
    prop_oneof![
        prop::option::of("[a-z]{0,5}").prop_map(|model| Delta::Start { model }),
        ".{0,5}".prop_map(|text| Delta::Text { text }),
        (
            prop_oneof![0u32..4, Just(u32::MAX)],
            prop::option::of(".{0,4}"),
            prop::option::of(".{0,4}"),
            ".{0,5}"
        )
            .prop_map(|(index, id, name, arguments)| Delta::ToolCall {
                index,
                id,
                name,
                arguments
            }),
        finish_reason().prop_map(|reason| Delta::Finish { reason }),
        (any::<u64>(), any::<u64>()).prop_map(|(i, o)| Delta::Usage { usage: usage(i, o) }),
        Just(Delta::Done),
    ]
}

#[derive(Debug, Clone)]
enum Op {
    Delta(Delta),
    Finish,
    Error(ErrorKind, u16),
}

fn op() -> impl Strategy<Value = Op> {
    let kinds = [
        ErrorKind::RateLimited,
        ErrorKind::QuotaExhausted,
        ErrorKind::Server,
        ErrorKind::Timeout,
        ErrorKind::Stalled,
        ErrorKind::Transport,
        ErrorKind::Auth,
        ErrorKind::NotFound,
        ErrorKind::ContextLength,
        ErrorKind::ContentFilter,
        ErrorKind::InvalidRequest,
        ErrorKind::Unsupported,
        ErrorKind::Decode,
        ErrorKind::CircuitOpen,
        ErrorKind::DeadlineExceeded,
    ];
    prop_oneof![
        8 => delta().prop_map(Op::Delta),
        1 => Just(Op::Finish),
        1 => (prop::sample::select(kinds.to_vec()), prop_oneof![Just(0u16), Just(403), Just(413), Just(529)])
            .prop_map(|(k, s)| Op::Error(k, s)),
    ]
}

/// A tool call's id, name and argument fragments, or a run of text.
#[derive(Debug, Clone)]
enum Segment {
    Text(Vec<String>),
    Tool(Vec<String>),
}

/// A well-formed provider stream: a model, text and tool calls in any
/// order, maybe a finish reason, usage, the end.
fn well_formed() -> impl Strategy<Value = Vec<Delta>> {
    let segment = prop_oneof![
        prop::collection::vec(".{1,8}", 1..4).prop_map(Segment::Text),
        prop::collection::vec(".{0,8}", 1..4).prop_map(Segment::Tool),
    ];
    (
        "[a-z0-9.-]{1,12}",
        prop::collection::vec(segment, 0..6),
        prop::option::of(finish_reason()),
        0u64..1_000_000,
        0u64..1_000_000,
    )
        .prop_map(|(model, segments, finish, input, output)| {
            let mut out = vec![
                Delta::Start { model: Some(model) },
                Delta::Usage {
                    usage: usage(input, 0),
                },
            ];
            let mut tools = 0u32;
            for s in segments {
                match s {
                    Segment::Text(parts) => {
                        out.extend(parts.into_iter().map(|text| Delta::Text { text }))
                    }
                    Segment::Tool(parts) => {
                        for (j, arguments) in parts.into_iter().enumerate() {
                            let first = j == 0;
                            out.push(Delta::ToolCall {
                                index: tools,
                                id: first.then(|| format!("id_{tools}")),
                                name: first.then(|| format!("tool_{tools}")),
                                arguments,
                            });
                        }
                        tools += 1;
                    }
                }
            }
            out.extend(finish.map(|reason| Delta::Finish { reason }));
            out.push(Delta::Usage {
                usage: usage(0, output),
            });
            out.push(Delta::Done);
            out
        })
}

proptest! {
    #[test]
    fn no_bytes_make_a_decoder_panic(bytes in prop::collection::vec(any::<u8>(), 0..400), cut in 0usize..400) {
        let cut = cut.min(bytes.len());
        let mut d = SseDecoder::new(128);
        let mut evs = Vec::new();
        let _ = d.feed(&bytes[..cut], &mut evs);
        let _ = d.feed(&bytes[cut..], &mut evs);
        evs.extend(d.finish());
        for ev in &evs {
            let _ = openai().decode_event(ev);
            let _ = anthropic().decode_event(ev);
        }
    }

    #[test]
    fn no_event_makes_a_decoder_panic(event in event_name(), data in json_value(), raw in ".{0,20}", as_raw in any::<bool>()) {
        let data = if as_raw { raw } else { data.to_string() };
        let ev = SseEvent { event, data, ..SseEvent::default() };
        let _ = openai().decode_event(&ev);
        let _ = anthropic().decode_event(&ev);
    }

    #[test]
    fn no_delta_sequence_makes_an_encoder_panic_or_write_a_malformed_stream(
        ops in prop::collection::vec(op(), 0..40),
        include_usage in any::<bool>(),
    ) {
        let mut o = OpenAiStreamEncoder::new("c".into(), 0, "m".into(), include_usage);
        let mut a = AnthropicStreamEncoder::new("msg".into(), "m".into());
        let (mut ob, mut ab) = (Vec::new(), Vec::new());
        for op in &ops {
            match op {
                Op::Delta(d) => {
                    ob.extend(o.delta(d));
                    ab.extend(a.delta(d));
                }
                Op::Finish => {
                    ob.extend(o.finish());
                    ab.extend(a.finish());
                }
                Op::Error(kind, status) => {
                    let mut e = ProviderError::new(*kind, "");
                    if *status > 0 {
                        e = e.with_status(*status);
                    }
                    ob.extend(o.error(&e));
                    ab.extend(a.error(&e));
                }
            }
        }
        ob.extend(o.finish());
        ab.extend(a.finish());
        prop_assert_eq!(check_openai(&ob), Ok(()), "{}", String::from_utf8_lossy(&ob));
        prop_assert_eq!(check_anthropic(&ab), Ok(()), "{}", String::from_utf8_lossy(&ab));
        // What an encoder writes, our own decoders read without a malformed chunk.
        prop_assert_eq!(decode(&openai(), &[&ob]).malformed, 0);
        prop_assert_eq!(decode(&anthropic(), &[&ab]).malformed, 0);
    }

    #[test]
    fn any_well_formed_stream_translates_both_ways(deltas in well_formed()) {
        let expected = assemble(&deltas, None);
        let s = Stream { deltas, ..Stream::default() };
        for first in [Format::OpenAi, Format::Anthropic] {
            let once = decode(reader(first).as_ref(), &[&render(first, &s)]);
            prop_assert_eq!(answer(&once), expected.clone(), "{:?}", first);
            let second = if first == Format::OpenAi { Format::Anthropic } else { Format::OpenAi };
            let twice = decode(reader(second).as_ref(), &[&render(second, &once)]);
            prop_assert_eq!(answer(&twice), expected.clone(), "{:?} then {:?}", first, second);
        }
    }
}
