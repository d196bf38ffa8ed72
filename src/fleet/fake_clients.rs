//! Client objects stand-in and a link to them, for tests: the objects'
//! clock is a [`FakePlatform`]. Reports wait in the link's queue until
//! [`FakeClientObject::pump`], as a round trip to the object would.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use super::client_object::{ClientBook, ClientReport};
use super::clients::{ClientInbox, ClientLink};
use crate::platform::Platform;
use crate::policy::tenant::Used;
use crate::testing::FakePlatform;

/// Every client's object. Clones share state, and each is also a
/// [`ClientLink`] to them (one per isolate, or shared).
#[derive(Clone)]
pub struct FakeClientObject(Rc<RefCell<Objects>>);

struct Objects {
    platform: FakePlatform,
    books: BTreeMap<String, ClientBook>,
    queue: Vec<(ClientReport, ClientInbox)>,
    down: bool,
    calls: usize,
}

impl FakeClientObject {
    /// Objects with nothing reported, on `platform`'s clock.
    pub fn new(platform: &FakePlatform) -> Self {
        FakeClientObject(Rc::new(RefCell::new(Objects {
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

    /// What `client` used through every isolate, as its object knows it now.
    pub fn total(&self, client: &str) -> Used {
        let o = self.0.borrow();
        let now = o.platform.now();
        o.books
            .get(client)
            .map_or(Used::default(), |b| b.total(now))
    }

    /// Reports that reached the objects.
    pub fn calls(&self) -> usize {
        self.0.borrow().calls
    }

    /// Reports waiting in the queue.
    pub fn queued(&self) -> usize {
        self.0.borrow().queue.len()
    }

    /// Answers every report queued before it was called, in order (an
    /// answer's own follow-up waits for the next pump).
    pub fn pump(&self) {
        let queue = std::mem::take(&mut self.0.borrow_mut().queue);
        for (call, inbox) in queue {
            let (now, answer) = {
                let mut o = self.0.borrow_mut();
                let now = o.platform.now();
                let answer = if o.down {
                    None
                } else {
                    o.calls += 1;
                    let book = o.books.entry(call.client.clone()).or_default();
                    Some(book.report(now, &call))
                };
                (now, answer)
            };
            inbox.deliver(&call.client, now, answer);
        }
    }
}

impl ClientLink for FakeClientObject {
    fn report(&self, call: ClientReport, inbox: ClientInbox) {
        self.0.borrow_mut().queue.push((call, inbox));
    }
}
