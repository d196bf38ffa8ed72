use super::fake::{FakeLink, FakeObject};
use super::*;
use crate::engine::store::BreakerStore;
use crate::platform::UnixMillis;
use crate::policy::breaker::StateName;
use crate::policy::breaker::{BreakerPolicy, CircuitOpen, Outcome, Permit, State};
use crate::testing::{block_on, FakePlatform};
use crate::Platform;
use std::time::Duration;

fn policy() -> BreakerPolicy {
    BreakerPolicy {
        failure_threshold: 3,
        cooldown: Duration::from_millis(1000),
        max_cooldown: Duration::from_millis(4000),
        ..BreakerPolicy::default()
    }
}

const LEASE: Duration = Duration::from_millis(5000);

fn failure(at: UnixMillis) -> Report {
    Report {
        at,
        verdict: Verdict::Failure,
        lease: None,
    }
}

fn verdict(token: u64, verdict: Verdict) -> Report {
    Report {
        at: 0,
        verdict,
        lease: Some(token),
    }
}

fn granted(a: LeaseAnswer) -> u64 {
    match a {
        LeaseAnswer::Granted { token, .. } => token,
        other => panic!("expected a lease, got {other:?}"),
    }
}

#[test]
fn reports_from_many_isolates_open_the_fleet_breaker() {
    let mut f = Fleet::new();
    // Two failures from one isolate, one from another: three in a row.
    f.fold(&policy(), 10, &[failure(1), failure(2)]);
    assert_eq!(f.view(&policy(), 11).state, State::Closed);
    let v = f.fold(&policy(), 20, &[failure(15)]);
    assert_eq!(v.state, State::Open { until: 1020 });
    // Verdicts of calls let through by a stale cache say nothing new.
    let v = f.fold(&policy(), 30, &[failure(25), failure(26)]);
    assert_eq!(v.state, State::Open { until: 1020 });
}

#[test]
fn one_probe_per_cooldown_and_the_holders_verdict_decides() {
    let mut f = Fleet::new();
    f.fold(&policy(), 0, &[failure(0), failure(0), failure(0)]);
    assert!(matches!(
        f.lease(&policy(), LEASE, 500, "a"),
        LeaseAnswer::Busy { until: 1000, .. }
    ));
    let token = granted(f.lease(&policy(), LEASE, 1000, "a"));
    assert!(matches!(
        f.lease(&policy(), LEASE, 1001, "b"),
        LeaseAnswer::Busy { until: 6000, .. }
    ));
    // A failed probe re-opens it for twice as long.
    let v = f.fold(&policy(), 1100, &[verdict(token, Verdict::Failure)]);
    assert_eq!(v.state, State::Open { until: 3100 });
    let token = granted(f.lease(&policy(), LEASE, 3100, "b"));
    // A stale token and ordinary verdicts do not decide the probe.
    let v = f.fold(
        &policy(),
        3200,
        &[verdict(token + 7, Verdict::Success), failure(3150)],
    );
    assert_eq!(v.state.name(), StateName::HalfOpen);
    let v = f.fold(&policy(), 3300, &[verdict(token, Verdict::Success)]);
    assert_eq!(v.state, State::Closed);
    assert!(matches!(
        f.lease(&policy(), LEASE, 3400, "c"),
        LeaseAnswer::Closed { .. }
    ));
    assert!(f.leases.is_empty());
}

#[test]
fn a_lapsed_lease_goes_to_someone_else_and_its_late_verdict_is_ignored() {
    let mut f = Fleet::new();
    f.fold(&policy(), 0, &[failure(0), failure(0), failure(0)]);
    let dead = granted(f.lease(&policy(), LEASE, 1000, "dead"));
    assert!(matches!(
        f.lease(&policy(), LEASE, 5999, "b"),
        LeaseAnswer::Busy { .. }
    ));
    let live = granted(f.lease(&policy(), LEASE, 6000, "b"));
    assert_ne!(dead, live);
    let v = f.fold(&policy(), 6100, &[verdict(dead, Verdict::Failure)]);
    assert_eq!(
        v.state.name(),
        StateName::HalfOpen,
        "the dead prober's verdict is void"
    );
    let v = f.fold(&policy(), 6200, &[verdict(live, Verdict::Success)]);
    assert_eq!(v.state, State::Closed);
}

#[test]
fn a_holder_asking_again_lost_its_verdict_and_probes_again() {
    let mut f = Fleet::new();
    f.fold(&policy(), 0, &[failure(0), failure(0), failure(0)]);
    let lost = granted(f.lease(&policy(), LEASE, 1000, "a"));
    // Its verdict never arrived; it asks again long before the lease lapses.
    let again = granted(f.lease(&policy(), LEASE, 1500, "a"));
    assert_ne!(lost, again);
    assert!(matches!(
        f.lease(&policy(), LEASE, 1501, "b"),
        LeaseAnswer::Busy { until: 6500, .. }
    ));
    let v = f.fold(&policy(), 1600, &[verdict(lost, Verdict::Failure)]);
    assert_eq!(
        v.state.name(),
        StateName::HalfOpen,
        "the lost lease is void"
    );
    let v = f.fold(&policy(), 1700, &[verdict(again, Verdict::Success)]);
    assert_eq!(v.state, State::Closed);
}

#[test]
fn an_abandoned_probe_gives_the_lease_back() {
    let mut f = Fleet::new();
    f.fold(&policy(), 0, &[failure(0), failure(0), failure(0)]);
    let t = granted(f.lease(&policy(), LEASE, 1000, "a"));
    f.fold(&policy(), 1100, &[verdict(t, Verdict::Abandoned)]);
    granted(f.lease(&policy(), LEASE, 1200, "b"));
}

#[test]
fn verdicts_from_before_a_transition_do_not_count_after_it() {
    let mut f = Fleet::new();
    f.fold(&policy(), 0, &[failure(0), failure(0), failure(0)]);
    let t = granted(f.lease(&policy(), LEASE, 1000, "a"));
    f.fold(&policy(), 1100, &[verdict(t, Verdict::Success)]);
    // Failures of calls that ended while it was open arrive late.
    let v = f.fold(&policy(), 1200, &[failure(900), failure(950), failure(990)]);
    assert_eq!(v.state, State::Closed);
    assert_eq!(v.consecutive_failures, 0);
}

#[test]
fn the_fleet_survives_a_restart_through_serde() {
    let mut f = Fleet::new();
    f.fold(&policy(), 0, &[failure(0), failure(0), failure(0)]);
    let t = granted(f.lease(&policy(), LEASE, 1000, "a"));
    let stored = serde_json::to_string(&f).unwrap();
    let mut back: Fleet = serde_json::from_str(&stored).unwrap();
    assert_eq!(back, f);
    assert!(matches!(
        back.lease(&policy(), LEASE, 1001, "b"),
        LeaseAnswer::Busy { .. }
    ));
    let v = back.fold(&policy(), 1100, &[verdict(t, Verdict::Success)]);
    assert_eq!(v.state, State::Closed);
}

// ------------------------------------------------------------ isolates

struct Isolate {
    store: FleetStore<FakeLink>,
}

impl Isolate {
    fn new(obj: &FakeObject, name: &str) -> Self {
        Isolate {
            store: FleetStore::new(FakeLink::new(obj), name, policy()).fleet_policy(FleetPolicy {
                lease_ttl: LEASE,
                ..FleetPolicy::default()
            }),
        }
    }

    fn acquire(&self, p: &FakePlatform) -> Result<Permit, CircuitOpen> {
        block_on(p, self.store.try_acquire("primary", p.now()))
    }

    fn call(&self, p: &FakePlatform, outcome: Outcome) -> Result<(), CircuitOpen> {
        let permit = self.acquire(p)?;
        self.store.record("primary", p.now(), permit, outcome);
        Ok(())
    }

    fn pump(&self) -> usize {
        self.store.link().pump()
    }

    fn counts(&self) -> std::rc::Rc<fake::LinkCounts> {
        self.store.link().counts()
    }
}

fn open_fleet(p: &FakePlatform, obj: &FakeObject) {
    let a = Isolate::new(obj, "opener");
    for _ in 0..3 {
        a.call(p, Outcome::Failure).unwrap();
    }
    a.pump();
    assert_eq!(
        obj.fleet("primary").unwrap().breaker.state.name(),
        StateName::Open
    );
}

#[test]
fn one_isolates_failures_open_the_breaker_for_another_after_one_refresh() {
    let p = FakePlatform::new().at(1_000_000);
    let slow = BreakerPolicy {
        cooldown: Duration::from_secs(5),
        max_cooldown: Duration::from_secs(20),
        ..policy()
    };
    let obj = FakeObject::new(&p, slow);
    let a = Isolate::new(&obj, "a");
    let b = Isolate::new(&obj, "b");
    b.call(&p, Outcome::Success).unwrap(); // b has a fresh, closed view
    b.pump();
    for _ in 0..3 {
        a.call(&p, Outcome::Failure).unwrap();
    }
    assert_eq!(
        a.counts().reports.get(),
        1,
        "flushed at once on a's local transition"
    );
    a.pump();
    // b decides from its cached view until it goes stale.
    assert!(b.acquire(&p).is_ok());
    p.advance(Duration::from_millis(1000));
    assert!(
        b.acquire(&p).is_ok(),
        "stale: answered from memory, refresh queued"
    );
    assert_eq!(b.pump(), 1, "one background refresh");
    let until = 1_000_000 + 5000;
    assert_eq!(b.acquire(&p), Err(CircuitOpen { until }));
    assert_eq!(b.counts().leases.get(), 0);
    assert_eq!(
        b.store.snapshot("primary").unwrap().state.name(),
        StateName::Open
    );
}

#[test]
fn only_one_probe_fleet_wide_per_cooldown() {
    let p = FakePlatform::new();
    let obj = FakeObject::new(&p, policy()).lease_ttl(LEASE);
    open_fleet(&p, &obj);
    let isolates: Vec<Isolate> = (0..4)
        .map(|i| Isolate::new(&obj, &format!("i{i}")))
        .collect();
    for i in &isolates {
        assert!(i.acquire(&p).is_ok(), "fresh isolates start closed");
        i.pump();
        assert!(i.acquire(&p).is_err(), "and learn within one refresh");
    }
    p.advance(Duration::from_millis(1000));
    let granted: Vec<bool> = isolates.iter().map(|i| i.acquire(&p).is_ok()).collect();
    assert_eq!(granted.iter().filter(|g| **g).count(), 1, "{granted:?}");
    // Everyone else was told to wait: no more lease questions meanwhile.
    for _ in 0..10 {
        for i in &isolates[1..] {
            assert!(i.acquire(&p).is_err());
        }
    }
    let asked: usize = isolates.iter().map(|i| i.counts().leases.get()).sum();
    assert_eq!(asked, 4);
}

#[test]
fn the_probers_success_closes_the_breaker_fleet_wide() {
    let p = FakePlatform::new();
    let obj = FakeObject::new(&p, policy()).lease_ttl(LEASE);
    open_fleet(&p, &obj);
    let a = Isolate::new(&obj, "a");
    let b = Isolate::new(&obj, "b");
    for i in [&a, &b] {
        let _ = i.acquire(&p);
        i.pump();
    }
    p.advance(Duration::from_millis(1000));
    let probe = a.acquire(&p).expect("a probes");
    assert!(b.acquire(&p).is_err());
    p.advance(Duration::from_millis(100));
    a.store.record("primary", p.now(), probe, Outcome::Success);
    assert!(a.acquire(&p).is_ok(), "a trusts its own probe at once");
    a.pump();
    assert_eq!(obj.fleet("primary").unwrap().breaker.state, State::Closed);
    p.advance(Duration::from_millis(1000));
    let _ = b.acquire(&p);
    b.pump();
    assert!(b.call(&p, Outcome::Success).is_ok());
}

#[test]
fn a_failed_probe_reopens_with_a_longer_cooldown() {
    let p = FakePlatform::new();
    let obj = FakeObject::new(&p, policy()).lease_ttl(LEASE);
    open_fleet(&p, &obj);
    let a = Isolate::new(&obj, "a");
    let _ = a.acquire(&p);
    a.pump();
    p.advance(Duration::from_millis(1000));
    a.call(&p, Outcome::Failure).expect("probe");
    assert!(
        a.acquire(&p).is_err(),
        "assumed open until the object answers"
    );
    a.pump();
    assert_eq!(
        obj.fleet("primary").unwrap().breaker.state,
        State::Open { until: 3000 }
    );
    assert_eq!(a.acquire(&p), Err(CircuitOpen { until: 3000 }));
}

#[test]
fn a_dead_probers_lease_lapses() {
    let p = FakePlatform::new();
    let obj = FakeObject::new(&p, policy()).lease_ttl(LEASE);
    open_fleet(&p, &obj);
    let a = Isolate::new(&obj, "a");
    let b = Isolate::new(&obj, "b");
    for i in [&a, &b] {
        let _ = i.acquire(&p);
        i.pump();
    }
    p.advance(Duration::from_millis(1000));
    let _abandoned_forever = a.acquire(&p).expect("a probes, then its isolate dies");
    drop(a);
    assert!(b.acquire(&p).is_err());
    p.advance(LEASE - Duration::from_millis(1));
    assert!(b.acquire(&p).is_err(), "still leased");
    p.advance(Duration::from_millis(1));
    let probe = b.acquire(&p).expect("the lease lapsed: b probes");
    b.store.record("primary", p.now(), probe, Outcome::Success);
    b.pump();
    assert_eq!(obj.fleet("primary").unwrap().breaker.state, State::Closed);
}

#[test]
fn an_abandoned_probe_lets_another_isolate_probe() {
    let p = FakePlatform::new();
    let obj = FakeObject::new(&p, policy()).lease_ttl(LEASE);
    open_fleet(&p, &obj);
    let a = Isolate::new(&obj, "a");
    let b = Isolate::new(&obj, "b");
    p.advance(Duration::from_millis(1000));
    let probe = a.acquire(&p).expect("probe");
    a.store.release("primary", probe);
    a.pump();
    assert!(b.acquire(&p).is_ok());
}

#[test]
fn steady_state_never_awaits_the_object() {
    let p = FakePlatform::new();
    let obj = FakeObject::new(&p, policy());
    let a = Isolate::new(&obj, "a");
    // 10 s of traffic, one call every 50 ms, background work run as it
    // would be after each request.
    for _ in 0..200 {
        a.call(&p, Outcome::Success).unwrap();
        a.store.flush_due(p.now());
        a.pump();
        p.advance(Duration::from_millis(50));
    }
    let c = a.counts();
    assert_eq!(c.leases.get(), 0, "no awaited call");
    assert!(c.refreshes.get() <= 11, "refreshes {}", c.refreshes.get());
    assert!(c.reports.get() <= 11, "batches {}", c.reports.get());
    assert_eq!(
        c.verdicts.get() + a.store.slots.borrow().slots["primary"].pending.len(),
        200
    );
}

#[test]
fn a_fresh_isolate_warms_its_view_without_a_request() {
    let p = FakePlatform::new();
    let obj = FakeObject::new(&p, policy());
    open_fleet(&p, &obj);
    let fresh = Isolate::new(&obj, "fresh");
    fresh.store.warm(["primary", "backup"], p.now());
    fresh.store.warm(["primary", "backup"], p.now());
    assert_eq!(fresh.counts().refreshes.get(), 2, "once per key");
    fresh.pump();
    assert_eq!(fresh.acquire(&p), Err(CircuitOpen { until: 1000 }));
    fresh.store.warm(["primary"], p.now() + 5000);
    assert_eq!(fresh.counts().refreshes.get(), 2, "only cold keys");
}

#[test]
fn a_look_refreshes_a_stale_view_an_idle_isolate_holds() {
    let p = FakePlatform::new();
    let obj = FakeObject::new(&p, policy());
    let idle = Isolate::new(&obj, "idle");
    idle.call(&p, Outcome::Success).unwrap(); // a closed view, then no more requests
    idle.pump();
    open_fleet(&p, &obj);
    // Within its time to live, neither warming nor looking asks again.
    idle.store.look(["primary"], p.now());
    assert_eq!(idle.counts().refreshes.get(), 1);
    p.advance(Duration::from_secs(2));
    // Stale: warming leaves a view it has alone; a look (`/health`) refreshes it.
    idle.store.warm(["primary"], p.now());
    assert_eq!(idle.counts().refreshes.get(), 1);
    assert_eq!(
        idle.store.snapshot("primary").unwrap().state.name(),
        StateName::Closed
    );
    idle.store.look(["primary"], p.now());
    idle.store.look(["primary"], p.now());
    assert_eq!(
        idle.counts().refreshes.get(),
        2,
        "once while it is in flight"
    );
    idle.pump();
    assert_eq!(
        idle.store.snapshot("primary").unwrap().state.name(),
        StateName::Open
    );
}

#[test]
fn the_breaker_stays_open_across_a_restart_of_the_object() {
    let p = FakePlatform::new();
    let obj = FakeObject::new(&p, policy());
    open_fleet(&p, &obj);
    let stored = obj.persist();
    drop(obj);
    let obj = FakeObject::restore(&p, policy(), &stored);
    let fresh = Isolate::new(&obj, "fresh");
    assert!(fresh.acquire(&p).is_ok());
    fresh.pump();
    assert_eq!(fresh.acquire(&p), Err(CircuitOpen { until: 1000 }));
}

#[test]
fn an_unreachable_object_falls_back_to_the_local_breaker() {
    let p = FakePlatform::new();
    let obj = FakeObject::new(&p, policy());
    open_fleet(&p, &obj);
    let a = Isolate::new(&obj, "a");
    let _ = a.acquire(&p);
    a.pump();
    p.advance(Duration::from_millis(1000));
    obj.set_down(true);
    assert!(
        a.call(&p, Outcome::Success).is_ok(),
        "local breaker decides"
    );
    assert_eq!(a.counts().leases.get(), 1);
    assert!(a.call(&p, Outcome::Success).is_ok());
    assert_eq!(
        a.counts().leases.get(),
        1,
        "no lease question without a fleet view"
    );
}

#[test]
fn wire_shapes_are_stable() {
    let v = View {
        state: State::Open { until: 5 },
        generation: 2,
        consecutive_failures: 0,
        failure_rate: 0.0,
        probes: 0,
        latencies: Default::default(),
        pool: None,
        as_of: 1,
    };
    let a = serde_json::to_value(LeaseAnswer::Busy { until: 5, view: v }).unwrap();
    assert_eq!(a["answer"], "busy");
    assert_eq!(a["view"]["state"]["state"], "open");
    let r: Report = serde_json::from_str(r#"{"at":3,"verdict":"failure"}"#).unwrap();
    assert_eq!(r, failure(3));
}

#[test]
fn a_probe_given_back_lets_an_isolate_turned_away_probe_within_one_refresh() {
    let p = FakePlatform::new();
    let obj = FakeObject::new(&p, policy()).lease_ttl(LEASE);
    open_fleet(&p, &obj);
    let a = Isolate::new(&obj, "a");
    let b = Isolate::new(&obj, "b");
    for i in [&a, &b] {
        let _ = i.acquire(&p);
        i.pump();
    }
    p.advance(Duration::from_millis(1000));
    let probe = a.acquire(&p).expect("a probes");
    // b asks while a holds the lease: busy until the lease would lapse.
    let lapse = p.now() + 5000;
    assert_eq!(b.acquire(&p), Err(CircuitOpen { until: lapse }));
    // a's client goes away: neutral, and the lease goes back at once.
    let reports = a.counts().reports.get();
    a.store.release("primary", probe);
    assert_eq!(a.counts().reports.get(), reports + 1, "sent at once");
    a.pump();
    assert_eq!(obj.fleet("primary").unwrap().leases.len(), 0);
    assert_eq!(
        obj.fleet("primary").unwrap().breaker.state.name(),
        StateName::HalfOpen,
        "no verdict: neither closed nor re-opened"
    );
    // Within one refresh b learns the probe is free and takes it, long
    // before the lease would have lapsed.
    p.advance(Duration::from_millis(1000));
    let _ = b.acquire(&p);
    b.pump();
    let probe = b.acquire(&p).expect("b probes after one refresh");
    assert!(p.now() < lapse);
    b.store.record("primary", p.now(), probe, Outcome::Success);
    b.pump();
    assert_eq!(obj.fleet("primary").unwrap().breaker.state, State::Closed);
}

#[test]
fn a_failure_that_can_open_the_fleet_is_sent_at_once_and_reaches_others_within_one_refresh() {
    let p = FakePlatform::new().at(10_000);
    let slow = BreakerPolicy {
        cooldown: Duration::from_secs(5),
        ..policy()
    };
    let obj = FakeObject::new(&p, slow).lease_ttl(LEASE);
    let a = Isolate::new(&obj, "a");
    let b = Isolate::new(&obj, "b");
    // Two failures at a, below its own threshold: batched, then sent.
    for _ in 0..2 {
        a.call(&p, Outcome::Failure).unwrap();
    }
    assert_eq!(
        a.counts().reports.get(),
        0,
        "short of opening anything: batched"
    );
    a.store.flush_all();
    a.pump();
    // b learns the fleet's count, then fails once: no local transition,
    // but its view says this failure opens the fleet, so it goes at once.
    let _ = b.acquire(&p);
    b.pump();
    b.call(&p, Outcome::Failure).unwrap();
    assert_eq!(
        b.counts().reports.get(),
        1,
        "sent at once, not after max_delay"
    );
    b.pump();
    assert_eq!(
        obj.fleet("primary").unwrap().breaker.state.name(),
        StateName::Open
    );
    // a hears it within one refresh (its view is 0 ms old now).
    p.advance(Duration::from_millis(1000));
    let _ = a.acquire(&p);
    a.pump();
    assert_eq!(
        a.acquire(&p),
        Err(CircuitOpen { until: 15_000 }),
        "a learned within one refresh"
    );
}
