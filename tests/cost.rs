//! Cost through the gateway, on the fake platform: the exact cost of the
//! fixtures' reported usage in the headers, the log line and `/health`; no
//! usage, no cost; a cut stream's tokens counted; `cheapest` ordering; a
//! route's daily budget refusing (429) or narrowing to cheap entries once
//! spent, and whole again the next UTC day.

use std::future::poll_fn;
use std::time::Duration;

use resilient_llm::gateway::{Gateway, Inbound, Outbound, Piece, Setup};
use resilient_llm::testing::{block_on, reply, BodyEnd, FakePlatform, Reply};
use resilient_llm::{Body, Config, Headers, MemoryStore};
use serde_json::{json, Value};

/// Noon, 2026-12-01 UTC.
const NOON: u64 = 1_796_126_400_000;

fn fixture(path: &str) -> Value {
    let text = std::fs::read_to_string(format!("tests/fixtures/{path}")).expect("fixture");
    serde_json::from_str::<Value>(&text).expect("JSON")["body"].take()
}

fn config(cost: Value) -> Value {
    json!({
        "providers": {
            "strong": { "kind": "anthropic", "baseUrl": "https://strong.test", "apiKey": "sk-s",
                "models": { "claude-sonnet-4-5": { "inputPricePerMtok": 3, "outputPricePerMtok": 15,
                    "cachedInputPricePerMtok": 0.3, "cacheWritePricePerMtok": 3.75 } } },
            "cheap": { "kind": "openai", "baseUrl": "https://cheap.test", "apiKey": "sk-c",
                "models": { "deepseek-reasoner": { "inputPricePerMtok": 0.27, "outputPricePerMtok": 1.1,
                    "cachedInputPricePerMtok": 0.07 } } },
            "free": { "kind": "openai", "baseUrl": "https://free.test", "apiKey": "sk-f" }
        },
        "routes": {
            "default": [ { "provider": "strong", "model": "claude-sonnet-4-5" },
                         { "provider": "cheap", "model": "deepseek-reasoner" } ],
            "unpriced": [ { "provider": "free", "model": "m" } ]
        },
        "retry": { "maxAttempts": 1 },
        "gateway": { "allowUnauthenticated": true },
        "cost": cost
    })
}

fn gateway(p: &FakePlatform, cost: Value) -> Gateway<FakePlatform, MemoryStore> {
    let setup = Setup::load(Some(&config(cost).to_string()), &|_| None).expect("valid");
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

fn get(path: &str) -> Inbound {
    Inbound {
        method: "GET".into(),
        path: path.into(),
        headers: Headers::new(),
        body: Body::full(Vec::new()),
    }
}

fn chat(model: &str) -> Value {
    json!({ "model": model, "max_tokens": 100, "messages": [{ "role": "user", "content": "hi" }] })
}

/// A request that may cost $0.000753 at `strong` (1 input token at $3,
/// 50 output at $15 per million): what it holds on a cap before it goes.
fn small(model: &str) -> Value {
    json!({ "model": model, "max_tokens": 50, "messages": [{ "role": "user", "content": "hi" }] })
}

fn json_of(out: &Outbound) -> Value {
    serde_json::from_slice(&out.body).expect("JSON body")
}

fn log_of(out: &Outbound) -> Value {
    serde_json::from_str(&out.log).expect("JSON log line")
}

fn anthropic_cached() -> Reply {
    reply(200)
        .header("content-type", "application/json")
        .body(fixture("anthropic/ok_thinking_cached.json").to_string())
}

fn openai_cached() -> Reply {
    reply(200)
        .header("content-type", "application/json")
        .body(fixture("openai/ok_reasoning_cached.json").to_string())
}

#[test]
fn the_fixtures_usage_costs_exactly_its_prices() {
    let p = FakePlatform::new().at(NOON);
    let g = gateway(&p, json!({}));
    // 5 plain input tokens at $3, 100 read from the cache at $0.30, 20
    // written to it at $3.75, 50 output at $15 (per million):
    // 15 + 30 + 75 + 750 µ$.
    p.script("https://strong.test", [anthropic_cached()]);
    let out = block_on(&p, g.handle(post("/v1/messages", chat("default"))));
    assert_eq!(out.status, 200);
    assert_eq!(out.headers.get("x-cost-usd"), Some("0.00087"));
    assert_eq!(out.headers.get("x-cost-usd-answer"), Some("0.00087"));
    let log = log_of(&out);
    assert_eq!(
        log["cost"],
        json!({ "answerUsd": 0.00087, "totalUsd": 0.00087 })
    );
    assert_eq!(log["trail"][0]["costUsd"], json!(0.00087));

    // 86 plain input tokens at $0.27, 1920 cached at $0.07, 300 output at
    // $1.10: 23.22 + 134.4 + 330 µ$.
    p.script("https://cheap.test", [openai_cached()]);
    let out = block_on(
        &p,
        g.handle(post(
            "/v1/chat/completions",
            chat("cheap/deepseek-reasoner"),
        )),
    );
    assert_eq!(out.status, 200);
    assert_eq!(out.headers.get("x-cost-usd"), Some("0.00048762"));

    let health = json_of(&block_on(&p, g.handle(get("/health"))));
    assert_eq!(
        health["costs"],
        json!([
            { "provider": "cheap", "model": "deepseek-reasoner", "usd": 0.00048762, "attempts": 1 },
            { "provider": "strong", "model": "claude-sonnet-4-5", "usd": 0.00087, "attempts": 1 }
        ])
    );
    let metrics = String::from_utf8(block_on(&p, g.handle(get("/metrics"))).body).unwrap();
    assert!(
        metrics.contains(
            r#"llm_gateway_cost_usd_total{provider="strong",model="claude-sonnet-4-5"} 0.00087"#
        ),
        "{metrics}"
    );
    let point = g.take_point();
    assert!(point.is_some());
}

#[test]
fn no_reported_usage_or_no_price_is_no_cost_never_zero() {
    let p = FakePlatform::new().at(NOON);
    let g = gateway(&p, json!({}));
    let mut body = fixture("openai/ok_reasoning_cached.json");
    body.as_object_mut().unwrap().remove("usage");
    p.script(
        "https://cheap.test",
        [reply(200)
            .header("content-type", "application/json")
            .body(body.to_string())],
    );
    let out = block_on(
        &p,
        g.handle(post(
            "/v1/chat/completions",
            chat("cheap/deepseek-reasoner"),
        )),
    );
    assert_eq!(out.status, 200);
    assert_eq!(out.headers.get("x-cost-usd"), None);
    assert_eq!(out.headers.get("x-cost-usd-answer"), None);
    let log = log_of(&out);
    assert!(log.get("cost").is_none(), "{log}");
    assert!(log["trail"][0].get("costUsd").is_none(), "{log}");
    let point = g.take_point().unwrap();
    assert_eq!(point.blobs.len(), 5, "no cost blob");
    assert_eq!(point.doubles.len(), 4, "no cost double");

    // Usage, but the model has no price.
    p.script("https://free.test", [openai_cached()]);
    let out = block_on(&p, g.handle(post("/v1/chat/completions", chat("unpriced"))));
    assert_eq!(out.status, 200);
    assert_eq!(out.headers.get("x-cost-usd"), None);
    let health = json_of(&block_on(&p, g.handle(get("/health"))));
    assert!(health.get("costs").is_none(), "{health}");
}

/// An Anthropic stream that reports its input tokens and is cut before
/// any text: the attempt's tokens are paid for.
fn anthropic_cut_before_text() -> Reply {
    let start = json!({ "type": "message_start", "message": { "id": "m", "type": "message",
        "role": "assistant", "content": [], "model": "claude-sonnet-4-5", "stop_reason": null,
        "usage": { "input_tokens": 1000, "output_tokens": 1 } } });
    reply(200)
        .header("content-type", "text/event-stream")
        .chunks([format!("event: message_start\ndata: {start}\n\n")])
        .cut_after(1, BodyEnd::Reset)
}

fn openai_stream(usage: Value) -> Reply {
    let chunk = |delta: Value, finish: Value| {
        let c = json!({ "id": "c", "object": "chat.completion.chunk", "created": 1,
            "model": "deepseek-reasoner", "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }] });
        format!("data: {c}\n\n")
    };
    let last = json!({ "id": "c", "object": "chat.completion.chunk", "created": 1,
        "model": "deepseek-reasoner", "choices": [], "usage": usage });
    reply(200)
        .header("content-type", "text/event-stream")
        .chunks([
            chunk(json!({ "role": "assistant", "content": "Hi" }), Value::Null),
            chunk(json!({}), json!("stop")),
            format!("data: {last}\n\n"),
            "data: [DONE]\n\n".to_string(),
        ])
}

/// The body, the SSE text and the end-of-stream log line.
fn run_stream(
    p: &FakePlatform,
    g: &Gateway<FakePlatform, MemoryStore>,
    r: Inbound,
) -> (Outbound, String, Value) {
    let mut out = block_on(p, g.handle(r));
    let mut stream = out.stream.take().expect("a stream");
    let mut bytes = Vec::new();
    let mut log = None;
    block_on(p, async {
        while let Some(piece) = poll_fn(|cx| stream.as_mut().poll_next(cx)).await {
            match piece {
                Piece::Bytes(b) => bytes.extend(b),
                Piece::Log(l) => log = Some(l),
            }
        }
    });
    let log = serde_json::from_str(&log.expect("an end line")).unwrap();
    (out, String::from_utf8(bytes).unwrap(), log)
}

#[test]
fn a_cut_stream_s_tokens_are_paid_for_and_the_end_has_the_final_figure() {
    let p = FakePlatform::new().at(NOON);
    let g = gateway(&p, json!({}));
    p.script("https://strong.test", [anthropic_cut_before_text()]);
    p.script(
        "https://cheap.test",
        [openai_stream(
            json!({ "prompt_tokens": 100, "completion_tokens": 10 }),
        )],
    );
    let mut body = chat("default");
    body["stream"] = json!(true);
    let (out, sse, end) = run_stream(&p, &g, post("/v1/chat/completions", body));
    assert_eq!(out.status, 200);
    assert_eq!(
        out.headers.get("x-served-by"),
        Some("cheap/deepseek-reasoner")
    );
    // At the commit point: the cut attempt's 1000 input and 1 output
    // tokens at $3 and $15 per million; the answer has no usage yet.
    assert_eq!(out.headers.get("x-cost-usd"), Some("0.003015"));
    assert_eq!(out.headers.get("x-cost-usd-answer"), None);
    // At the end: plus 100 × 0.27 + 10 × 1.1 µ$ for the answer.
    assert_eq!(
        end["cost"],
        json!({ "answerUsd": 0.000038, "totalUsd": 0.003053 })
    );
    assert!(
        sse.contains(": cost usd=0.003053 answer=0.000038\n\n"),
        "{sse}"
    );
    let health = json_of(&block_on(&p, g.handle(get("/health"))));
    assert_eq!(health["costs"][0]["usd"], json!(0.000038));
    assert_eq!(health["costs"][1]["usd"], json!(0.003015));
}

#[test]
fn cheapest_serves_from_the_entry_expected_to_cost_least() {
    let p = FakePlatform::new().at(NOON);
    let g = gateway(
        &p,
        json!({ "routes": { "default": { "strategy": "cheapest" } } }),
    );
    p.script("https://cheap.test", [openai_cached()]);
    let out = block_on(&p, g.handle(post("/v1/chat/completions", chat("default"))));
    assert_eq!(out.status, 200);
    assert_eq!(
        out.headers.get("x-served-by"),
        Some("cheap/deepseek-reasoner")
    );
    assert_eq!(p.requests_to("https://strong.test"), 0);

    // Failure handling as always: the cheap one fails, the strong one answers.
    p.script("https://cheap.test", [reply(503)]);
    p.script("https://strong.test", [anthropic_cached()]);
    let out = block_on(&p, g.handle(post("/v1/chat/completions", chat("default"))));
    assert_eq!(out.status, 200);
    assert_eq!(
        out.headers.get("x-served-by"),
        Some("strong/claude-sonnet-4-5")
    );
    assert_eq!(log_of(&out)["trail"][0]["provider"], "cheap");

    // "ordered", the default, keeps the configured order.
    let g = gateway(&p, json!({}));
    p.script("https://strong.test", [anthropic_cached()]);
    let out = block_on(&p, g.handle(post("/v1/chat/completions", chat("default"))));
    assert_eq!(
        out.headers.get("x-served-by"),
        Some("strong/claude-sonnet-4-5")
    );
}

#[test]
fn a_spent_budget_answers_429_in_the_client_s_format_until_the_day_ends() {
    let p = FakePlatform::new().at(NOON);
    let g = gateway(
        &p,
        json!({ "routes": { "default": { "dailyBudgetUsd": 0.0008 } } }),
    );
    p.script("https://strong.test", [anthropic_cached()]);
    let out = block_on(&p, g.handle(post("/v1/messages", small("default"))));
    assert_eq!(out.status, 200, "under budget before the call");
    let health = json_of(&block_on(&p, g.handle(get("/health"))));
    assert_eq!(
        health["spend"],
        json!([{ "route": "default", "budgetUsd": 0.0008, "spentUsd": 0.00087,
                 "exhausted": true, "resetsAt": NOON + 12 * 3600 * 1000 }])
    );

    let out = block_on(&p, g.handle(post("/v1/messages", small("default"))));
    assert_eq!(out.status, 429);
    assert_eq!(out.headers.get("retry-after"), Some("43200"));
    let body = json_of(&out);
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "rate_limit_error");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("route \"default\" has spent its daily budget of $0.0008"),
        "{message}"
    );
    let out = block_on(&p, g.handle(post("/v1/chat/completions", small("default"))));
    assert_eq!(out.status, 429);
    assert_eq!(json_of(&out)["error"]["code"], "spend_cap_reached");
    let mut streamed = small("default");
    streamed["stream"] = json!(true);
    let out = block_on(&p, g.handle(post("/v1/chat/completions", streamed)));
    assert_eq!(out.status, 429, "a stream is refused before it starts");
    assert_eq!(
        p.requests_to("https://strong.test"),
        1,
        "no call once spent"
    );

    // Other routes are not capped; the next UTC day starts from nothing.
    p.advance(Duration::from_millis(12 * 3600 * 1000));
    p.script("https://strong.test", [anthropic_cached()]);
    let out = block_on(&p, g.handle(post("/v1/messages", small("default"))));
    assert_eq!(out.status, 200);
}

#[test]
fn a_spent_budget_can_narrow_the_route_to_entries_under_a_price() {
    let p = FakePlatform::new().at(NOON);
    let g = gateway(
        &p,
        json!({ "routes": { "default": { "dailyBudgetUsd": 0.0008,
                                         "overBudget": { "maxPricePerMtok": 2 } } } }),
    );
    p.script("https://strong.test", [anthropic_cached()]);
    assert_eq!(
        block_on(&p, g.handle(post("/v1/messages", small("default")))).status,
        200
    );
    p.script("https://cheap.test", [openai_cached(), reply(503)]);
    let out = block_on(&p, g.handle(post("/v1/messages", small("default"))));
    assert_eq!(out.status, 200);
    assert_eq!(
        out.headers.get("x-served-by"),
        Some("cheap/deepseek-reasoner")
    );
    assert_eq!(p.requests_to("https://strong.test"), 1);
    // The cheap entry failing leaves nothing under the price: the route's
    // error, not a call to the dear one.
    let out = block_on(&p, g.handle(post("/v1/messages", small("default"))));
    assert_eq!(out.status, 503);
    assert_eq!(p.requests_to("https://strong.test"), 1);
}

#[test]
fn cost_settings_are_checked_with_their_paths() {
    let mut cfg = config(json!({
        "prices": { "nobody/m": { "inputPerMtok": 1, "outputPerMtok": 1 },
                    "bad": { "inputPerMtok": 1, "outputPerMtok": 1 },
                    "free/m": { "inputPerMtok": -1, "outputPerMtok": 1 } },
        "routes": { "nowhere": { "strategy": "cheapest" },
                    "default": { "dailyBudgetUsd": -3 },
                    "unpriced": { "overBudget": "reject" } }
    }));
    cfg["providers"]["cheap"]["models"]["half"] = json!({ "inputPricePerMtok": 1 });
    let err = Config::parse(&cfg.to_string())
        .unwrap()
        .validate(&|_| None, &[])
        .err()
        .expect("invalid");
    let text = err.to_string();
    for want in [
        "providers.cheap.models.half: a price needs both inputPricePerMtok and outputPricePerMtok",
        "cost.prices.nobody/m: unknown provider \"nobody\"",
        "cost.prices.bad: name a model as provider/model",
        "cost.prices.free/m.inputPerMtok: must be a number from 0 to 1000000",
        "cost.routes.nowhere: unknown route \"nowhere\"",
        "cost.routes.default.dailyBudgetUsd: must be a non-negative number of dollars",
        "cost.routes.unpriced.overBudget: needs dailyBudgetUsd",
    ] {
        assert!(text.contains(want), "{want}\nin\n{text}");
    }
    let unknown = json!({ "cost": { "routes": { "default": { "strategy": "priciest" } } } });
    assert!(Config::parse(&unknown.to_string()).is_err());
}
