//! The whole gateway on the fake platform: any client request (either
//! format, any headers the gateway reads, any body) against an upstream
//! answering any bytes. Every answer is JSON (or SSE whose data is JSON, or
//! passed through as the provider sent it), and no provider key is in any
//! error, header or log line.
#![no_main]

mod common;

use std::future::poll_fn;

use libfuzzer_sys::fuzz_target;
use resilient_llm::gateway::{Inbound, Piece, Setup, REQUEST_HEADERS};
use resilient_llm::testing::{block_on, reply, FakePlatform};
use resilient_llm::{Body, Headers, MemoryStore, SseDecoder};

const CONFIG: &str = r#"{
  "providers": {
    "oa": { "kind": "openai", "baseUrl": "https://oa.test", "apiKeyEnv": "K" },
    "an": { "kind": "anthropic", "baseUrl": "https://an.test", "apiKeyEnv": "K" }
  },
  "routes": {
    "default": [ { "provider": "oa", "model": "gpt" } ],
    "claude": [ { "provider": "an", "model": "claude" } ]
  },
  "retry": { "maxAttempts": 1 },
  "limits": { "maxRequestBytes": 65536 },
  "gateway": { "clientKeysEnv": ["G"] }
}"#;

thread_local! {
    /// Whether this input's client side holds a piece of the key, which the
    /// gateway may then echo (a request id, a route name): not a leak.
    static CLIENT_HAS_KEY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn no_key(text: &str) {
    if !CLIENT_HAS_KEY.get() {
        common::assert_no_key(text);
    }
}

/// Panics unless `bytes` are JSON; checks an error (a log line, an error
/// answer or event) for the key. An answer is the provider's to give.
fn check_json(bytes: &[u8], what: &str, error: bool) {
    let v = serde_json::from_slice::<serde_json::Value>(bytes)
        .unwrap_or_else(|e| panic!("{what} is not JSON: {e}"));
    if error || v.get("error").is_some() {
        no_key(&String::from_utf8_lossy(bytes));
    }
}

fuzz_target!(|input: &[u8]| {
    // [path][status][header] header value "\n" client body NUL upstream body
    let [path, status, header, rest @ ..] = input else {
        return;
    };
    let (value, rest) = common::split_line(rest);
    let (body, upstream) = match rest.iter().position(|b| *b == 0) {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &[][..]),
    };
    let has_piece = |b: &[u8]| {
        common::KEY
            .as_bytes()
            .windows(6)
            .any(|w| b.windows(6).any(|x| x == w))
    };
    CLIENT_HAS_KEY.set(has_piece(value) || has_piece(body));
    let secret = |name: &str| match name {
        "K" => Some(common::KEY.to_string()),
        _ => Some("client-key".to_string()),
    };
    let p = FakePlatform::new().at(1_700_000_000_000);
    let status = [200, 200, 400, 401, 429, 500, 529][usize::from(*status) % 7];
    let answer = || {
        reply(status)
            .header("retry-after", "1")
            .body(upstream.to_vec())
    };
    p.script("https://oa.test", [answer()]);
    p.script("https://an.test", [answer()]);
    let setup = Setup::load(Some(CONFIG), &secret).expect("a valid configuration");
    let store = MemoryStore::new(setup.breaker());
    let g = setup.into_gateway(p.clone(), store);
    let mut headers = Headers::new();
    headers.insert("authorization", "Bearer client-key");
    let name = REQUEST_HEADERS[usize::from(*header) % REQUEST_HEADERS.len()];
    if name != "authorization" || header & 0x80 != 0 {
        headers.insert(name, String::from_utf8_lossy(value));
    }
    let path = [
        "/v1/chat/completions",
        "/v1/messages",
        "/v1/models",
        "/health",
    ][usize::from(*path) % 4];
    let method = if path.starts_with("/v1/c") || path == "/v1/messages" {
        "POST"
    } else {
        "GET"
    };
    let r = Inbound {
        method: method.into(),
        path: path.into(),
        headers,
        body: Body::full(body.to_vec()),
    };
    let mut out = block_on(&p, g.handle(r));
    check_json(out.log.as_bytes(), "the log line", true);
    for (_, v) in out.headers.iter() {
        no_key(v);
    }
    match out.stream.take() {
        None => check_json(&out.body, "the answer", out.status >= 400),
        Some(mut s) => {
            let mut bytes = Vec::new();
            block_on(&p, async {
                while let Some(piece) = poll_fn(|cx| s.as_mut().poll_next(cx)).await {
                    match piece {
                        Piece::Bytes(b) => bytes.extend(b),
                        Piece::Log(l) => check_json(l.as_bytes(), "the stream's log line", true),
                    }
                }
            });
            let mut events = Vec::new();
            let mut d = SseDecoder::default();
            d.feed(&bytes, &mut events).expect("the stream is SSE");
            events.extend(d.finish());
            for ev in events {
                // A passed-through stream forwards the provider's events as
                // they came, whatever their data (an unknown event type, an
                // event without data): only what the gateway wrote must be JSON.
                let sent = String::from_utf8_lossy(upstream);
                let passed = ev.data.split('\n').all(|line| sent.contains(line));
                let error = ev.event.as_deref() == Some("error");
                if ev.data != "[DONE]" && !passed {
                    check_json(ev.data.as_bytes(), &format!("a stream event {ev:?}"), error);
                } else if error {
                    no_key(&ev.data);
                }
            }
        }
    }
});
