//! `models.<m>.contextWindow` used before a call: an entry whose window
//! cannot hold the request (its input's lower bound in words plus
//! `max_tokens`) is passed over without a call, named in the log line's
//! trail; when no entry can hold it, the client gets a 400 in its own
//! format naming the window and the estimate. On the fake platform.

use resilient_llm::gateway::{Gateway, Inbound, Outbound, Setup};
use resilient_llm::testing::{block_on, reply, FakePlatform};
use resilient_llm::{Body, Headers, MemoryStore};
use serde_json::{json, Value};

fn gateway(p: &FakePlatform, small: u32, big: Option<u32>) -> Gateway<FakePlatform, MemoryStore> {
    let backup_models = match big {
        Some(w) => json!({ "claude-big": { "contextWindow": w } }),
        None => json!({}),
    };
    let config = json!({
        "providers": {
            "small": { "kind": "openai", "baseUrl": "https://small.test", "apiKeyEnv": "K",
                       "models": { "gpt-small": { "contextWindow": small } } },
            "big": { "kind": "anthropic", "baseUrl": "https://big.test", "apiKeyEnv": "K",
                     "models": backup_models }
        },
        "routes": { "default": [
            { "provider": "small", "model": "gpt-small" },
            { "provider": "big", "model": "claude-big" }
        ] },
        "gateway": { "allowUnauthenticated": true }
    });
    let secret = |name: &str| (name == "K").then(|| "sk-test".to_string());
    let setup = Setup::load(Some(&config.to_string()), &secret).expect("valid config");
    let store = MemoryStore::new(setup.breaker());
    setup.into_gateway(p.clone(), store)
}

fn openai_ok() -> String {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-small",
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": "small" }, "finish_reason": "stop" }],
        "usage": { "prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5 }
    })
    .to_string()
}

fn anthropic_ok() -> String {
    json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-big",
        "content": [{ "type": "text", "text": "big" }],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": { "input_tokens": 3, "output_tokens": 2 }
    })
    .to_string()
}

fn post(path: &str, body: Value) -> Inbound {
    let body = body.to_string();
    let mut headers = Headers::new();
    headers.append("content-length", body.len().to_string());
    Inbound {
        method: "POST".into(),
        path: path.into(),
        headers,
        body: Body::full(body.into_bytes()),
    }
}

/// A Chat Completions request of `words` words asking for `max_tokens`.
fn chat(words: usize, max_tokens: u32) -> Inbound {
    let text = "word ".repeat(words);
    post(
        "/v1/chat/completions",
        json!({ "model": "default", "max_tokens": max_tokens,
                "messages": [{ "role": "user", "content": text }] }),
    )
}

fn run(
    p: &FakePlatform,
    g: &Gateway<FakePlatform, MemoryStore>,
    r: Inbound,
) -> (Outbound, Value, Value) {
    let out = block_on(p, g.handle(r));
    let body: Value = serde_json::from_slice(&out.body).expect("a JSON body");
    let log: Value = serde_json::from_str(&out.log).expect("a JSON log line");
    (out, body, log)
}

#[test]
fn a_request_that_fits_goes_to_the_first_entry() {
    let p = FakePlatform::new();
    p.script("https://small.test", [reply(200).body(openai_ok())]);
    let g = gateway(&p, 100, None);
    let (out, body, _) = run(&p, &g, chat(60, 40));
    assert_eq!(out.status, 200, "{body}");
    assert_eq!(out.headers.get("x-served-by"), Some("small/gpt-small"));
    assert_eq!(p.requests_to("https://small.test"), 1);
}

#[test]
fn an_entry_too_small_is_passed_over_without_a_call() {
    let p = FakePlatform::new();
    p.script("https://small.test", [reply(200).body(openai_ok())]);
    p.script("https://big.test", [reply(200).body(anthropic_ok())]);
    let g = gateway(&p, 100, None);
    // 61 words of input + 40 of output: 101 > 100.
    let (out, body, log) = run(&p, &g, chat(61, 40));
    assert_eq!(out.status, 200, "{body}");
    assert_eq!(out.headers.get("x-served-by"), Some("big/claude-big"));
    assert_eq!(body["choices"][0]["message"]["content"], "big");
    assert_eq!(p.requests_to("https://small.test"), 0, "never called");
    let skipped = &log["trail"][0];
    assert_eq!(skipped["provider"], "small");
    assert_eq!(skipped["outcome"], "context_length");
    assert_eq!(skipped["reached"], false);
    let reason = skipped["reason"].as_str().expect("a reason");
    assert!(reason.starts_with("context_window: "), "{reason}");
    assert!(
        reason.contains("at least 101 tokens") && reason.contains("window is 100"),
        "{reason}"
    );
    assert_eq!(log["trail"][1]["outcome"], "ok");
    assert_eq!(
        out.headers.get("x-attempts"),
        Some("1"),
        "one call reached a provider"
    );
}

#[test]
fn a_streamed_request_is_passed_over_alike() {
    let p = FakePlatform::new();
    let events = [
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-big\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":3,\"output_tokens\":0}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"big\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    ];
    p.script(
        "https://big.test",
        [reply(200)
            .header("content-type", "text/event-stream")
            .chunks(events)],
    );
    let g = gateway(&p, 10, None);
    let req = post(
        "/v1/chat/completions",
        json!({ "model": "default", "stream": true, "max_tokens": 5,
                "messages": [{ "role": "user", "content": "one two three four five six" }] }),
    );
    let out = block_on(&p, g.handle(req));
    assert_eq!(out.status, 200);
    assert_eq!(out.headers.get("x-served-by"), Some("big/claude-big"));
    assert_eq!(p.requests_to("https://small.test"), 0, "never called");
}

#[test]
fn no_entry_fits_a_400_in_the_clients_format_names_window_and_estimate() {
    let p = FakePlatform::new();
    let g = gateway(&p, 100, Some(120));
    let (out, body, log) = run(&p, &g, chat(100, 50));
    assert_eq!(out.status, 400, "{body}");
    let message = body["error"]["message"].as_str().expect("an OpenAI error");
    assert!(message.contains("at least 150 tokens"), "{message}");
    assert!(
        message.contains("window is 100") && message.contains("window is 120"),
        "{message}"
    );
    assert_eq!(p.requests().len(), 0, "no provider called");
    assert_eq!(log["trail"].as_array().map(Vec::len), Some(2));

    let text = "word ".repeat(100);
    let anthropic = post(
        "/v1/messages",
        json!({ "model": "default", "max_tokens": 50,
                "messages": [{ "role": "user", "content": text }] }),
    );
    let (out, body, _) = run(&p, &g, anthropic);
    assert_eq!(out.status, 400, "{body}");
    assert_eq!(body["type"], "error");
    let message = body["error"]["message"]
        .as_str()
        .expect("an Anthropic error");
    assert!(message.contains("context window is 120"), "{message}");
}
