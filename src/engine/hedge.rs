//! Hedged requests (docs/design.md, "Hedged requests"): when a route's
//! first entry has not answered by a delay, the same request goes to the
//! next entry too; the first answer wins and the others are dropped, which
//! aborts their upstream fetches (the platform's contract). A dropped
//! attempt is recorded as `cancelled`: no breaker hears of it and no
//! statistic counts it. A budget, a share of the route's requests, keeps
//! an outage (every first attempt slow) from doubling the load.

use std::cell::RefCell;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::rc::Rc;
use std::task::Poll;
use std::time::Duration;

use crate::chat::ChatRequest;
use crate::engine::core::Core;
use crate::engine::cursor::{Cursor, Run};
use crate::engine::route::{Entry, Keyed, Reply, Step};
use crate::engine::store::BreakerStore;
use crate::error::{Error, ErrorKind, Exhausted, ProviderError};
use crate::platform::{Platform, UnixMillis};
use crate::policy::budget::{BudgetPolicy, RetryBudget};

/// When a hedge goes out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum HedgeAfter {
    /// A fixed delay after the attempt started.
    Fixed(Duration),
    /// The waiting entry's recent p95 (of whole answers at its provider);
    /// no hedge while it has none yet.
    P95,
}

/// A route's hedging; off unless configured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HedgePolicy {
    /// When the next entry is asked too.
    pub after: HedgeAfter,
    /// How many entries may be asked besides the first (default 1).
    pub max_extra: u32,
    /// The share of the route's requests that may be hedged (default 0.1),
    /// over a burst of one.
    pub budget: f64,
}

impl HedgePolicy {
    /// The budget: `budget` of a hedge earned per request, at most one
    /// saved up, nothing earned by time alone.
    pub(crate) fn bucket(&self) -> RetryBudget {
        RetryBudget::new(BudgetPolicy {
            ratio: self.budget,
            floor_per_sec: 0.0,
            capacity: 1.0,
        })
    }
}

/// One leg of a race: an entry asked (or a stream opened), boxed.
pub(crate) type Leg<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// One entry asked, with its own record of attempts (shared with its
/// future, read once the future is done or dropped).
struct Running<'a> {
    entry: Entry,
    run: Rc<RefCell<Run>>,
    leg: Option<Leg<'a, Step>>,
}

/// What woke a race.
pub(crate) enum Woke<T> {
    /// Leg `i` ended with its output (its slot is `None` from then on).
    Done(usize, T),
    /// The hedge timer fired.
    Hedge,
}

/// The race of whole answers and of streams alike: waits for the first of
/// `legs` still running (the slot `leg` finds in each) to end, or for
/// `timer` to fire.
pub(crate) async fn first_of<'l, R, T, Z: Future<Output = ()>>(
    legs: &mut [R],
    leg: impl Fn(&mut R) -> &mut Option<Leg<'l, T>>,
    timer: &mut Option<Pin<Box<Z>>>,
) -> Woke<T> {
    poll_fn(|cx| {
        for (i, slot) in legs.iter_mut().map(&leg).enumerate() {
            if let Some(Poll::Ready(out)) = slot.as_mut().map(|l| l.as_mut().poll(cx)) {
                *slot = None;
                return Poll::Ready(Woke::Done(i, out));
            }
        }
        match timer.as_mut().map(|t| t.as_mut().poll(cx)) {
            Some(Poll::Ready(())) => Poll::Ready(Woke::Hedge),
            Some(Poll::Pending) | None => Poll::Pending,
        }
    })
    .await
}

impl<P: Platform, S: BreakerStore> Core<P, S> {
    /// The delay before hedging `entry`, if there is one: for a stream
    /// (`stream`) its recent p95 is of the first token, for a whole answer
    /// of the answer.
    pub(crate) fn hedge_delay(
        &self,
        h: &HedgePolicy,
        entry: &Entry,
        stream: bool,
    ) -> Option<Duration> {
        match h.after {
            HedgeAfter::Fixed(d) => Some(d),
            HedgeAfter::P95 => self
                .model_stats
                .borrow()
                .get(self.key_of(entry).as_ref())
                .and_then(|s| match stream {
                    true => s.ttft().p95,
                    false => s.latency().p95,
                })
                .map(Duration::from_millis),
        }
    }

    /// Credits `route`'s budget with one request.
    pub(crate) fn deposit_hedge(&self, route: &str, h: &HedgePolicy) {
        self.hedge_budgets
            .borrow_mut()
            .entry(route.to_string())
            .or_insert_with(|| h.bucket())
            .deposit(self.platform.now());
    }

    /// Takes a hedge from `route`'s budget.
    pub(crate) fn take_hedge(&self, route: &str, h: &HedgePolicy, now: UnixMillis) -> bool {
        let mut budgets = self.hedge_budgets.borrow_mut();
        let bucket = budgets
            .entry(route.to_string())
            .or_insert_with(|| h.bucket());
        bucket.try_withdraw(now)
    }

    /// Runs the walk's first entry, hedged. `None` when every entry asked
    /// failed in a way that fails over: the walk goes on as usual, past them.
    pub(crate) async fn hedged(
        &self,
        walk: &mut Cursor<'_>,
        req: &ChatRequest,
        route: &str,
        h: &HedgePolicy,
    ) -> Option<Result<Reply, Error>> {
        self.deposit_hedge(route, h);
        let permit = walk.admit(self).await?;
        let mut legs = vec![self.leg(walk, walk.entry().clone(), permit, req)];
        let mut extra = 0;
        let mut timer = self
            .hedge_delay(h, walk.entry(), false)
            .map(|d| Box::pin(self.platform.sleep(d)));
        loop {
            let woke = first_of(&mut legs, |r| &mut r.leg, &mut timer).await;
            match woke {
                Woke::Hedge => {
                    timer = None;
                    if extra >= h.max_extra || !self.take_hedge(route, h, self.platform.now()) {
                        continue;
                    }
                    walk.pass();
                    let Some(permit) = walk.admit(self).await else {
                        continue;
                    };
                    extra += 1;
                    let entry = walk.entry().clone();
                    if extra < h.max_extra {
                        timer = self
                            .hedge_delay(h, &entry, false)
                            .map(|d| Box::pin(self.platform.sleep(d)));
                    }
                    legs.push(self.leg(walk, entry, permit, req));
                }
                Woke::Done(i, step) => {
                    let done = legs.remove(i);
                    let entry = done.entry.clone();
                    self.merge(walk, done);
                    match step {
                        Step::Answered(response) => {
                            self.cancel(walk, legs);
                            return Some(Ok(Reply::new(
                                &entry,
                                *response,
                                walk.run.take_attempts(),
                            )));
                        }
                        Step::Stop(error) => {
                            self.cancel(walk, legs);
                            return Some(Err(stop(walk, &entry, error)));
                        }
                        // The last to fail moves the walk past it.
                        Step::Next(error) if legs.is_empty() => {
                            walk.fail_over(self, &error);
                            return None;
                        }
                        Step::Next(_) => {}
                    }
                }
            }
        }
    }

    /// `entry` asked under its own record of attempts.
    fn leg<'a>(
        &'a self,
        walk: &Cursor<'_>,
        entry: Entry,
        permit: crate::policy::breaker::Permit,
        req: &'a ChatRequest,
    ) -> Running<'a> {
        let run = Rc::new(RefCell::new(walk.run.fork()));
        let (shared, owned, key) = (Rc::clone(&run), entry.clone(), Rc::clone(walk.key()));
        // The record is borrowed only inside this future (never from
        // outside while it runs): read after it ends or is dropped.
        #[allow(clippy::await_holding_refcell_ref)]
        let leg: Leg<'a, Step> = Box::pin(async move {
            let mut run = shared.borrow_mut();
            let entry = Keyed::new(&owned, &key);
            self.step(entry, permit, req, &mut run).await
        });
        Running {
            entry,
            run,
            leg: Some(leg),
        }
    }

    /// The attempts of a leg that ended, into the request's record.
    fn merge(&self, walk: &mut Cursor<'_>, done: Running<'_>) {
        drop(done.leg);
        let mut run = done.run.borrow_mut();
        walk.run.attempts.append(&mut run.attempts);
        walk.run.attempts.sort_by_key(|a| a.started_at);
    }

    /// Drops the legs still running (aborting their fetches, giving their
    /// permits back without a verdict) and records each attempt in flight
    /// as cancelled.
    fn cancel(&self, walk: &mut Cursor<'_>, legs: Vec<Running<'_>>) {
        let now = self.platform.now();
        for mut r in legs {
            r.leg = None;
            let mut run = r.run.borrow_mut();
            if let Some(in_flight) = run.in_flight.take() {
                run.cancelled(&r.entry, in_flight, now);
            }
            drop(run);
            self.merge(walk, r);
        }
    }
}

/// The call's end on an error from `entry` that does not fail over.
fn stop(walk: &mut Cursor<'_>, entry: &Entry, error: ProviderError) -> Error {
    let attempts = walk.run.take_attempts();
    match error.kind {
        ErrorKind::DeadlineExceeded => Error::AllProvidersFailed(Exhausted { attempts }),
        _ => Error::Rejected {
            provider: entry.provider.clone(),
            error,
            attempts,
        },
    }
}
