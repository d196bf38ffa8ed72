//! A Durable Object stand-in and a link to it, for tests: the object's
//! clock is a [`FakePlatform`]; background
//! calls wait in the link's queue until [`FakeLink::pump`].

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use super::{Batch, Fleet, FleetLink, FleetPolicy, Inbox, Journal, LeaseAnswer, LinkError};
use crate::platform::Platform;
use crate::policy::breaker::BreakerPolicy;
use crate::policy::latency::DemotionPolicy;
use crate::testing::FakePlatform;

/// The fleet objects of every provider. Clones share state.
#[derive(Clone)]
pub struct FakeObject(Rc<RefCell<Objects>>);

struct Objects {
    platform: FakePlatform,
    policy: BreakerPolicy,
    lease_ttl: Duration,
    demotion: DemotionPolicy,
    fleets: BTreeMap<String, Fleet>,
    down: bool,
}

impl FakeObject {
    /// Empty objects whose breakers use `policy`.
    pub fn new(platform: &FakePlatform, policy: BreakerPolicy) -> Self {
        FakeObject(Rc::new(RefCell::new(Objects {
            platform: platform.clone(),
            policy,
            lease_ttl: FleetPolicy::default().lease_ttl,
            demotion: DemotionPolicy::default(),
            fleets: BTreeMap::new(),
            down: false,
        })))
    }

    /// Sets the probe lease's length.
    pub fn lease_ttl(self, ttl: Duration) -> Self {
        self.0.borrow_mut().lease_ttl = ttl;
        self
    }

    /// Sets how the objects judge latency samples.
    pub fn demotion(self, policy: DemotionPolicy) -> Self {
        self.0.borrow_mut().demotion = policy;
        self
    }

    /// Makes every call fail (`true`) or work again.
    pub fn set_down(&self, down: bool) {
        self.0.borrow_mut().down = down;
    }

    /// The stored fleet of `key`.
    pub fn fleet(&self, key: &str) -> Option<Fleet> {
        self.0.borrow().fleets.get(key).cloned()
    }

    /// Everything stored, as the objects would persist it.
    pub fn persist(&self) -> String {
        serde_json::to_string(&self.0.borrow().fleets).unwrap_or_default()
    }

    /// Objects restarted from what [`FakeObject::persist`] wrote.
    pub fn restore(platform: &FakePlatform, policy: BreakerPolicy, stored: &str) -> Self {
        let obj = FakeObject::new(platform, policy);
        obj.0.borrow_mut().fleets = serde_json::from_str(stored).unwrap_or_default();
        obj
    }

    fn call<T>(
        &self,
        key: &str,
        f: impl FnOnce(&mut Fleet, &BreakerPolicy, u64, Duration) -> T,
    ) -> Result<T, LinkError> {
        let mut o = self.0.borrow_mut();
        if o.down {
            return Err(LinkError("object down".into()));
        }
        let now = o.platform.now();
        let (policy, ttl) = (o.policy, o.lease_ttl);
        let fleet = o.fleets.entry(key.to_string()).or_default();
        Ok(f(fleet, &policy, now, ttl))
    }
}

/// Calls made over a link.
#[derive(Debug, Default)]
pub struct LinkCounts {
    /// Awaited lease requests.
    pub leases: Cell<usize>,
    /// Background report batches.
    pub reports: Cell<usize>,
    /// Verdicts in those batches.
    pub verdicts: Cell<usize>,
    /// Background refreshes.
    pub refreshes: Cell<usize>,
}

enum Job {
    Report(String, Box<Batch>, Inbox),
    Refresh(String, Inbox),
}

/// One isolate's link to the [`FakeObject`].
pub struct FakeLink {
    object: FakeObject,
    queue: RefCell<Vec<Job>>,
    counts: Rc<LinkCounts>,
}

impl FakeLink {
    /// A link to `object`.
    pub fn new(object: &FakeObject) -> Self {
        FakeLink {
            object: object.clone(),
            queue: RefCell::default(),
            counts: Rc::default(),
        }
    }

    /// The call counters, readable after the link moves into a store.
    pub fn counts(&self) -> Rc<LinkCounts> {
        self.counts.clone()
    }

    /// Background calls queued and not yet run.
    pub fn queued(&self) -> usize {
        self.queue.borrow().len()
    }

    /// Runs the queued background calls; returns how many ran.
    pub fn pump(&self) -> usize {
        let jobs = std::mem::take(&mut *self.queue.borrow_mut());
        let n = jobs.len();
        for job in jobs {
            match job {
                Job::Report(key, batch, inbox) => {
                    let demotion = self.object.0.borrow().demotion;
                    if let Ok(view) = self
                        .object
                        .call(&key, |f, p, now, _| f.report(p, &demotion, now, &batch))
                    {
                        inbox.deliver(&key, view);
                    }
                }
                Job::Refresh(key, inbox) => {
                    if let Ok(view) = self.object.call(&key, |f, p, now, _| f.view(p, now)) {
                        inbox.deliver(&key, view);
                    }
                }
            }
        }
        n
    }
}

impl FleetLink for FakeLink {
    async fn lease(&self, key: &str, holder: &str) -> Result<LeaseAnswer, LinkError> {
        self.counts.leases.set(self.counts.leases.get() + 1);
        self.object
            .call(key, |f, p, now, ttl| f.lease(p, ttl, now, holder))
    }

    fn report(&self, key: &str, batch: Batch, inbox: Inbox) {
        self.counts.reports.set(self.counts.reports.get() + 1);
        self.counts
            .verdicts
            .set(self.counts.verdicts.get() + batch.reports.len());
        self.queue
            .borrow_mut()
            .push(Job::Report(key.to_string(), Box::new(batch), inbox));
    }

    fn refresh(&self, key: &str, inbox: Inbox) {
        self.counts.refreshes.set(self.counts.refreshes.get() + 1);
        self.queue
            .borrow_mut()
            .push(Job::Refresh(key.to_string(), inbox));
    }

    async fn journal(&self, key: &str) -> Result<Journal, LinkError> {
        self.object.call(key, |f, p, now, _| f.journal(p, now))
    }
}
