//! Same-format streams pass through byte for byte: whatever shape the
//! provider's event stream takes (no space after the colon, CRLF line ends,
//! comments, `id:` lines, fields the gateway does not know, one event split
//! across reads, several in one read), the client receives exactly the
//! bytes the provider sent.

use std::future::poll_fn;

use resilient_llm::gateway::{Gateway, Inbound, Outbound, Piece, Setup};
use resilient_llm::testing::{block_on, reply, BodyEnd, FakePlatform};
use resilient_llm::{Body, Headers, MemoryStore};
use serde_json::{json, Value};

fn gateway(p: &FakePlatform) -> Gateway<FakePlatform, MemoryStore> {
    gateway_with(p, 1)
}

fn gateway_with(p: &FakePlatform, max_attempts: u32) -> Gateway<FakePlatform, MemoryStore> {
    let config = json!({
        "providers": {
            "oai": { "kind": "openai", "baseUrl": "https://oai.test", "apiKeyEnv": "K" },
            "ant": { "kind": "anthropic", "baseUrl": "https://ant.test", "apiKeyEnv": "K" }
        },
        "routes": {
            "gpt": [ { "provider": "oai", "model": "gpt-big" } ],
            "claude": [ { "provider": "ant", "model": "claude-big" } ]
        },
        "retry": { "maxAttempts": max_attempts, "baseDelayMs": 10, "maxDelayMs": 10 },
        "gateway": { "allowUnauthenticated": true }
    });
    let setup = Setup::load(Some(&config.to_string()), &|_| Some("sk-test".into())).expect("valid");
    let store = MemoryStore::new(setup.breaker());
    setup.into_gateway(p.clone(), store)
}

fn post(path: &str, body: Value) -> Inbound {
    Inbound {
        method: "POST".into(),
        path: path.into(),
        headers: [("content-type", "application/json")]
            .into_iter()
            .collect::<Headers>(),
        body: Body::full(body.to_string().into_bytes()),
    }
}

/// The response, its body's bytes and how many pieces they came in.
fn run(
    p: &FakePlatform,
    g: &Gateway<FakePlatform, MemoryStore>,
    r: Inbound,
) -> (Outbound, Vec<u8>, usize) {
    let mut out = block_on(p, g.handle(r));
    let mut stream = out.stream.take().expect("a stream");
    let mut bytes = Vec::new();
    let mut pieces = 0;
    block_on(p, async {
        while let Some(piece) = poll_fn(|cx| stream.as_mut().poll_next(cx)).await {
            if let Piece::Bytes(b) = piece {
                pieces += 1;
                bytes.extend(b);
            }
        }
    });
    (out, bytes, pieces)
}

fn chunk(content: &str, finish: Value) -> String {
    json!({"id": "chatcmpl-up", "object": "chat.completion.chunk", "created": 7, "model": "gpt-big-2025",
           "system_fingerprint": "fp_1", "service_tier": "default", "obfuscation": "x1",
           "choices": [{"index": 0, "delta": {"content": content}, "logprobs": null, "finish_reason": finish}]})
    .to_string()
}

#[test]
fn an_openai_stream_of_any_shape_reaches_the_client_byte_for_byte() {
    let usage = json!({"id": "chatcmpl-up", "object": "chat.completion.chunk", "created": 7, "model": "gpt-big-2025",
        "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5,
        "completion_tokens_details": {"reasoning_tokens": 0}}});
    let upstream = [
        ": OPENROUTER PROCESSING\r\n\r\n".to_string(),
        format!("id: 1\r\ndata:{}\r\n\r\n", chunk("Hel", Value::Null)),
        // One event split across three reads, with a CRLF split between two.
        format!("data: {}\r", chunk("lo", Value::Null)),
        "\n".to_string(),
        "\r\n".to_string(),
        // Two events and a comment in one read.
        format!(
            "data: {}\n\n: keep-alive\n\ndata: {}\n\n",
            chunk(" there", Value::Null),
            chunk("", json!("stop"))
        ),
        format!("data: {usage}\n\n"),
        "data: [DONE]\n\n".to_string(),
    ];
    let sent: Vec<u8> = upstream.concat().into_bytes();
    let p = FakePlatform::new();
    p.script(
        "https://oai.test",
        [reply(200)
            .header("content-type", "text/event-stream")
            .chunks(upstream.clone())],
    );
    let g = gateway(&p);
    let body = json!({"model": "gpt", "stream": true, "stream_options": {"include_usage": true},
                      "messages": [{"role": "user", "content": "hi"}]});
    let (out, bytes, pieces) = run(&p, &g, post("/v1/chat/completions", body));
    assert_eq!(out.status, 200);
    assert_eq!(out.headers.get("x-attempts"), Some("1"));
    assert_eq!(out.headers.get("x-served-by"), Some("oai/gpt-big"));
    assert_eq!(
        String::from_utf8(bytes).unwrap(),
        String::from_utf8(sent).unwrap(),
        "what the provider sent, byte for byte"
    );
    // Held until the commit point, then at most one piece per upstream read.
    assert!(pieces < upstream.len(), "{pieces} pieces");
}

#[test]
fn an_anthropic_stream_with_crlf_and_comments_reaches_the_client_byte_for_byte() {
    let ev = |name: &str, data: Value| format!("event:{name}\r\ndata:{data}\r\n\r\n");
    let upstream = [
        ev(
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_up", "type": "message",
            "role": "assistant", "model": "claude-big-2025", "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": {"input_tokens": 5, "output_tokens": 1, "service_tier": "standard"}}}),
        ),
        ": a comment\r\n".to_string(),
        ev("ping", json!({"type": "ping"})),
        ev(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": "", "citations": null}}),
        ),
        ev(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": "Hi"}}),
        ),
        ev(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        ev(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn",
            "stop_sequence": null}, "usage": {"output_tokens": 2}, "context_management": null}),
        ),
        ev("message_stop", json!({"type": "message_stop"})),
    ];
    let sent: Vec<u8> = upstream.concat().into_bytes();
    let p = FakePlatform::new();
    p.script(
        "https://ant.test",
        [reply(200)
            .header("content-type", "text/event-stream")
            .chunks(upstream)],
    );
    let g = gateway(&p);
    let body = json!({"model": "claude", "max_tokens": 20, "stream": true,
                      "messages": [{"role": "user", "content": "hi"}]});
    let (out, bytes, _) = run(&p, &g, post("/v1/messages", body));
    assert_eq!(out.status, 200);
    assert_eq!(out.headers.get("x-attempts"), Some("1"));
    assert_eq!(
        String::from_utf8(bytes).unwrap(),
        String::from_utf8(sent).unwrap()
    );
}

/// The headers count what happened before the commit point; a continuation
/// after it is told to an OpenAI client in a comment before the end.
#[test]
fn a_continuation_is_told_in_a_final_comment_and_the_headers_stay_true() {
    let events = |parts: &[&str]| {
        let mut out: Vec<String> = parts
            .iter()
            .map(|p| format!("data: {}\n\n", chunk(p, Value::Null)))
            .collect();
        out.push(format!("data: {}\n\n", chunk("", json!("stop"))));
        out.push("data: [DONE]\n\n".to_string());
        out
    };
    let parts = ["The ", "answer ", "is ", "42"];
    let p = FakePlatform::new();
    let cut = reply(200)
        .header("content-type", "text/event-stream")
        .chunks(events(&parts))
        .cut_after(2, BodyEnd::Reset);
    let again = reply(200)
        .header("content-type", "text/event-stream")
        .chunks(events(&parts));
    p.script("https://oai.test", [cut, again]);
    let g = gateway_with(&p, 2);
    let body =
        json!({"model": "gpt", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    let (out, bytes, _) = run(&p, &g, post("/v1/chat/completions", body));
    assert_eq!(out.status, 200);
    assert_eq!(
        out.headers.get("x-attempts"),
        Some("1"),
        "one attempt before the commit point"
    );
    let text = String::from_utf8(bytes).unwrap();
    let note = ": continued after the commit point: attempts=2 last=oai/gpt-big\n\n";
    assert!(text.ends_with(&format!("{note}data: [DONE]\n\n")), "{text}");
    assert_eq!(text.matches(note).count(), 1);
}
