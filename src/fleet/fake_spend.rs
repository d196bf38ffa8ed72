//! A spend object stand-in and a link to it, for tests: the object's clock
//! is a [`FakePlatform`]. Holds are answered when asked (the object takes
//! one call at a time, as a Durable Object does); background calls wait in
//! the link's queue until [`FakeSpendObject::pump`].

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use super::spend::{SpendCall, SpendInbox, SpendLink};
use super::spend_object::{HoldAnswer, HoldCall, SettleCall, SpendBook};
use super::LinkError;
use crate::platform::Platform;
use crate::policy::spend::Tally;
use crate::testing::FakePlatform;

/// Every cap's spend object. Clones share state, and each is also a
/// [`SpendLink`] to them (one per isolate, or shared).
#[derive(Clone)]
pub struct FakeSpendObject(Rc<RefCell<Objects>>);

/// A call waiting in the queue.
enum Queued {
    Spend(SpendCall),
    Settle(SettleCall),
}

struct Objects {
    platform: FakePlatform,
    books: BTreeMap<String, SpendBook>,
    queue: Vec<(Queued, SpendInbox)>,
    down: bool,
    calls: usize,
}

impl FakeSpendObject {
    /// Objects with nothing spent, on `platform`'s clock.
    pub fn new(platform: &FakePlatform) -> Self {
        FakeSpendObject(Rc::new(RefCell::new(Objects {
            platform: platform.clone(),
            books: BTreeMap::new(),
            queue: Vec::new(),
            down: false,
            calls: 0,
        })))
    }

    /// Makes every call fail (`true`) or work again.
    pub fn set_down(&self, down: bool) {
        self.0.borrow_mut().down = down;
    }

    /// What `route`'s object has booked.
    pub fn tally(&self, route: &str) -> Option<Tally> {
        let o = self.0.borrow();
        let book = o.books.get(route)?;
        Some(Tally {
            day: book.day,
            spent: book.spent,
        })
    }

    /// Picodollars `route`'s object holds, and in how many holds.
    pub fn held(&self, route: &str) -> (u64, usize) {
        let o = self.0.borrow();
        o.books
            .get(route)
            .map_or((0, 0), |b| (b.held(), b.holds.len()))
    }

    /// Calls that reached the objects.
    pub fn calls(&self) -> usize {
        self.0.borrow().calls
    }

    /// Calls waiting in the queue.
    pub fn queued(&self) -> usize {
        self.0.borrow().queue.len()
    }

    /// Runs `step` on `route`'s book as of now; `None` when down.
    fn step<T>(&self, route: &str, step: impl FnOnce(&mut SpendBook) -> T) -> Option<T> {
        let mut o = self.0.borrow_mut();
        if o.down {
            return None;
        }
        o.calls += 1;
        let now = o.platform.now();
        let stored = o.books.remove(route);
        let mut book = SpendBook::load(stored, now);
        let out = step(&mut book);
        o.books.insert(route.to_owned(), book);
        Some(out)
    }

    /// Answers every queued call, in order.
    pub fn pump(&self) {
        let queue = std::mem::take(&mut self.0.borrow_mut().queue);
        for (call, inbox) in queue {
            let (route, add) = match &call {
                Queued::Spend(c) => (c.route.clone(), c.add),
                Queued::Settle(c) => (c.route.clone(), c.add),
            };
            let answer = self.step(&route, |book| {
                match &call {
                    Queued::Spend(c) => book.add(c.add),
                    Queued::Settle(c) => book.settle(c),
                }
                book.standing().tally()
            });
            inbox.deliver(&route, add, answer);
        }
    }
}

impl SpendLink for FakeSpendObject {
    fn spend(&self, call: SpendCall, inbox: SpendInbox) {
        self.0.borrow_mut().queue.push((Queued::Spend(call), inbox));
    }

    fn settle(&self, call: SettleCall, inbox: SpendInbox) {
        self.0
            .borrow_mut()
            .queue
            .push((Queued::Settle(call), inbox));
    }

    async fn hold(&self, call: HoldCall) -> Result<HoldAnswer, LinkError> {
        let now = self.0.borrow().platform.now();
        self.step(&call.route, |book| book.hold(now, &call))
            .ok_or_else(|| LinkError("the spend object is down".into()))
    }
}
