//! Latency demotion shared fleet-wide (issue 13, part 2): two isolates on
//! one fleet object (fake link, fake platform). One sees the slow answers;
//! the other follows the fleet's standing within one refresh, demoted and
//! restored alike.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use resilient_llm::fleet::fake::{FakeLink, FakeObject};
use resilient_llm::testing::{block_on, reply, FakePlatform, Reply};
use resilient_llm::{
    BreakerPolicy, ChatRequest, Client, Config, DemotionPolicy, Event, FleetStore, Message,
    Platform,
};
use serde_json::{json, Value};

fn answer(model: &str, text: &str) -> Reply {
    let body = json!({ "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": model,
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": text }, "finish_reason": "stop" }],
        "usage": { "prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5 } });
    reply(200)
        .header("content-type", "application/json")
        .body(body.to_string())
}

fn demotion() -> DemotionPolicy {
    DemotionPolicy {
        window: 10,
        min_samples: 5,
        restore_ratio: 0.8,
        explore: 0.1,
    }
}

type Log = Rc<RefCell<Vec<String>>>;

struct Isolate {
    client: Client<FakePlatform, FleetStore<FakeLink>>,
    events: Log,
}

impl Isolate {
    fn new(p: &FakePlatform, obj: &FakeObject, name: &str) -> Self {
        let events: Log = Rc::default();
        let seen = Rc::clone(&events);
        let cfg = json!({
            "providers": {
                "first": { "kind": "openai", "baseUrl": "https://first.test" },
                "second": { "kind": "openai", "baseUrl": "https://second.test" }
            },
            "routes": { "default": [ { "provider": "first", "model": "m1", "latencySloMs": 1000 },
                                     { "provider": "second", "model": "m2" } ] },
            "latency": { "window": 10, "minSamples": 5, "explore": 0.1 }
        });
        let client = Config::parse(&cfg.to_string())
            .unwrap()
            .client_builder(p.clone(), vec![], &|_| Some("sk-test".into()))
            .unwrap()
            .observer(move |e| match e {
                Event::Demoted(s) | Event::Restored(s) => seen.borrow_mut().push(format!(
                    "{} {}/{} p95={}",
                    serde_json::to_value(e).unwrap()["type"].as_str().unwrap(),
                    s.provider,
                    s.model,
                    s.p95_ms,
                )),
                _ => {}
            })
            .build_with_store(FleetStore::new(
                FakeLink::new(obj),
                name,
                BreakerPolicy::default(),
            ));
        Isolate { client, events }
    }

    /// One request and the background work after it; who answered.
    fn request(&self, p: &FakePlatform) -> String {
        let req = ChatRequest::new(vec![Message::user("hi")]);
        let reply = block_on(p, self.client.chat(req)).expect("an answer");
        self.pump(p);
        reply.served_by.provider
    }

    /// The background work the Worker hands to `waitUntil`.
    fn pump(&self, p: &FakePlatform) {
        self.client.store().flush_due(p.now());
        self.client.store().link().pump();
    }

    fn demoted(&self) -> Value {
        let health = serde_json::to_value(self.client.health()).unwrap();
        health[0].get("demoted").cloned().unwrap_or(Value::Null)
    }
}

#[test]
fn one_isolates_slow_answers_demote_the_entry_in_every_isolate_and_its_recovery_restores_it() {
    let p = FakePlatform::new();
    let obj = FakeObject::new(&p, BreakerPolicy::default()).demotion(demotion());
    let (a, b) = (Isolate::new(&p, &obj, "a"), Isolate::new(&p, &obj, "b"));

    // B looks once: its view of the model is fresh and clean.
    assert_eq!(b.demoted(), Value::Null);
    b.pump(&p);
    p.script("https://second.test", (0..40).map(|_| answer("m2", "fast")));
    p.script(
        "https://first.test",
        (0..6).map(|_| answer("m1", "slow").delay(Duration::from_secs(2))),
    );
    // A alone sees 2 s answers against a 1 s objective; its samples go to
    // the object with its verdicts, and the object decides.
    for _ in 0..5 {
        assert_eq!(a.request(&p), "first");
    }
    p.advance(Duration::from_secs(1));
    a.pump(&p);
    let fleet = obj
        .fleet("first/m1")
        .expect("the object heard of the model");
    let figure = fleet.figures.latencies().latency.unwrap();
    assert_eq!((figure.p95_ms, figure.demoted), (2000, true));
    assert_eq!(a.request(&p), "second", "A follows the fleet");
    assert_eq!(*a.events.borrow(), ["demoted first/m1 p95=2000"]);

    // B's view is stale: the request that finds it so still goes by it (as
    // a breaker's view does) and refreshes it; from then on B tries the
    // slow entry last too, and says so in its events and /health.
    assert_eq!(b.request(&p), "first");
    assert_eq!(b.request(&p), "second");
    assert_eq!(*b.events.borrow(), ["demoted first/m1 p95=2000"]);
    assert_eq!(
        b.demoted(),
        json!([{ "model": "m1", "measure": "latency", "p95Ms": 2000 }])
    );
    // B's own slow sample reaches the object with its next batch.
    p.advance(Duration::from_secs(1));
    b.pump(&p);

    // Recovered: A's exploring requests (random below 0.1) keep the
    // configured order and refill the fleet's window with fast answers.
    p.script("https://first.test", (0..12).map(|_| answer("m1", "fast")));
    let explore = p.clone().random([0.05]);
    for _ in 0..10 {
        p.advance(Duration::from_millis(300));
        assert_eq!(a.request(&explore), "first");
    }
    p.advance(Duration::from_secs(2));
    a.pump(&p);
    let figure = obj.fleet("first/m1").unwrap().figures.latencies().latency;
    assert_eq!(figure.map(|f| (f.p95_ms, f.demoted)), Some((0, false)));
    assert_eq!(a.demoted(), Value::Null);
    assert_eq!(
        *a.events.borrow(),
        ["demoted first/m1 p95=2000", "restored first/m1 p95=0"]
    );

    // B, not exploring, never called the entry again; the refresh its next
    // request starts (a demoted model's view is watched) restores it.
    let steady = p.clone().random([0.99]);
    assert_eq!(b.request(&steady), "second");
    assert_eq!(b.request(&steady), "first");
    assert_eq!(
        *b.events.borrow(),
        ["demoted first/m1 p95=2000", "restored first/m1 p95=0"]
    );
    assert_eq!(b.demoted(), Value::Null);
}

#[test]
fn samples_travel_with_the_verdicts_not_in_calls_of_their_own() {
    let p = FakePlatform::new();
    let obj = FakeObject::new(&p, BreakerPolicy::default()).demotion(demotion());
    let a = Isolate::new(&p, &obj, "a");
    let link = a.client.store().link().counts();
    p.script(
        "https://first.test",
        (0..3).map(|_| answer("m1", "ok").delay(Duration::from_millis(400))),
    );
    for _ in 0..3 {
        assert_eq!(a.request(&p), "first");
    }
    p.advance(Duration::from_secs(2));
    a.pump(&p);
    // Three verdicts and their three samples: batched by the verdicts'
    // delay, never one call per answer.
    assert_eq!(link.verdicts.get(), 3);
    assert!(
        link.reports.get() < 3,
        "{} report calls",
        link.reports.get()
    );
    let fleet = obj.fleet("first/m1").unwrap();
    let stored = serde_json::to_value(&fleet).unwrap();
    assert_eq!(
        stored["figures"]["latency"]["samples"],
        json!([400, 400, 400])
    );
    assert!(!fleet.figures.latencies().any_demoted());
}

#[test]
fn the_protocol_reads_messages_from_either_side_of_the_change() {
    use resilient_llm::fleet::{Call, View};
    // An isolate that sends no samples, an object whose view has no figures.
    let old_call: Call =
        serde_json::from_value(json!({ "key": "first/m1", "reports": [] })).unwrap();
    assert!(old_call.samples.is_empty());
    let old_view: View = serde_json::from_value(json!({ "state": { "state": "closed" },
        "generation": 0, "consecutiveFailures": 0, "failureRate": 0.0, "asOf": 5 }))
    .unwrap();
    assert!(old_view.latencies.is_none());
    // A new view without figures is the bytes an old one was.
    assert!(serde_json::to_value(old_view)
        .unwrap()
        .get("latencies")
        .is_none());
    let call: Call = serde_json::from_value(json!({ "key": "first/m1",
        "samples": [{ "measure": "ttft", "ms": 1200, "sloMs": 1000 }] }))
    .unwrap();
    assert_eq!((call.samples[0].ms, call.samples[0].slo_ms), (1200, 1000));
}
