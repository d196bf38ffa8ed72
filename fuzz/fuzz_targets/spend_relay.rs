//! Three data centres' relays of one spend cap over its real object
//! ([`SpendBook`]): isolates' holds, settles and questions through any
//! relay, renewals answered or lost (for as long in a row as the input
//! says: a relay cut off from its object for minutes), relays restarted
//! from what they kept while their holds are in flight, in any order and
//! at any clock (each relay renewing when it is due, as its host does).
//! Each request that is granted spends exactly what it held when it
//! settles, so whatever comes, what was granted and not lapsed never adds
//! up to more than the budget: no relay grants a picodollar its slice does
//! not cover, and no slice lapses before what was granted from it is
//! booked.
#![no_main]

use libfuzzer_sys::fuzz_target;
use resilient_llm::fleet::{
    HoldAnswer, HoldCall, HoldStep, Kept, SettleCall, SpendBook, SpendCall, SpendRelay,
};

const BUDGET: u64 = 10_000;
const TTL_MS: u64 = 120_000;

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
        // the op says so, as many times in a row as the input has such
        // ops): a relay that lives renews.
        for relay in &mut relays {
            if let Some(call) = relay.renewal(now) {
                book = SpendBook::load(Some(book), now);
                let answer = book.hold(now, &call);
                relay.renewed(now, (op & 0x40 == 0).then_some(answer));
            }
        }
        let r = usize::from((op >> 3) & 3) % relays.len();
        let lost = op & 0x80 != 0;
        let relay = &mut relays[r];
        match (op & 7) % 6 {
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
            3 if amount < 16 => {
                // Restarted from what it stored: its holds in flight are
                // unknown to the new instance (their settles go to the
                // object).
                n += 1;
                let text = serde_json::to_string(&relay.kept()).expect("kept");
                let kept: Kept = serde_json::from_str(&text).expect("read back");
                let mut fresh = SpendRelay::new(format!("r{r}-{n}"));
                fresh.restore(kept, now);
                *relay = fresh;
            }
            4 => {
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
