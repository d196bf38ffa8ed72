//! Named clients through the gateway on the fake platform: each key finds
//! its client, a client's limits (requests and tokens per minute, requests
//! in flight, daily spend) refuse in the client's format with
//! `retry-after` and OpenAI's rate headers, a route it may not use is
//! refused, an admitted request still fails over, and the health page,
//! metrics and log line name the client, never its key.

use std::time::Duration;

use futures_util::future::join_all;
use resilient_llm::gateway::{Gateway, Inbound, Outbound, Setup};
use resilient_llm::testing::{block_on, reply, FakePlatform, Reply};
use resilient_llm::{Body, Headers, MemoryStore};
use serde_json::{json, Value};

/// Noon, 2026-12-01 UTC: a minute's start.
const NOON: u64 = 1_796_126_400_000;

/// Clients `web` (every route), `batch` (3 requests and 1,000 tokens a
/// minute, only `cheap`), `one` (one request in flight), `budget` ($1 a
/// day), and `gateway.clientKeysEnv`'s `OLD` as `default`.
fn config() -> Value {
    json!({
        "providers": {
            "up": { "kind": "openai", "baseUrl": "https://up.test", "apiKey": "sk-up",
                "models": { "big": { "inputPricePerMtok": 0.1, "outputPricePerMtok": 0.4 } } },
            "alt": { "kind": "openai", "baseUrl": "https://alt.test", "apiKey": "sk-alt",
                "models": { "small": { "inputPricePerMtok": 0, "outputPricePerMtok": 0 } } }
        },
        "routes": {
            "default": [{ "provider": "up", "model": "big" }, { "provider": "alt", "model": "small" }],
            "cheap": [{ "provider": "alt", "model": "small" }]
        },
        "retry": { "maxAttempts": 1 },
        "gateway": {
            "clientKeysEnv": ["OLD"],
            "clients": [
                { "name": "web", "keysEnv": ["WEB", "WEB_NEXT"] },
                { "name": "batch", "keysEnv": ["BATCH"], "routes": ["cheap"],
                  "limits": { "requestsPerMinute": 3, "tokensPerMinute": 1000 } },
                { "name": "one", "keysEnv": ["ONE"], "limits": { "maxInFlight": 1 } },
                { "name": "budget", "keysEnv": ["BUDGET"], "limits": { "dailyBudgetUsd": 1 } }
            ]
        }
    })
}

fn secret(name: &str) -> Option<String> {
    let key = match name {
        "OLD" => "key-old",
        "WEB" => "key-web",
        "WEB_NEXT" => "key-web-next",
        "BATCH" => "key-batch",
        "ONE" => "key-one",
        "BUDGET" => "key-budget",
        _ => return None,
    };
    Some(key.into())
}

fn gateway(p: &FakePlatform) -> Gateway<FakePlatform, MemoryStore> {
    let setup = Setup::load(Some(&config().to_string()), &secret).expect("valid");
    let store = MemoryStore::new(setup.breaker());
    setup.into_gateway(p.clone(), store)
}

/// An answer reporting `input` and `output` tokens.
fn answer(input: u64, output: u64) -> Reply {
    let body = json!({ "id": "c", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": "ok" },
                      "finish_reason": "stop" }],
        "usage": { "prompt_tokens": input, "completion_tokens": output,
                   "total_tokens": input + output } });
    reply(200)
        .header("content-type", "application/json")
        .body(body.to_string())
}

fn post(path: &str, key: &str, body: Value) -> Inbound {
    Inbound {
        method: "POST".into(),
        path: path.into(),
        headers: [
            ("content-type", "application/json"),
            ("authorization", &format!("Bearer {key}")),
        ]
        .into_iter()
        .collect::<Headers>(),
        body: Body::full(body.to_string().into_bytes()),
    }
}

/// "hi" (one token) of `route`, for up to `max_tokens`.
fn ask(key: &str, route: &str, max_tokens: u32) -> Inbound {
    post(
        "/v1/chat/completions",
        key,
        json!({ "model": route, "max_tokens": max_tokens,
                "messages": [{ "role": "user", "content": "hi" }] }),
    )
}

fn page(p: &FakePlatform, g: &Gateway<FakePlatform, MemoryStore>, path: &str) -> Outbound {
    let req = Inbound {
        method: "GET".into(),
        path: path.into(),
        headers: [("x-api-key", "key-web")].into_iter().collect::<Headers>(),
        body: Body::full(Vec::new()),
    };
    block_on(p, g.handle(req))
}

fn json_of(out: &Outbound) -> Value {
    serde_json::from_slice(&out.body).expect("JSON")
}

fn header<'a>(out: &'a Outbound, name: &str) -> &'a str {
    out.headers.get(name).unwrap_or_else(|| panic!("no {name}"))
}

#[test]
fn every_key_finds_its_client_and_an_unknown_one_is_refused() {
    let p = FakePlatform::new().at(NOON);
    let g = gateway(&p);
    p.script("https://up.test", (0..3).map(|_| answer(1, 1)));
    for key in ["key-old", "key-web", "key-web-next"] {
        let out = block_on(&p, g.handle(ask(key, "default", 10)));
        assert_eq!(out.status, 200, "{key}");
        assert!(
            out.headers.get("x-ratelimit-limit-requests").is_none(),
            "no limits, no headers"
        );
    }
    let out = block_on(&p, g.handle(ask("key-nope", "default", 10)));
    assert_eq!(out.status, 401);
    let web = json_of(&page(&p, &g, "/health"))["clients"].clone();
    let by_name = |n: &str| {
        web.as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == n)
            .cloned()
            .unwrap()
    };
    assert_eq!(by_name("default")["requests"], 1);
    assert_eq!(by_name("web")["requests"], 2, "both of its keys");
    assert!(
        !web.to_string().contains("key-"),
        "no key on the page: {web}"
    );
}

#[test]
fn a_client_over_its_requests_per_minute_gets_a_429_it_can_retry() {
    let p = FakePlatform::new().at(NOON);
    let g = gateway(&p);
    p.script("https://alt.test", (0..4).map(|_| answer(1, 1)));
    for i in 0..3 {
        let out = block_on(&p, g.handle(ask("key-batch", "cheap", 10)));
        assert_eq!(out.status, 200, "request {i}");
        assert_eq!(header(&out, "x-ratelimit-limit-requests"), "3");
        assert_eq!(
            header(&out, "x-ratelimit-remaining-requests"),
            (2 - i).to_string()
        );
        assert_eq!(header(&out, "x-ratelimit-reset-requests"), "2m0s");
    }
    p.advance(Duration::from_secs(20));
    let out = block_on(&p, g.handle(ask("key-batch", "cheap", 10)));
    assert_eq!(out.status, 429);
    let body = json_of(&out);
    assert_eq!(body["error"]["type"], "rate_limit_error", "{body}");
    assert_eq!(body["error"]["code"], "rate_limit_exceeded");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("\"batch\" is over its 3 requests per minute"),
        "{message}"
    );
    // The minute slides on: the last minute's three weigh two a third
    // into the next one, and one more fits then.
    assert_eq!(header(&out, "retry-after-ms"), "60000");
    assert_eq!(header(&out, "retry-after"), "60");
    assert_eq!(header(&out, "x-ratelimit-remaining-requests"), "0");
    assert_eq!(
        p.requests_to("https://alt.test"),
        3,
        "a refused request calls nobody"
    );
    p.advance(Duration::from_millis(60_001));
    assert_eq!(
        block_on(&p, g.handle(ask("key-batch", "cheap", 10))).status,
        200
    );
    let health = json_of(&page(&p, &g, "/health"));
    let batch = &health["clients"].as_array().unwrap()[2];
    assert_eq!(
        (
            batch["name"].as_str(),
            batch["refused"]["requests"].as_u64()
        ),
        (Some("batch"), Some(1))
    );
}

#[test]
fn tokens_are_held_at_the_estimate_and_corrected_by_the_usage_reported() {
    let p = FakePlatform::new().at(NOON);
    let g = gateway(&p);
    // Held: 1 input token and 600 output; reported: 1 and 99.
    p.script("https://alt.test", (0..3).map(|_| answer(1, 99)));
    let first = block_on(&p, g.handle(ask("key-batch", "cheap", 600)));
    assert_eq!(first.status, 200);
    assert_eq!(header(&first, "x-ratelimit-limit-tokens"), "1000");
    assert_eq!(
        header(&first, "x-ratelimit-remaining-tokens"),
        "900",
        "corrected"
    );
    // 100 used: another 601 fits, a request for 901 does not.
    assert_eq!(
        block_on(&p, g.handle(ask("key-batch", "cheap", 600))).status,
        200
    );
    let over = block_on(&p, g.handle(ask("key-batch", "cheap", 801)));
    assert_eq!(over.status, 429);
    let message = json_of(&over)["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(message.contains("1000 tokens per minute"), "{message}");
    assert_eq!(header(&over, "x-ratelimit-remaining-tokens"), "800");
}

#[test]
fn a_client_may_not_use_a_route_it_was_not_given() {
    let p = FakePlatform::new().at(NOON);
    let g = gateway(&p);
    let out = block_on(&p, g.handle(ask("key-batch", "default", 10)));
    assert_eq!(out.status, 403);
    let body = json_of(&out);
    assert_eq!(body["error"]["code"], "route_not_allowed");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("it may use: cheap"));
    let out = block_on(&p, g.handle(ask("key-batch", "up/big", 10)));
    assert_eq!(out.status, 403, "nor an entry named directly");
    assert_eq!(p.requests().len(), 0);
}

#[test]
fn requests_in_flight_are_limited_until_they_end() {
    let p = FakePlatform::new().at(NOON);
    let g = gateway(&p);
    let slow = answer(1, 1).delay(Duration::from_secs(2));
    p.script("https://up.test", [slow, answer(1, 1)]);
    let outs = block_on(
        &p,
        join_all([
            g.handle(ask("key-one", "default", 10)),
            g.handle(ask("key-one", "default", 10)),
        ]),
    );
    assert_eq!((outs[0].status, outs[1].status), (200, 429));
    assert_eq!(header(&outs[1], "retry-after"), "1");
    assert!(json_of(&outs[1])["error"]["message"]
        .as_str()
        .unwrap()
        .contains("1 requests in flight"));
    // The first ended: the next is admitted.
    assert_eq!(
        block_on(&p, g.handle(ask("key-one", "default", 10))).status,
        200
    );
}

#[test]
fn a_streamed_answer_holds_its_place_until_its_body_ends() {
    let p = FakePlatform::new().at(NOON);
    let g = gateway(&p);
    let events = [
        "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2,\"total_tokens\":3}}\n\n",
        "data: [DONE]\n\n",
    ];
    let stream = reply(200)
        .header("content-type", "text/event-stream")
        .chunks(events);
    p.script("https://up.test", [stream, answer(1, 1)]);
    let mut req = ask("key-one", "default", 10);
    req.body = Body::full(
        json!({ "model": "default", "stream": true, "messages": [{ "role": "user", "content": "hi" }] })
            .to_string()
            .into_bytes(),
    );
    let out = block_on(&p, g.handle(req));
    assert_eq!(out.status, 200);
    let mut body = out.stream.expect("a stream");
    assert_eq!(
        block_on(&p, g.handle(ask("key-one", "default", 10))).status,
        429,
        "the stream is still in flight"
    );
    let (mut text, mut end) = (Vec::new(), None);
    while let Some(piece) = block_on(&p, futures_util::StreamExt::next(&mut body)) {
        match piece {
            resilient_llm::gateway::Piece::Bytes(b) => text.extend(b),
            resilient_llm::gateway::Piece::Log(line) => end = Some(line),
        }
    }
    drop(body);
    assert!(String::from_utf8_lossy(&text).contains("[DONE]"));
    let end: Value = serde_json::from_str(&end.expect("the stream's end line")).expect("JSON");
    assert_eq!(
        (end["msg"].as_str(), end["client"].as_str()),
        (Some("stream end"), Some("one"))
    );
    assert_eq!(
        block_on(&p, g.handle(ask("key-one", "default", 10))).status,
        200
    );
    let health = json_of(&page(&p, &g, "/health"));
    let one = &health["clients"][3];
    assert_eq!(one["tokens"], 5, "the stream's 3 and the answer's 2");
    assert_eq!(one["refused"]["inFlight"], 1);
}

#[test]
fn a_daily_budget_refuses_until_the_day_ends() {
    let p = FakePlatform::new().at(NOON);
    let g = gateway(&p);
    // $0.50 an answer at up/big.
    p.script(
        "https://up.test",
        (0..3).map(|_| answer(1_000_000, 1_000_000)),
    );
    assert_eq!(
        block_on(&p, g.handle(ask("key-budget", "default", 10))).status,
        200
    );
    assert_eq!(
        block_on(&p, g.handle(ask("key-budget", "default", 10))).status,
        200
    );
    let out = block_on(&p, g.handle(ask("key-budget", "default", 10)));
    assert_eq!(out.status, 429);
    assert_eq!(
        header(&out, "retry-after"),
        (12 * 3600).to_string(),
        "midnight UTC"
    );
    let health = json_of(&page(&p, &g, "/health"));
    let budget = &health["clients"].as_array().unwrap()[4];
    assert_eq!(budget["spentTodayUsd"], 1.0);
    assert_eq!(budget["refused"]["spend"], 1);
    p.advance(Duration::from_secs(12 * 3600));
    assert_eq!(
        block_on(&p, g.handle(ask("key-budget", "default", 10))).status,
        200
    );
}

#[test]
fn an_admitted_request_fails_over_whatever_its_limits() {
    let p = FakePlatform::new().at(NOON);
    let g = gateway(&p);
    p.script("https://up.test", [reply(503)]);
    p.script("https://alt.test", [answer(1, 1)]);
    // `one` may have one request in flight: its failover is not another.
    let out = block_on(&p, g.handle(ask("key-one", "default", 10)));
    assert_eq!(out.status, 200);
    assert_eq!(header(&out, "x-served-by"), "alt/small");
    assert_eq!(header(&out, "x-attempts"), "2");
}

#[test]
fn an_anthropic_client_is_refused_in_its_own_format() {
    let p = FakePlatform::new().at(NOON);
    let g = gateway(&p);
    p.script("https://alt.test", (0..3).map(|_| answer(1, 1)));
    let ask = || {
        post(
            "/v1/messages",
            "key-batch",
            json!({ "model": "cheap", "max_tokens": 10,
                    "messages": [{ "role": "user", "content": "hi" }] }),
        )
    };
    for _ in 0..3 {
        assert_eq!(block_on(&p, g.handle(ask())).status, 200);
    }
    let out = block_on(&p, g.handle(ask()));
    assert_eq!(out.status, 429);
    let body = json_of(&out);
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "rate_limit_error", "{body}");
    assert!(out.headers.get("retry-after").is_some());
}

#[test]
fn the_log_line_and_metrics_name_the_client_and_never_its_key() {
    let p = FakePlatform::new().at(NOON);
    let g = gateway(&p);
    p.script("https://alt.test", (0..3).map(|_| answer(1, 1)));
    let ok = block_on(&p, g.handle(ask("key-batch", "cheap", 10)));
    let line: Value = serde_json::from_str(&ok.log).expect("a JSON line");
    assert_eq!(line["client"], "batch");
    let refused = block_on(&p, g.handle(ask("key-batch", "default", 10)));
    let line: Value = serde_json::from_str(&refused.log).expect("a JSON line");
    assert_eq!(
        (line["client"].as_str(), line["refused"].as_str()),
        (Some("batch"), Some("route"))
    );
    assert!(!refused.log.contains("key-batch"));
    let metrics = String::from_utf8(page(&p, &g, "/metrics").body).unwrap();
    assert!(
        metrics.contains("llm_gateway_client_requests_total{client=\"batch\"} 1"),
        "{metrics}"
    );
    assert!(metrics
        .contains("llm_gateway_client_rejections_total{client=\"batch\",reason=\"route\"} 1"));
    assert!(metrics.contains("llm_gateway_client_tokens_total{client=\"batch\"} 2"));
    assert!(!metrics.contains("key-"));
}

#[test]
fn configuration_mistakes_are_reported_with_their_paths_at_once() {
    let mut cfg = config();
    cfg["gateway"]["clients"][1]["limits"]["maxInFlight"] = json!(0);
    cfg["gateway"]["clients"][2]["routes"] = json!(["nope"]);
    cfg["gateway"]["clients"][3]["keysEnv"] = json!(["UNSET"]);
    let err = Setup::load(Some(&cfg.to_string()), &secret)
        .err()
        .expect("refused");
    let paths: Vec<String> = err.issues.iter().map(|i| i.path.clone()).collect();
    assert_eq!(
        paths,
        [
            "gateway.clients[1].limits.maxInFlight",
            "gateway.clients[2].routes[0]",
            "gateway.clients[3].keysEnv[0]",
        ],
        "{err}"
    );
    assert!(err.issues[2].message.contains("\"UNSET\" is not set"));
    let mut cfg = config();
    cfg["gateway"]["allowUnauthenticated"] = json!(true);
    let err = Setup::load(Some(&cfg.to_string()), &secret)
        .err()
        .expect("refused");
    assert_eq!(err.issues[0].path, "gateway.allowUnauthenticated");
}
