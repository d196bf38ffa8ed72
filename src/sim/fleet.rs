//! Several isolates sharing breakers as the Worker's do: each a
//! [`FleetStore`](crate::fleet::FleetStore) over a link to one simulated
//! Durable Object per provider, running the real [`Fleet`] object logic.
//! Every call to an object takes [`ROUND_TRIP_MS`] of virtual time; reports
//! and refreshes run in the background, as tasks of the run's executor.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use super::exec::{Clock, Executor};
use crate::fleet::{Batch, Fleet, FleetLink, FleetPolicy, Inbox, Journal, LeaseAnswer, LinkError};
use crate::policy::breaker::BreakerPolicy;
use crate::policy::latency::DemotionPolicy;

/// An isolate's call to a Durable Object and back.
pub(crate) const ROUND_TRIP_MS: u64 = 5;

/// The objects: one [`Fleet`] per provider, with the breaker policy the
/// configuration gives it.
pub(crate) struct Objects {
    fleets: RefCell<BTreeMap<String, Fleet>>,
    default_policy: BreakerPolicy,
    policies: BTreeMap<String, BreakerPolicy>,
    lease_ttl: Duration,
}

impl Objects {
    pub(crate) fn new(default_policy: BreakerPolicy, policies: &[(String, BreakerPolicy)]) -> Self {
        Objects {
            fleets: RefCell::default(),
            default_policy,
            policies: policies.iter().cloned().collect(),
            lease_ttl: FleetPolicy::default().lease_ttl,
        }
    }

    fn call<T>(
        &self,
        key: &str,
        now: u64,
        f: impl FnOnce(&mut Fleet, &BreakerPolicy, u64, Duration) -> T,
    ) -> T {
        let policy = self.policies.get(key).unwrap_or(&self.default_policy);
        let mut fleets = self.fleets.borrow_mut();
        let fleet = fleets.entry(key.to_owned()).or_default();
        f(fleet, policy, now, self.lease_ttl)
    }
}

/// One isolate's link to the objects.
pub(crate) struct SimLink {
    objects: Rc<Objects>,
    clock: Clock,
    ex: Executor,
}

impl SimLink {
    pub(crate) fn new(objects: Rc<Objects>, clock: Clock, ex: Executor) -> Self {
        SimLink { objects, clock, ex }
    }

    fn later(
        &self,
        key: &str,
        inbox: Inbox,
        op: impl FnOnce(&mut Fleet, &BreakerPolicy, u64) -> crate::fleet::View + 'static,
    ) {
        let (objects, clock, key) = (self.objects.clone(), self.clock.clone(), key.to_owned());
        let arrives = clock.now() + ROUND_TRIP_MS;
        self.ex.spawn(async move {
            clock.at(arrives).await;
            let view = objects.call(&key, clock.now(), |f, p, now, _| op(f, p, now));
            inbox.deliver(&key, view);
        });
    }
}

impl FleetLink for SimLink {
    async fn lease(&self, key: &str, holder: &str) -> Result<LeaseAnswer, LinkError> {
        self.clock.at(self.clock.now() + ROUND_TRIP_MS).await;
        let now = self.clock.now();
        Ok(self
            .objects
            .call(key, now, |f, p, now, ttl| f.lease(p, ttl, now, holder)))
    }

    fn report(&self, key: &str, batch: Batch, inbox: Inbox) {
        // The simulated routes set no latency objectives: the samples are
        // judged with the default policy, as an object without one would.
        self.later(key, inbox, move |f, p, now| {
            f.report(p, &DemotionPolicy::default(), now, &batch)
        });
    }

    fn refresh(&self, key: &str, inbox: Inbox) {
        self.later(key, inbox, |f, p, now| f.view(p, now));
    }

    async fn journal(&self, key: &str) -> Result<Journal, LinkError> {
        self.clock.at(self.clock.now() + ROUND_TRIP_MS).await;
        let now = self.clock.now();
        Ok(self
            .objects
            .call(key, now, |f, p, now, _| f.journal(p, now)))
    }
}
