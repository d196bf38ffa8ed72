//! A spend object stand-in and a link to it, for tests: the object's clock
//! is a [`FakePlatform`]; calls wait in the link's queue until
//! [`FakeSpendObject::pump`].

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use super::spend::{fold_spend, SpendCall, SpendInbox, SpendLink};
use crate::platform::Platform;
use crate::policy::spend::Tally;
use crate::testing::FakePlatform;

/// Every route's spend object. Clones share state, and each is also a
/// [`SpendLink`] to them (one per isolate, or shared).
#[derive(Clone)]
pub struct FakeSpendObject(Rc<RefCell<Objects>>);

struct Objects {
    platform: FakePlatform,
    tallies: BTreeMap<String, Tally>,
    queue: Vec<(SpendCall, SpendInbox)>,
    down: bool,
    calls: usize,
}

impl FakeSpendObject {
    /// Objects with nothing spent, on `platform`'s clock.
    pub fn new(platform: &FakePlatform) -> Self {
        FakeSpendObject(Rc::new(RefCell::new(Objects {
            platform: platform.clone(),
            tallies: BTreeMap::new(),
            queue: Vec::new(),
            down: false,
            calls: 0,
        })))
    }

    /// Makes every call fail (`true`) or work again.
    pub fn set_down(&self, down: bool) {
        self.0.borrow_mut().down = down;
    }

    /// What `route`'s object holds.
    pub fn tally(&self, route: &str) -> Option<Tally> {
        self.0.borrow().tallies.get(route).copied()
    }

    /// Calls that reached the objects.
    pub fn calls(&self) -> usize {
        self.0.borrow().calls
    }

    /// Answers every queued call, in order.
    pub fn pump(&self) {
        let queue = std::mem::take(&mut self.0.borrow_mut().queue);
        for (call, inbox) in queue {
            let answer = {
                let mut o = self.0.borrow_mut();
                if o.down {
                    None
                } else {
                    o.calls += 1;
                    let now = o.platform.now();
                    let stored = o.tallies.get(&call.route).copied();
                    let tally = fold_spend(stored, now, call.add);
                    o.tallies.insert(call.route.clone(), tally);
                    Some(tally)
                }
            };
            inbox.deliver(&call.route, call.add, answer);
        }
    }
}

impl SpendLink for FakeSpendObject {
    fn spend(&self, call: SpendCall, inbox: SpendInbox) {
        self.0.borrow_mut().queue.push((call, inbox));
    }
}
