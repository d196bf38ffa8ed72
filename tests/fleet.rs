//! The fleet-wide breaker through the client: isolates sharing one fleet
//! object (fake link, fake platform), as the Worker runs them.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use resilient_llm::fleet::fake::{FakeLink, FakeObject, LinkCounts};
use resilient_llm::testing::{block_on, err, ok, FakePlatform, ScriptedProvider, Step};
use resilient_llm::{
    BreakerPolicy, ChatRequest, Client, Entry, ErrorKind, FleetStore, Message, Platform, Policy,
    RetryPolicy, Upstream,
};

fn breaker() -> BreakerPolicy {
    BreakerPolicy {
        failure_threshold: 3,
        cooldown: Duration::from_secs(10),
        max_cooldown: Duration::from_secs(20),
        ..BreakerPolicy::default()
    }
}

struct Isolate {
    client: Client<FakePlatform, FleetStore<FakeLink>>,
    primary: Rc<Cell<usize>>,
    counts: Rc<LinkCounts>,
}

impl Isolate {
    /// An isolate whose primary fails until `recovers_at`, then answers.
    fn new(p: &FakePlatform, obj: &FakeObject, name: &str, recovers_at: u64) -> Self {
        let outage = Step::Until {
            at: recovers_at,
            before: Box::new(err(ErrorKind::Server, 503)),
            after: Box::new(ok("primary answer")),
        };
        let primary = ScriptedProvider::new(p, "primary", [outage]);
        let backup = ScriptedProvider::new(p, "backup", [ok("backup answer")]);
        let calls = primary.calls();
        let link = FakeLink::new(obj);
        let counts = link.counts();
        let client = Client::builder(p.clone())
            .upstream("primary", Upstream::Custom(Box::new(primary)))
            .upstream("backup", Upstream::Custom(Box::new(backup)))
            .route(
                "default",
                vec![Entry::new("primary", "big"), Entry::new("backup", "small")],
            )
            .policy(Policy {
                retry: RetryPolicy {
                    max_attempts: 1,
                    ..RetryPolicy::default()
                },
                ..Policy::default()
            })
            .build_with_store(FleetStore::new(link, name, breaker()));
        Isolate {
            client,
            primary: calls,
            counts,
        }
    }

    /// One request, then the background work the Worker hands to
    /// `waitUntil`. Returns the provider that answered.
    fn request(&self, p: &FakePlatform) -> String {
        let reply = block_on(
            p,
            self.client
                .chat(ChatRequest::new(vec![Message::user("hi")])),
        )
        .expect("an answer");
        self.client.store().flush_due(p.now());
        self.client.store().link().pump();
        reply.served_by.provider
    }
}

#[test]
fn one_isolates_outage_teaches_the_fleet_and_recovery_takes_one_probe() {
    let p = FakePlatform::new().at(1_000);
    let obj = FakeObject::new(&p, breaker());
    let a = Isolate::new(&p, &obj, "a", 30_000);
    let b = Isolate::new(&p, &obj, "b", 30_000);
    assert_eq!(b.request(&p), "backup", "b fails over too, once");
    assert_eq!(b.primary.get(), 1);

    for _ in 0..3 {
        assert_eq!(a.request(&p), "backup");
    }
    assert_eq!(a.primary.get(), 3, "a's breaker opens on its third failure");

    // b learns within one refresh and stops calling the dead primary.
    p.advance(Duration::from_secs(1));
    for _ in 0..5 {
        assert_eq!(b.request(&p), "backup");
        p.advance(Duration::from_millis(500));
    }
    // Stale-while-revalidate: the request that finds b's view stale is still
    // decided from it, and starts the refresh; none after it calls.
    assert_eq!(b.primary.get(), 2, "b called the open primary once at most");
    assert_eq!(b.counts.leases.get(), 0, "and never awaited the object");

    // Cooldowns pass while the primary is still down: one probe each time.
    while p.now() < 30_000 {
        a.request(&p);
        b.request(&p);
        p.advance(Duration::from_millis(500));
    }
    let probes = a.primary.get() + b.primary.get() - 5;
    assert!(
        (1..=2).contains(&probes),
        "one probe per cooldown (10 s, then 20 s): {probes}"
    );

    // The primary recovered at 30 s; the next probe closes the fleet breaker.
    while a.primary.get() + b.primary.get() - 5 == probes {
        a.request(&p);
        b.request(&p);
        p.advance(Duration::from_millis(500));
        assert!(p.now() < 60_000, "recovered within one max cooldown");
    }
    p.advance(Duration::from_secs(1));
    a.request(&p);
    b.request(&p);
    assert_eq!(a.request(&p), "primary");
    assert_eq!(b.request(&p), "primary");
}
