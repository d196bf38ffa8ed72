//! Spend caps under concurrency and every way of reaching a capped entry,
//! through the gateway on the fake platform with the fake fleet spend
//! object: a request holds what it may cost before it goes (its input
//! estimated from its text, its output at `max_tokens`, priced), fleet-wide,
//! and the hold is settled with the usage reported; a cap counts its
//! route's entries however a request names them.

use std::rc::Rc;
use std::time::Duration;

use futures_util::future::join_all;
use resilient_llm::fleet::fake_spend::FakeSpendObject;
use resilient_llm::fleet::FleetSpend;
use resilient_llm::gateway::{Gateway, Inbound, Outbound, Setup};
use resilient_llm::testing::{block_on, reply, FakePlatform, Reply};
use resilient_llm::{Body, Headers, MemoryStore};
use serde_json::{json, Value};

/// Noon, 2026-12-01 UTC.
const NOON: u64 = 1_796_126_400_000;

/// Picodollars per dollar.
const USD: u64 = 1_000_000_000_000;

/// `capped` may spend $1 a day on `up/big` ($0.10 input, $0.40 output per
/// million tokens); `mixed` shares that entry, with an uncapped one after
/// it.
fn config() -> Value {
    json!({
        "providers": {
            "up": { "kind": "openai", "baseUrl": "https://up.test", "apiKey": "sk-u",
                "models": { "big": { "inputPricePerMtok": 0.1, "outputPricePerMtok": 0.4 } } },
            "alt": { "kind": "openai", "baseUrl": "https://alt.test", "apiKey": "sk-a",
                "models": { "small": { "inputPricePerMtok": 0, "outputPricePerMtok": 0 } } }
        },
        "routes": {
            "capped": [{ "provider": "up", "model": "big" }],
            "mixed": [{ "provider": "up", "model": "big" }, { "provider": "alt", "model": "small" }]
        },
        "retry": { "maxAttempts": 1 },
        "gateway": { "allowUnauthenticated": true },
        "cost": { "routes": { "capped": { "dailyBudgetUsd": 1 } } }
    })
}

/// An isolate: a gateway whose spending goes through `object`.
fn isolate(
    p: &FakePlatform,
    object: &FakeSpendObject,
    name: &str,
) -> Gateway<FakePlatform, MemoryStore> {
    let ledger = FleetSpend::new(object.clone(), Duration::from_secs(1), name);
    let setup = Setup::load(Some(&config().to_string()), &|_| None)
        .expect("valid")
        .spend_ledger(Rc::new(ledger));
    let store = MemoryStore::new(setup.breaker());
    setup.into_gateway(p.clone(), store)
}

/// An answer reporting a million tokens in and a million out ($0.50 at
/// `up/big`), after a second.
fn million(model: &str) -> Reply {
    let body = json!({ "id": "c", "object": "chat.completion", "created": 1, "model": model,
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": "ok" },
                      "finish_reason": "stop" }],
        "usage": { "prompt_tokens": 1_000_000, "completion_tokens": 1_000_000, "total_tokens": 2_000_000 } });
    reply(200)
        .header("content-type", "application/json")
        .body(body.to_string())
        .delay(Duration::from_secs(1))
}

/// "hi" for up to a million tokens: held at $0.4000001 (1 input token, a
/// million output).
fn ask(model: &str) -> Inbound {
    ask_for(model, 1_000_000)
}

/// "hi" for up to `max_tokens`.
fn ask_for(model: &str, max_tokens: u32) -> Inbound {
    let body = json!({ "model": model, "max_tokens": max_tokens,
                       "messages": [{ "role": "user", "content": "hi" }] });
    Inbound {
        method: "POST".into(),
        path: "/v1/chat/completions".into(),
        headers: [("content-type", "application/json")]
            .into_iter()
            .collect::<Headers>(),
        body: Body::full(body.to_string().into_bytes()),
    }
}

const HELD: u64 = 400_000_100_000;
const COST: u64 = USD / 2;

fn spent_usd(p: &FakePlatform, g: &Gateway<FakePlatform, MemoryStore>) -> f64 {
    let get = Inbound {
        method: "GET".into(),
        path: "/health".into(),
        headers: Headers::new(),
        body: Body::full(Vec::new()),
    };
    let out = block_on(p, g.handle(get));
    let health: Value = serde_json::from_slice(&out.body).expect("JSON");
    health["spend"][0]["spentUsd"]
        .as_f64()
        .expect("a capped route")
}

fn code(out: &Outbound) -> Value {
    let body: Value = serde_json::from_slice(&out.body).expect("JSON");
    body["error"]["code"].clone()
}

/// What bounds the overshoot: the holds admitted fit under the budget
/// (`served × HELD ≤ budget`), and each request spent its reported usage,
/// which is above its hold only by what its input was underestimated.
fn assert_bounded(served: u64, spent: u64) {
    assert!(served * HELD <= USD, "holds fit under the budget: {served}");
    assert_eq!(served, USD / HELD, "and as many as fit");
    assert_eq!(spent, served * COST, "each request's reported usage");
    let overshoot = spent.saturating_sub(USD);
    assert!(overshoot <= served * (COST - HELD), "{overshoot}");
}

#[test]
fn twenty_concurrent_requests_hold_the_budget_before_they_go() {
    let p = FakePlatform::new().at(NOON);
    let object = FakeSpendObject::new(&p);
    let g = isolate(&p, &object, "one");
    p.script("https://up.test", (0..20).map(|_| million("big")));
    let outs = block_on(&p, join_all((0..20).map(|_| g.handle(ask("capped")))));
    let served = outs.iter().filter(|o| o.status == 200).count() as u64;
    for o in outs.iter().filter(|o| o.status != 200) {
        assert_eq!(o.status, 429);
        assert_eq!(code(o), "spend_cap_reached");
    }
    assert_eq!(p.requests_to("https://up.test") as u64, served);
    object.pump();
    let spent = object.tally("capped").expect("booked").spent;
    assert_eq!(object.held("capped"), (0, 0), "every hold settled");
    println!(
        "20 concurrent, one isolate: {served} served, spentUsd {} against a $1 cap",
        spent as f64 / USD as f64
    );
    assert_bounded(served, spent);
    assert_eq!(spent_usd(&p, &g), spent as f64 / USD as f64);
}

#[test]
fn twenty_concurrent_requests_through_two_isolates_share_one_budget() {
    let p = FakePlatform::new().at(NOON);
    let object = FakeSpendObject::new(&p);
    let (a, b) = (isolate(&p, &object, "a"), isolate(&p, &object, "b"));
    p.script("https://up.test", (0..20).map(|_| million("big")));
    let outs = block_on(
        &p,
        join_all((0..20).map(|i| if i % 2 == 0 { &a } else { &b }.handle(ask("capped")))),
    );
    let served = outs.iter().filter(|o| o.status == 200).count() as u64;
    assert!(outs.iter().all(|o| o.status == 200 || o.status == 429));
    object.pump();
    let spent = object.tally("capped").expect("booked").spent;
    println!(
        "20 concurrent, two isolates: {served} served, spentUsd {} against a $1 cap",
        spent as f64 / USD as f64
    );
    assert_bounded(served, spent);
    // Each isolate's view has both isolates' spending once asked again.
    p.advance(Duration::from_secs(1));
    let _ = spent_usd(&p, &b);
    object.pump();
    assert_eq!(spent_usd(&p, &b), spent as f64 / USD as f64);
}

#[test]
fn a_cap_counts_its_entries_however_a_request_names_them() {
    let p = FakePlatform::new().at(NOON);
    let object = FakeSpendObject::new(&p);
    let g = isolate(&p, &object, "one");
    // Reached as `provider/model` and as the model's own name, the entry
    // spends the capped route's budget: $1.
    p.script("https://up.test", [million("big"), million("big")]);
    assert_eq!(block_on(&p, g.handle(ask("up/big"))).status, 200);
    assert_eq!(block_on(&p, g.handle(ask("big"))).status, 200);
    object.pump();
    assert_eq!(object.tally("capped").map(|t| t.spent), Some(USD));
    // Spent: every way to it is refused, and a route sharing it fails
    // over to its uncapped entry.
    for name in ["capped", "up/big", "big"] {
        let out = block_on(&p, g.handle(ask(name)));
        assert_eq!(out.status, 429, "{name}");
        assert_eq!(code(&out), "spend_cap_reached", "{name}");
    }
    p.script("https://alt.test", [million("small")]);
    let out = block_on(&p, g.handle(ask("mixed")));
    assert_eq!(out.status, 200);
    assert_eq!(out.headers.get("x-served-by"), Some("alt/small"));
    assert_eq!(p.requests_to("https://up.test"), 2, "no call once spent");
}

#[test]
fn a_request_that_may_cost_more_than_is_left_fails_over_or_is_refused() {
    let p = FakePlatform::new().at(NOON);
    let object = FakeSpendObject::new(&p);
    let g = isolate(&p, &object, "one");
    p.script("https://up.test", [million("big")]);
    assert_eq!(block_on(&p, g.handle(ask("capped"))).status, 200);
    object.pump();
    // $0.50 left; a request that may cost $0.4000001 fits, one that may
    // cost $0.8000001 does not.
    let out = block_on(&p, g.handle(ask_for("up/big", 2_000_000)));
    assert_eq!(out.status, 429);
    let body: Value = serde_json::from_slice(&out.body).unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("route \"capped\""),
        "{body}"
    );
    assert_eq!(p.requests_to("https://up.test"), 1);
    p.script("https://alt.test", [million("small")]);
    let out = block_on(&p, g.handle(ask_for("mixed", 2_000_000)));
    assert_eq!(out.headers.get("x-served-by"), Some("alt/small"));
    p.script("https://up.test", [million("big")]);
    assert_eq!(block_on(&p, g.handle(ask("capped"))).status, 200, "fits");
}
