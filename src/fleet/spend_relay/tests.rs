use super::*;
use crate::fleet::spend_object::SpendBook;

/// Noon, 2026-12-01 UTC.
const NOON: UnixMillis = 1_796_126_400_000;

/// A cap's object, called directly, counting its calls.
struct Object {
    book: SpendBook,
    calls: usize,
}

impl Object {
    fn new() -> Self {
        Object {
            book: SpendBook::load(None, NOON),
            calls: 0,
        }
    }

    fn hold(&mut self, now: UnixMillis, call: &HoldCall) -> HoldAnswer {
        self.calls += 1;
        self.book.hold(now, call)
    }

    fn settle(&mut self, call: &SettleCall) -> Standing {
        self.calls += 1;
        self.book.settle(call);
        self.book.standing()
    }

    /// Booked and held: what the budget must cover.
    fn committed(&self) -> u64 {
        self.book.spent + self.book.held()
    }
}

fn hold(id: &str, amount: u64, budget: u64) -> HoldCall {
    HoldCall {
        route: "r".into(),
        id: id.into(),
        amount,
        budget,
        ttl_ms: 120_000,
        slice: None,
    }
}

fn settle(id: &str, add: u64) -> SettleCall {
    SettleCall {
        route: "r".into(),
        holds: vec![id.into()],
        add,
    }
}

/// An isolate's hold through `relay`: granted here or asked of `object`.
fn ask(relay: &mut SpendRelay, object: &mut Object, now: UnixMillis, call: &HoldCall) -> bool {
    let mut step = relay.hold(now, call);
    if step == HoldStep::Wait {
        // The host sends the renewal due and asks again once answered.
        beat(relay, object, now);
        step = relay.hold_again(now, call);
    }
    match step {
        HoldStep::Answer(a) => a.granted,
        HoldStep::Ask => {
            let a = object.hold(now, call);
            relay.saw(now, a.standing);
            a.granted
        }
        HoldStep::Wait => panic!("told to wait twice"),
    }
}

/// An isolate's settle through `relay`.
fn end(relay: &mut SpendRelay, object: &mut Object, now: UnixMillis, call: SettleCall) {
    match relay.settle(now, call) {
        Ok((_, Some(rest))) => {
            object.settle(&rest);
        }
        Ok((_, None)) => {}
        Err(call) => {
            let s = object.settle(&call);
            relay.saw(now, s);
        }
    }
}

/// The renewal due now, if any, answered by `object`.
fn beat(relay: &mut SpendRelay, object: &mut Object, now: UnixMillis) {
    if let Some(call) = relay.renewal(now) {
        let a = object.hold(now, &call);
        relay.renewed(now, Some(a));
    }
}

#[test]
fn holds_come_from_the_slice_and_the_object_hears_once_a_heartbeat() {
    let mut object = Object::new();
    let mut relay = SpendRelay::new("AMS-1");
    let budget = 1_000_000;
    // The first hold waits for the first renewal and comes from its slice.
    assert!(ask(
        &mut relay,
        &mut object,
        NOON,
        &hold("i-0", 100, budget)
    ));
    beat(&mut relay, &mut object, NOON);
    assert_eq!(object.calls, 1, "the renewal, not the hold");
    // 100 asked in no time: counted over `EARLY`, 800 a heartbeat.
    assert_eq!(relay.slice.as_ref().map(|s| s.amount), Some(1_600));
    // 30 s of 50 requests a second (each 100 held, 90 spent, a request a
    // 20 ms, settled 100 ms later), one renewal a heartbeat.
    let mut served = 1;
    end(&mut relay, &mut object, NOON + 10, settle("i-0", 90));
    for i in 1..1500u64 {
        let now = NOON + i * 20;
        if ask(
            &mut relay,
            &mut object,
            now,
            &hold(&format!("i-{i}"), 100, budget),
        ) {
            served += 1;
        }
        if i > 5 {
            let done = i - 5;
            end(
                &mut relay,
                &mut object,
                now,
                settle(&format!("i-{done}"), 90),
            );
        }
        beat(&mut relay, &mut object, now);
        assert!(object.committed() <= budget);
    }
    assert_eq!(served, 1500, "the budget had room for all");
    // Today's protocol: 3,000 calls (a hold and a settle each). Relayed:
    // a renewal every 2 s, and the holds the slice could not take while it
    // grew after the first.
    assert!(object.calls <= 20, "{} calls", object.calls);
    println!("1,500 requests in 30 s: {} object calls", object.calls);
    // What was spent reaches the object with the renewals; the rest when
    // the relay goes idle.
    let later = NOON + 1500 * 20 + 200;
    for i in 1495..1500u64 {
        end(
            &mut relay,
            &mut object,
            later,
            settle(&format!("i-{i}"), 90),
        );
    }
    for s in 0..10 {
        beat(&mut relay, &mut object, later + s * 2_000);
    }
    assert_eq!(object.book.spent, 1500 * 90);
    assert_eq!(relay.slice, None);
    assert!(relay.is_idle(later + 20_000));
    assert_eq!(object.book.held(), 0, "the last slice released");
}

#[test]
fn the_budget_holds_across_relays_and_the_room_is_shared() {
    let mut object = Object::new();
    let budget = 10_000;
    let mut relays: Vec<SpendRelay> = (0..3)
        .map(|i| SpendRelay::new(format!("relay{i}")))
        .collect();
    let mut granted = [0u64; 3];
    let mut n = 0;
    // Every relay asks for holds of 100 each 10 ms for 10 s; nothing
    // settles, so the budget runs out.
    for step in 0..1000u64 {
        let now = NOON + step * 10;
        for (i, relay) in relays.iter_mut().enumerate() {
            n += 1;
            if ask(
                relay,
                &mut object,
                now,
                &hold(&format!("h{n}"), 100, budget),
            ) {
                granted[i] += 100;
            }
            beat(relay, &mut object, now);
            assert!(object.committed() <= budget, "the object never over");
        }
        for relay in &relays {
            let sliced = relay.slice.as_ref().map_or(0, |s| s.amount);
            assert!(relay.in_holds() <= sliced, "granted within its slice");
        }
    }
    assert_eq!(
        granted.iter().sum::<u64>(),
        budget,
        "exactly the budget, no more"
    );
    println!(
        "granted per relay: {granted:?}, {} object calls",
        object.calls
    );
    assert!(
        granted.iter().all(|g| *g >= 2_000),
        "each got a share: {granted:?}"
    );
    // Of 3,000 holds, most refused once the budget is held: answered from
    // the relays' fresh standing, not each by the object.
    assert!(object.calls <= 300, "{} object calls", object.calls);
}

#[test]
fn a_lost_renewal_goes_again_as_it_was_and_books_once() {
    let mut object = Object::new();
    let mut relay = SpendRelay::new("x");
    ask(&mut relay, &mut object, NOON, &hold("a", 100, 10_000));
    beat(&mut relay, &mut object, NOON);
    assert!(ask(
        &mut relay,
        &mut object,
        NOON + 1,
        &hold("b", 100, 10_000)
    ));
    end(&mut relay, &mut object, NOON + 2, settle("b", 70));
    // Applied by the object, its answer lost.
    let call = relay.renewal(NOON + 2_000).expect("due");
    object.hold(NOON + 2_000, &call);
    relay.renewed(NOON, None);
    assert_eq!(object.book.spent, 70);
    assert_eq!(relay.view().map(|s| s.spent), Some(70), "counted as sent");
    // Sent again as it was: answered as it stands, booked once.
    let again = relay.renewal(NOON + 4_000).expect("due");
    assert_eq!(again, call);
    relay.renewed(NOON + 4_000, Some(object.hold(NOON + 4_000, &again)));
    assert_eq!(object.book.spent, 70);
    assert_eq!(relay.view().map(|s| s.spent), Some(70));
    assert!(relay.slice.is_some());
}

#[test]
fn a_slice_is_granted_from_for_its_time_and_not_while_a_renewal_is_out() {
    let mut object = Object::new();
    let mut relay = SpendRelay::new("x");
    ask(&mut relay, &mut object, NOON, &hold("a", 100, 10_000));
    beat(&mut relay, &mut object, NOON);
    let calls = object.calls;
    assert!(ask(
        &mut relay,
        &mut object,
        NOON + 1,
        &hold("b", 100, 10_000)
    ));
    assert_eq!(object.calls, calls, "from the slice");
    // No renewal sent (the host stalled): granted from for `SLICE_TTL`.
    let lapsed = NOON + millis(SLICE_TTL);
    assert!(matches!(
        relay.hold(lapsed - 1, &hold("c", 1, 10_000)),
        HoldStep::Answer(HoldAnswer { granted: true, .. })
    ));
    assert_eq!(relay.hold(lapsed, &hold("d", 1, 10_000)), HoldStep::Ask);
    // At the object it lasts until the end of its day, and as long again
    // as the holds granted from it (120 s, rounded up with a margin: 130 s
    // after its own 10 s): "c", granted at its last moment, is covered
    // until it lapses itself, and what is settled here until a renewal
    // books it.
    let slice_at = |t| {
        let book = SpendBook::load(Some(object.book.clone()), t);
        book.holds.iter().any(|h| h.slice)
    };
    let midnight = day_end(utc_day(NOON));
    assert!(slice_at(midnight + 140_000 - 1));
    assert!(!slice_at(midnight + 140_000));
    // A hold that would outlast what the slice covers (near the end of
    // the day) waits for the next renewal, which covers it.
    let mut relay = SpendRelay::new("z");
    let mut object = Object::new();
    let late = midnight - 30_000;
    ask(&mut relay, &mut object, late, &hold("a", 100, 10_000));
    beat(&mut relay, &mut object, late);
    let longer = HoldCall {
        ttl_ms: 181_000,
        ..hold("long", 1, 10_000)
    };
    assert_eq!(relay.hold(late + 1, &longer), HoldStep::Wait);
    assert_eq!(relay.renewal(late + 1), None, "not before `EARLY`");
    let renewal = relay
        .renewal(late + 250)
        .expect("early: the slice ran short");
    // 181 s rounded up with a margin, and the day's last 29.75 s.
    assert_eq!(renewal.ttl_ms, 210_000 + 29_750);
    relay.renewed(late + 250, Some(object.hold(late + 250, &renewal)));
    assert!(matches!(
        relay.hold_again(late + 251, &longer),
        HoldStep::Answer(HoldAnswer { granted: true, .. })
    ));

    // A renewal in flight, or whose answer was lost: nothing is granted
    // here (the object may have released the slice), until it is answered.
    let mut relay = SpendRelay::new("y");
    let mut object = Object::new();
    ask(&mut relay, &mut object, NOON, &hold("a", 100, 10_000));
    beat(&mut relay, &mut object, NOON);
    assert!(ask(
        &mut relay,
        &mut object,
        NOON + 1,
        &hold("b", 100, 10_000)
    ));
    let call = relay.renewal(NOON + 2_000).expect("due");
    let e = hold("e", 1, 10_000);
    assert_eq!(relay.hold(NOON + 2_001, &e), HoldStep::Wait);
    assert_eq!(relay.hold_again(NOON + 2_001, &e), HoldStep::Ask);
    relay.renewed(NOON + 2_002, None);
    assert_eq!(
        relay.hold(NOON + 2_003, &hold("f", 1, 10_000)),
        HoldStep::Ask
    );
    let again = relay.renewal(NOON + 4_002).expect("sent again");
    assert_eq!(again, call);
    relay.renewed(NOON + 4_003, Some(object.hold(NOON + 4_003, &again)));
    assert!(matches!(
        relay.hold(NOON + 4_004, &hold("g", 1, 10_000)),
        HoldStep::Answer(HoldAnswer { granted: true, .. })
    ));
}

#[test]
fn a_hold_the_relay_did_not_grant_is_settled_at_the_object() {
    let mut object = Object::new();
    let mut relay = SpendRelay::new("x");
    // The first hold waits for the first slice, 1,600, and comes from it.
    assert!(ask(&mut relay, &mut object, NOON, &hold("a", 100, 10_000)));
    assert!(object.book.holds.iter().all(|h| h.slice), "only the slice");
    end(&mut relay, &mut object, NOON + 1, settle("a", 80));
    assert_eq!(object.book.spent, 0, "booked here");
    // A hold bigger than the slice left goes to the object, and so does
    // its settle.
    assert!(ask(
        &mut relay,
        &mut object,
        NOON + 3,
        &hold("big", 5_000, 10_000)
    ));
    assert!(object.book.holds.iter().any(|h| h.id == "big"));
    end(&mut relay, &mut object, NOON + 4, settle("big", 4_000));
    assert_eq!(object.book.spent, 4_000);
    // A booking is counted here and sent with the next renewal, with the
    // settle booked here.
    let spend = SpendCall {
        route: "r".into(),
        add: 5,
    };
    assert_eq!(relay.spend(NOON + 5, spend).map(|s| s.spent), Ok(4_085));
    beat(&mut relay, &mut object, NOON + 2_002);
    assert_eq!(object.book.spent, 4_085);
}

#[test]
fn old_objects_and_old_relays_read_each_other() {
    // A renewal read by an object that knows no slices: one hold more.
    let mut relay = SpendRelay::new("x");
    let object = Object::new();
    assert_eq!(relay.hold(NOON, &hold("a", 100, 10_000)), HoldStep::Wait);
    let call = relay.renewal(NOON).expect("due");
    let text = serde_json::to_string(&call).unwrap();
    assert!(
        text.contains(r#""slice":{"release":[],"add":0,"atLeast":0}"#),
        "{text}"
    );
    // An isolate's hold carries no slice: the bytes it always had.
    let plain = serde_json::to_string(&hold("a", 1, 2)).unwrap();
    assert_eq!(
        plain,
        r#"{"route":"r","id":"a","amount":1,"budget":2,"ttlMs":120000}"#
    );
    // A relay serves the cap its first call named.
    assert!(relay.serves("r") && !relay.serves("other"));
    let stored = serde_json::to_string(&object.book).unwrap();
    assert!(!stored.contains("slice"), "{stored}");
}

#[test]
fn a_restarted_relay_loses_nothing_booked() {
    let mut object = Object::new();
    let mut relay = SpendRelay::new("x-1");
    assert!(ask(&mut relay, &mut object, NOON, &hold("a", 100, 10_000)));
    assert!(ask(
        &mut relay,
        &mut object,
        NOON + 1,
        &hold("b", 100, 10_000)
    ));
    end(&mut relay, &mut object, NOON + 2, settle("a", 70));
    // A renewal sent, applied, its answer lost with the process; and a
    // settle booked after it.
    let call = relay.renewal(NOON + 2_000).expect("due");
    object.hold(NOON + 2_000, &call);
    end(&mut relay, &mut object, NOON + 2_001, settle("b", 60));
    let kept: Kept = serde_json::from_str(&serde_json::to_string(&relay.kept()).unwrap()).unwrap();
    // A new instance, with a name of its own.
    let mut relay = SpendRelay::new("x-2");
    relay.restore(kept, NOON + 3_000);
    beat(&mut relay, &mut object, NOON + 3_000);
    assert_eq!(object.book.spent, 70, "the lost renewal, booked once");
    // "b" was granted by the old instance: its late settle would go to the
    // object; here it came before the restart and was kept.
    beat(&mut relay, &mut object, NOON + 5_000);
    assert_eq!(object.book.spent, 130);
    // Slices that hold budget (a renewal that asked for nothing leaves a
    // marker of nothing, briefly).
    let slices = |object: &Object| -> Vec<String> {
        let book = &object.book;
        let holding = book.holds.iter().filter(|h| h.slice && h.amount > 0);
        holding.map(|h| h.id.clone()).collect()
    };
    // The old instance's slice (the one its lost renewal got) is retired:
    // kept at the object until the holds granted from it have lapsed.
    assert_eq!(slices(&object), ["x-1-2"]);
    let lapsed = NOON + 3_000 + 120_000;
    for t in (NOON + 6_000..lapsed).step_by(1_000) {
        beat(&mut relay, &mut object, t);
    }
    assert_eq!(slices(&object), ["x-1-2"]);
    assert!(!relay.is_idle(lapsed));
    beat(&mut relay, &mut object, lapsed);
    assert!(slices(&object).is_empty());
    assert!(relay.is_idle(lapsed));
    assert_eq!(object.book.spent, 130);
}

#[test]
fn a_hold_granted_before_a_restart_stays_covered_until_it_lapses() {
    let mut object = Object::new();
    let mut relay = SpendRelay::new("x-1");
    let budget = 10_000;
    assert!(ask(&mut relay, &mut object, NOON, &hold("a", 100, budget)));
    let granted = relay.slice.as_ref().map_or(0, |s| s.amount);
    assert!(granted >= 100);
    let kept = relay.kept();
    let mut relay = SpendRelay::new("x-2");
    relay.restore(kept, NOON + 1_000);
    // "a" is still in flight, inside the old slice: the object grants
    // only what is left besides it, and the new instance nothing from it.
    let rest = budget - granted;
    assert!(!ask(
        &mut relay,
        &mut object,
        NOON + 1_000,
        &hold("big", rest + 1, budget)
    ));
    assert!(object.committed() <= budget);
    // Its settle, unknown here, goes to the object and is booked there.
    let Err(call) = relay.settle(NOON + 2_000, settle("a", 90)) else {
        panic!("granted by the earlier instance");
    };
    object.settle(&call);
    assert_eq!(object.book.spent, 90);
    for t in (NOON + 3_000..=NOON + 121_000).step_by(1_000) {
        beat(&mut relay, &mut object, t);
        assert!(object.committed() <= budget);
    }
    assert!(relay.is_idle(NOON + 121_000));
    assert_eq!(object.book.held(), 0);
    assert_eq!(object.book.spent, 90);
}

#[test]
fn restarts_faster_than_the_hold_time_retire_at_most_max_retired_slices() {
    let mut object = Object::new();
    let mut relay = SpendRelay::new("x-0");
    // Each instance gets a slice, then restarts a second later: every
    // restart retires one more, none lapsed yet.
    for n in 1..=3 * MAX_RETIRED as u64 {
        let t = NOON + n * 1_000;
        let id = format!("h{n}");
        assert!(ask(&mut relay, &mut object, t, &hold(&id, 10, 1_000_000)));
        let kept = relay.kept();
        relay = SpendRelay::new(format!("x-{n}"));
        relay.restore(kept, t);
        assert!(relay.kept().retired.len() <= MAX_RETIRED);
    }
    assert_eq!(relay.kept().retired.len(), MAX_RETIRED);
    // The newest are kept: the last instance's slice among them.
    let last = format!("x-{}-", 3 * MAX_RETIRED - 1);
    assert!(relay.kept().retired.iter().any(|r| r.id.starts_with(&last)));
}

#[test]
fn a_relay_cut_off_for_minutes_books_once_and_the_object_never_overgrants() {
    let mut object = Object::new();
    let mut relay = SpendRelay::new("x");
    let budget = 100_000;
    for i in 0..5u64 {
        let id = format!("a{i}");
        assert!(ask(
            &mut relay,
            &mut object,
            NOON + i,
            &hold(&id, 100, budget)
        ));
        end(&mut relay, &mut object, NOON + i, settle(&id, 90));
    }
    let slice = relay.slice.as_ref().map_or(0, |s| s.amount);
    // Ten minutes without a renewal reaching the object: sent, lost.
    let cut_until = NOON + 600_000;
    let mut t = NOON + 1_000;
    while t < cut_until {
        if relay.renewal(t).is_some() {
            relay.renewed(t, None);
        }
        // The object, reloaded as after an eviction, keeps the slice: what
        // was granted and settled from it is covered.
        object.book = SpendBook::load(Some(object.book.clone()), t);
        assert!(object.book.holds.iter().any(|h| h.slice), "at {t}");
        t += 1_000;
    }
    // An isolate elsewhere gets only what the slice leaves.
    let direct = hold("elsewhere", budget - slice + 1, budget);
    assert!(!object.hold(cut_until, &direct).granted);
    // Reached again: what was settled here booked once, the slice released.
    beat(&mut relay, &mut object, cut_until);
    assert_eq!(object.book.spent, 450);
    for t in (cut_until + 1_000..cut_until + 200_000).step_by(1_000) {
        beat(&mut relay, &mut object, t);
    }
    assert_eq!(object.book.spent, 450);
    assert_eq!(object.book.held(), 0);
    assert!(relay.is_idle(cut_until + 200_000));
}

#[test]
fn kept_state_from_before_retired_slices_reads() {
    let old =
        r#"{"route":"r","budget":5,"holdTtl":120000,"booked":3,"renewal":null,"slice":"x-1"}"#;
    let kept: Kept = serde_json::from_str(old).unwrap();
    assert!(kept.retired.is_empty());
    assert_eq!(kept.slice.as_deref(), Some("x-1"));
    // And a renewal that asks for nothing marks itself done briefly.
    let mut object = Object::new();
    let mut relay = SpendRelay::new("x");
    relay.restore(kept, NOON);
    beat(&mut relay, &mut object, NOON);
    assert_eq!(object.book.spent, 3);
    let marker = object.book.holds.iter().find(|h| h.slice).expect("marker");
    assert_eq!(marker.amount, 0);
    assert!(marker.expires_at <= NOON + 140_000);
}

#[test]
fn a_settle_of_holds_granted_here_and_at_the_object_releases_both() {
    let mut object = Object::new();
    let mut relay = SpendRelay::new("x");
    // One request, two entries of the cap: one hold from the slice (1,600),
    // one too big for it, from the object.
    assert!(ask(&mut relay, &mut object, NOON, &hold("a", 100, 10_000)));
    assert!(ask(
        &mut relay,
        &mut object,
        NOON + 1,
        &hold("b", 5_000, 10_000)
    ));
    let both = SettleCall {
        route: "r".into(),
        holds: vec!["a".into(), "b".into()],
        add: 4_000,
    };
    let (view, rest) = relay.settle(NOON + 2, both).expect("one was granted here");
    assert_eq!(view.spent, 4_000, "booked here");
    let rest = rest.expect("the object's hold to release");
    assert_eq!((rest.holds, rest.add), (vec!["b".to_owned()], 0));
    object.book.settle(&SettleCall {
        route: "r".into(),
        holds: vec!["b".into()],
        add: 0,
    });
    assert!(object.book.holds.iter().all(|h| h.slice), "only the slice");
    beat(&mut relay, &mut object, NOON + 2_000);
    assert_eq!(object.book.spent, 4_000, "booked once, with the renewal");
}
