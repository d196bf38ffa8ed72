//! One conformance function, run over every adapter and every preset:
//! encoding (URL, auth style, no key in Debug output) and decoding of every
//! recorded fixture (success shapes and each error shape) to the right
//! kind, status, Retry-After and `x-should-retry`. Plus properties: no byte
//! string and no status makes a decoder panic.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use resilient_llm::{build_provider, OpenAi, Provider, ProviderConfig};
use resilient_llm::{
    Anthropic, BufferedResponse, ChatRequest, Headers, Message, Part, PresetName, Role, Secret,
    Tool, ToolCall, ToolChoice,
};
use serde_json::{json, Value};

const KEY: &str = "sk-test-SECRET-0123456789abcdef";
const NOW: u64 = 1_700_000_000_000;

/// How an adapter must present the key.
#[derive(Debug, Clone, Copy)]
enum Auth {
    Bearer,
    Header(&'static str),
    None,
}

struct Case {
    name: &'static str,
    config: Value,
    fixtures: &'static str,
    url: &'static str,
    auth: Auth,
}

fn cases() -> Vec<Case> {
    let compat = |preset: &str| json!({"kind": "openai-compatible", "preset": preset});
    let mut custom = compat("custom");
    custom["baseUrl"] = json!("http://10.0.0.5:9000/");
    custom["apiKeyEnv"] = json!("CUSTOM_KEY");
    let mut azure = compat("azure");
    azure["baseUrl"] = json!("https://res.openai.azure.com");
    azure["deployment"] = json!("gpt4o-prod");
    let hosted = |name, url| Case {
        name,
        config: compat(name),
        fixtures: "openai",
        url,
        auth: Auth::Bearer,
    };
    let local = |name, url| Case {
        name,
        config: compat(name),
        fixtures: "openai",
        url,
        auth: Auth::None,
    };
    vec![
        Case {
            name: "anthropic",
            config: json!({"kind": "anthropic"}),
            fixtures: "anthropic",
            url: "https://api.anthropic.com/v1/messages",
            auth: Auth::Header("x-api-key"),
        },
        Case {
            name: "openai",
            config: json!({"kind": "openai", "organization": "org-1"}),
            fixtures: "openai",
            url: "https://api.openai.com/v1/chat/completions",
            auth: Auth::Bearer,
        },
        hosted("deepseek", "https://api.deepseek.com/chat/completions"),
        hosted("groq", "https://api.groq.com/openai/v1/chat/completions"),
        hosted("mistral", "https://api.mistral.ai/v1/chat/completions"),
        hosted("together", "https://api.together.xyz/v1/chat/completions"),
        hosted(
            "fireworks",
            "https://api.fireworks.ai/inference/v1/chat/completions",
        ),
        hosted("openrouter", "https://openrouter.ai/api/v1/chat/completions"),
        hosted(
            "gemini",
            "https://generativelanguage.googleapis.com/v1beta/openai/chat/completions",
        ),
        Case {
            name: "azure",
            config: azure,
            fixtures: "openai",
            url: "https://res.openai.azure.com/openai/deployments/gpt4o-prod/chat/completions?api-version=2024-10-21",
            auth: Auth::Header("api-key"),
        },
        local("vllm", "http://localhost:8000/v1/chat/completions"),
        local("ollama", "http://localhost:11434/v1/chat/completions"),
        local("llamacpp", "http://localhost:8080/v1/chat/completions"),
        Case {
            name: "custom",
            config: custom,
            fixtures: "openai",
            url: "http://10.0.0.5:9000/v1/chat/completions",
            auth: Auth::Bearer,
        },
    ]
}

/// Every configured key resolves to [`KEY`].
fn secret(name: &str) -> Option<String> {
    [
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "DEEPSEEK_API_KEY",
        "GROQ_API_KEY",
        "MISTRAL_API_KEY",
        "TOGETHER_API_KEY",
        "FIREWORKS_API_KEY",
        "OPENROUTER_API_KEY",
        "GEMINI_API_KEY",
        "AZURE_OPENAI_API_KEY",
        "CUSTOM_KEY",
    ]
    .contains(&name)
    .then(|| KEY.to_string())
}

fn provider(case: &Case) -> Box<dyn Provider> {
    let cfg: ProviderConfig = serde_json::from_value(case.config.clone()).unwrap();
    let mut issues = Vec::new();
    let p = build_provider(
        case.name,
        &cfg,
        &secret,
        &format!("providers.{}", case.name),
        &mut issues,
    );
    assert!(issues.is_empty(), "{}: {issues:?}", case.name);
    p.unwrap()
}

fn representative_request() -> ChatRequest {
    let mut req = ChatRequest::new(vec![
        Message::system("You are terse."),
        Message::user("Weather in Paris?"),
        Message {
            role: Role::Assistant,
            content: vec![Part::ToolCall(ToolCall {
                id: "call_1".into(),
                name: "get_weather".into(),
                arguments: r#"{"city":"Paris"}"#.into(),
            })],
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
    ]);
    req.max_tokens = Some(256);
    req.temperature = Some(0.2);
    req.stop = vec!["END".into()];
    req.tools = vec![Tool {
        name: "get_weather".into(),
        description: Some("Current weather".into()),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        cache_control: None,
    }];
    req.tool_choice = Some(ToolChoice::Auto);
    req
}

fn fixture_files(dir: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "too few fixtures in {dir:?}");
    files
}

/// A fixture envelope as a response, and the `now` it is decoded at.
fn response(f: &Value) -> (BufferedResponse, u64) {
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
    (
        BufferedResponse {
            status,
            headers,
            body,
        },
        now,
    )
}

/// The conformance function: everything every adapter must do.
fn conformance(case: &Case) {
    let p = provider(case);
    let name = case.name;
    assert_eq!(p.id(), name);

    // Encoding: URL, method, JSON body, the key in the right header only.
    let req = representative_request();
    let http = p.encode(&req, "some-model").unwrap();
    assert_eq!(http.method, "POST", "{name}");
    assert_eq!(http.url, case.url, "{name}");
    assert_eq!(
        http.headers.get("content-type"),
        Some("application/json"),
        "{name}"
    );
    let body: Value = serde_json::from_slice(&http.body).unwrap();
    assert_eq!(body["model"], "some-model", "{name}");
    assert!(body["messages"].as_array().is_some_and(|m| !m.is_empty()));
    match case.auth {
        Auth::Bearer => {
            assert_eq!(
                http.headers.get("authorization"),
                Some(format!("Bearer {KEY}").as_str()),
                "{name}"
            )
        }
        Auth::Header(h) => {
            assert_eq!(http.headers.get(h), Some(KEY), "{name}");
            assert_eq!(http.headers.get("authorization"), None, "{name}");
        }
        Auth::None => assert!(http.headers.iter().all(|(_, v)| !v.contains(KEY)), "{name}"),
    }
    assert!(!format!("{http:?}").contains(KEY), "{name}: key in Debug");
    assert!(!String::from_utf8_lossy(&http.body).contains(KEY));

    // Decoding: every fixture to its expected outcome.
    for file in fixture_files(case.fixtures) {
        let f: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let (resp, now) = response(&f);
        let label = format!("{name} {}", file.file_name().unwrap().to_string_lossy());
        let got = p.decode(&resp, now);
        // What the headers say of the rate-limit pool: the fixture's
        // `expect.pool`, or nothing.
        let pool = serde_json::to_value(p.pool(&resp.headers, now)).unwrap();
        let want = f["expect"].get("pool").cloned().unwrap_or(Value::Null);
        assert_eq!(pool, want, "{label}: pool");
        if let Some(ok) = f["expect"].get("ok") {
            let r = got.unwrap_or_else(|e| panic!("{label}: {e}"));
            assert_eq!(r.provider, name, "{label}");
            assert_eq!(r.raw_value().unwrap(), f["body"], "{label}");
            let v = serde_json::to_value(&r).unwrap();
            for (k, want) in ok.as_object().unwrap() {
                assert_eq!(&v[k], want, "{label}: {k}");
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
            if let Some(needle) = want.get("messageContains").and_then(Value::as_str) {
                assert!(e.message.contains(needle), "{label}: {}", e.message);
            }
            assert!(!e.message.is_empty(), "{label}");
        }
    }

    // A server that echoes the key never gets it into an error message
    // (keyless presets have no key to leak).
    let statuses: &[u16] = match case.auth {
        Auth::None => &[],
        Auth::Bearer | Auth::Header(_) => &[200, 401, 500],
    };
    for &status in statuses {
        let resp = BufferedResponse {
            status,
            headers: Headers::new(),
            body: format!(r#"{{"error":{{"message":"bad key {KEY}","type":"x"}}}}"#).into_bytes(),
        };
        let e = p.decode(&resp, NOW).unwrap_err();
        assert!(
            !e.to_string().contains(KEY),
            "{name}: key echoed at {status}"
        );
    }
}

#[test]
fn every_adapter_and_preset_conforms() {
    let cases = cases();
    assert_eq!(cases.len(), 14, "anthropic, openai and the 12 presets");
    for case in &cases {
        conformance(case);
    }
}

#[test]
fn adapters_never_show_the_key_in_debug() {
    let a = Anthropic::new("a").api_key(Secret::new(KEY));
    let o = OpenAi::new("o", PresetName::Azure).api_key(Secret::new(KEY));
    assert!(!format!("{a:?} {o:?}").contains(KEY));
}

#[test]
fn anthropic_quirks_are_in_the_request() {
    let cfg: ProviderConfig = serde_json::from_value(json!({
        "kind": "anthropic", "anthropicVersion": "2024-01-01", "defaultMaxTokens": 1000,
        "headers": {"anthropic-beta": "tools-2024"}, "apiKey": KEY,
        "models": {"claude-x": {"contextWindow": 200000, "inputPricePerMtok": 3.0, "outputPricePerMtok": 15.0}}
    }))
    .unwrap();
    let mut issues = Vec::new();
    let p = build_provider(
        "anthropic",
        &cfg,
        &|_| None,
        "providers.anthropic",
        &mut issues,
    )
    .unwrap();
    let mut req = ChatRequest::new(vec![Message::user("hi")]);
    req.metadata = Some(json!({"user_id": "u-1", "other": "dropped"}));
    let http = p.encode(&req, "claude-x").unwrap();
    assert_eq!(http.headers.get("anthropic-version"), Some("2024-01-01"));
    assert_eq!(http.headers.get("anthropic-beta"), Some("tools-2024"));
    let body: Value = serde_json::from_slice(&http.body).unwrap();
    assert_eq!(body["max_tokens"], 1000);
    assert_eq!(body["metadata"], json!({"user_id": "u-1"}));
    let caps = p.capabilities("claude-x");
    assert!(caps.prefill && caps.tools);
    assert_eq!(caps.context_window, Some(200_000));
    assert_eq!(caps.output_price_per_mtok, Some(15.0));
    assert_eq!(p.capabilities("unknown").context_window, None);
}

#[test]
fn openai_quirks_are_in_the_request() {
    let cfg: ProviderConfig = serde_json::from_value(json!({
        "kind": "openai", "organization": "org-1", "project": "proj-1",
        "maxTokensField": "max_tokens", "models": {"gpt-x": {"tools": false}}
    }))
    .unwrap();
    let mut issues = Vec::new();
    let p = build_provider("openai", &cfg, &secret, "providers.openai", &mut issues).unwrap();
    let mut req = representative_request();
    let e = p.encode(&req, "gpt-x").unwrap_err();
    assert_eq!(e.kind, resilient_llm::ErrorKind::Unsupported, "{e}");
    req.tools.clear();
    req.tool_choice = None;
    req.stream = true;
    let http = p.encode(&req, "gpt-y").unwrap();
    assert_eq!(http.headers.get("openai-organization"), Some("org-1"));
    assert_eq!(http.headers.get("openai-project"), Some("proj-1"));
    let body: Value = serde_json::from_slice(&http.body).unwrap();
    assert_eq!(body["max_tokens"], 256);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert!(!p.capabilities("gpt-y").prefill);
    // The assistant's tool call and the tool's answer keep their shapes.
    assert_eq!(
        body["messages"][2]["tool_calls"][0]["function"]["name"],
        "get_weather"
    );
    assert_eq!(body["messages"][3]["role"], "tool");
    assert_eq!(body["messages"][3]["tool_call_id"], "call_1");
}

#[test]
fn a_missing_key_names_the_secret_not_a_value() {
    let cfg: ProviderConfig =
        serde_json::from_value(json!({"kind": "openai-compatible", "preset": "groq"})).unwrap();
    let mut issues = Vec::new();
    assert!(build_provider("groq", &cfg, &|_| None, "providers.groq", &mut issues).is_none());
    assert_eq!(
        issues.iter().map(ToString::to_string).collect::<Vec<_>>(),
        ["providers.groq.apiKeyEnv: secret \"GROQ_API_KEY\" is not set"]
    );
}

#[test]
fn retry_after_beats_informational_rate_limit_headers() {
    let p = provider(&cases()[0]);
    let resp = BufferedResponse {
        status: 429,
        headers: [("anthropic-ratelimit-requests-reset", "2030-01-01T00:00:00Z")]
            .into_iter()
            .collect(),
        body: br#"{"type":"error","error":{"type":"rate_limit_error","message":"slow"}}"#.to_vec(),
    };
    let e = p.decode(&resp, NOW).unwrap_err();
    assert_eq!(e.retry_after, None);
    assert!(e.is_retryable());
}

/// Bodies of a 200 that are not plain answers: each is told apart the way
/// the classifier reads error bodies, whatever shape the rest has, and an
/// answer with odd members beside the ones read is still an answer.
#[test]
fn a_200_is_an_error_or_an_answer_whatever_its_other_members() {
    let openai = provider(&cases()[1]);
    let anthropic = provider(&cases()[0]);
    let ok = |p: &dyn Provider, body: Value| {
        let resp = BufferedResponse {
            status: 200,
            headers: Headers::new(),
            body: serde_json::to_vec(&body).unwrap(),
        };
        p.decode(&resp, NOW)
    };
    let answer =
        json!({"model": "m", "choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}]});
    // An error object wins over a malformed rest, at the top or in the
    // first choice, and inside an array (Gemini).
    let cases = [
        (
            json!({"error": {"type": "rate_limit_error", "message": "slow"}, "choices": 5}),
            resilient_llm::ErrorKind::RateLimited,
        ),
        (
            json!([{"error": {"code": 503, "message": "busy", "status": "UNAVAILABLE"}}]),
            resilient_llm::ErrorKind::Server,
        ),
        (
            json!({"choices": [{"error": {"message": "upstream", "code": 502}, "message": 5}]}),
            resilient_llm::ErrorKind::Server,
        ),
        (
            json!({"choices": {"0": {"error": {"message": "upstream", "code": 429}}}}),
            resilient_llm::ErrorKind::RateLimited,
        ),
        (
            json!({"object": "error", "message": "bad", "type": "BadRequestError", "code": 400}),
            resilient_llm::ErrorKind::InvalidRequest,
        ),
    ];
    for (body, kind) in cases {
        let e = ok(openai.as_ref(), body.clone()).unwrap_err();
        assert_eq!(e.kind, kind, "{body}: {e}");
    }
    let e = ok(anthropic.as_ref(), json!({"type": "error", "error": {"type": "overloaded_error", "message": "o"}, "content": 5})).unwrap_err();
    assert_eq!(e.kind, resilient_llm::ErrorKind::Server, "{e}");
    // Members that are not read, or read only to spot an error, may be of
    // any type; a null `error` is no error.
    let mut odd = answer.clone();
    odd["type"] = json!(5);
    odd["object"] = json!({"x": [1]});
    odd["error"] = Value::Null;
    odd["choices"]
        .as_array_mut()
        .unwrap()
        .push(json!("ignored"));
    let r = ok(openai.as_ref(), odd.clone()).unwrap();
    assert_eq!((r.text.as_str(), r.model.as_str()), ("hi", "m"));
    assert_eq!(r.raw_value().unwrap(), odd);
    // A wrong shape is a decode error naming the field; an object given as
    // an array is a wrong shape.
    let mut bad = answer.clone();
    bad["choices"][0]["message"] = json!(["hi"]);
    let e = ok(openai.as_ref(), bad).unwrap_err();
    assert_eq!(e.kind, resilient_llm::ErrorKind::Decode);
    assert!(e.message.contains("choices[0].message"), "{e}");
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|n| json!(n)),
        prop_oneof![
            Just("error".to_string()),
            Just("text".to_string()),
            Just("tool_use".to_string()),
            Just("user".to_string()),
            ".{0,8}"
        ]
        .prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        let keys = prop_oneof![
            Just("type".to_string()),
            Just("error".to_string()),
            Just("choices".to_string()),
            Just("message".to_string()),
            Just("content".to_string()),
            Just("tool_calls".to_string()),
            Just("function".to_string()),
            Just("usage".to_string()),
            Just("messages".to_string()),
            Just("role".to_string()),
            Just("model".to_string()),
            ".{0,6}"
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(keys, inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn no_bytes_and_no_status_make_a_decoder_panic(
        status in 0u16..1000,
        body in prop::collection::vec(any::<u8>(), 0..200),
        retry in ".{0,12}",
        should in ".{0,6}",
    ) {
        let headers: Headers = [("retry-after", retry), ("x-should-retry", should)].into_iter().collect();
        let resp = BufferedResponse { status, headers, body };
        for case in cases() {
            let _ = provider(&case).decode(&resp, NOW);
        }
    }

    #[test]
    fn no_json_shape_makes_a_decoder_panic(v in arb_json(), status in prop_oneof![Just(200u16), Just(400u16), 0u16..1000]) {
        let resp = BufferedResponse { status, headers: Headers::new(), body: serde_json::to_vec(&v).unwrap() };
        for case in cases() {
            let _ = provider(&case).decode(&resp, NOW);
        }
    }
}
