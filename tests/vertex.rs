//! Google Vertex AI on the fake platform: the service account's JWT against a vector signed
//! by openssl, the token fetched once and shared, renewed before it expires, its failure an
//! auth failure that fails over; Claude through rawPredict / streamRawPredict on the Messages
//! API's fixtures; errors in Google's shape classified on both publishers; configuration
//! problems named without the key; no key or token in any output. Gemini's translation:
//! `tests/vertex_gemini.rs`.

#[path = "vertex/support.rs"]
mod support;

use std::path::Path;
use std::time::Duration;

use futures_util::future::join_all;
use proptest::prelude::*;
use resilient_llm::testing::{block_on, fail, reply, FakePlatform};
use resilient_llm::{
    build_provider, BufferedResponse, ChatRequest, Config, Credential, Delta, ErrorKind, Headers,
    Message, ProviderConfig, ServiceAccount, TransportErrorKind,
};
use serde_json::{json, Value};
use support::*;

// ------------------------------------------------------------ the token

#[test]
fn the_assertion_is_the_one_openssl_signed() {
    let account = ServiceAccount::from_json(&key_json()).unwrap();
    let input = std::fs::read_to_string(fixtures().join("jwt-signing-input.txt")).unwrap();
    let signature = std::fs::read_to_string(fixtures().join("jwt-signature.txt")).unwrap();
    assert_eq!(
        account.assertion(NOW),
        format!("{}.{}", input.trim(), signature.trim())
    );
    // The claims Google requires, read back from the signed JWT.
    let claims = input.trim().split('.').nth(1).unwrap();
    use base64::Engine as _;
    let claims = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(claims)
        .unwrap();
    let claims: Value = serde_json::from_slice(&claims).unwrap();
    assert_eq!(
        claims,
        json!({"iss": account.email(), "scope": "https://www.googleapis.com/auth/cloud-platform",
               "aud": TOKEN_URI, "iat": 1_700_000_000u64, "exp": 1_700_003_600u64})
    );
}

#[test]
fn the_token_request_is_a_jwt_bearer_grant_posted_to_token_uri() {
    let account = ServiceAccount::from_json(&key_json()).unwrap();
    let http = account.token_request(NOW).unwrap();
    assert_eq!(http.method, "POST");
    assert_eq!(http.url, TOKEN_URI);
    assert_eq!(
        http.headers.get("content-type"),
        Some("application/x-www-form-urlencoded")
    );
    let body = String::from_utf8(http.body).unwrap();
    assert_eq!(
        body,
        format!(
            "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion={}",
            account.assertion(NOW)
        )
    );
    assert!(!format!("{account:?}").contains(&key_material()));
}

#[test]
fn a_token_endpoint_that_gives_no_token_is_an_auth_failure_without_secrets() {
    let account = ServiceAccount::from_json(&key_json()).unwrap();
    let cases = [
        (
            400,
            r#"{"error":"invalid_grant","error_description":"Invalid JWT Signature."}"#,
        ),
        (200, r#"{"token_type":"Bearer"}"#),
        (200, r#"{"access_token":"a b","expires_in":3600}"#),
        (
            200,
            r#"{"access_token":"x","expires_in":3600,"token_type":"MAC"}"#,
        ),
        (200, "not json"),
        (503, ""),
    ];
    for (status, body) in cases {
        let resp = BufferedResponse {
            status,
            headers: Headers::new(),
            body: body.as_bytes().to_vec(),
        };
        let e = account.accept(&resp, NOW).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Auth, "{status} {body}");
        assert!(!e.message.contains(&key_material()));
        assert!(!account.is_fresh(NOW));
    }
    let e = account
        .accept(
            &BufferedResponse {
                status: 400,
                headers: Headers::new(),
                body: cases[0].1.as_bytes().to_vec(),
            },
            NOW,
        )
        .unwrap_err();
    assert!(
        e.message.contains("invalid_grant: Invalid JWT Signature."),
        "{e}"
    );
}

#[test]
fn one_token_serves_many_requests_concurrent_ones_included_and_is_renewed_before_expiry() {
    let p = FakePlatform::new().at(NOW);
    let c = client(&p);
    // The token takes a while: every request is waiting for it at once.
    p.script(
        TOKEN_URI,
        [token_reply(3600).delay(Duration::from_millis(50))],
    );
    let raw = format!("{VERTEX}/anthropic/models/claude-sonnet-4-5@20250929:rawPredict");
    p.script(&raw, (0..8).map(|i| claude_ok(&format!("answer {i}"))));
    p.script("https://anthropic.test", (0..8).map(|_| reply(529)));
    let replies = block_on(&p, join_all((0..5).map(|_| c.chat(ask("claude")))));
    for r in &replies {
        let r = r.as_ref().unwrap();
        assert_eq!(r.served_by.provider, "vertex");
    }
    block_on(&p, c.chat(ask("claude"))).unwrap();
    assert_eq!(p.requests_to(TOKEN_URI), 1, "one token for six requests");
    for req in p.requests().iter().filter(|r| r.url == raw) {
        assert_eq!(
            req.headers.get("authorization"),
            Some(format!("Bearer {TOKEN}").as_str())
        );
    }
    // 55 minutes on, the token is about to expire: one renewal.
    p.advance(Duration::from_secs(55 * 60 + 1));
    p.script(TOKEN_URI, [token_reply(3600)]);
    block_on(&p, c.chat(ask("claude"))).unwrap();
    block_on(&p, c.chat(ask("claude"))).unwrap();
    assert_eq!(p.requests_to(TOKEN_URI), 2);
}

#[test]
fn a_failed_token_fetch_is_an_auth_failure_that_fails_over_and_counts_for_the_breaker() {
    let p = FakePlatform::new().at(NOW);
    let cfg = json!({
        "providers": {
            "vertex": {"kind": "vertex", "publisher": "anthropic", "project": "test-project",
                       "region": "us-east5"},
            "anthropic": {"kind": "anthropic", "baseUrl": "https://anthropic.test"}
        },
        "routes": {"claude": [{"provider": "vertex", "model": "claude-sonnet-4-5@20250929"},
                              {"provider": "anthropic", "model": "claude-sonnet-4-5"}]},
        "breaker": {"failureThreshold": 2}
    });
    let c = Config::parse(&cfg.to_string())
        .unwrap()
        .client(p.clone(), vec![], &secret)
        .unwrap();
    p.script(
        TOKEN_URI,
        [
            reply(400).body(r#"{"error":"invalid_grant","error_description":"bad"}"#),
            fail(TransportErrorKind::Refused),
        ],
    );
    p.script(
        "https://anthropic.test",
        (0..4).map(|_| claude_ok("direct")),
    );
    for _ in 0..3 {
        let r = block_on(&p, c.chat(ask("claude"))).unwrap();
        assert_eq!(r.served_by.provider, "anthropic");
        assert_eq!(r.response.text, "direct");
    }
    let prefix = format!("{VERTEX}/");
    assert_eq!(p.requests_to(&prefix), 0, "no model call without a token");
    // Two failures opened the breaker: the third request did not try.
    assert_eq!(p.requests_to(TOKEN_URI), 2);
    let r = block_on(&p, c.chat(ask("claude"))).unwrap();
    assert_eq!(r.attempts[0].error().unwrap().kind, ErrorKind::CircuitOpen);
}

// ------------------------------------------------------------ Claude

#[test]
fn claude_goes_to_raw_predict_with_vertex_s_version_and_no_model() {
    let p = authorised(claude_provider());
    let mut req = ChatRequest::new(vec![Message::system("terse"), Message::user("hi")]);
    req.max_tokens = Some(64);
    let http = p.encode(&req, "claude-sonnet-4-5@20250929").unwrap();
    assert_eq!(
        http.url,
        format!("{VERTEX}/anthropic/models/claude-sonnet-4-5@20250929:rawPredict")
    );
    let body: Value = serde_json::from_slice(&http.body).unwrap();
    assert_eq!(body["anthropic_version"], "vertex-2023-10-16");
    assert!(body.get("model").is_none());
    assert_eq!(body["system"], "terse");
    assert_eq!(body["max_tokens"], 64);
    assert_eq!(http.headers.get("anthropic-version"), None);
    assert_eq!(http.headers.get("x-api-key"), None);
    assert_eq!(
        http.headers.get("authorization"),
        Some(format!("Bearer {TOKEN}").as_str())
    );
    assert!(!format!("{http:?}").contains(TOKEN));
    req.stream = true;
    let http = p.encode(&req, "claude-sonnet-4-5@20250929").unwrap();
    assert!(http.url.ends_with(":streamRawPredict"), "{}", http.url);
    let body: Value = serde_json::from_slice(&http.body).unwrap();
    assert_eq!(body["stream"], true);
}

#[test]
fn without_a_token_nothing_is_encoded() {
    let e = claude_provider()
        .encode(&ChatRequest::new(vec![Message::user("hi")]), "m")
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Auth);
}

#[test]
fn global_region_and_base_url_override() {
    let p = authorised(provider(json!({
        "kind": "vertex", "publisher": "google", "project": "p-1", "region": "global"
    })));
    let http = p
        .encode(
            &ChatRequest::new(vec![Message::user("hi")]),
            "gemini-2.5-pro",
        )
        .unwrap();
    assert_eq!(
        http.url,
        "https://aiplatform.googleapis.com/v1/projects/p-1/locations/global/publishers/google/models/gemini-2.5-pro:generateContent"
    );
    let p = authorised(provider(json!({
        "kind": "vertex", "publisher": "google", "project": "p-1", "region": "europe-west1",
        "baseUrl": "http://127.0.0.1:8788/vertex/"
    })));
    let mut req = ChatRequest::new(vec![Message::user("hi")]);
    req.stream = true;
    let http = p.encode(&req, "gemini-2.5-pro").unwrap();
    assert_eq!(
        http.url,
        "http://127.0.0.1:8788/vertex/v1/projects/p-1/locations/europe-west1/publishers/google/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
    );
}

/// Every Anthropic fixture reads the same through Vertex's Claude entry.
#[test]
fn claude_answers_and_errors_read_as_the_messages_api_does() {
    let p = claude_provider();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/anthropic");
    let mut n = 0;
    for file in json_files(&dir) {
        check_fixture(p.as_ref(), &file);
        n += 1;
    }
    assert!(n >= 10);
}

#[test]
fn claude_streams_are_the_messages_api_s_events() {
    let p = claude_provider();
    let sse = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/anthropic/stream_text.sse"),
    )
    .unwrap();
    let deltas = stream_deltas(p.as_ref(), &sse).unwrap();
    assert!(deltas.iter().any(|d| matches!(d, Delta::Text { .. })));
    assert_eq!(deltas.last(), Some(&Delta::Done));
}

// ------------------------------------------------------------ errors

#[test]
fn google_errors_are_classified_on_both_publishers() {
    let files = json_files(&fixtures().join("errors"));
    assert!(files.len() >= 10);
    for p in [claude_provider(), gemini_provider()] {
        for file in &files {
            check_fixture(p.as_ref(), file);
        }
    }
}

// ------------------------------------------------------------ configuration

#[test]
fn configuration_problems_are_named_without_the_key() {
    let check = |cfg: Value, secrets: &dyn Fn(&str) -> Option<String>| {
        let cfg: ProviderConfig = serde_json::from_value(cfg).unwrap();
        let mut issues = Vec::new();
        let built = build_provider("v", &cfg, secrets, "providers.v", &mut issues).is_some();
        (
            built,
            issues.iter().map(ToString::to_string).collect::<Vec<_>>(),
        )
    };
    let (built, issues) = check(
        json!({"kind": "vertex", "publisher": "google", "project": "a/b", "region": ""}),
        &|_| None,
    );
    assert!(!built);
    assert_eq!(
        issues,
        [
            "providers.v.project: must be a non-empty name of letters, digits, - _ .",
            "providers.v.region: must be a non-empty name of letters, digits, - _ .",
            "providers.v.serviceAccountKeyEnv: secret \"GOOGLE_SERVICE_ACCOUNT_KEY\" is not set",
        ]
    );
    let mut broken: Value = serde_json::from_str(&key_json()).unwrap();
    let pem = broken["private_key"]
        .as_str()
        .unwrap()
        .replace("MII", "XXX");
    broken["private_key"] = json!(pem);
    let (built, issues) = check(
        json!({"kind": "vertex", "publisher": "anthropic", "project": "p", "region": "us-east5",
               "serviceAccountKey": broken}),
        &|_| None,
    );
    assert!(!built);
    assert_eq!(
        issues,
        ["providers.v.serviceAccountKey: the service-account key has a private_key that is not an RSA key in PKCS#8 PEM"]
    );
    let (_, issues) = check(
        json!({"kind": "vertex", "publisher": "anthropic", "project": "p", "region": "us-east5",
               "serviceAccountKeyEnv": "MY_KEY"}),
        &|_| Some("{\"private_key\": \"-----BEGIN".into()),
    );
    assert_eq!(issues.len(), 1);
    assert!(issues[0].starts_with("providers.v.serviceAccountKeyEnv: the service-account key is not a service-account key file"), "{issues:?}");
    assert!(!issues[0].contains("BEGIN"));
    // The key given in the configuration as text works as the object does.
    let (built, issues) = check(
        json!({"kind": "vertex", "publisher": "anthropic", "project": "p", "region": "us-east5",
               "serviceAccountKey": key_json()}),
        &|_| None,
    );
    assert!(built, "{issues:?}");
    let e = serde_json::from_value::<ProviderConfig>(
        json!({"kind": "vertex", "publisher": "amazon", "project": "p", "region": "r"}),
    )
    .unwrap_err();
    assert!(e.to_string().contains("amazon"), "{e}");
}

#[test]
fn an_error_that_echoes_the_token_does_not_show_it() {
    for p in [authorised(claude_provider()), authorised(gemini_provider())] {
        let body = json!({"error": {"code": 401, "message": format!("bad token {TOKEN}"),
                                    "status": "UNAUTHENTICATED"}});
        let resp = BufferedResponse {
            status: 401,
            headers: Headers::new(),
            body: body.to_string().into_bytes(),
        };
        let e = p.decode(&resp, NOW).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Auth);
        assert!(!e.message.contains(TOKEN), "{e}");
        let ev = resilient_llm::SseEvent {
            data: body.to_string(),
            ..Default::default()
        };
        let ev = if p.dialect().is_some() {
            resilient_llm::SseEvent {
                event: Some("error".into()),
                ..ev
            }
        } else {
            ev
        };
        let e = p.decode_event(&ev).unwrap_err();
        assert!(!e.message.contains(TOKEN), "{e}");
    }
}

#[test]
fn the_documented_vertex_providers_are_valid() {
    // docs/clouds.md's example, moved there from the README.
    let doc = include_str!("../docs/clouds.md");
    let section = &doc[doc.find("## Google Vertex AI").unwrap()..];
    let start = section.find("```jsonc\n").unwrap() + "```jsonc\n".len();
    let end = start + section[start..].find("```").unwrap();
    let cfg = Config::parse(&format!("{{{}}}", &section[start..end])).unwrap();
    let key = |name: &str| (name == "VERTEX_SERVICE_ACCOUNT_KEY").then(key_json);
    assert_eq!(cfg.providers.len(), 2);
    cfg.client(FakePlatform::new(), vec![], &key)
        .expect("valid, the key read from its secret");
}

#[test]
fn the_documented_three_reseller_route_is_valid() {
    // docs/clouds.md's example, moved there from the README.
    let doc = include_str!("../docs/clouds.md");
    let section = &doc[doc.find("## One model, three resellers").unwrap()..];
    let start = section.find("```jsonc\n").unwrap() + "```jsonc\n".len();
    let end = start + section[start..].find("```").unwrap();
    let cfg = Config::parse(&section[start..end]).unwrap();
    let secrets = |name: &str| match name {
        "GOOGLE_SERVICE_ACCOUNT_KEY" => Some(key_json()),
        "ANTHROPIC_API_KEY" | "AWS_ACCESS_KEY_ID" | "AWS_SECRET_ACCESS_KEY" => {
            Some("placeholder".to_string())
        }
        _ => None,
    };
    let client = cfg
        .client(FakePlatform::new(), vec![], &secrets)
        .expect("valid, every secret read by its default name");
    let chain: Vec<_> = client.routes()["claude"]
        .iter()
        .map(|e| e.provider.as_str())
        .collect();
    assert_eq!(chain, ["anthropic", "bedrock", "vertex"]);
}

// ------------------------------------------------------------ properties

proptest! {
    #[test]
    fn no_token_answer_makes_accept_panic(status in 100u16..600, body in ".{0,200}") {
        let account = ServiceAccount::from_json(&key_json()).unwrap();
        let resp = BufferedResponse { status, headers: Headers::new(), body: body.into_bytes() };
        let _ = account.accept(&resp, NOW);
    }
}
