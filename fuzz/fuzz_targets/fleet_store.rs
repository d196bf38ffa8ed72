//! The fleet protocol on the isolate's side: a `FleetStore` whose object
//! answers anything (any view, any lease answer, or an error), in any order,
//! at any clock, while requests acquire, record and release permits and
//! share the pool readings the views carry.
#![no_main]

mod common;

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use libfuzzer_sys::fuzz_target;
use resilient_llm::fleet::{Batch, Inbox, Journal, LeaseAnswer, LinkError, View};
use resilient_llm::testing::{block_on, FakePlatform};
use resilient_llm::{BreakerPolicy, BreakerStore, FleetLink, FleetStore, Outcome};

/// An object that answers what the input says, in order.
#[derive(Clone, Default)]
struct Scripted {
    leases: Rc<RefCell<VecDeque<Result<LeaseAnswer, LinkError>>>>,
    views: Rc<RefCell<VecDeque<View>>>,
}

impl FleetLink for Scripted {
    async fn lease(&self, _key: &str, _holder: &str) -> Result<LeaseAnswer, LinkError> {
        self.leases
            .borrow_mut()
            .pop_front()
            .unwrap_or_else(|| Err(LinkError("no answer".into())))
    }

    fn report(&self, key: &str, _batch: Batch, inbox: Inbox) {
        if let Some(v) = self.views.borrow_mut().pop_front() {
            inbox.deliver(key, v);
        }
    }

    fn refresh(&self, key: &str, inbox: Inbox) {
        if let Some(v) = self.views.borrow_mut().pop_front() {
            inbox.deliver(key, v);
        }
    }

    async fn journal(&self, _key: &str) -> Result<Journal, LinkError> {
        Err(LinkError("not scripted".into()))
    }
}

fuzz_target!(|input: &[u8]| {
    // lines: [op] [clock step] JSON (a view or a lease answer for the object to give)
    let link = Scripted::default();
    let policy = BreakerPolicy {
        failure_threshold: 2,
        minimum_calls: 2,
        window: 4,
        ..BreakerPolicy::default()
    };
    let store = FleetStore::new(link.clone(), "isolate-1", policy);
    let p = FakePlatform::new();
    let mut now: u64 = 1_700_000_000_000;
    for line in input.split(|b| *b == b'\n').take(64) {
        let [op, step, json @ ..] = line else {
            continue;
        };
        now = now.saturating_add(u64::from(*step) * 251);
        if let Ok(v) = serde_json::from_slice::<View>(json) {
            link.views.borrow_mut().push_back(v);
        } else if let Ok(a) = serde_json::from_slice::<LeaseAnswer>(json) {
            link.leases.borrow_mut().push_back(Ok(a));
        } else if json == b"down" {
            link.leases
                .borrow_mut()
                .push_back(Err(LinkError("down".into())));
        }
        let key = if op & 8 == 0 { "a" } else { "b" };
        match op % 4 {
            0 | 1 => {
                if let Ok(permit) = block_on(&p, store.try_acquire(key, now)) {
                    let outcome = if op % 4 == 0 {
                        Outcome::Success
                    } else {
                        Outcome::Failure
                    };
                    store.record(key, now, permit, outcome);
                }
            }
            2 => {
                if let Ok(permit) = block_on(&p, store.try_acquire(key, now)) {
                    store.release(key, permit);
                }
            }
            _ => {
                let permit = store.force(key, now);
                store.record(key, now, permit, Outcome::Ignored);
            }
        }
        // A pool reading the object gave goes back with the next batch.
        if let Some(reading) = store.fleet_pool(key) {
            store.share_pool(key, now, reading);
        }
        store.flush_due(now);
        let _ = store.snapshot(key);
    }
    store.flush_all();
});
