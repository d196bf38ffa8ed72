//! Load shed by priority through the gateway on the fake platform: while
//! every provider of a route fails, its `sheddable` requests are refused
//! first, then its `standard` ones, and `critical` ones still reach the
//! providers; the depth moves once a second and holds inside its band;
//! a header lowers a class and never raises it; a shed request gets a 503
//! in the client's format with a spread `retry-after`; `/health`,
//! `/metrics` and the log line say so.

use std::time::Duration;

use resilient_llm::gateway::{Gateway, Inbound, Outbound, Setup};
use resilient_llm::testing::{block_on, reply, FakePlatform, Reply};
use resilient_llm::{Body, Headers, MemoryStore};
use serde_json::{json, Value};

/// Noon, 2026-12-01 UTC.
const NOON: u64 = 1_796_126_400_000;

fn config() -> Value {
    json!({
        "providers": { "up": { "kind": "openai", "baseUrl": "https://up.test", "apiKey": "sk-up" } },
        "routes": { "main": [{ "provider": "up", "model": "big" }] },
        "retry": { "maxAttempts": 1 },
        // A breaker that never opens: every request reaches the provider.
        "breaker": { "failureThreshold": 10000 },
        "gateway": {
            "clients": [
                { "name": "web", "keysEnv": ["WEB"], "priority": "critical" },
                { "name": "app", "keysEnv": ["APP"] },
                { "name": "bulk", "keysEnv": ["BULK"], "priority": "sheddable" }
            ]
        }
    })
}

fn secret(name: &str) -> Option<String> {
    Some(format!("key-{}", name.to_lowercase())).filter(|_| ["WEB", "APP", "BULK"].contains(&name))
}

type G = Gateway<FakePlatform, MemoryStore>;

fn gateway(p: &FakePlatform) -> G {
    gateway_of(p, &config(), &secret)
}

/// A gateway of `cfg` whose secrets `secret` holds.
fn gateway_of(p: &FakePlatform, cfg: &Value, secret: &dyn Fn(&str) -> Option<String>) -> G {
    let setup = Setup::load(Some(&cfg.to_string()), secret).expect("valid");
    let store = MemoryStore::new(setup.breaker());
    setup.into_gateway(p.clone(), store)
}

/// A gateway whose `bulk` client may send 100 requests a minute.
fn limited_bulk(p: &FakePlatform) -> G {
    let mut cfg = config();
    cfg["gateway"]["clients"][2]["limits"] = json!({ "requestsPerMinute": 100 });
    gateway_of(p, &cfg, &secret)
}

fn ok() -> Reply {
    let body = json!({ "id": "c", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": "ok" },
                      "finish_reason": "stop" }],
        "usage": { "prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2 } });
    reply(200)
        .header("content-type", "application/json")
        .body(body.to_string())
}

fn ask(key: &str, priority: Option<&str>, path: &str) -> Inbound {
    let mut headers: Headers = [
        ("content-type", "application/json"),
        ("authorization", &format!("Bearer {key}")),
    ]
    .into_iter()
    .collect();
    if let Some(p) = priority {
        headers.insert("x-priority", p);
    }
    let body = json!({ "model": "main", "max_tokens": 8,
                       "messages": [{ "role": "user", "content": "hi" }] });
    Inbound {
        method: "POST".into(),
        path: path.into(),
        headers,
        body: Body::full(body.to_string().into_bytes()),
    }
}

fn send(p: &FakePlatform, g: &G, key: &str) -> Outbound {
    block_on(p, g.handle(ask(key, None, "/v1/chat/completions")))
}

/// What each client's requests got in one second of `each` requests a
/// client, the provider answering `reply`: (reached the provider, shed).
/// A reply is scripted only when none waits (a shed request leaves its
/// own for the next): at most one of a phase's replies answers the next.
fn second(p: &FakePlatform, g: &G, each: usize, reply: impl Fn() -> Reply) -> [(usize, usize); 3] {
    let mut out = [(0, 0); 3];
    for _ in 0..each {
        for (i, key) in ["key-web", "key-app", "key-bulk"].into_iter().enumerate() {
            let before = p.requests_to("https://up.test");
            if !waiting(p) {
                p.script("https://up.test", [reply()]);
                SCRIPTED.with(|n| n.set(n.get() + 1));
            }
            let res = send(p, g, key);
            let body: Value = serde_json::from_slice(&res.body).unwrap_or_default();
            if res.status == 503 && body["error"]["code"] == "load_shed" {
                out[i].1 += 1;
            }
            out[i].0 += p.requests_to("https://up.test") - before;
        }
    }
    p.advance(Duration::from_millis(1000));
    out
}

thread_local! {
    /// Replies scripted so far (each test runs on a thread of its own).
    static SCRIPTED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Whether a scripted reply waits for a request.
fn waiting(p: &FakePlatform) -> bool {
    SCRIPTED.with(|n| n.get()) > p.requests_to("https://up.test")
}

fn header<'a>(out: &'a Outbound, name: &str) -> Option<&'a str> {
    out.headers.get(name)
}

#[test]
fn sheddable_goes_first_then_standard_and_critical_still_reaches_the_providers() {
    let p = FakePlatform::new().at(NOON);
    let g = gateway(&p);
    // Healthy: nothing shed.
    assert_eq!(second(&p, &g, 4, ok), [(4, 0), (4, 0), (4, 0)]);
    // Every request fails: the depth rises a quarter a second.
    let mut seconds = Vec::new();
    for _ in 0..10 {
        seconds.push(second(&p, &g, 4, || reply(529)));
    }
    // Sheddable is shed from the second second on, a quarter more each;
    // standard once sheddable is gone; critical never.
    let bulk: Vec<usize> = seconds.iter().map(|s| s[2].1).collect();
    let app: Vec<usize> = seconds.iter().map(|s| s[1].1).collect();
    let web: Vec<usize> = seconds.iter().map(|s| s[0].0).collect();
    assert_eq!(bulk, [0, 1, 2, 3, 4, 4, 4, 4, 4, 4], "{seconds:?}");
    assert_eq!(app, [0, 0, 0, 0, 0, 1, 2, 3, 4, 4], "{seconds:?}");
    assert_eq!(web, [4; 10], "critical always reaches the provider");
    // The providers answer again: the depth comes down a tenth a second,
    // standard back before sheddable.
    let mut back = Vec::new();
    for _ in 0..24 {
        back.push(second(&p, &g, 4, ok));
    }
    assert_eq!(back[0][1].1, 4, "held at once: {back:?}");
    let app_back = back.iter().position(|s| s[1].1 == 0).unwrap();
    let bulk_first = back.iter().position(|s| s[2].0 > 0).unwrap();
    assert!(app_back < bulk_first, "{back:?}");
    assert!(
        back[bulk_first][2].1 > 0,
        "sheddable comes back a share at a time: {back:?}"
    );
    assert_eq!(back[23], [(4, 0), (4, 0), (4, 0)], "{back:?}");
}

#[test]
fn a_shed_request_is_a_503_in_its_format_with_a_spread_retry_after() {
    let p = FakePlatform::new().at(NOON).random([0.0, 1.0, 0.5]);
    let g = gateway(&p);
    for _ in 0..8 {
        second(&p, &g, 3, || reply(503));
    }
    let res = send(&p, &g, "key-bulk");
    assert_eq!(res.status, 503);
    let body: Value = serde_json::from_slice(&res.body).unwrap();
    assert_eq!(body["error"]["code"], "load_shed", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("route \"main\" is shedding sheddable requests"),
        "{message}"
    );
    let ms: u64 = header(&res, "retry-after-ms").unwrap().parse().unwrap();
    assert!((1000..=5000).contains(&ms), "{ms}");
    assert_eq!(
        header(&res, "retry-after").unwrap(),
        ms.div_ceil(1000).to_string()
    );
    let res = block_on(&p, g.handle(ask("key-bulk", None, "/v1/messages")));
    assert_eq!(res.status, 503);
    let body: Value = serde_json::from_slice(&res.body).unwrap();
    assert_eq!(body["type"], "error", "Anthropic's shape: {body}");
    // The log line names the class and the refusal.
    let line: Value = serde_json::from_str(&res.log).unwrap();
    assert_eq!(
        (
            line["client"].as_str(),
            line["priority"].as_str(),
            line["refused"].as_str()
        ),
        (Some("bulk"), Some("sheddable"), Some("shed"))
    );
}

#[test]
fn a_header_lowers_a_class_and_never_raises_it() {
    let p = FakePlatform::new().at(NOON);
    let g = gateway(&p);
    for _ in 0..6 {
        second(&p, &g, 3, || reply(529));
    }
    // Deep enough that no sheddable request passes, and standard ones do.
    if !waiting(&p) {
        p.script("https://up.test", [reply(529)]);
        SCRIPTED.with(|n| n.set(n.get() + 1));
    }
    let lowered = block_on(
        &p,
        g.handle(ask("key-web", Some("sheddable"), "/v1/chat/completions")),
    );
    assert_eq!(lowered.status, 503, "critical lowered to sheddable is shed");
    let raised = block_on(
        &p,
        g.handle(ask("key-bulk", Some("critical"), "/v1/chat/completions")),
    );
    assert_eq!(raised.status, 503, "sheddable is not raised");
    let before = p.requests_to("https://up.test");
    let own = block_on(
        &p,
        g.handle(ask("key-web", Some("critical"), "/v1/chat/completions")),
    );
    let body: Value = serde_json::from_slice(&own.body).unwrap();
    assert_ne!(body["error"]["code"], "load_shed", "{body}");
    assert_eq!(
        p.requests_to("https://up.test"),
        before + 1,
        "critical reaches the provider"
    );
    let bad = block_on(
        &p,
        g.handle(ask("key-web", Some("urgent"), "/v1/chat/completions")),
    );
    assert_eq!(bad.status, 400);
    let body: Value = serde_json::from_slice(&bad.body).unwrap();
    assert_eq!(body["error"]["code"], "invalid_priority", "{body}");
}

#[test]
fn health_and_metrics_show_each_route_s_shedding_and_each_client_s_class() {
    let p = FakePlatform::new().at(NOON);
    let g = gateway(&p);
    for _ in 0..6 {
        second(&p, &g, 2, || reply(529));
    }
    let page = |path: &str| {
        let req = Inbound {
            method: "GET".into(),
            path: path.into(),
            headers: [("x-api-key", "key-web")].into_iter().collect::<Headers>(),
            body: Body::full(Vec::new()),
        };
        block_on(&p, g.handle(req))
    };
    let health: Value = serde_json::from_slice(&page("/health").body).unwrap();
    let row = &health["shedding"][0];
    assert_eq!(row["route"], "main", "{health}");
    assert!(row["depth"].as_f64().unwrap() >= 1.0, "{row}");
    assert_eq!(row["admitted"]["sheddable"], 0.0);
    assert!(row["shed"]["sheddable"].as_u64().unwrap() > 0);
    let bulk = health["clients"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "bulk")
        .unwrap()
        .clone();
    assert_eq!(bulk["priority"], "sheddable");
    assert_eq!(bulk["refused"]["shed"], row["shed"]["sheddable"]);
    let metrics = String::from_utf8(page("/metrics").body).unwrap();
    // Every sheddable request shed; the four failing requests a second
    // left are too few to go deeper.
    assert!(
        metrics.contains("llm_gateway_route_shed_depth{route=\"main\"} 1.0"),
        "{metrics}"
    );
    assert!(
        metrics.contains("llm_gateway_client_rejections_total{client=\"bulk\",reason=\"shed\"}")
    );
}

#[test]
fn a_shed_request_counts_toward_none_of_its_clients_limits() {
    let p = FakePlatform::new().at(NOON);
    let g = limited_bulk(&p);
    let mut shed = 0;
    let mut last = None;
    for _ in 0..6 {
        let s = second(&p, &g, 4, || reply(529));
        shed += s[2].1;
        last = Some(s);
    }
    assert!(shed > 0, "{last:?}");
    p.script("https://up.test", [reply(529)]);
    let out = send(&p, &g, "key-bulk");
    assert_eq!(out.status, 503);
    // 24 asked, of which `shed` were shed: those did not count.
    let admitted = 24 - shed;
    assert_eq!(
        header(&out, "x-ratelimit-remaining-requests"),
        Some((100 - admitted).to_string().as_str()),
        "{shed} shed"
    );
}

#[test]
fn the_library_sheds_by_each_call_s_priority() {
    use resilient_llm::testing::{err, ScriptedProvider};
    use resilient_llm::{
        CallOptions, ChatRequest, Client, Entry, Error, ErrorKind, Message, Priority, Upstream,
    };
    let p = FakePlatform::new().at(NOON);
    let down = ScriptedProvider::new(&p, "down", (0..200).map(|_| err(ErrorKind::Server, 503)));
    let client = Client::builder(p.clone())
        .upstream("down", Upstream::Custom(Box::new(down)))
        .route("default", vec![Entry::new("down", "m")])
        .build();
    let ask = |priority| {
        let opts = CallOptions {
            priority,
            ..CallOptions::default()
        };
        block_on(
            &p,
            client.chat_with(ChatRequest::new(vec![Message::user("hi")]), opts),
        )
    };
    let mut shed = Vec::new();
    for _ in 0..6 {
        let mut n = 0;
        for _ in 0..6 {
            if let Err(Error::Shed { priority, .. }) = ask(Priority::Sheddable) {
                assert_eq!(priority, "sheddable");
                n += 1;
            }
            assert!(!matches!(ask(Priority::Standard), Err(Error::Shed { .. })));
        }
        shed.push(n);
        p.advance(Duration::from_secs(1));
    }
    assert_eq!(shed[0], 0);
    assert!(shed.windows(2).all(|w| w[0] <= w[1]), "{shed:?}");
    assert_eq!(shed[5], 6, "every sheddable call shed: {shed:?}");
    let e = ask(Priority::Sheddable).unwrap_err();
    assert_eq!((e.status(), e.code()), (503, "load_shed"));
    assert!(e.retry_after().is_some());
    assert!(client.shedding()[0].depth >= 1.0);
    // A stream of the same class is refused when it opens, before anything is sent.
    let opts = CallOptions {
        priority: Priority::Sheddable,
        ..CallOptions::default()
    };
    let opened = client.stream(ChatRequest::new(vec![Message::user("hi")]), opts);
    assert!(matches!(opened, Err(Error::Shed { .. })));
}

#[test]
fn a_shed_stream_is_counted_as_shed_and_refunded() {
    let p = FakePlatform::new().at(NOON);
    let g = limited_bulk(&p);
    for _ in 0..6 {
        second(&p, &g, 4, || reply(529));
    }
    let body = json!({ "model": "main", "max_tokens": 8, "stream": true,
                       "messages": [{ "role": "user", "content": "hi" }] });
    let mut req = ask("key-bulk", None, "/v1/chat/completions");
    req.body = Body::full(body.to_string().into_bytes());
    let out = block_on(&p, g.handle(req));
    assert_eq!(out.status, 503);
    let line: Value = serde_json::from_str(&out.log).unwrap();
    assert_eq!(line["refused"], "shed", "{line}");
    let before: u64 = header(&out, "x-ratelimit-remaining-requests")
        .unwrap()
        .parse()
        .unwrap();
    // Another shed request leaves the remaining count where it was.
    let out = send(&p, &g, "key-bulk");
    assert_eq!(out.status, 503);
    assert_eq!(
        header(&out, "x-ratelimit-remaining-requests"),
        Some(before.to_string().as_str())
    );
}

#[test]
fn within_a_class_clients_share_what_is_admitted_not_by_how_much_they_send() {
    let mut cfg = config();
    cfg["gateway"]["clients"]
        .as_array_mut()
        .unwrap()
        .push(json!({ "name": "few", "keysEnv": ["FEW"], "priority": "sheddable" }));
    let secret = |name: &str| match name {
        "FEW" => Some("key-few".to_string()),
        other => secret(other),
    };
    let p = FakePlatform::new().at(NOON);
    let g = gateway_of(&p, &cfg, &secret);
    // One second: `web` asks ten times, `bulk` ten times, `few` twice;
    // the provider fails them all, or only the first. What `bulk` and
    // `few` had sent.
    let tick = |all_fail: bool| {
        let mut sent = [0; 2];
        for i in 0..22 {
            let key = match i {
                _ if i % 11 == 10 => "key-few",
                _ if i % 2 == 0 => "key-web",
                _ => "key-bulk",
            };
            let before = p.requests_to("https://up.test");
            if !waiting(&p) {
                let r = if all_fail || i == 0 { reply(529) } else { ok() };
                p.script("https://up.test", [r]);
                SCRIPTED.with(|n| n.set(n.get() + 1));
            }
            send(&p, &g, key);
            let reached = p.requests_to("https://up.test") - before;
            match key {
                "key-bulk" => sent[0] += reached,
                "key-few" => sent[1] += reached,
                _ => {}
            }
        }
        p.advance(Duration::from_millis(1000));
        sent
    };
    // Two seconds of failures: half of sheddable shed.
    tick(true);
    tick(true);
    // Then one failure a second in some sixteen, inside the band: the
    // depth holds.
    let mut seconds = Vec::new();
    for _ in 0..4 {
        seconds.push(tick(false));
    }
    let health: Value = {
        let req = Inbound {
            method: "GET".into(),
            path: "/health".into(),
            headers: [("x-api-key", "key-web")].into_iter().collect::<Headers>(),
            body: Body::full(Vec::new()),
        };
        serde_json::from_slice(&block_on(&p, g.handle(req)).body).unwrap()
    };
    assert_eq!(
        health["shedding"][0]["admitted"]["sheddable"], 0.5,
        "{health}"
    );
    // Six of the twelve sheddable requests a second: `few`'s two (under
    // its share of three), `bulk` the other four (by arrival: one and five).
    assert_eq!(seconds[3], [4, 2], "{seconds:?}");
    assert!(seconds.iter().all(|s| s[1] == 2), "{seconds:?}");
}
