//! A named client's limits across isolates, on the fake platform and the
//! fake client objects: two gateways share what their client used, so a
//! requests-per-minute limit holds for the pair within a measured
//! overshoot; the rate headers count the other isolate's requests; the
//! requests in flight and the daily budget are fleet-wide too; and when
//! the object cannot be reached each isolate holds the limit on its own.

use std::time::Duration;

use resilient_llm::fleet::fake_clients::FakeClientObject;
use resilient_llm::fleet::{ClientLedger, FleetClients};
use resilient_llm::gateway::{Gateway, Inbound, Setup};
use resilient_llm::testing::{block_on, reply, FakePlatform, Reply};
use resilient_llm::{Body, Headers, MemoryStore};
use serde_json::{json, Value};
use std::rc::Rc;

/// Noon, 2026-12-01 UTC: a minute's start.
const NOON: u64 = 1_796_126_400_000;

/// `batch` may send `rpm` requests a minute; `pair` two at a time and $1 a day.
fn config(rpm: u64) -> Value {
    json!({
        "providers": {
            "up": { "kind": "openai", "baseUrl": "https://up.test", "apiKey": "sk-up",
                "models": { "big": { "inputPricePerMtok": 100000, "outputPricePerMtok": 0 } } }
        },
        "routes": { "default": [{ "provider": "up", "model": "big" }] },
        "retry": { "maxAttempts": 1 },
        "gateway": {
            "clients": [
                { "name": "batch", "keysEnv": ["BATCH"], "limits": { "requestsPerMinute": rpm } },
                { "name": "pair", "keysEnv": ["PAIR"],
                  "limits": { "maxInFlight": 2, "dailyBudgetUsd": 1 } },
                { "name": "free", "keysEnv": ["FREE"] }
            ]
        }
    })
}

fn secret(name: &str) -> Option<String> {
    match name {
        "BATCH" => Some("key-batch".into()),
        "PAIR" => Some("key-pair".into()),
        "FREE" => Some("key-free".into()),
        _ => None,
    }
}

type Isolate = Gateway<FakePlatform, MemoryStore>;

/// An isolate named `holder` whose limited clients share through `object`
/// (`None`: it counts alone).
fn isolate(p: &FakePlatform, rpm: u64, object: Option<&FakeClientObject>, holder: &str) -> Isolate {
    let setup = Setup::load(Some(&config(rpm).to_string()), &secret).expect("valid");
    let setup = match object {
        Some(o) => {
            let ledger: Rc<dyn ClientLedger> =
                Rc::new(FleetClients::new(o.clone(), Duration::from_secs(1), holder));
            setup.client_ledger(ledger)
        }
        None => setup,
    };
    let store = MemoryStore::new(setup.breaker());
    setup.into_gateway(p.clone(), store)
}

/// An answer of `input` tokens (at $0.1 a token), after `delay`.
fn answer(input: u64, delay: Duration) -> Reply {
    let body = json!({ "id": "c", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": "ok" },
                      "finish_reason": "stop" }],
        "usage": { "prompt_tokens": input, "completion_tokens": 0, "total_tokens": input } });
    reply(200)
        .header("content-type", "application/json")
        .body(body.to_string())
        .delay(delay)
}

fn ask(key: &str) -> Inbound {
    let body = json!({ "model": "default", "max_tokens": 8,
                       "messages": [{ "role": "user", "content": "hi" }] });
    Inbound {
        method: "POST".into(),
        path: "/v1/chat/completions".into(),
        headers: [
            ("content-type", "application/json"),
            ("authorization", &format!("Bearer {key}")),
        ]
        .into_iter()
        .collect::<Headers>(),
        body: Body::full(body.to_string().into_bytes()),
    }
}

/// Requests `batch` had served in each whole minute of `minutes`, when
/// `isolates` take turns with one request every `every` between them and
/// the object (if any) answers after each.
fn served_per_minute(
    p: &FakePlatform,
    isolates: &[Isolate],
    object: Option<&FakeClientObject>,
    every: Duration,
    minutes: u64,
) -> Vec<u64> {
    let start = NOON;
    let mut per_minute = vec![0; minutes as usize];
    let mut turn = 0;
    loop {
        let now = start + (turn as u64) * every.as_millis() as u64;
        let minute = ((now - start) / 60_000) as usize;
        if minute >= per_minute.len() {
            return per_minute;
        }
        p.advance(Duration::from_millis(now.saturating_sub(p_now(p))));
        let g = &isolates[turn % isolates.len()];
        p.script("https://up.test", [answer(1, Duration::ZERO)]);
        let out = block_on(p, g.handle(ask("key-batch")));
        match out.status {
            200 => per_minute[minute] += 1,
            429 => {}
            s => panic!("status {s}"),
        }
        if let Some(o) = object {
            o.pump();
        }
        turn += 1;
    }
}

fn p_now(p: &FakePlatform) -> u64 {
    use resilient_llm::Platform;
    p.now()
}

#[test]
fn a_requests_per_minute_limit_holds_across_two_isolates_within_its_measured_overshoot() {
    // 600 requests a minute offered against a limit of 60: one isolate
    // alone, two sharing their client object, two that cannot reach it.
    let every = Duration::from_millis(100);
    let p = FakePlatform::new().at(NOON);
    let alone = served_per_minute(&p, &[isolate(&p, 60, None, "a")], None, every, 3);

    let p = FakePlatform::new().at(NOON);
    let object = FakeClientObject::new(&p);
    let pair = [
        isolate(&p, 60, Some(&object), "a"),
        isolate(&p, 60, Some(&object), "b"),
    ];
    let shared = served_per_minute(&p, &pair, Some(&object), every, 3);

    let p = FakePlatform::new().at(NOON);
    let object = FakeClientObject::new(&p);
    object.set_down(true);
    let pair = [
        isolate(&p, 60, Some(&object), "a"),
        isolate(&p, 60, Some(&object), "b"),
    ];
    let apart = served_per_minute(&p, &pair, Some(&object), every, 3);

    let over: Vec<i64> = shared
        .iter()
        .zip(&alone)
        .map(|(s, a)| *s as i64 - *a as i64)
        .collect();
    println!(
        "rpm 60, 10 requests a second over two isolates, the object a turn away: \
         served per minute alone {alone:?}, two sharing {shared:?} (overshoot {over:?}), \
         two apart {apart:?}"
    );
    assert_eq!(alone[0], 60, "one isolate serves its limit");
    // Sharing: what the other isolate admitted in one round trip is the
    // most either can miss; here, one request a turn.
    for (minute, o) in over.iter().enumerate() {
        assert!(
            (0..=2).contains(o),
            "minute {minute}: overshoot {o} ({shared:?} against {alone:?})"
        );
    }
    // Apart, each isolate holds the whole limit: twice it.
    assert_eq!(apart[0], 120, "{apart:?}");
    assert!(object.calls() == 0);
}

#[test]
fn the_rate_headers_count_the_other_isolates_requests() {
    let p = FakePlatform::new().at(NOON);
    let object = FakeClientObject::new(&p);
    let a = isolate(&p, 10, Some(&object), "a");
    let b = isolate(&p, 10, Some(&object), "b");
    p.script("https://up.test", (0..8).map(|_| answer(1, Duration::ZERO)));
    // Each request, then time for two round trips to the object: the
    // report sent at admission, and the one its end sends after it.
    let remaining = |g: &Isolate| {
        let out = block_on(&p, g.handle(ask("key-batch")));
        assert_eq!(out.status, 200);
        object.pump();
        object.pump();
        out.headers
            .get("x-ratelimit-remaining-requests")
            .map(str::to_owned)
    };
    for i in 0..4 {
        assert_eq!(remaining(&a).as_deref(), Some((9 - i).to_string().as_str()));
    }
    assert_eq!(object.total("batch").requests.estimate(NOON), 4);
    // B's first request is decided by its own count while it asks; its
    // second knows a's four.
    assert_eq!(remaining(&b).as_deref(), Some("9"));
    assert_eq!(
        remaining(&b).as_deref(),
        Some("4"),
        "ten, less a's four and b's two"
    );
    // A asked last before b's requests: it hears of them with the answer
    // to its next report.
    assert_eq!(remaining(&a).as_deref(), Some("5"));
    assert_eq!(
        remaining(&a).as_deref(),
        Some("2"),
        "ten, less a's six and b's two"
    );
    object.pump();
    assert_eq!(object.total("batch").requests.estimate(NOON), 8);
    // An unlimited client never reaches the objects.
    let calls = object.calls();
    p.script("https://up.test", [answer(1, Duration::ZERO)]);
    assert_eq!(block_on(&p, a.handle(ask("key-free"))).status, 200);
    object.pump();
    assert_eq!(object.calls(), calls);
}

#[test]
fn requests_in_flight_and_the_daily_budget_are_counted_fleet_wide() {
    use std::future::Future;
    let p = FakePlatform::new().at(NOON);
    let object = FakeClientObject::new(&p);
    let a = isolate(&p, 60, Some(&object), "a");
    let b = isolate(&p, 60, Some(&object), "b");
    // Two slow requests through a ($0.4 each), started, their reports
    // answered while they are under way.
    p.script(
        "https://up.test",
        (0..2).map(|_| answer(4, Duration::from_secs(5))),
    );
    let mut slow = Box::pin(futures_util::future::join_all([
        a.handle(ask("key-pair")),
        a.handle(ask("key-pair")),
    ]));
    let waker = futures_util::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    assert!(slow.as_mut().poll(&mut cx).is_pending());
    object.pump();
    object.pump();
    assert_eq!(object.total("pair").in_flight, 2);
    // B's first request ($0.4) is its own count's to decide; with the
    // answer to its report it knows a's two in flight.
    p.script("https://up.test", [answer(4, Duration::ZERO)]);
    assert_eq!(block_on(&p, b.handle(ask("key-pair"))).status, 200);
    object.pump();
    let refused = |why: &str| {
        let out = block_on(&p, b.handle(ask("key-pair")));
        assert_eq!(out.status, 429, "{why}");
        let body: Value = serde_json::from_slice(&out.body).unwrap();
        let message = body["error"]["message"].as_str().unwrap().to_owned();
        assert!(message.contains(why), "{message}");
        object.pump();
    };
    refused("2 requests in flight");
    let done = block_on(&p, slow);
    assert!(done.iter().all(|o| o.status == 200));
    object.pump();
    object.pump();
    let total = object.total("pair");
    assert_eq!(total.in_flight, 0);
    assert_eq!(
        total.spend.spent, 1_200_000_000_000,
        "three requests of $0.4"
    );
    // B's view is five seconds old: the refusal asks again, and the next
    // one knows the pair spent $1.2 of its $1 today.
    refused("2 requests in flight");
    refused("daily budget of $1");
}

#[test]
fn a_failed_report_is_tried_again_a_time_to_live_later() {
    let p = FakePlatform::new().at(NOON);
    let object = FakeClientObject::new(&p);
    let a = isolate(&p, 60, Some(&object), "a");
    p.script("https://up.test", (0..3).map(|_| answer(1, Duration::ZERO)));
    object.set_down(true);
    assert_eq!(block_on(&p, a.handle(ask("key-batch"))).status, 200);
    assert_eq!(object.queued(), 1);
    object.pump();
    object.set_down(false);
    // The object is not asked again at once, however much is admitted.
    assert_eq!(block_on(&p, a.handle(ask("key-batch"))).status, 200);
    assert_eq!(object.queued(), 0);
    p.advance(Duration::from_secs(1));
    assert_eq!(block_on(&p, a.handle(ask("key-batch"))).status, 200);
    object.pump();
    assert_eq!(object.total("batch").requests.estimate(p_now(&p)), 3);
}
