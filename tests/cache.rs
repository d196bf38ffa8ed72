//! The response cache at the gateway, on the fake platform: a miss then a
//! hit, the client's controls, the TTL and the stale window, scopes, a
//! stored answer replayed as a stream, and what is never stored.

use std::time::Duration;

use resilient_llm::gateway::{Gateway, Inbound, Outbound, Setup};
use resilient_llm::testing::{block_on, reply, FakePlatform};
use resilient_llm::{Body, Headers, MemoryStore};
use serde_json::{json, Value};

const A: &str = "client-key-a";
const B: &str = "client-key-b";

fn config() -> Value {
    json!({
        "providers": {
            "primary": { "kind": "openai", "baseUrl": "https://primary.test", "apiKey": "sk-p",
                "models": { "gpt": { "inputPricePerMtok": 2, "outputPricePerMtok": 8 } } },
            "backup": { "kind": "anthropic", "baseUrl": "https://backup.test", "apiKey": "sk-b" }
        },
        "routes": {
            "default": [ { "provider": "primary", "model": "gpt" },
                         { "provider": "backup", "model": "claude" } ],
            "everyone": [ { "provider": "primary", "model": "gpt" } ],
            "plain": [ { "provider": "primary", "model": "gpt" } ]
        },
        "cache": {
            "default": { "ttlSeconds": 60, "staleIfErrorSeconds": 3600 },
            "everyone": { "ttlSeconds": 60, "scope": "shared" }
        },
        "retry": { "maxAttempts": 1 },
        "breaker": { "failureThreshold": 100 },
        "gateway": { "clientKeysEnv": ["KEY_A", "KEY_B"] }
    })
}

fn gateway(p: &FakePlatform) -> Gateway<FakePlatform, MemoryStore> {
    let secret = |name: &str| match name {
        "KEY_A" => Some(A.to_string()),
        "KEY_B" => Some(B.to_string()),
        _ => None,
    };
    let setup = Setup::load(Some(&config().to_string()), &secret).expect("valid config");
    let store = MemoryStore::new(setup.breaker());
    setup.into_gateway(p.clone(), store)
}

fn openai_ok(text: &str, finish: &str) -> String {
    json!({
        "id": "chatcmpl-up", "object": "chat.completion", "created": 1, "model": "gpt-2026",
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": text }, "finish_reason": finish }],
        "usage": { "prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500 }
    })
    .to_string()
}

fn chat(key: &str, body: Value, extra: &[(&str, &str)]) -> Inbound {
    let bearer = format!("Bearer {key}");
    let mut headers: Headers = [("authorization", bearer.as_str())].into_iter().collect();
    for (n, v) in extra {
        headers.insert(n, *v);
    }
    Inbound {
        method: "POST".into(),
        path: "/v1/chat/completions".into(),
        headers,
        body: Body::full(body.to_string().into_bytes()),
    }
}

fn ask(route: &str) -> Value {
    json!({ "model": route, "messages": [{ "role": "user", "content": "classify: spam?" }], "temperature": 0 })
}

fn run(p: &FakePlatform, g: &Gateway<FakePlatform, MemoryStore>, r: Inbound) -> (Outbound, Value) {
    let out = block_on(p, g.handle(r));
    let body = serde_json::from_slice(&out.body).unwrap_or(Value::Null);
    (out, body)
}

fn log(out: &Outbound) -> Value {
    serde_json::from_str(&out.log).expect("a JSON log line")
}

#[test]
fn a_miss_then_a_hit_calls_the_provider_once() {
    let p = FakePlatform::new().at(1_800_000_000_000);
    p.script(
        "https://primary.test",
        [reply(200).body(openai_ok("not spam", "stop"))],
    );
    let g = gateway(&p);
    let (out, first) = run(&p, &g, chat(A, ask("default"), &[]));
    assert_eq!(out.status, 200, "{first}");
    assert_eq!(out.headers.get("x-cache"), Some("miss"));
    assert_eq!(out.headers.get("age"), None);
    assert_eq!(log(&out)["cache"], "miss");

    p.advance(Duration::from_secs(5));
    // The same meaning: other key order, another number form, and fields
    // that do not change the answer.
    let same = json!({ "temperature": 0.0, "user": "u-77", "metadata": { "run": "2" },
        "messages": [{ "content": "classify: spam?", "role": "user" }], "model": "default" });
    let (out, second) = run(&p, &g, chat(A, same, &[]));
    assert_eq!(out.status, 200, "{second}");
    assert_eq!(
        p.requests_to("https://primary.test"),
        1,
        "served from the cache"
    );
    assert_eq!(out.headers.get("x-cache"), Some("hit"));
    assert_eq!(out.headers.get("age"), Some("5"));
    assert_eq!(out.headers.get("x-attempts"), Some("0"));
    assert_eq!(out.headers.get("x-served-by"), Some("primary/gpt"));
    // The provider's own body, as it came: same-format.
    assert_eq!(second, first);
    // 1000 input tokens at $2/Mtok and 500 output at $8/Mtok.
    assert_eq!(out.headers.get("x-cost-saved-usd"), Some("0.006"));
    assert_eq!(out.headers.get("x-cost-usd"), None, "a hit costs nothing");
    let line = log(&out);
    assert_eq!(line["cache"], "hit");
    assert_eq!(line["costSavedUsd"], 0.006);
    assert_eq!(line["attempts"], 0);

    let metrics = block_on(
        &p,
        g.handle(Inbound {
            method: "GET".into(),
            path: "/metrics".into(),
            headers: [("authorization", format!("Bearer {A}").as_str())]
                .into_iter()
                .collect(),
            body: Body::full(Vec::new()),
        }),
    );
    let text = String::from_utf8(metrics.body).unwrap();
    assert!(
        text.contains("llm_gateway_cache_requests_total{result=\"hit\"} 1"),
        "{text}"
    );
    assert!(text.contains("llm_gateway_cache_requests_total{result=\"miss\"} 1"));
    assert!(text.contains("llm_gateway_cache_saved_usd_total 0.006"));
    assert!(!text.contains("llm_gateway_cache_stored_bytes_total 0\n"));

    let get = |path: &str| {
        block_on(
            &p,
            g.handle(Inbound {
                method: "GET".into(),
                path: path.into(),
                headers: [("authorization", format!("Bearer {A}").as_str())]
                    .into_iter()
                    .collect(),
                body: Body::full(Vec::new()),
            }),
        )
    };
    let status: Value = serde_json::from_slice(&get("/status/data").body).expect("JSON");
    let cache = &status["cache"];
    assert_eq!(cache["store"], "memory");
    assert_eq!(cache["entries"], 1);
    assert!(cache["bytes"].as_u64().is_some_and(|b| b > 100), "{cache}");
    assert_eq!(
        cache["requests"],
        json!({ "hit": 1, "miss": 1, "stale": 0, "bypass": 0 })
    );
    assert_eq!(cache["savedUsd"], 0.006);
    assert_eq!(
        cache["routes"][0],
        json!({ "route": "default", "ttlSeconds": 60, "staleIfErrorSeconds": 3600, "scope": "client" })
    );
    assert_eq!(cache["routes"][1]["scope"], "shared");
    let page = String::from_utf8(get("/status").body).unwrap();
    assert!(
        page.contains("<h2>Response cache</h2><p>Store: memory, 1 entries, "),
        "{page}"
    );
    assert!(page.contains("1 hits, 1 misses, 0 served stale, 0 bypassed"));
}

#[test]
fn another_question_is_another_answer() {
    let p = FakePlatform::new();
    p.script(
        "https://primary.test",
        [
            reply(200).body(openai_ok("one", "stop")),
            reply(200).body(openai_ok("two", "stop")),
        ],
    );
    let g = gateway(&p);
    run(&p, &g, chat(A, ask("default"), &[]));
    let mut other = ask("default");
    other["temperature"] = json!(0.5);
    let (out, body) = run(&p, &g, chat(A, other, &[]));
    assert_eq!(out.headers.get("x-cache"), Some("miss"));
    assert_eq!(body["choices"][0]["message"]["content"], "two");
}

#[test]
fn no_cache_skips_the_lookup_and_no_store_the_write() {
    let p = FakePlatform::new();
    p.script(
        "https://primary.test",
        [
            reply(200).body(openai_ok("one", "stop")),
            reply(200).body(openai_ok("two", "stop")),
            reply(200).body(openai_ok("three", "stop")),
            reply(200).body(openai_ok("four", "stop")),
        ],
    );
    let g = gateway(&p);
    // no-store: asked, not kept.
    let (out, _) = run(
        &p,
        &g,
        chat(A, ask("default"), &[("cache-control", "no-store")]),
    );
    assert_eq!(out.headers.get("x-cache"), Some("miss"));
    let (out, body) = run(&p, &g, chat(A, ask("default"), &[]));
    assert_eq!(out.headers.get("x-cache"), Some("miss"));
    assert_eq!(body["choices"][0]["message"]["content"], "two");
    // no-cache: asked again though "two" is stored; its answer replaces it.
    let (out, body) = run(
        &p,
        &g,
        chat(A, ask("default"), &[("cache-control", "no-cache")]),
    );
    assert_eq!(out.headers.get("x-cache"), Some("bypass"));
    assert_eq!(body["choices"][0]["message"]["content"], "three");
    let (out, body) = run(&p, &g, chat(A, ask("default"), &[]));
    assert_eq!(out.headers.get("x-cache"), Some("hit"));
    assert_eq!(body["choices"][0]["message"]["content"], "three");
    assert_eq!(p.requests_to("https://primary.test"), 3);
}

#[test]
fn fresh_for_the_ttl_or_the_shorter_one_asked() {
    let p = FakePlatform::new();
    p.script(
        "https://primary.test",
        [
            reply(200).body(openai_ok("one", "stop")),
            reply(200).body(openai_ok("two", "stop")),
            reply(200).body(openai_ok("three", "stop")),
        ],
    );
    let g = gateway(&p);
    run(&p, &g, chat(A, ask("default"), &[]));
    p.advance(Duration::from_secs(59));
    let (out, _) = run(&p, &g, chat(A, ask("default"), &[]));
    assert_eq!(out.headers.get("x-cache"), Some("hit"));
    p.advance(Duration::from_secs(1));
    // Past its TTL, and the providers answer: a new answer, not the stale one.
    let (out, body) = run(&p, &g, chat(A, ask("default"), &[("x-cache-ttl", "10")]));
    assert_eq!(out.headers.get("x-cache"), Some("miss"));
    assert_eq!(body["choices"][0]["message"]["content"], "two");
    p.advance(Duration::from_secs(9));
    let (out, _) = run(&p, &g, chat(A, ask("default"), &[]));
    assert_eq!(out.headers.get("x-cache"), Some("hit"));
    p.advance(Duration::from_secs(1));
    let (out, body) = run(&p, &g, chat(A, ask("default"), &[("x-cache-ttl", "999")]));
    assert_eq!(
        out.headers.get("x-cache"),
        Some("miss"),
        "10 s asked, not 60"
    );
    assert_eq!(body["choices"][0]["message"]["content"], "three");
}

#[test]
fn a_stale_answer_when_every_entry_fails_within_the_window_only() {
    let p = FakePlatform::new();
    p.script(
        "https://primary.test",
        [
            reply(200).body(openai_ok("kept", "stop")),
            reply(503),
            reply(503),
            reply(503),
        ],
    );
    p.script("https://backup.test", [reply(529), reply(529), reply(529)]);
    let g = gateway(&p);
    run(&p, &g, chat(A, ask("default"), &[]));
    p.advance(Duration::from_secs(120));
    let (out, body) = run(&p, &g, chat(A, ask("default"), &[]));
    assert_eq!(out.status, 200, "{body}");
    assert_eq!(out.headers.get("x-cache"), Some("stale"));
    assert_eq!(out.headers.get("age"), Some("120"));
    assert_eq!(out.headers.get("x-attempts"), Some("2"));
    assert_eq!(body["choices"][0]["message"]["content"], "kept");
    let line = log(&out);
    assert_eq!(line["cache"], "stale");
    assert_eq!(line["status"], 200);
    assert!(line.get("error").is_none());
    let trail = line["trail"].as_array().unwrap();
    assert_eq!(trail.len(), 2, "the failures that made it stale: {line}");
    assert_eq!(trail[0]["outcome"], "server");

    // The client said no-cache: the error, not the stale answer.
    let (out, body) = run(
        &p,
        &g,
        chat(A, ask("default"), &[("cache-control", "no-cache")]),
    );
    assert_eq!(out.status, 503, "{body}");
    assert_eq!(body["error"]["code"], "all_providers_failed");

    // Past the stale window: the error too.
    p.advance(Duration::from_secs(3600));
    let (out, _) = run(&p, &g, chat(A, ask("default"), &[]));
    assert_eq!(out.status, 503);
    assert_eq!(out.headers.get("x-cache"), Some("miss"));
}

#[test]
fn one_clients_answers_are_not_served_to_another_unless_shared() {
    let p = FakePlatform::new();
    p.script(
        "https://primary.test",
        [
            reply(200).body(openai_ok("for a", "stop")),
            reply(200).body(openai_ok("for b", "stop")),
            reply(200).body(openai_ok("for all", "stop")),
        ],
    );
    let g = gateway(&p);
    run(&p, &g, chat(A, ask("default"), &[]));
    let (out, body) = run(&p, &g, chat(B, ask("default"), &[]));
    assert_eq!(out.headers.get("x-cache"), Some("miss"));
    assert_eq!(body["choices"][0]["message"]["content"], "for b");
    let (out, body) = run(&p, &g, chat(A, ask("default"), &[]));
    assert_eq!(out.headers.get("x-cache"), Some("hit"));
    assert_eq!(body["choices"][0]["message"]["content"], "for a");

    run(&p, &g, chat(A, ask("everyone"), &[]));
    let (out, body) = run(&p, &g, chat(B, ask("everyone"), &[]));
    assert_eq!(out.headers.get("x-cache"), Some("hit"), "scope shared");
    assert_eq!(body["choices"][0]["message"]["content"], "for all");
    assert!(!out.log.contains(A) && !out.log.contains(B));
}

#[test]
fn a_stored_answer_is_replayed_as_a_stream() {
    let p = FakePlatform::new();
    p.script(
        "https://primary.test",
        [
            reply(200).body(openai_ok("streamed later", "stop")),
            reply(503),
        ],
    );
    p.script("https://backup.test", [reply(529)]);
    let g = gateway(&p);
    run(&p, &g, chat(A, ask("default"), &[]));
    let mut streamed = ask("default");
    streamed["stream"] = json!(true);
    streamed["stream_options"] = json!({ "include_usage": true });
    let out = block_on(&p, g.handle(chat(A, streamed.clone(), &[])));
    assert_eq!(out.status, 200);
    assert_eq!(out.headers.get("x-cache"), Some("hit"));
    assert!(out
        .headers
        .get("content-type")
        .is_some_and(|t| t.starts_with("text/event-stream")));
    let text = String::from_utf8(out.body).unwrap();
    let data: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let said: String = data
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(said, "streamed later");
    assert!(data.iter().any(|c| c["usage"]["completion_tokens"] == 500));
    assert!(text.trim_end().ends_with("data: [DONE]"));
    assert_eq!(p.requests_to("https://primary.test"), 1);

    // Stale, to a stream: the events, then a comment saying so.
    p.advance(Duration::from_secs(61));
    let out = block_on(&p, g.handle(chat(A, streamed, &[])));
    assert_eq!(out.status, 200);
    assert_eq!(out.headers.get("x-cache"), Some("stale"));
    let text = String::from_utf8(out.body).unwrap();
    assert!(text.contains("streamed later"));
    assert!(
        text.ends_with(": x-cache stale: every provider failed; this answer is 61 s old\n\n"),
        "{text}"
    );
}

#[test]
fn what_is_never_stored_and_where_nothing_is_cached() {
    let p = FakePlatform::new();
    p.script(
        "https://primary.test",
        [
            reply(200).body(openai_ok("", "content_filter")),
            reply(200).body(openai_ok("ok", "stop")),
            reply(200).body(openai_ok("one", "stop")),
            reply(200).body(openai_ok("two", "stop")),
        ],
    );
    let g = gateway(&p);
    // A refused answer is returned, never stored.
    let (out, _) = run(&p, &g, chat(A, ask("default"), &[]));
    assert_eq!(out.headers.get("x-cache"), Some("miss"));
    let (out, body) = run(&p, &g, chat(A, ask("default"), &[]));
    assert_eq!(out.headers.get("x-cache"), Some("miss"));
    assert_eq!(body["choices"][0]["message"]["content"], "ok");
    // A route that does not cache says nothing of it.
    let (out, _) = run(&p, &g, chat(A, ask("plain"), &[]));
    assert_eq!(out.headers.get("x-cache"), None);
    assert!(log(&out).get("cache").is_none());
    let (_, body) = run(&p, &g, chat(A, ask("plain"), &[]));
    assert_eq!(body["choices"][0]["message"]["content"], "two");
    // A body canonical JSON cannot hold exactly is asked, never stored.
    let mut seeded = ask("default");
    seeded["seed"] = json!(9_007_199_254_740_993u64);
    let (out, _) = run(&p, &g, chat(A, seeded, &[]));
    assert_eq!(out.headers.get("x-cache"), Some("bypass"));
}
