//! OpenAI's 429 for a request bigger than the rate limit itself ("Request too large for gpt-4o
//! … on tokens per min (TPM): Limit 30000, Requested 45000"), on the fake platform: not
//! retried, failed over, never counted, so one client's oversized requests leave the provider
//! in service for everyone (`src/provider/classify.rs`).

use resilient_llm::testing::{block_on, reply, FakePlatform, Reply};
use resilient_llm::{ChatRequest, Client, Config, ErrorKind, Message, StateName};
use serde_json::json;

fn client(p: &FakePlatform) -> Client<FakePlatform> {
    let cfg = json!({
        "providers": {
            "a": {"kind": "openai", "baseUrl": "https://a.test"},
            "b": {"kind": "openai", "baseUrl": "https://b.test"}
        },
        "routes": {"r": [{"provider": "a", "model": "gpt-4o"}, {"provider": "b", "model": "m"}]},
        "retry": {"maxAttempts": 3},
        "breaker": {"failureThreshold": 3}
    });
    Config::parse(&cfg.to_string())
        .unwrap()
        .client(p.clone(), vec![], &|_: &str| Some("sk-test".to_string()))
        .unwrap()
}

fn ask() -> ChatRequest {
    let mut req = ChatRequest::new(vec![Message::user("hello")]);
    req.model = Some("r".into());
    req
}

fn ok() -> Reply {
    reply(200).body(
        json!({"id": "c1", "object": "chat.completion", "model": "m",
               "choices": [{"index": 0, "finish_reason": "stop",
                            "message": {"role": "assistant", "content": "hi"}}]})
        .to_string(),
    )
}

fn too_large() -> Reply {
    reply(429).header("retry-after", "1").body(
        json!({"error": {"message": "Request too large for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Requested 45000. The input or output tokens must be reduced in order to run successfully.",
                         "type": "tokens", "param": null, "code": "rate_limit_exceeded"}})
        .to_string(),
    )
}

#[test]
fn requests_over_the_limit_itself_neither_retry_nor_open_the_breaker() {
    let p = FakePlatform::new();
    let c = client(&p);
    p.script("https://a.test", (0..5).map(|_| too_large()));
    p.script("https://b.test", (0..5).map(|_| ok()));
    for _ in 0..5 {
        let r = block_on(&p, c.chat(ask())).unwrap();
        assert_eq!(r.served_by.provider, "b");
        let at_a: Vec<ErrorKind> = r
            .attempts
            .iter()
            .filter(|a| a.provider == "a")
            .filter_map(|a| a.error().map(|e| e.kind))
            .collect();
        assert_eq!(at_a, [ErrorKind::ContextLength], "tried once, not retried");
    }
    assert!(p.sleeps().is_empty(), "no wait on a Retry-After");
    let a = c.health().into_iter().find(|h| h.provider == "a").unwrap();
    assert_eq!((a.state, a.consecutive_failures), (StateName::Closed, 0));
    p.script("https://a.test", [ok()]);
    assert_eq!(block_on(&p, c.chat(ask())).unwrap().served_by.provider, "a");
}
