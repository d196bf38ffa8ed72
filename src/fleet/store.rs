//! The isolate side: a [`BreakerStore`] that decides from memory and talks
//! to the fleet in the background.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::{Rc, Weak};
use std::time::Duration;

use crate::engine::key::provider_of;
use crate::engine::store::BreakerStore;
use crate::platform::{millis, UnixMillis};
use crate::policy::breaker::{
    Breaker, BreakerPolicy, CircuitOpen, Outcome, Permit, PermitKind, Snapshot, State,
};
use crate::policy::pool::{newest, PoolReading};

use super::{
    Batch, FleetLink, FleetPolicy, Journal, Latencies, LeaseAnswer, Report, Sample, Verdict, View,
};

/// Where background answers come back to a [`FleetStore`]. Holds no strong
/// reference: answers for a store that is gone are dropped.
#[derive(Clone)]
pub struct Inbox(Weak<RefCell<Slots>>);

impl Inbox {
    /// Delivers the fleet's view of `key`.
    pub fn deliver(&self, key: &str, view: View) {
        if let Some(slots) = self.0.upgrade() {
            if let Some(slot) = slots.borrow_mut().slots.get_mut(key) {
                slot.apply(view);
            }
        }
    }
}

/// Lease permits carry their token with this bit set, so they can never be
/// mistaken for a permit of the local breaker (whose generations stay far
/// below it).
const LEASE_BIT: u64 = 1 << 63;

#[derive(Default)]
pub(super) struct Slots {
    pub(super) slots: BTreeMap<String, Slot>,
}

/// One provider's state in one isolate.
pub(super) struct Slot {
    policy: BreakerPolicy,
    local: Breaker,
    view: Option<View>,
    /// A refresh is in flight since.
    refreshing_since: Option<UnixMillis>,
    /// A lease request is in flight since (others in this isolate wait).
    asking_since: Option<UnixMillis>,
    /// After a `Busy` answer: do not ask again before.
    busy_until: Option<UnixMillis>,
    /// The probe lease this isolate holds: (token, expires_at).
    lease: Option<(u64, UnixMillis)>,
    pub(super) pending: Vec<Report>,
    /// Latency samples to send with the next batch.
    samples: Vec<Sample>,
    /// The newest pool reading to send with the next batch.
    pool: Option<PoolReading>,
    /// Since when samples or a reading wait.
    extras_since: Option<UnixMillis>,
}

enum Gate {
    Pass,
    Reject(UnixMillis),
    AskLease,
}

impl Slot {
    fn new(policy: BreakerPolicy) -> Self {
        Slot {
            policy,
            local: Breaker::new(policy),
            view: None,
            refreshing_since: None,
            asking_since: None,
            busy_until: None,
            lease: None,
            pending: Vec::new(),
            samples: Vec::new(),
            pool: None,
            extras_since: None,
        }
    }

    /// Takes a newer view of the fleet.
    fn apply(&mut self, view: View) {
        self.refreshing_since = None;
        let old = self.view.as_ref();
        if old.is_some_and(|o| view.generation < o.generation) {
            return; // an answer that was overtaken
        }
        if old.is_none_or(|o| o.generation != view.generation) {
            // The fleet moved on: an old busy answer or lease is void.
            self.busy_until = None;
            self.lease = None;
        }
        if view.probes == 0 {
            // The probe that made the answer busy was given back (or
            // lapsed): ask again now, not at the lease's end.
            self.busy_until = None;
        }
        // The fleet recovered (a probe closed it): so does this isolate.
        let recovered =
            old.is_some_and(|o| o.state != State::Closed) && view.state == State::Closed;
        if recovered && self.local.state() != State::Closed {
            self.local = Breaker::new(self.policy);
        }
        self.view = Some(view);
    }

    fn is_stale(&self, ttl: Duration, now: UnixMillis) -> bool {
        let fresh = self
            .view
            .as_ref()
            .is_some_and(|v| now < v.as_of.saturating_add(millis(ttl)));
        let refreshing = self
            .refreshing_since
            .is_some_and(|t| now < t.saturating_add(millis(ttl)));
        !fresh && !refreshing
    }

    /// What the fleet says about a call at `now`.
    fn gate(&self, ttl: Duration, now: UnixMillis) -> Gate {
        let Some(view) = &self.view else {
            return Gate::Pass; // a fresh isolate starts closed
        };
        match view.state {
            State::Closed => Gate::Pass,
            State::Open { until } if now < until => Gate::Reject(until),
            State::Open { .. } | State::HalfOpen { .. } => {
                if let Some((_, expires_at)) = self.lease.filter(|(_, e)| now < *e) {
                    return Gate::Reject(expires_at.min(now.saturating_add(millis(ttl))));
                }
                if let Some(t) = self.asking_since {
                    if now < t.saturating_add(millis(ttl)) {
                        return Gate::Reject(now);
                    }
                }
                match self.busy_until {
                    Some(until) if now < until => Gate::Reject(until),
                    _ => Gate::AskLease,
                }
            }
        }
    }

    /// Whether a failure now could open the fleet breaker, as far as the
    /// cached view tells: its consecutive failures, those queued here and
    /// this one reach the threshold. Such a failure is sent at once, so the
    /// fleet opens (and every isolate learns it within one refresh) without
    /// waiting out the batch delay. Failures short of that stay batched.
    fn could_open_fleet(&self) -> bool {
        let Some(view) = &self.view else {
            return false; // no fleet view: the local transition flushes
        };
        if view.state != State::Closed {
            return false;
        }
        let queued = self
            .pending
            .iter()
            .filter(|r| r.verdict == Verdict::Failure)
            .count();
        let count = u64::from(view.consecutive_failures) + queued as u64 + 1;
        count >= u64::from(self.policy.failure_threshold.max(1))
    }

    fn is_due(&self, policy: &FleetPolicy, now: UnixMillis) -> bool {
        let first = self.pending.first().map(|r| r.at);
        let oldest = match (first, self.extras_since) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => match a.or(b) {
                Some(t) => t,
                None => return false,
            },
        };
        self.pending.len() + self.samples.len() >= policy.max_batch.max(1)
            || now >= oldest.saturating_add(millis(policy.max_delay))
    }

    fn has_pending(&self) -> bool {
        !self.pending.is_empty() || !self.samples.is_empty() || self.pool.is_some()
    }

    /// What is queued, taken for one call.
    fn take(&mut self, urgent: bool) -> Batch {
        self.extras_since = None;
        Batch {
            reports: std::mem::take(&mut self.pending),
            samples: std::mem::take(&mut self.samples),
            pool: self.pool.take(),
            urgent,
        }
    }
}

/// A [`BreakerStore`] shared fleet-wide through a [`FleetLink`]: decides
/// from memory, reports in the background, awaits only for a probe lease.
pub struct FleetStore<L: FleetLink> {
    link: L,
    holder: String,
    policy: FleetPolicy,
    default_breaker: BreakerPolicy,
    breakers: BTreeMap<String, BreakerPolicy>,
    pub(super) slots: Rc<RefCell<Slots>>,
}

impl<L: FleetLink> FleetStore<L> {
    /// A store over `link` whose breakers all use `breaker`; `holder` names
    /// this isolate in leases.
    pub fn new(link: L, holder: impl Into<String>, breaker: BreakerPolicy) -> Self {
        FleetStore {
            link,
            holder: holder.into(),
            policy: FleetPolicy::default(),
            default_breaker: breaker,
            breakers: BTreeMap::new(),
            slots: Rc::default(),
        }
    }

    /// Sets how the store shares with the fleet.
    pub fn fleet_policy(mut self, policy: FleetPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Gives `key` its own breaker policy.
    pub fn with_policy(mut self, key: impl Into<String>, policy: BreakerPolicy) -> Self {
        self.breakers.insert(key.into(), policy);
        self
    }

    /// The link.
    pub fn link(&self) -> &L {
        &self.link
    }

    /// What the fleet remembers of `key`'s breaker (its counters and recent
    /// transitions); `None` when its object cannot be reached.
    pub async fn journal(&self, key: &str) -> Option<Journal> {
        self.link.journal(key).await.ok()
    }

    /// The cached fleet view of `key`, if any.
    pub fn view(&self, key: &str) -> Option<View> {
        self.slots.borrow().slots.get(key).and_then(|s| s.view)
    }

    /// Sends every queued batch that is due (full, or old enough). The host
    /// calls it once a request is done.
    pub fn flush_due(&self, now: UnixMillis) {
        let due: Vec<(String, Batch)> = {
            let mut slots = self.slots.borrow_mut();
            slots
                .slots
                .iter_mut()
                .filter(|(_, s)| s.is_due(&self.policy, now))
                .map(|(k, s)| (k.clone(), s.take(false)))
                .collect()
        };
        for (key, batch) in due {
            self.link.report(&key, batch, self.inbox());
        }
    }

    /// Sends every queued verdict now.
    pub fn flush_all(&self) {
        let all: Vec<(String, Batch)> = {
            let mut slots = self.slots.borrow_mut();
            slots
                .slots
                .iter_mut()
                .filter(|(_, s)| s.has_pending())
                .map(|(k, s)| (k.clone(), s.take(false)))
                .collect()
        };
        for (key, batch) in all {
            self.link.report(&key, batch, self.inbox());
        }
    }

    fn inbox(&self) -> Inbox {
        Inbox(Rc::downgrade(&self.slots))
    }

    /// Refreshes, in the background, each of `keys` whose view is stale
    /// (and not already being fetched) and that `due` picks by its view.
    fn refresh_where<'k>(
        &self,
        keys: impl IntoIterator<Item = &'k str>,
        now: UnixMillis,
        due: impl Fn(Option<&View>) -> bool,
    ) {
        let ttl = self.policy.ttl;
        let cold: Vec<&str> = keys
            .into_iter()
            .filter(|key| {
                self.with(key, |s| {
                    let cold = due(s.view.as_ref()) && s.is_stale(ttl, now);
                    if cold {
                        s.refreshing_since = Some(now);
                    }
                    cold
                })
            })
            .collect();
        for key in cold {
            self.link.refresh(key, self.inbox());
        }
    }

    fn breaker_policy(&self, key: &str) -> BreakerPolicy {
        self.breakers
            .get(key)
            .or_else(|| self.breakers.get(provider_of(key)))
            .copied()
            .unwrap_or(self.default_breaker)
    }

    fn with<T>(&self, key: &str, f: impl FnOnce(&mut Slot) -> T) -> T {
        let mut slots = self.slots.borrow_mut();
        if let Some(slot) = slots.slots.get_mut(key) {
            return f(slot);
        }
        f(slots
            .slots
            .entry(key.to_owned())
            .or_insert_with(|| Slot::new(self.breaker_policy(key))))
    }

    /// Queues `report`; sends the batch at once when `now_flush`, or when due.
    fn queue(&self, key: &str, now: UnixMillis, report: Report, now_flush: bool) {
        let batch = self.with(key, |s| {
            s.pending.push(report);
            (now_flush || s.is_due(&self.policy, now)).then(|| s.take(now_flush))
        });
        if let Some(batch) = batch {
            self.link.report(key, batch, self.inbox());
        }
    }

    /// Adds what travels with the verdicts (a sample, a pool reading) to
    /// `key`'s next batch, sent only when the batch is due anyway.
    fn queue_extra(&self, key: &str, now: UnixMillis, add: impl FnOnce(&mut Slot)) {
        let batch = self.with(key, |s| {
            add(s);
            s.extras_since.get_or_insert(now);
            s.is_due(&self.policy, now).then(|| s.take(false))
        });
        if let Some(batch) = batch {
            self.link.report(key, batch, self.inbox());
        }
    }

    fn record_lease(&self, key: &str, now: UnixMillis, token: u64, verdict: Verdict) {
        let held = self.with(key, |s| {
            if s.lease.map(|(t, _)| t) != Some(token) {
                return false; // lapsed, or the fleet moved on
            }
            s.lease = None;
            // Until the object answers, assume what the verdict does to it
            // (same generation: the object's answer, one generation on,
            // replaces the guess; an older answer in flight may undo it for
            // one refresh, which costs at most one lease question).
            if let Some(v) = &mut s.view {
                match verdict {
                    Verdict::Success => {
                        v.state = State::Closed;
                        v.consecutive_failures = 0;
                        s.local = Breaker::new(s.policy);
                    }
                    Verdict::Failure => {
                        v.state = State::Open {
                            until: now.saturating_add(millis(s.policy.cooldown)),
                        };
                    }
                    Verdict::Abandoned => {}
                }
            }
            true
        });
        if held {
            let report = Report {
                at: now,
                verdict,
                lease: Some(token),
            };
            self.queue(key, now, report, true);
        }
    }
}

fn lease_token(permit: Permit) -> Option<u64> {
    (permit.kind == PermitKind::Probe && permit.generation & LEASE_BIT != 0)
        .then_some(permit.generation & !LEASE_BIT)
}

impl<L: FleetLink> BreakerStore for FleetStore<L> {
    async fn try_acquire(&self, key: &str, now: UnixMillis) -> Result<Permit, CircuitOpen> {
        let ttl = self.policy.ttl;
        let (gate, refresh) = self.with(key, |s| {
            let refresh = s.is_stale(ttl, now);
            if refresh {
                s.refreshing_since = Some(now);
            }
            let gate = s.gate(ttl, now);
            if let Gate::AskLease = gate {
                s.asking_since = Some(now);
            }
            (gate, refresh)
        });
        if refresh {
            self.link.refresh(key, self.inbox());
        }
        match gate {
            Gate::Pass => self.with(key, |s| s.local.try_acquire(now)),
            Gate::Reject(until) => Err(CircuitOpen { until }),
            Gate::AskLease => {
                let answer = self.link.lease(key, &self.holder).await;
                self.with(key, |s| {
                    s.asking_since = None;
                    match answer {
                        Ok(LeaseAnswer::Granted {
                            token,
                            expires_at,
                            view,
                        }) => {
                            s.apply(view);
                            s.refreshing_since = None;
                            s.lease = Some((token, expires_at));
                            Ok(Permit {
                                kind: PermitKind::Probe,
                                generation: LEASE_BIT | (token & !LEASE_BIT),
                                failing: false,
                            })
                        }
                        Ok(LeaseAnswer::Busy { until, view }) => {
                            s.apply(view);
                            s.busy_until = Some(until);
                            Err(CircuitOpen { until })
                        }
                        Ok(LeaseAnswer::Closed { view }) => {
                            s.apply(view);
                            s.local.try_acquire(now)
                        }
                        Err(_) => {
                            // The fleet is out of reach: decide locally.
                            s.view = None;
                            s.local.try_acquire(now)
                        }
                    }
                })
            }
        }
    }

    fn force(&self, key: &str, now: UnixMillis) -> Permit {
        self.with(key, |s| s.local.force(now))
    }

    fn may_retry(&self, key: &str, now: UnixMillis, permit: &mut Permit, failed: bool) -> bool {
        let ttl = self.policy.ttl;
        self.with(key, |s| {
            if failed {
                s.local.mark_failing(permit);
            }
            matches!(s.gate(ttl, now), Gate::Pass) && s.local.may_retry(*permit)
        })
    }

    fn record(&self, key: &str, now: UnixMillis, permit: Permit, outcome: Outcome) {
        if let Some(token) = lease_token(permit) {
            let verdict = match outcome {
                Outcome::Success => Verdict::Success,
                Outcome::Failure => Verdict::Failure,
                Outcome::Ignored => Verdict::Abandoned,
            };
            self.record_lease(key, now, token, verdict);
            return;
        }
        let (transition, tipping) = self.with(key, |s| {
            let before = s.local.state().name();
            s.local.record(now, permit, outcome);
            let tipping = outcome == Outcome::Failure && s.could_open_fleet();
            (before != s.local.state().name(), tipping)
        });
        let verdict = match outcome {
            Outcome::Success => Verdict::Success,
            Outcome::Failure => Verdict::Failure,
            Outcome::Ignored => return,
        };
        let report = Report {
            at: now,
            verdict,
            lease: None,
        };
        self.queue(key, now, report, transition || tipping);
    }

    fn release(&self, key: &str, permit: Permit) {
        match lease_token(permit) {
            Some(token) => {
                let now = self.with(key, |s| s.view.as_ref().map_or(0, |v| v.as_of));
                self.record_lease(key, now, token, Verdict::Abandoned);
            }
            None => self.with(key, |s| s.local.release(permit)),
        }
    }

    fn note_failure(&self, key: &str, now: UnixMillis) {
        let counted = self.with(key, |s| {
            let before = s.local.state();
            s.local.note_failure(now);
            let urgent = before.name() != s.local.state().name() || s.could_open_fleet();
            (before == State::Closed).then_some(urgent)
        });
        // The object folds it like any verdict without a lease.
        if let Some(transition) = counted {
            let report = Report {
                at: now,
                verdict: Verdict::Failure,
                lease: None,
            };
            self.queue(key, now, report, transition);
        }
    }

    /// Queued with the verdicts: a sample alone never makes a call before
    /// the batch is due.
    fn sample(&self, key: &str, now: UnixMillis, sample: Sample) {
        self.queue_extra(key, now, |s| s.samples.push(sample));
    }

    fn latencies(&self, key: &str) -> Option<Latencies> {
        let slots = self.slots.borrow();
        slots.slots.get(key)?.view.as_ref().map(|v| v.latencies)
    }

    /// Kept for the next batch (the newest of those seen since the last),
    /// never a call of its own.
    fn share_pool(&self, key: &str, now: UnixMillis, reading: PoolReading) {
        self.queue_extra(key, now, |s| s.pool = newest(s.pool, Some(reading)));
    }

    fn fleet_pool(&self, key: &str) -> Option<PoolReading> {
        let slots = self.slots.borrow();
        slots.slots.get(key)?.view.as_ref()?.pool
    }

    fn snapshot(&self, key: &str) -> Option<Snapshot> {
        let slots = self.slots.borrow();
        let s = slots.slots.get(key)?;
        let mut snap = s.local.snapshot();
        if let Some(view) = &s.view {
            // The stricter of the two: the fleet's open beats a local closed.
            let fleet_blocks = !matches!(view.state, State::Closed);
            if fleet_blocks && matches!(snap.state, State::Closed) {
                snap.state = view.state;
            }
            snap.consecutive_failures = snap.consecutive_failures.max(view.consecutive_failures);
        }
        Some(snap)
    }

    /// Starts a background refresh of every key in `keys` this isolate has
    /// no view of yet (and is not already fetching): the first request of a
    /// route learns the fleet's state of all its entries, not only of the
    /// one it calls first. A stale view of a model demoted for its latency
    /// is refreshed too: tried last, it is rarely called, and its
    /// restoration must still reach this isolate within one refresh.
    fn warm<'k>(&self, keys: impl IntoIterator<Item = &'k str>, now: UnixMillis) {
        self.refresh_where(keys, now, |v| v.is_none_or(|v| v.latencies.any_demoted()));
    }

    /// Every stale view is refreshed, not only missing ones: an isolate
    /// that serves no request of a model still shows its fleet state as it
    /// stands within one refresh.
    fn look<'k>(&self, keys: impl IntoIterator<Item = &'k str>, now: UnixMillis) {
        self.refresh_where(keys, now, |_| true);
    }
}
