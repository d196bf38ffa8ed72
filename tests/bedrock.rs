//! The Bedrock adapter end to end on the fake platform: InvokeModel with
//! the Messages body and Converse, whole and streamed, signed requests,
//! each error class from recorded answers (tests/bedrock_protocols.rs has
//! SigV4 and the event-stream decoder on their own).

use std::fs;
use std::path::Path;

use resilient_llm::bedrock::eventstream::encode_frame;
use resilient_llm::bedrock::sigv4::{self, Scope, SigningRequest};
use resilient_llm::testing::{block_on, reply, FakePlatform};
use resilient_llm::{
    CallOptions, ChatRequest, Client, Config, Delta, Dialect, Error, ErrorKind, Message, Native,
    Usage,
};
use serde_json::{json, Value};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/bedrock");

fn read(path: impl AsRef<Path>) -> String {
    fs::read_to_string(path.as_ref()).unwrap_or_else(|e| panic!("{:?}: {e}", path.as_ref()))
}

fn recorded(name: &str) -> Vec<u8> {
    fs::read(Path::new(FIXTURES).join(name)).unwrap()
}

const NOW: u64 = 1_764_590_400_000; // 2025-12-01T12:00:00Z
const CLAUDE: &str = "anthropic.claude-sonnet-4-5-20250929-v1:0";
const NOVA: &str = "us.amazon.nova-pro-v1:0";

fn secret(name: &str) -> Option<String> {
    match name {
        "AWS_ACCESS_KEY_ID" => Some("AKIDEXAMPLE".into()),
        "AWS_SECRET_ACCESS_KEY" => Some("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into()),
        _ => None,
    }
}

fn client(p: &FakePlatform, model: &str) -> Client<FakePlatform> {
    let cfg = json!({
        "providers": { "bedrock": { "kind": "bedrock", "region": "us-east-1",
                                    "baseUrl": "https://bedrock.test" } },
        "routes": { "default": [ { "provider": "bedrock", "model": model } ] },
        "retry": { "maxAttempts": 1 }
    });
    Config::parse(&cfg.to_string())
        .unwrap()
        .client(p.clone(), vec![], &secret)
        .unwrap()
}

fn req() -> ChatRequest {
    ChatRequest::new(vec![Message::system("Be brief."), Message::user("Hello")])
}

fn chat(
    p: &FakePlatform,
    c: &Client<FakePlatform>,
    r: ChatRequest,
) -> Result<resilient_llm::Reply, Error> {
    block_on(p, c.chat(r))
}

fn stream(
    p: &FakePlatform,
    c: &Client<FakePlatform>,
    mut r: ChatRequest,
) -> (Vec<Delta>, Option<Error>) {
    r.stream = true;
    block_on(p, async {
        let mut s = match c.stream(r, CallOptions::default()) {
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

#[test]
fn an_anthropic_model_is_invoked_with_a_signed_messages_body() {
    let p = FakePlatform::new().at(NOW);
    let answer = read(Path::new(FIXTURES).join("invoke.json"));
    p.script("https://bedrock.test/", [reply(200).body(answer)]);
    let c = client(&p, CLAUDE);
    let r = chat(&p, &c, req()).unwrap();
    assert_eq!(r.response.text, "Hello from Claude on Bedrock.");
    assert_eq!(r.response.usage.unwrap().output_tokens, 9);
    let sent = &p.requests()[0];
    assert_eq!(
        sent.url,
        "https://bedrock.test/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke"
    );
    let body: Value = serde_json::from_slice(&sent.body).unwrap();
    assert_eq!(body["anthropic_version"], "bedrock-2023-05-31");
    assert!(
        body.get("model").is_none() && body.get("stream").is_none(),
        "{body}"
    );
    assert_eq!(body["system"], "Be brief.");
    assert_eq!(sent.headers.get("x-amz-date"), Some("20251201T120000Z"));
    let auth = sent.headers.get("authorization").unwrap();
    assert!(auth.starts_with(
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20251201/us-east-1/bedrock/aws4_request, SignedHeaders=accept;content-type;host;x-amz-date, Signature="
    ), "{auth}");
    // The signature is the one an independent signer computes over the
    // request as sent: the path's %3A encoded again, as AWS expects.
    let scope = Scope {
        region: "us-east-1",
        service: "bedrock",
        amz_date: "20251201T120000Z".into(),
    };
    let headers = [
        ("accept", "application/json"),
        ("content-type", "application/json"),
        ("host", "bedrock.test"),
        ("x-amz-date", "20251201T120000Z"),
    ];
    let canonical = sigv4::canonical_request(&SigningRequest {
        method: "POST",
        path: "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke",
        query: "",
        headers: &headers,
        payload: &sent.body,
    });
    assert!(canonical.contains("/model/anthropic.claude-sonnet-4-5-20250929-v1%253A0/invoke\n"));
    let sig = sigv4::signature(
        "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        &scope,
        &sigv4::string_to_sign(&scope, &canonical),
    );
    assert!(auth.ends_with(&sig));
    // No secret in any header but the signature's derivation.
    for (_, v) in sent.headers.iter() {
        assert!(!v.contains("wJalrXUtnFEMI"));
    }
}

#[test]
fn a_messages_clients_own_body_reaches_bedrock_with_its_fields() {
    let p = FakePlatform::new().at(NOW);
    p.script(
        "https://bedrock.test/",
        [reply(200).body(read(Path::new(FIXTURES).join("invoke.json")))],
    );
    let c = client(&p, CLAUDE);
    let body = json!({"model": "default", "max_tokens": 50, "x_future": [1],
                      "messages": [{"role": "user", "content": [{"type": "text", "text": "hi",
                                    "cache_control": {"type": "ephemeral"}}]}]});
    let mut r = resilient_llm::format::anthropic::request_from_value(&body).unwrap();
    let Value::Object(body) = body else {
        unreachable!()
    };
    r.native = Some(Box::new(Native {
        dialect: Dialect::Anthropic,
        body,
        headers: vec![("anthropic-beta".into(), "context-1m-2025-08-07".into())],
    }));
    let out = chat(&p, &c, r).unwrap();
    // The answer is Bedrock's Messages body, for a Messages client as it came.
    assert_eq!(out.response.dialect, Some(Dialect::Anthropic));
    let sent: Value = serde_json::from_slice(&p.requests()[0].body).unwrap();
    assert_eq!(
        sent,
        json!({"max_tokens": 50, "x_future": [1],
               "messages": [{"role": "user", "content": [{"type": "text", "text": "hi",
                             "cache_control": {"type": "ephemeral"}}]}],
               "anthropic_beta": ["context-1m-2025-08-07"],
               "anthropic_version": "bedrock-2023-05-31"})
    );
}

#[test]
fn other_models_go_through_converse_both_ways() {
    let p = FakePlatform::new().at(NOW);
    p.script(
        "https://bedrock.test/",
        [reply(200).body(read(Path::new(FIXTURES).join("converse.json")))],
    );
    let c = client(&p, NOVA);
    let mut r = req();
    r.max_tokens = Some(100);
    r.temperature = Some(0.5);
    r.seed = Some(7);
    let out = chat(&p, &c, r).unwrap();
    assert_eq!(out.response.text, "Hello from Nova.");
    assert_eq!(
        out.response.usage,
        Some(Usage {
            input_tokens: 15,
            output_tokens: 5,
            cached_input_tokens: Some(3),
            cache_write_input_tokens: None,
            reasoning_tokens: None
        })
    );
    // Converse names no model: the entry's is the one that answered.
    assert_eq!(out.response.model, "");
    assert_eq!(out.served_by.model, NOVA);
    let sent = &p.requests()[0];
    assert_eq!(
        sent.url,
        "https://bedrock.test/model/us.amazon.nova-pro-v1%3A0/converse"
    );
    let body: Value = serde_json::from_slice(&sent.body).unwrap();
    assert_eq!(
        body,
        json!({"messages": [{"role": "user", "content": [{"text": "Hello"}]}],
               "system": [{"text": "Be brief."}],
               "inferenceConfig": {"maxTokens": 100, "temperature": 0.5}})
    );
    assert_eq!(out.attempts[0].omitted, ["seed"]);
}

#[test]
fn converse_carries_tools_and_their_results() {
    let p = FakePlatform::new().at(NOW);
    p.script(
        "https://bedrock.test/",
        [reply(200).body(read(Path::new(FIXTURES).join("converse-tool.json")))],
    );
    let c = client(&p, NOVA);
    let body = json!({"model": "default", "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "t1", "type": "function",
            "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "t1", "content": "sunny"},
        {"role": "user", "content": "And Rome?"}],
        "tools": [{"type": "function", "function": {"name": "weather", "description": "Weather",
                   "parameters": {"type": "object"}}}]});
    let r = resilient_llm::format::openai::parse_request(body.to_string().as_bytes()).unwrap();
    let out = chat(&p, &c, r).unwrap();
    assert_eq!(out.response.tool_calls[0].name, "weather");
    assert_eq!(out.response.tool_calls[0].arguments, r#"{"city":"Rome"}"#);
    let sent: Value = serde_json::from_slice(&p.requests()[0].body).unwrap();
    assert_eq!(
        sent["messages"],
        json!([
            {"role": "user", "content": [{"text": "Weather in Paris?"}]},
            {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "weather", "input": {"city": "Paris"}}}]},
            {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "content": [{"text": "sunny"}]}},
                                         {"text": "And Rome?"}]}
        ])
    );
    assert_eq!(
        sent["toolConfig"],
        json!({"tools": [{"toolSpec": {"name": "weather", "description": "Weather",
                                       "inputSchema": {"json": {"type": "object"}}}}]})
    );
}

/// A Bedrock event stream: each JSON payload a frame of `:event-type`.
fn event_stream(events: &[(&str, Value)]) -> Vec<Vec<u8>> {
    events
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
fn an_invoke_stream_is_read_by_the_anthropic_decoder() {
    let p = FakePlatform::new().at(NOW);
    let bytes = recorded("invoke-stream.bin");
    // Cut in arbitrary places, not on frame boundaries.
    let chunks: Vec<Vec<u8>> = bytes.chunks(37).map(<[u8]>::to_vec).collect();
    p.script("https://bedrock.test/", [reply(200).chunks(chunks)]);
    let c = client(&p, CLAUDE);
    let (deltas, error) = stream(&p, &c, req());
    assert!(error.is_none(), "{error:?}");
    assert_eq!(text(&deltas), "Hello from Claude.");
    assert_eq!(deltas.last(), Some(&Delta::Done));
    assert!(p.requests()[0]
        .url
        .ends_with("/invoke-with-response-stream"));
    assert_eq!(
        p.requests()[0].headers.get("accept"),
        Some("application/vnd.amazon.eventstream")
    );
}

#[test]
fn a_converse_stream_gives_text_tool_calls_and_usage() {
    let p = FakePlatform::new().at(NOW);
    let frames = event_stream(&[
        ("messageStart", json!({"role": "assistant", "p": "abc"})),
        (
            "contentBlockDelta",
            json!({"contentBlockIndex": 0, "delta": {"text": "Hi "}}),
        ),
        (
            "contentBlockDelta",
            json!({"contentBlockIndex": 0, "delta": {"text": "there."}}),
        ),
        ("contentBlockStop", json!({"contentBlockIndex": 0})),
        (
            "contentBlockStart",
            json!({"contentBlockIndex": 1, "start": {"toolUse": {"toolUseId": "t9", "name": "f"}}}),
        ),
        (
            "contentBlockDelta",
            json!({"contentBlockIndex": 1, "delta": {"toolUse": {"input": "{\"a\":"}}}),
        ),
        (
            "contentBlockDelta",
            json!({"contentBlockIndex": 1, "delta": {"toolUse": {"input": "1}"}}}),
        ),
        ("messageStop", json!({"stopReason": "tool_use"})),
        (
            "metadata",
            json!({"usage": {"inputTokens": 4, "outputTokens": 6, "totalTokens": 10}, "metrics": {"latencyMs": 9}}),
        ),
    ]);
    p.script("https://bedrock.test/", [reply(200).chunks(frames)]);
    let c = client(&p, NOVA);
    let mut r = req();
    r.tools = vec![resilient_llm::Tool {
        name: "f".into(),
        description: None,
        parameters: json!({"type": "object"}),
        cache_control: None,
    }];
    let (deltas, error) = stream(&p, &c, r);
    assert!(error.is_none(), "{error:?}");
    assert_eq!(text(&deltas), "Hi there.");
    let args: String = deltas
        .iter()
        .filter_map(|d| match d {
            Delta::ToolCall { arguments, .. } => Some(arguments.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(args, r#"{"a":1}"#);
    assert!(deltas.contains(&Delta::Usage {
        usage: Usage {
            input_tokens: 4,
            output_tokens: 6,
            ..Usage::default()
        }
    }));
    assert!(p.requests()[0].url.ends_with("/converse-stream"));
}

#[test]
fn a_mid_stream_exception_fails_the_stream_after_what_was_delivered() {
    let p = FakePlatform::new().at(NOW);
    let mut frames = event_stream(&[
        ("messageStart", json!({"role": "assistant"})),
        (
            "contentBlockDelta",
            json!({"contentBlockIndex": 0, "delta": {"text": "Partial"}}),
        ),
    ]);
    frames.push(encode_frame(
        &[
            (":message-type", "exception"),
            (":exception-type", "modelStreamErrorException"),
        ],
        br#"{"message":"The model stream failed."}"#,
    ));
    p.script("https://bedrock.test/", [reply(200).chunks(frames)]);
    let c = client(&p, NOVA);
    let (deltas, error) = stream(&p, &c, req());
    assert_eq!(text(&deltas), "Partial");
    let error = error.expect("an interrupted stream");
    let e = error.attempts().last().and_then(|a| a.error()).unwrap();
    assert_eq!(e.kind, ErrorKind::Server);
    assert!(e.message.contains("The model stream failed."), "{e:?}");
}

#[test]
fn a_stream_frame_quoting_the_key_fails_without_showing_it() {
    // serde quotes the bytes it chokes on; an exception's message is the
    // provider's: neither reaches the error with the signing key in it.
    let key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
    let chunk = format!(r#"{{"bytes": {key}}}"#);
    let exception = format!(r#"{{"message":"bad signature for {key}"}}"#);
    let frames = [
        encode_frame(
            &[(":event-type", "chunk"), (":message-type", "event")],
            chunk.as_bytes(),
        ),
        encode_frame(
            &[
                (":message-type", "exception"),
                (":exception-type", "modelStreamErrorException"),
            ],
            exception.as_bytes(),
        ),
    ];
    for frame in frames {
        let p = FakePlatform::new().at(NOW);
        p.script("https://bedrock.test/", [reply(200).chunks(vec![frame])]);
        let c = client(&p, CLAUDE);
        let (_, error) = stream(&p, &c, req());
        let error = error.expect("a failed stream");
        let e = error.attempts().last().and_then(|a| a.error()).unwrap();
        assert!(!format!("{e:?} {error}").contains(key), "{e:?}");
        assert!(!e.message.is_empty());
    }
}

#[test]
fn each_bedrock_error_class_is_classified() {
    // Recorded error answers: status, x-amzn-ErrorType, body, the kind it must be.
    let cases: Vec<Value> =
        serde_json::from_str(&read(Path::new(FIXTURES).join("errors.json"))).unwrap();
    assert!(cases.len() >= 10);
    for case in &cases {
        let status = u16::try_from(case["status"].as_u64().unwrap()).unwrap();
        let kind: ErrorKind = serde_json::from_value(case["kind"].clone()).unwrap();
        let message = case["body"]["message"].as_str().unwrap();
        for model in [CLAUDE, NOVA] {
            let p = FakePlatform::new().at(NOW);
            p.script(
                "https://bedrock.test/",
                [reply(status)
                    .header("x-amzn-ErrorType", case["type"].as_str().unwrap())
                    .header("retry-after", "2")
                    .body(case["body"].to_string())],
            );
            let c = client(&p, model);
            let e = chat(&p, &c, req()).unwrap_err();
            let last = e.attempts().last().and_then(|a| a.error()).unwrap();
            assert_eq!(last.kind, kind, "{case} {model}");
            assert_eq!(last.message, message);
            assert_eq!(last.status, Some(status));
            assert_eq!(last.retry_after, Some(std::time::Duration::from_secs(2)));
        }
    }
}

#[test]
fn a_recorded_converse_stream_gives_its_text_finish_and_usage() {
    let p = FakePlatform::new().at(NOW);
    let bytes = recorded("converse-stream.bin");
    let chunks: Vec<Vec<u8>> = bytes.chunks(29).map(<[u8]>::to_vec).collect();
    p.script("https://bedrock.test/", [reply(200).chunks(chunks)]);
    let c = client(&p, NOVA);
    let (deltas, error) = stream(&p, &c, req());
    assert!(error.is_none(), "{error:?}");
    assert_eq!(text(&deltas), "Hello from Nova.");
    assert!(deltas.contains(&Delta::Finish {
        reason: resilient_llm::FinishReason::Stop
    }));
    assert!(deltas.contains(&Delta::Usage {
        usage: Usage {
            input_tokens: 11,
            output_tokens: 4,
            ..Usage::default()
        }
    }));
    assert_eq!(deltas.last(), Some(&Delta::Done));
}

#[test]
fn missing_credentials_and_bad_regions_are_config_issues() {
    let cfg = json!({
        "providers": { "b": { "kind": "bedrock", "region": "US East" } },
        "routes": { "default": [ { "provider": "b", "model": "m" } ] }
    });
    let err = Config::parse(&cfg.to_string())
        .unwrap()
        .client(FakePlatform::new(), vec![], &|_| None)
        .err()
        .expect("refused")
        .to_string();
    assert!(
        err.contains("providers.b.region: must be an AWS region name"),
        "{err}"
    );
    assert!(
        err.contains("providers.b.accessKeyIdEnv: secret \"AWS_ACCESS_KEY_ID\" is not set"),
        "{err}"
    );
    assert!(
        err.contains("providers.b.secretAccessKeyEnv: secret \"AWS_SECRET_ACCESS_KEY\" is not set"),
        "{err}"
    );
    assert!(!err.contains("sessionToken"), "{err}");
}

#[test]
fn the_documented_bedrock_configuration_is_valid() {
    // docs/clouds.md's example, moved there from the README.
    let doc = include_str!("../docs/clouds.md");
    let section = doc.find("## AWS Bedrock").expect("the section");
    let start =
        section + doc[section..].find("```jsonc\n").expect("its block") + "```jsonc\n".len();
    let end = start + doc[start..].find("```").expect("its end");
    let cfg = Config::parse(&doc[start..end]).expect("parses");
    let all_keys = |_: &str| Some("placeholder".to_string());
    let client = cfg
        .client(FakePlatform::new(), vec![], &all_keys)
        .expect("valid");
    assert_eq!(client.routes()["claude"].len(), 2);
}

#[test]
fn temporary_credentials_send_and_sign_their_session_token() {
    let p = FakePlatform::new().at(NOW);
    p.script(
        "https://bedrock.test/",
        [reply(200).body(read(Path::new(FIXTURES).join("converse.json")))],
    );
    let cfg = json!({
        "providers": { "b": { "kind": "bedrock", "region": "eu-west-1", "baseUrl": "https://bedrock.test",
                              "accessKeyIdEnv": "KEY_ID", "secretAccessKeyEnv": "SECRET",
                              "sessionTokenEnv": "TOKEN" } },
        "routes": { "default": [ { "provider": "b", "model": NOVA } ] }
    });
    let lookup = |name: &str| match name {
        "KEY_ID" => Some("ASIAEXAMPLE".to_string()),
        "SECRET" => Some("temporary-secret".to_string()),
        "TOKEN" => Some("session-token-value".to_string()),
        _ => None,
    };
    let c = Config::parse(&cfg.to_string())
        .unwrap()
        .client(p.clone(), vec![], &lookup)
        .unwrap();
    chat(&p, &c, req()).unwrap();
    let sent = &p.requests()[0];
    assert_eq!(
        sent.headers.get("x-amz-security-token"),
        Some("session-token-value")
    );
    let auth = sent.headers.get("authorization").unwrap();
    assert!(auth.starts_with("AWS4-HMAC-SHA256 Credential=ASIAEXAMPLE/20251201/eu-west-1/bedrock/aws4_request, SignedHeaders=accept;content-type;host;x-amz-date;x-amz-security-token, Signature="), "{auth}");
    assert!(!format!("{sent:?}").contains("temporary-secret"));
}

#[test]
fn converse_takes_inline_images_and_a_structured_answer_through_a_forced_tool() {
    let p = FakePlatform::new().at(NOW);
    let answer = json!({"output": {"message": {"role": "assistant", "content": [
        {"toolUse": {"toolUseId": "t1", "name": "city", "input": {"name": "Rome"}}}]}},
        "stopReason": "tool_use", "usage": {"inputTokens": 30, "outputTokens": 8}});
    p.script(
        "https://bedrock.test/",
        [reply(200).body(answer.to_string())],
    );
    let c = client(&p, NOVA);
    let body = json!({"model": "default", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "Which city is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/AAAA"}}]}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "city",
            "schema": {"type": "object", "properties": {"name": {"type": "string"}}}}}});
    let r = resilient_llm::format::openai::parse_request(body.to_string().as_bytes()).unwrap();
    let out = chat(&p, &c, r).unwrap();
    // The forced tool's input is the answer's text, and the finish a stop.
    assert_eq!(out.response.text, r#"{"name":"Rome"}"#);
    assert!(out.response.tool_calls.is_empty());
    assert_eq!(
        out.response.finish_reason,
        Some(resilient_llm::FinishReason::Stop)
    );
    let sent: Value = serde_json::from_slice(&p.requests()[0].body).unwrap();
    assert_eq!(
        sent["messages"][0]["content"][1],
        json!({"image": {"format": "jpeg", "source": {"bytes": "/9j/AAAA"}}})
    );
    assert_eq!(
        sent["toolConfig"]["toolChoice"],
        json!({"tool": {"name": "city"}})
    );
    assert_eq!(sent["toolConfig"]["tools"][0]["toolSpec"]["name"], "city");
}

#[test]
fn an_image_url_converse_cannot_take_moves_on_without_a_call() {
    let p = FakePlatform::new().at(NOW);
    let c = client(&p, NOVA);
    let mut r = req();
    r.messages.push(Message {
        role: resilient_llm::Role::User,
        content: vec![resilient_llm::Part::Image(resilient_llm::Image {
            source: resilient_llm::ImageSource::Url {
                url: "https://example.com/cat.png".into(),
            },
            detail: None,
            cache_control: None,
        })],
    });
    let e = chat(&p, &c, r).unwrap_err();
    let last = e.attempts().last().and_then(|a| a.error()).unwrap();
    assert_eq!(last.kind, ErrorKind::Unsupported);
    assert!(
        last.message.contains("inline images only"),
        "{}",
        last.message
    );
    assert!(p.requests().is_empty());
}
