//! The fleet-wide breaker through the client: isolates sharing one fleet
//! object (fake link, fake platform), as the Worker runs them.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use resilient_llm::fleet::fake::{FakeLink, FakeObject, LinkCounts};
use resilient_llm::fleet::{Call, LeaseAnswer, Report, Verdict, View};
use resilient_llm::testing::{block_on, err, ok, FakePlatform, ScriptedProvider, Step};
use resilient_llm::{
    BreakerPolicy, ChatRequest, Client, Entry, ErrorKind, Fleet, FleetStore, Message, Platform,
    Policy, RetryPolicy, Upstream,
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

#[test]
fn a_request_warms_the_fleet_view_of_its_routes_entries_and_no_others() {
    let p = FakePlatform::new().at(1_000);
    let obj = FakeObject::new(&p, breaker());
    let a = Isolate::new(&p, &obj, "a", 30_000);
    for _ in 0..3 {
        a.request(&p);
    }
    // A fresh isolate with a second route whose provider the first request
    // does not use.
    let primary = ScriptedProvider::new(&p, "primary", [ok("p")]);
    let primary_calls = primary.calls();
    let link = FakeLink::new(&obj);
    let counts = link.counts();
    let fresh = Client::builder(p.clone())
        .upstream("primary", Upstream::Custom(Box::new(primary)))
        .upstream(
            "backup",
            Upstream::Custom(Box::new(ScriptedProvider::new(&p, "backup", [ok("b")]))),
        )
        .upstream(
            "other",
            Upstream::Custom(Box::new(ScriptedProvider::new(&p, "other", [ok("o")]))),
        )
        .route(
            "default",
            vec![Entry::new("primary", "big"), Entry::new("backup", "small")],
        )
        .route("elsewhere", vec![Entry::new("other", "m")])
        .build_with_store(FleetStore::new(link, "fresh", breaker()));
    let ask = || {
        let reply = block_on(&p, fresh.chat(ChatRequest::new(vec![Message::user("hi")])));
        fresh.store().flush_due(p.now());
        fresh.store().link().pump();
        reply.expect("an answer").served_by.provider
    };
    // Its first request decides locally (no view yet: it calls the primary,
    // which answers it) and starts learning both entries of its route, the
    // backup it did not call too, but not the other route's provider.
    assert_eq!(ask(), "primary");
    assert_eq!(counts.refreshes.get(), 2, "primary and backup");
    assert!(fresh.store().view("backup/small").is_some());
    assert!(fresh.store().view("other/m").is_none());
    assert!(matches!(
        fresh.store().view("primary/big").map(|v| v.state),
        Some(resilient_llm::State::Open { .. })
    ));
    // The next one knows the fleet's open primary and does not call it.
    assert_eq!(ask(), "backup");
    assert_eq!(primary_calls.get(), 1);
}

#[test]
fn looking_at_health_warms_every_providers_fleet_view() {
    let p = FakePlatform::new().at(1_000);
    let obj = FakeObject::new(&p, breaker());
    let a = Isolate::new(&p, &obj, "a", 30_000);
    for _ in 0..3 {
        a.request(&p);
    }
    // An isolate that has served nothing yet (as after a restart): its
    // first /health cannot know, but starts learning, and the next one does.
    let fresh = Isolate::new(&p, &obj, "fresh", 30_000);
    let primary = |c: &Client<FakePlatform, FleetStore<FakeLink>>| {
        c.health()
            .into_iter()
            .find(|h| h.provider == "primary")
            .map(|h| h.state)
    };
    assert_eq!(
        primary(&fresh.client),
        Some(resilient_llm::StateName::Closed)
    );
    assert_eq!(fresh.counts.refreshes.get(), 2, "primary and backup");
    fresh.client.store().link().pump();
    assert_eq!(primary(&fresh.client), Some(resilient_llm::StateName::Open));
    assert_eq!(fresh.primary.get(), 0, "without a call to it");
}

/// `tests/fixtures/fleet/<name>.json`: bytes the Worker sent to or stored in
/// the breaker Durable Object before the protocol was derived by serde.
fn stored(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/fleet")
        .join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.trim_end().to_string()
}

/// The fixture `name` reads as `value`, and `value` writes the same bytes.
fn same<T>(name: &str, value: &T)
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let text = stored(name);
    let read: T = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(
        &read, value,
        "{name} reads as the value it was written from"
    );
    assert_eq!(
        serde_json::to_string(value).unwrap(),
        text,
        "{name} is written as stored"
    );
}

/// A stored fixture predates the object's journal (counters and recent
/// transitions, added since): it holds the fleet less its journal, and an
/// object that has journaled nothing writes it unchanged.
fn same_stored(name: &str, f: &Fleet) {
    let mut f = f.clone();
    f.journal = resilient_llm::fleet::Journal::default();
    same(name, &f);
}

#[test]
fn stored_protocol_and_state_are_read_and_written_unchanged() {
    // The steps that wrote the fixtures, replayed through the object's own
    // operations.
    let policy = BreakerPolicy {
        failure_threshold: 2,
        window: 4,
        minimum_calls: 2,
        failure_rate: 0.5,
        ..BreakerPolicy::default()
    };
    let ttl = Duration::from_secs(5);
    let report = |at, verdict, lease| Report { at, verdict, lease };
    let mut f = Fleet::new();
    same_stored("stored-new", &f);
    let success = report(1, Verdict::Success, None);
    let v = f.fold(
        &policy,
        1,
        &[success, success, report(1, Verdict::Failure, None)],
    );
    same("view-closed", &v);
    let answer = f.lease(&policy, ttl, 1, "isolate-\"1\"");
    assert!(matches!(answer, LeaseAnswer::Closed { .. }));
    same("lease-closed", &answer);
    same_stored("stored-closed", &f);
    let failure = report(2, Verdict::Failure, None);
    let v = f.fold(
        &policy,
        2,
        &[failure, failure, report(2, Verdict::Abandoned, None)],
    );
    same("view-open", &v);
    let answer = f.lease(&policy, ttl, 3, "isolate-2");
    assert!(matches!(answer, LeaseAnswer::Busy { .. }));
    same("lease-busy", &answer);
    same_stored("stored-open", &f);
    let answer = f.lease(&policy, ttl, 20_000, "isolate-2");
    let LeaseAnswer::Granted { token, .. } = answer else {
        panic!("no lease: {answer:?}");
    };
    same("lease-granted", &answer);
    same("view-half-open", &f.view(&policy, 20_000));
    // Views gained `probes` (leases out); bytes written before it still
    // read, as a view with none counted.
    for name in [
        "lease-granted-before-probes",
        "view-half-open-before-probes",
    ] {
        let text = stored(name);
        let ok = match name {
            "lease-granted-before-probes" => serde_json::from_str::<LeaseAnswer>(&text).is_ok(),
            _ => serde_json::from_str::<View>(&text).is_ok_and(|v| v.probes == 0),
        };
        assert!(ok, "{name} still reads");
    }
    same_stored("stored-leased", &f);
    let v: View = f.fold(
        &policy,
        20_001,
        &[report(20_000, Verdict::Failure, Some(token))],
    );
    same("view-reopened", &v);
    same_stored("stored-reopened", &f);

    let call = |holder: Option<&str>, reports: Vec<Report>| Call {
        key: "openai".into(),
        holder: holder.map(str::to_string),
        reports,
        ..Call::default()
    };
    same("call-lease", &call(Some("isolate-2"), vec![]));
    same("call-view", &call(None, vec![]));
    same(
        "call-report",
        &call(
            None,
            vec![
                report(1, Verdict::Success, None),
                report(2, Verdict::Failure, None),
                report(3, Verdict::Abandoned, Some(7)),
            ],
        ),
    );
}

#[test]
fn stored_state_missing_later_fields_or_carrying_unknown_ones_still_reads() {
    let breaker = r#"{"state":{"state":"open","until":5},"consecutiveFailures":2,"window":[true,false],"trips":1,"generation":3}"#;
    let only_breaker: Fleet = serde_json::from_str(&format!(r#"{{"breaker":{breaker}}}"#)).unwrap();
    assert!(only_breaker.leases.is_empty());
    assert_eq!((only_breaker.next_token, only_breaker.changed_at), (0, 0));
    let extra: Fleet = serde_json::from_str(&format!(
        r#"{{"breaker":{breaker},"nextToken":2,"later":[1]}}"#
    ))
    .unwrap();
    assert_eq!(extra.breaker, only_breaker.breaker);
    assert_eq!(extra.next_token, 2);
    for bad in [
        "",
        "null",
        "[]",
        r#"{"leases":[]}"#,
        r#"{"breaker":{"state":{"state":"opened"},"consecutiveFailures":0,"window":[],"trips":0,"generation":0}}"#,
    ] {
        assert!(serde_json::from_str::<Fleet>(bad).is_err(), "{bad}");
    }
}

/// A client of `obj` whose primary and backup follow the given scripts.
fn scripted(
    p: &FakePlatform,
    obj: &FakeObject,
    name: &str,
    primary: Vec<Step>,
    backup: Vec<Step>,
) -> (Client<FakePlatform, FleetStore<FakeLink>>, Rc<Cell<usize>>) {
    let primary = ScriptedProvider::new(p, "primary", primary);
    let backup = ScriptedProvider::new(p, "backup", backup);
    let calls = primary.calls();
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
        .build_with_store(FleetStore::new(FakeLink::new(obj), name, breaker()));
    (client, calls)
}

#[test]
fn a_primary_whose_probe_another_isolate_holds_still_serves_when_the_backup_fails() {
    // Isolate a holds the fleet's one probe lease for the healed primary
    // (its answer takes 100 ms) when b's request finds its backup failing:
    // b makes one forced call to the primary rather than answer 503.
    let p = FakePlatform::new().at(1_000);
    let obj = FakeObject::new(&p, breaker());
    let dead = || err(ErrorKind::Server, 503);
    let slow_ok = || Step::After(Duration::from_millis(100), Box::new(ok("primary answer")));
    let (a, a_calls) = scripted(
        &p,
        &obj,
        "a",
        vec![dead(), dead(), dead(), slow_ok()],
        vec![ok("backup answer")],
    );
    let (b, b_calls) = scripted(
        &p,
        &obj,
        "b",
        vec![slow_ok()],
        vec![err(ErrorKind::Auth, 401)],
    );
    let hi = || ChatRequest::new(vec![Message::user("hi")]);
    for _ in 0..3 {
        block_on(&p, a.chat(hi())).expect("the backup answers");
        a.store().flush_due(p.now());
        a.store().link().pump();
    }
    assert_eq!(a_calls.get(), 3);
    b.health();
    b.store().link().pump();
    p.advance(Duration::from_secs(11));
    let late = async {
        resilient_llm::testing::sleep(&p, Duration::from_millis(10)).await;
        b.chat(hi()).await
    };
    let (probe, late) = block_on(&p, futures_util::future::join(a.chat(hi()), late));
    assert_eq!(probe.expect("the probe").served_by.provider, "primary");
    let late = late.expect("an answer, not a 503");
    assert_eq!(late.served_by.provider, "primary");
    let kinds: Vec<_> = late.attempts.iter().map(|a| a.reached).collect();
    assert_eq!(kinds, [false, true, true], "skipped, backup failed, forced");
    assert_eq!((a_calls.get(), b_calls.get()), (4, 1));
}

#[test]
fn the_object_journals_every_isolates_verdicts_and_its_transitions() {
    let p = FakePlatform::new().at(1_000);
    let obj = FakeObject::new(&p, breaker());
    let a = Isolate::new(&p, &obj, "a", 20_000);
    let b = Isolate::new(&p, &obj, "b", 20_000);
    // Two failures from a, one from b: the fleet opens on the third.
    a.request(&p);
    a.request(&p);
    b.request(&p);
    // Then cooldowns and probes until the primary has healed.
    while p.now() < 40_000 {
        a.request(&p);
        b.request(&p);
        p.advance(Duration::from_millis(500));
    }
    // The last verdicts wait out their batch's delay.
    p.advance(Duration::from_secs(2));
    for i in [&a, &b] {
        i.client.store().flush_due(p.now());
        i.client.store().link().pump();
    }
    let journal = block_on(&p, b.client.store().journal("primary/big")).expect("reachable");
    let moves: Vec<_> = journal.recent.iter().map(|t| (t.from, t.to)).collect();
    use resilient_llm::StateName::{Closed, HalfOpen, Open};
    assert_eq!(moves.first(), Some(&(Closed, Open)), "{moves:?}");
    assert_eq!(moves.last(), Some(&(HalfOpen, Closed)), "{moves:?}");
    assert!(
        moves.windows(2).all(|w| w[0].1 == w[1].0),
        "a chain: {moves:?}"
    );
    assert_eq!(journal.recent[0].trips, 1);
    assert_eq!(journal.recent[0].until, Some(journal.recent[0].at + 10_000));
    assert_eq!(journal.counts.transitions, moves.len() as u64);
    let calls = a.primary.get() + b.primary.get();
    let c = journal.counts;
    assert_eq!(
        c.successes + c.failures + c.abandoned,
        calls as u64,
        "{c:?}"
    );
    assert!(c.failures >= 3 && c.successes >= 1, "{c:?}");
    assert_eq!(
        c.probes,
        moves.iter().filter(|m| m.1 == HalfOpen).count() as u64
    );
    assert_eq!(
        block_on(&p, a.client.store().journal("primary/big")),
        Some(journal),
        "one fleet-wide record, whichever isolate asks"
    );
}
