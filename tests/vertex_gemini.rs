//! Gemini on Vertex AI on the fake platform: a neutral request written in Gemini's format
//! (text, images, tools and their results, JSON output, thinking), answers and stream chunks
//! read back on recorded fixtures with the usage Gemini gave and no other, through the
//! client, and no bytes that make a reader panic.

#[path = "vertex/support.rs"]
mod support;

use proptest::prelude::*;
use resilient_llm::format::gemini;
use resilient_llm::testing::{block_on, reply, FakePlatform};
use resilient_llm::{
    BufferedResponse, CallOptions, ChatRequest, Delta, Error, ErrorKind, FinishReason, Headers,
    Image, ImageSource, Message, Part, ResponseFormat, Role, SseDecoder, Tool, ToolCall,
    ToolChoice, Usage,
};
use serde_json::{json, Value};
use support::*;

// ------------------------------------------------------------ Gemini

#[test]
fn gemini_answers_read_into_the_neutral_answer() {
    let p = gemini_provider();
    let files = json_files(&fixtures().join("gemini"));
    assert!(files.len() >= 7);
    for file in &files {
        check_fixture(p.as_ref(), file);
    }
}

#[test]
fn a_neutral_request_is_written_in_gemini_s_format() {
    let p = authorised(gemini_provider());
    let mut req = ChatRequest::new(vec![
        Message::system("You are terse."),
        Message {
            role: Role::User,
            content: vec![
                Part::text("What is in this picture, and the weather in Paris?"),
                Part::Image(Image {
                    source: ImageSource::Base64 {
                        media_type: "image/png".into(),
                        data: "iVBORw0KGgo=".into(),
                    },
                    detail: None,
                    cache_control: None,
                }),
            ],
        },
        Message {
            role: Role::Assistant,
            content: vec![
                Part::text("A cat. Checking the weather."),
                Part::ToolCall(ToolCall {
                    id: "call_1".into(),
                    name: "get_weather".into(),
                    arguments: r#"{"city":"Paris"}"#.into(),
                }),
            ],
        },
        Message {
            role: Role::Tool,
            content: vec![Part::ToolResult {
                tool_call_id: "call_1".into(),
                content: "18C, cloudy".into(),
                images: Vec::new(),
                is_error: false,
                cache_control: None,
            }],
        },
        Message::user("Thanks."),
    ]);
    req.max_tokens = Some(256);
    req.temperature = Some(0.2);
    req.stop = vec!["END".into()];
    req.tools = vec![Tool {
        name: "get_weather".into(),
        description: Some("Current weather".into()),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}},
                           "additionalProperties": false}),
        cache_control: None,
    }];
    req.tool_choice = Some(ToolChoice::Tool("get_weather".into()));
    req.response_format = Some(ResponseFormat::JsonObject);
    let http = p.encode(&req, "gemini-2.5-flash").unwrap();
    assert_eq!(
        http.url,
        format!("{VERTEX}/google/models/gemini-2.5-flash:generateContent")
    );
    let body: Value = serde_json::from_slice(&http.body).unwrap();
    assert_eq!(
        body,
        json!({
            "contents": [
                {"role": "user", "parts": [
                    {"text": "What is in this picture, and the weather in Paris?"},
                    {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}
                ]},
                {"role": "model", "parts": [
                    {"text": "A cat. Checking the weather."},
                    {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}
                ]},
                {"role": "user", "parts": [
                    {"functionResponse": {"name": "get_weather",
                                          "response": {"content": "18C, cloudy"}}},
                    {"text": "Thanks."}
                ]}
            ],
            "systemInstruction": {"parts": [{"text": "You are terse."}]},
            "tools": [{"functionDeclarations": [{
                "name": "get_weather", "description": "Current weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}
            }]}],
            "toolConfig": {"functionCallingConfig": {
                "mode": "ANY", "allowedFunctionNames": ["get_weather"]}},
            "generationConfig": {
                "maxOutputTokens": 256, "temperature": 0.2, "stopSequences": ["END"],
                "responseMimeType": "application/json"
            }
        })
    );
    assert_eq!(
        http.headers.get("authorization"),
        Some(format!("Bearer {TOKEN}").as_str())
    );
}

#[test]
fn a_json_schema_becomes_response_schema() {
    let mut req = ChatRequest::new(vec![Message::user("a city")]);
    req.response_format = Some(
        serde_json::from_value(json!({"type": "json_schema", "name": "city",
            "schema": {"type": "object", "properties": {"name": {"type": "string"}},
                       "required": ["name"], "additionalProperties": false}, "strict": true}))
        .unwrap(),
    );
    req.reasoning = Some(resilient_llm::Reasoning::Budget {
        budget_tokens: 1024,
    });
    let body = serde_json::to_value(gemini::encode_request(&req).unwrap()).unwrap();
    assert_eq!(
        body["generationConfig"],
        json!({"responseMimeType": "application/json",
               "responseSchema": {"type": "object", "properties": {"name": {"type": "string"}},
                                  "required": ["name"]},
               "thinkingConfig": {"thinkingBudget": 1024, "includeThoughts": true}})
    );
}

#[test]
fn what_gemini_cannot_take_is_refused_with_its_place() {
    let mut req = ChatRequest::new(vec![Message {
        role: Role::User,
        content: vec![Part::Image(Image {
            source: ImageSource::Url {
                url: "https://example.test/cat.png".into(),
            },
            detail: None,
            cache_control: None,
        })],
    }]);
    let e = gemini::encode_request(&req).unwrap_err();
    assert_eq!(e.path, "messages[0].content[0]");
    req.messages = vec![Message {
        role: Role::Tool,
        content: vec![Part::ToolResult {
            tool_call_id: "nowhere".into(),
            content: "x".into(),
            images: Vec::new(),
            is_error: false,
            cache_control: None,
        }],
    }];
    let e = gemini::encode_request(&req).unwrap_err();
    assert_eq!(e.path, "messages[0].content[0].tool_call_id");
}

#[test]
fn gemini_streams_read_into_deltas_with_usage_only_at_the_end() {
    let p = gemini_provider();
    let sse = std::fs::read(fixtures().join("gemini/stream_text.sse")).unwrap();
    let deltas = stream_deltas(p.as_ref(), &sse).unwrap();
    let text: String = deltas
        .iter()
        .filter_map(|d| match d {
            Delta::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Hello!");
    let usage: Vec<&Usage> = deltas
        .iter()
        .filter_map(|d| match d {
            Delta::Usage { usage } => Some(usage),
            _ => None,
        })
        .collect();
    assert_eq!(
        usage,
        [&Usage {
            input_tokens: 4,
            output_tokens: 3,
            ..Usage::default()
        }]
    );
    assert!(deltas.contains(&Delta::Finish {
        reason: FinishReason::Stop
    }));

    let sse = std::fs::read(fixtures().join("gemini/stream_function_call.sse")).unwrap();
    let deltas = stream_deltas(p.as_ref(), &sse).unwrap();
    assert!(deltas.contains(&Delta::ToolCall {
        index: 1,
        id: Some("call_1_get_weather".into()),
        name: Some("get_weather".into()),
        arguments: r#"{"city":"Paris"}"#.into(),
    }));
    assert!(deltas.contains(&Delta::Finish {
        reason: FinishReason::ToolCalls
    }));
    assert!(deltas.contains(&Delta::Usage {
        usage: Usage {
            input_tokens: 40,
            output_tokens: 20,
            reasoning_tokens: Some(11),
            ..Usage::default()
        }
    }));

    let sse = std::fs::read(fixtures().join("gemini/stream_error.sse")).unwrap();
    let e = stream_deltas(p.as_ref(), &sse).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Server);
    assert!(e.message.contains("overloaded"));
}

#[test]
fn a_gemini_model_answers_a_stream_through_the_client() {
    let p = FakePlatform::new().at(NOW);
    let c = client(&p);
    p.script(TOKEN_URI, [token_reply(3600)]);
    let url = format!("{VERTEX}/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse");
    let sse = std::fs::read(fixtures().join("gemini/stream_text.sse")).unwrap();
    p.script(
        &url,
        [reply(200)
            .header("content-type", "text/event-stream")
            .body(sse)],
    );
    let deltas: Result<Vec<Delta>, Error> = block_on(&p, async {
        let mut s = c.stream(ask("gemini"), CallOptions::default())?;
        let mut out = Vec::new();
        while let Some(d) = s.next().await {
            out.push(d?);
        }
        Ok(out)
    });
    let deltas = deltas.unwrap();
    assert_eq!(deltas.last(), Some(&Delta::Done));
    let r = block_on(&p, async {
        p.script(
            &format!("{VERTEX}/google/models/gemini-2.5-flash:generateContent"),
            [gemini_ok("whole")],
        );
        c.chat(ask("gemini")).await
    })
    .unwrap();
    assert_eq!(r.response.text, "whole");
    assert_eq!(p.requests_to(TOKEN_URI), 1);
}

// ------------------------------------------------------------ properties

proptest! {
    #[test]
    fn no_bytes_make_the_gemini_readers_panic(body in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = gemini::decode_response(&body);
        let _ = gemini::decode_chunk(&body);
        let p = gemini_provider();
        let _ = p.decode(&BufferedResponse { status: 200, headers: Headers::new(), body: body.clone() }, NOW);
        let mut events = Vec::new();
        if SseDecoder::default().feed(&body, &mut events).is_ok() {
            for ev in &events {
                let _ = p.decode_event(ev);
            }
        }
    }
}
