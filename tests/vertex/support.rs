//! Helpers of the Vertex AI tests (`tests/vertex.rs`, `tests/vertex_gemini.rs`): the test
//! service account, scripted replies, adapters built from configuration, fixture envelopes.
// Each test file uses a part of these.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use resilient_llm::testing::{reply, FakePlatform, Reply};
use resilient_llm::{
    build_provider, BufferedResponse, ChatRequest, Client, Config, Delta, Headers, Message,
    Provider, ProviderConfig, SseDecoder,
};
use serde_json::{json, Value};

pub const TOKEN_URI: &str = "http://127.0.0.1:9/token";
pub const TOKEN: &str = "ya29.test-access-token-0123456789";
pub const NOW: u64 = 1_700_000_000_000;
pub const VERTEX: &str = "https://us-east5-aiplatform.googleapis.com/v1/projects/test-project/locations/us-east5/publishers";

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/vertex")
}

pub fn key_json() -> String {
    std::fs::read_to_string(fixtures().join("service-account.json")).unwrap()
}

/// The PEM body of the test key: what must never appear in an output.
pub fn key_material() -> String {
    let pem = std::fs::read_to_string(fixtures().join("test-key.pem")).unwrap();
    pem.lines().nth(5).unwrap().to_string()
}

pub fn secret(name: &str) -> Option<String> {
    match name {
        "GOOGLE_SERVICE_ACCOUNT_KEY" => Some(key_json()),
        "ANTHROPIC_API_KEY" => Some("sk-ant-test".into()),
        _ => None,
    }
}

pub fn token_reply(expires_in: u64) -> Reply {
    reply(200).body(
        json!({"access_token": TOKEN, "expires_in": expires_in, "token_type": "Bearer"})
            .to_string(),
    )
}

pub fn claude_ok(text: &str) -> Reply {
    reply(200).body(
        json!({"id": "msg_1", "type": "message", "role": "assistant",
               "content": [{"type": "text", "text": text}], "model": "claude-sonnet-4-5",
               "stop_reason": "end_turn", "usage": {"input_tokens": 3, "output_tokens": 2}})
        .to_string(),
    )
}

pub fn gemini_ok(text: &str) -> Reply {
    reply(200).body(
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
                "finishReason": "STOP"}],
               "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 2},
               "modelVersion": "gemini-2.5-flash"})
        .to_string(),
    )
}

/// A client with a route `claude` = [anthropic, vertex (Claude)] and a
/// route `gemini` = [gemini (Vertex, Google's models)].
pub fn client(p: &FakePlatform) -> Client<FakePlatform> {
    let cfg = json!({
        "providers": {
            "anthropic": {"kind": "anthropic", "baseUrl": "https://anthropic.test"},
            "vertex": {"kind": "vertex", "publisher": "anthropic", "project": "test-project",
                       "region": "us-east5"},
            "gemini": {"kind": "vertex", "publisher": "google", "project": "test-project",
                       "region": "us-east5"}
        },
        "routes": {
            "claude": [{"provider": "anthropic", "model": "claude-sonnet-4-5"},
                       {"provider": "vertex", "model": "claude-sonnet-4-5@20250929"}],
            "gemini": [{"provider": "gemini", "model": "gemini-2.5-flash"}]
        },
        "retry": {"maxAttempts": 1}
    });
    Config::parse(&cfg.to_string())
        .unwrap()
        .client(p.clone(), vec![], &secret)
        .unwrap()
}

pub fn ask(route: &str) -> ChatRequest {
    let mut req = ChatRequest::new(vec![Message::user("hi")]);
    req.model = Some(route.into());
    req
}

pub fn provider(cfg: Value) -> Box<dyn Provider> {
    let cfg: ProviderConfig = serde_json::from_value(cfg).unwrap();
    let mut issues = Vec::new();
    let p = build_provider("v", &cfg, &secret, "providers.v", &mut issues);
    assert!(issues.is_empty(), "{issues:?}");
    p.unwrap()
}

pub fn claude_provider() -> Box<dyn Provider> {
    provider(
        json!({"kind": "vertex", "publisher": "anthropic", "project": "test-project",
                    "region": "us-east5"}),
    )
}

pub fn gemini_provider() -> Box<dyn Provider> {
    provider(
        json!({"kind": "vertex", "publisher": "google", "project": "test-project",
                    "region": "us-east5"}),
    )
}

/// Gives `p` its token as the engine would.
pub fn authorised(p: Box<dyn Provider>) -> Box<dyn Provider> {
    let c = p.credential().unwrap();
    let resp = BufferedResponse {
        status: 200,
        headers: Headers::new(),
        body: json!({"access_token": TOKEN, "expires_in": 3600})
            .to_string()
            .into_bytes(),
    };
    c.accept(&resp, NOW).unwrap();
    p
}

pub fn json_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
}

/// Decodes one fixture envelope and checks what it expects.
pub fn check_fixture(p: &dyn Provider, file: &Path) {
    let f: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let label = file.file_name().unwrap().to_string_lossy().to_string();
    let headers: Headers = f["headers"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str().unwrap().to_string()))
        .collect();
    let body = match f.get("bodyText") {
        Some(t) => t.as_str().unwrap().as_bytes().to_vec(),
        None => serde_json::to_vec(&f["body"]).unwrap(),
    };
    let status = u16::try_from(f["status"].as_u64().unwrap()).unwrap();
    let now = f.get("now").and_then(Value::as_u64).unwrap_or(NOW);
    let got = p.decode(
        &BufferedResponse {
            status,
            headers,
            body,
        },
        now,
    );
    if let Some(ok) = f["expect"].get("ok") {
        let r = got.unwrap_or_else(|e| panic!("{label}: {e}"));
        assert_eq!(r.provider, "v", "{label}");
        assert_eq!(r.raw_value().unwrap(), f["body"], "{label}");
        let v = serde_json::to_value(&r).unwrap();
        for (k, want) in ok.as_object().unwrap() {
            let got = v.get(k).unwrap_or(&Value::Null);
            assert_eq!(got, want, "{label}: {k}");
        }
    } else {
        let want = &f["expect"]["error"];
        let e = got
            .err()
            .unwrap_or_else(|| panic!("{label}: decoded an error as success"));
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["kind"], want["kind"], "{label}: {e}");
        assert_eq!(v["status"], want["status"], "{label}");
        for k in ["code", "retryAfterMs", "shouldRetry"] {
            assert_eq!(v.get(k), want.get(k), "{label}: {k}");
        }
        assert!(!e.message.is_empty(), "{label}");
    }
}

/// A recorded stream through the adapter's event decoder.
pub fn stream_deltas(
    p: &dyn Provider,
    sse: &[u8],
) -> Result<Vec<Delta>, resilient_llm::ProviderError> {
    let mut events = Vec::new();
    let mut decoder = SseDecoder::default();
    decoder.feed(sse, &mut events).unwrap();
    events.extend(decoder.finish());
    let mut out = Vec::new();
    for ev in &events {
        out.extend(p.decode_event(ev)?);
    }
    Ok(out)
}
