//! Three data centres' relays of one spend cap over its real object
//! ([`SpendBook`]): isolates' holds, settles and questions through any
//! relay, renewals answered or lost, in any order and at any clock (each
//! relay renewing when it is due, as its host does). Each
//! request that is granted spends exactly what it held when it settles, so
//! whatever comes, what was granted and not lapsed never adds up to more
//! than the budget: no relay grants a picodollar its slice does not cover.
#![no_main]

use libfuzzer_sys::fuzz_target;
use resilient_llm::fleet::{
    HoldAnswer, HoldCall, HoldStep, SettleCall, SpendBook, SpendCall, SpendRelay,
};

const BUDGET: u64 = 10_000;
const TTL_MS: u64 = 120_000;
/// The longest a relay's renewals are lost in a row (a slice lasts
/// `TTL_MS` and `SLICE_TTL` at the object).
const CUT_OFF_MS: u64 = 100_000;

/// A request granted, not settled.
struct Granted {
    relay: usize,
    id: String,
    amount: u64,
    expires_at: u64,
}

fuzz_target!(|input: &[u8]| {
    // triples: [op] [clock step] [amount]
    let mut now: u64 = 1_796_126_400_000;
    let mut book = SpendBook::load(None, now);
    let mut relays: Vec<SpendRelay> = (0..3).map(|i| SpendRelay::new(format!("r{i}"))).collect();
    let mut out: Vec<Granted> = Vec::new();
    // When each relay's renewal was last answered.
    let mut heard = [now; 3];
    // What the settled requests spent.
    let mut spent = 0u64;
    let mut n = 0u64;
    for chunk in input.chunks_exact(3).take(512) {
        let [op, step, amount] = [chunk[0], chunk[1], chunk[2]];
        now = now.saturating_add(u64::from(step) * 37);
        // A request whose hold lapsed died with its isolate (a live one
        // ends by its deadline, well before): it spent nothing, and its
        // budget may be granted again.
        out.retain(|g| g.expires_at > now);
        // Each relay's host renews when it is due (its answer lost when
        // the op says so): a relay that lives renews.
        // A relay is cut off from the object for at most `CUT_OFF_MS` at a
        // time: cut off for longer than its slice lasts there, the spending
        // it booked meanwhile reaches the object after the slice lapsed
        // (counted late, as an isolate's settle after such a cut is without
        // relays), which is not what this target checks.
        for (relay, heard) in relays.iter_mut().zip(heard.iter_mut()) {
            if let Some(call) = relay.renewal(now) {
                book = SpendBook::load(Some(book), now);
                let answer = book.hold(now, &call);
                let lost = op & 0x40 != 0 && now < *heard + CUT_OFF_MS;
                if !lost {
                    *heard = now;
                }
                relay.renewed(now, (!lost).then_some(answer));
            }
        }
        let r = usize::from((op >> 3) & 3) % relays.len();
        let lost = op & 0x80 != 0;
        let relay = &mut relays[r];
        match (op & 7) % 5 {
            0 => {
                n += 1;
                let id = format!("isolate-{n}");
                let call = HoldCall {
                    route: "r".into(),
                    id: id.clone(),
                    amount: (u64::from(amount) + 1) * 10,
                    budget: BUDGET,
                    // What is left of its request's deadline, and a margin.
                    ttl_ms: TTL_MS - u64::from(step) * 50,
                    slice: None,
                };
                let mut step = relay.hold(now, &call);
                if step == HoldStep::Wait {
                    // The host sends the renewal due, if any, and asks
                    // again once it is answered (or lost).
                    if let Some(renewal) = relay.renewal(now) {
                        book = SpendBook::load(Some(book), now);
                        let answer = book.hold(now, &renewal);
                        relay.renewed(now, (op & 0x40 == 0).then_some(answer));
                    }
                    step = relay.hold_again(now, &call);
                }
                let granted = match step {
                    HoldStep::Wait => panic!("told to wait twice"),
                    HoldStep::Answer(a) => a.granted,
                    HoldStep::Ask => {
                        book = SpendBook::load(Some(book), now);
                        let a: HoldAnswer = book.hold(now, &call);
                        relay.saw(now, a.standing);
                        // A lost answer: the isolate gives up on the request.
                        a.granted && !lost
                    }
                };
                if granted {
                    out.push(Granted {
                        relay: r,
                        id,
                        amount: call.amount,
                        expires_at: now + call.ttl_ms,
                    });
                }
            }
            1 if !out.is_empty() => {
                let g = out.remove(usize::from(amount) % out.len());
                spent += g.amount;
                let call = SettleCall {
                    route: "r".into(),
                    holds: vec![g.id],
                    add: g.amount,
                };
                match relays[g.relay].settle(now, call) {
                    Ok((_, rest)) => {
                        if let Some(rest) = rest {
                            book = SpendBook::load(Some(book), now);
                            book.settle(&rest);
                        }
                    }
                    Err(call) => {
                        book = SpendBook::load(Some(book), now);
                        book.settle(&call);
                        relays[g.relay].saw(now, book.standing());
                    }
                }
            }
            2 => {
                if let Some(call) = relay.renewal(now) {
                    book = SpendBook::load(Some(book), now);
                    let answer = book.hold(now, &call);
                    relay.renewed(now, (!lost).then_some(answer));
                }
            }
            3 => {
                let call = SpendCall {
                    route: "r".into(),
                    add: 0,
                };
                if let Err(call) = relay.spend(now, call) {
                    book = SpendBook::load(Some(book), now);
                    book.add(call.add);
                    relay.saw(now, book.standing());
                }
            }
            _ => {}
        }
        let granted: u64 = out.iter().map(|g| g.amount).sum::<u64>() + spent;
        assert!(
            granted <= BUDGET,
            "granted {granted} of a budget of {BUDGET}"
        );
    }
});
