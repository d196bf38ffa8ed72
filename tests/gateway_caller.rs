//! A gateway whose caller holds the providers' keys itself (the npm
//! package's `client.fetch`) answers an exhausted route with the status its
//! failures share, as the package's `chat()` rejects; a gateway of its own
//! clients (the Worker) answers 503. No ports, no sleeps.

use std::rc::Rc;

use resilient_llm::gateway::{Auth, Gateway, Inbound};
use resilient_llm::testing::{block_on, reply, FakePlatform};
use resilient_llm::{Body, Config, Headers};
use serde_json::json;

fn client(p: &FakePlatform) -> resilient_llm::Client<FakePlatform> {
    Config::parse(
        &json!({
            "providers": {
                "a": { "kind": "openai", "baseUrl": "https://a.test", "apiKey": "sk-a" },
                "b": { "kind": "openai", "baseUrl": "https://b.test", "apiKey": "sk-b" }
            },
            "routes": {
                "one": [{ "provider": "a", "model": "m" }],
                "two": [{ "provider": "a", "model": "m" }, { "provider": "b", "model": "m" }]
            },
            "retry": { "maxAttempts": 1 }
        })
        .to_string(),
    )
    .unwrap()
    .client(p.clone(), vec![], &|_| None)
    .unwrap()
}

fn ask(route: &str) -> Inbound {
    Inbound {
        method: "POST".into(),
        path: "/v1/chat/completions".into(),
        headers: [("content-type", "application/json")]
            .into_iter()
            .collect::<Headers>(),
        body: Body::full(
            json!({ "model": route, "messages": [{ "role": "user", "content": "hi" }] })
                .to_string()
                .into_bytes(),
        ),
    }
}

/// The statuses of `route` answered after the providers answer `a` and `b`.
fn statuses(route: &str, a: u16, b: u16) -> (u16, u16) {
    let answer = |holds_keys: bool| {
        let p = FakePlatform::new();
        p.script("https://a.test", [reply(a)]);
        p.script("https://b.test", [reply(b)]);
        let gateway = Gateway::shared(Rc::new(client(&p)), Auth::open());
        let gateway = if holds_keys {
            gateway.caller_holds_keys()
        } else {
            gateway
        };
        block_on(&p, gateway.handle(ask(route))).status
    };
    (answer(true), answer(false))
}

#[test]
fn a_lone_401_is_a_401_for_a_caller_holding_the_keys() {
    assert_eq!(statuses("one", 401, 200), (401, 503));
}

#[test]
fn a_route_of_429s_is_a_429_and_mixed_failures_a_503() {
    assert_eq!(statuses("two", 429, 429), (429, 503));
    assert_eq!(statuses("two", 429, 500), (503, 503));
}
