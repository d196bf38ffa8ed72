//! Fleet-wide breaker state (DESIGN.md §4), sans-IO.
//!
//! Many isolates serve one gateway. Each keeps a local breaker per provider
//! and a cached copy of the fleet's breaker, which lives in one Durable
//! Object per provider. This module is the protocol between them, as pure
//! logic; the Worker host only moves its messages.
//!
//! - **The object side**, [`Fleet`]: folds batches of [`Report`]s from every
//!   isolate into one [`Breaker`] (the same state machine), grants the
//!   half-open **probe lease** (one probe fleet-wide per cooldown, with an
//!   expiry so a dead prober cannot pin the state; the holder's verdict
//!   closes or re-opens it), and answers state queries with a [`View`]. It is
//!   plain serde data: the object loads it, calls one method and stores it
//!   back, with no `.await` in between.
//! - **The isolate side**, [`FleetStore`]: a [`BreakerStore`] that decides
//!   from memory (local breaker + cached [`View`], fresh for
//!   [`FleetPolicy::ttl`]). Verdicts are queued and sent in the background in
//!   batches, at once on a local transition; a stale view is refreshed in the
//!   background while the stale one keeps answering. The only awaited call
//!   is [`FleetLink::lease`], made when a fleet cooldown has ended and a
//!   probe must be asked for.
//!
//! When the object cannot be reached, an isolate falls back to its local
//! breaker: losing the fleet's memory must not stop traffic.

use std::cell::RefCell;
use std::rc::{Rc, Weak};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::breaker::{
    Breaker, BreakerPolicy, CircuitOpen, Outcome, Permit, PermitKind, Snapshot, State,
};
use crate::platform::{millis, UnixMillis};
use crate::store::BreakerStore;
use crate::table::Table;

/// How an isolate shares its breakers with the fleet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FleetPolicy {
    /// How long a cached fleet view is fresh (default 1 s). A stale one still
    /// answers while a refresh runs in the background.
    pub ttl: Duration,
    /// How long a probe lease lasts before the object gives the probe to
    /// someone else (default 30 s): a prober that died cannot pin the
    /// breaker half-open for longer.
    pub lease_ttl: Duration,
    /// Queued verdicts that make a batch worth sending at once (default
    /// 256). Only a cap on a batch's size: `max_delay` bounds how late the
    /// fleet hears of a verdict, and a local transition is sent at once. A
    /// call to the object costs far more than a verdict in it (at the edge
    /// benchmark's rate, batches of 32 cost 4 % of the Worker's CPU).
    pub max_batch: usize,
    /// How long a verdict may wait in the queue (default 1 s).
    pub max_delay: Duration,
}

impl Default for FleetPolicy {
    fn default() -> Self {
        FleetPolicy {
            ttl: Duration::from_secs(1),
            lease_ttl: Duration::from_secs(30),
            max_batch: 256,
            max_delay: Duration::from_secs(1),
        }
    }
}

// ------------------------------------------------------------------ wire

/// The fleet breaker as isolates see it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct View {
    /// Where the fleet breaker stands. An `Open` whose `until` has passed
    /// means a probe may be asked for.
    pub state: State,
    /// Bumped on every fleet transition; orders views.
    pub generation: u64,
    /// Failures since the last success, fleet-wide.
    pub consecutive_failures: u32,
    /// The fleet failure rate over the breaker's window.
    pub failure_rate: f64,
    /// When the object answered (its clock).
    pub as_of: UnixMillis,
}

/// A verdict an isolate sends to the fleet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The provider answered.
    Success,
    /// The provider failed (after its retries).
    Failure,
    /// A probe ended without a verdict (abandoned, or the request itself was
    /// bad): its lease is given back.
    Abandoned,
}

/// One verdict, as an isolate reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// When the call ended (the isolate's clock).
    pub at: UnixMillis,
    /// How it went.
    pub verdict: Verdict,
    /// The probe lease the call was made under, if it was the fleet's probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<u64>,
}

/// The object's answer to a probe-lease request.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
pub enum LeaseAnswer {
    /// The caller holds the fleet's probe until `expires_at`; its verdict
    /// closes or re-opens the fleet breaker.
    Granted {
        /// Names the lease in the verdict's [`Report`].
        token: u64,
        /// When the object gives the probe to someone else.
        expires_at: UnixMillis,
        /// The fleet after granting it.
        view: View,
    },
    /// No probe now: the cooldown has not ended, or another isolate holds
    /// the lease. Ask again at `until` at the earliest.
    Busy {
        /// When asking again may succeed.
        until: UnixMillis,
        /// The fleet as it stands.
        view: View,
    },
    /// The fleet breaker is closed: no probe is needed.
    Closed {
        /// The fleet as it stands.
        view: View,
    },
}

// ------------------------------------------------------------------ object side

/// A granted probe lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Lease {
    /// The lease's name.
    pub token: u64,
    /// The fleet breaker's permit behind it.
    pub permit: Permit,
    /// Who holds it (an isolate id, for diagnostics).
    pub holder: String,
    /// When it lapses.
    pub expires_at: UnixMillis,
}

/// One provider's fleet breaker: what its Durable Object persists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Fleet {
    /// The fleet breaker.
    pub breaker: Snapshot,
    /// Probe leases granted and not yet answered.
    #[serde(default)]
    pub leases: Vec<Lease>,
    /// The next lease token.
    #[serde(default)]
    pub next_token: u64,
    /// When the breaker last changed state: verdicts of calls that ended
    /// before it describe an older state and are ignored.
    #[serde(default)]
    pub changed_at: UnixMillis,
}

impl Default for Fleet {
    fn default() -> Self {
        Fleet::new()
    }
}

impl Fleet {
    /// A closed fleet breaker.
    pub fn new() -> Self {
        Fleet {
            breaker: Breaker::new(BreakerPolicy::default()).snapshot(),
            leases: Vec::new(),
            next_token: 1,
            changed_at: 0,
        }
    }

    /// Folds a batch of verdicts into the fleet breaker and answers with the
    /// view after it.
    ///
    /// A verdict under a live lease is the probe's: it closes or re-opens
    /// the breaker (an abandoned probe gives its permit back). Other
    /// verdicts count only while the breaker is closed and only if they
    /// ended after its last transition; calls let through by a stale cache
    /// while it was open say nothing new.
    pub fn fold(&mut self, policy: &BreakerPolicy, now: UnixMillis, reports: &[Report]) -> View {
        let mut b = self.restore(policy, now);
        for r in reports {
            match r.lease {
                Some(token) => {
                    let Some(i) = self.leases.iter().position(|l| l.token == token) else {
                        continue; // lapsed or unknown: another probe took over
                    };
                    let lease = self.leases.remove(i);
                    match r.verdict {
                        Verdict::Success => b.record(now, lease.permit, Outcome::Success),
                        Verdict::Failure => b.record(now, lease.permit, Outcome::Failure),
                        Verdict::Abandoned => b.release(lease.permit),
                    }
                }
                None => {
                    let counts = matches!(b.state(), State::Closed) && r.at >= self.changed_at;
                    let outcome = match r.verdict {
                        Verdict::Success => Outcome::Success,
                        Verdict::Failure => Outcome::Failure,
                        Verdict::Abandoned => continue,
                    };
                    if counts {
                        if let Ok(permit) = b.try_acquire(now) {
                            b.record(now, permit, outcome);
                        }
                    }
                }
            }
            self.save(&b, now);
        }
        self.save(&b, now);
        self.view_of(&b, now)
    }

    /// Asks for the probe lease on behalf of `holder`.
    pub fn lease(
        &mut self,
        policy: &BreakerPolicy,
        lease_ttl: Duration,
        now: UnixMillis,
        holder: &str,
    ) -> LeaseAnswer {
        let mut b = self.restore(policy, now);
        let answer = match b.state() {
            State::Closed => LeaseAnswer::Closed {
                view: self.view_of(&b, now),
            },
            State::Open { until } if now < until => LeaseAnswer::Busy {
                until,
                view: self.view_of(&b, now),
            },
            State::Open { .. } | State::HalfOpen { .. } => match b.try_acquire(now) {
                Ok(permit) if permit.kind == PermitKind::Probe => {
                    let token = self.next_token.max(1);
                    self.next_token = token + 1;
                    let expires_at = now.saturating_add(millis(lease_ttl));
                    self.leases.push(Lease {
                        token,
                        permit,
                        holder: holder.chars().take(64).collect(),
                        expires_at,
                    });
                    self.save(&b, now);
                    LeaseAnswer::Granted {
                        token,
                        expires_at,
                        view: self.view_of(&b, now),
                    }
                }
                // Not a probe: the breaker cannot be half-open here; treat
                // it as closed without keeping the permit.
                Ok(_) => LeaseAnswer::Closed {
                    view: self.view_of(&b, now),
                },
                Err(CircuitOpen { .. }) => LeaseAnswer::Busy {
                    until: self
                        .leases
                        .iter()
                        .map(|l| l.expires_at)
                        .min()
                        .unwrap_or(now)
                        .max(now),
                    view: self.view_of(&b, now),
                },
            },
        };
        self.save(&b, now);
        answer
    }

    /// The fleet as it stands (lapsed leases are given back first).
    pub fn view(&mut self, policy: &BreakerPolicy, now: UnixMillis) -> View {
        let b = self.restore(policy, now);
        self.save(&b, now);
        self.view_of(&b, now)
    }

    /// The breaker, with lapsed leases' permits given back.
    fn restore(&mut self, policy: &BreakerPolicy, now: UnixMillis) -> Breaker {
        let mut b = Breaker::restore(*policy, self.breaker.clone());
        let generation = b.snapshot().generation;
        self.leases.retain(|l| {
            // A lease from an older generation is void; a lapsed one gives
            // its probe back so someone else may probe.
            if l.permit.generation != generation {
                return false;
            }
            if now >= l.expires_at {
                b.release(l.permit);
                return false;
            }
            true
        });
        b
    }

    fn save(&mut self, b: &Breaker, now: UnixMillis) {
        let snap = b.snapshot();
        if snap.generation != self.breaker.generation {
            self.changed_at = now;
            self.leases
                .retain(|l| l.permit.generation == snap.generation);
        }
        self.breaker = snap;
    }

    fn view_of(&self, b: &Breaker, now: UnixMillis) -> View {
        View {
            state: b.state(),
            generation: b.snapshot().generation,
            consecutive_failures: b.consecutive_failures(),
            failure_rate: b.failure_rate(),
            as_of: now,
        }
    }
}

// ------------------------------------------------------------------ isolate side

/// The fleet object could not be reached or answered nonsense.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("fleet breaker unreachable: {0}")]
pub struct LinkError(pub String);

/// How an isolate reaches the fleet's objects: one per provider `key`.
#[allow(async_fn_in_trait)] // single-threaded by design; futures are !Send on wasm
pub trait FleetLink {
    /// Asks for the probe lease and waits for the answer: the one awaited
    /// call, made only when a fleet cooldown has ended.
    async fn lease(&self, key: &str, holder: &str) -> Result<LeaseAnswer, LinkError>;

    /// Sends verdicts in the background; the object's view after folding
    /// them goes to `inbox`. A failed call delivers nothing: the view goes
    /// stale and the next request past its TTL refreshes it again.
    fn report(&self, key: &str, reports: Vec<Report>, inbox: Inbox);

    /// Fetches the fleet's view in the background into `inbox`.
    fn refresh(&self, key: &str, inbox: Inbox);
}

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
struct Slots {
    slots: Table<Slot>,
}

/// One provider's state in one isolate.
struct Slot {
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
    pending: Vec<Report>,
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
        }
    }

    /// Takes a newer view of the fleet.
    fn apply(&mut self, view: View) {
        self.refreshing_since = None;
        let old = self.view;
        if old.is_some_and(|o| view.generation < o.generation) {
            return; // an answer that was overtaken
        }
        if old.is_none_or(|o| o.generation != view.generation) {
            // The fleet moved on: an old busy answer or lease is void.
            self.busy_until = None;
            self.lease = None;
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
            .is_some_and(|v| now < v.as_of.saturating_add(millis(ttl)));
        let refreshing = self
            .refreshing_since
            .is_some_and(|t| now < t.saturating_add(millis(ttl)));
        !fresh && !refreshing
    }

    /// What the fleet says about a call at `now`.
    fn gate(&self, ttl: Duration, now: UnixMillis) -> Gate {
        let Some(view) = self.view else {
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

    fn is_due(&self, policy: &FleetPolicy, now: UnixMillis) -> bool {
        match self.pending.first() {
            None => false,
            Some(first) => {
                self.pending.len() >= policy.max_batch.max(1)
                    || now >= first.at.saturating_add(millis(policy.max_delay))
            }
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
    breakers: Table<BreakerPolicy>,
    slots: Rc<RefCell<Slots>>,
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
            breakers: Table::default(),
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

    /// The cached fleet view of `key`, if any.
    pub fn view(&self, key: &str) -> Option<View> {
        self.slots.borrow().slots.get(key).and_then(|s| s.view)
    }

    /// Starts a background refresh of every key in `keys` this isolate has
    /// no view of yet (and is not already fetching): a fresh isolate learns
    /// the fleet's state without waiting for a request to each provider.
    pub fn warm<'k>(&self, keys: impl IntoIterator<Item = &'k str>, now: UnixMillis) {
        let ttl = self.policy.ttl;
        let cold: Vec<&str> = keys
            .into_iter()
            .filter(|key| {
                self.with(key, |s| {
                    let cold = s.view.is_none() && s.is_stale(ttl, now);
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

    /// Sends every queued batch that is due (full, or old enough). The host
    /// calls it once a request is done.
    pub fn flush_due(&self, now: UnixMillis) {
        let due: Vec<(String, Vec<Report>)> = {
            let mut slots = self.slots.borrow_mut();
            slots
                .slots
                .iter_mut()
                .filter(|(_, s)| s.is_due(&self.policy, now))
                .map(|(k, s)| (k.clone(), std::mem::take(&mut s.pending)))
                .collect()
        };
        for (key, batch) in due {
            self.link.report(&key, batch, self.inbox());
        }
    }

    /// Sends every queued verdict now.
    pub fn flush_all(&self) {
        let all: Vec<(String, Vec<Report>)> = {
            let mut slots = self.slots.borrow_mut();
            slots
                .slots
                .iter_mut()
                .filter(|(_, s)| !s.pending.is_empty())
                .map(|(k, s)| (k.clone(), std::mem::take(&mut s.pending)))
                .collect()
        };
        for (key, batch) in all {
            self.link.report(&key, batch, self.inbox());
        }
    }

    fn inbox(&self) -> Inbox {
        Inbox(Rc::downgrade(&self.slots))
    }

    fn breaker_policy(&self, key: &str) -> BreakerPolicy {
        self.breakers
            .get(key)
            .copied()
            .unwrap_or(self.default_breaker)
    }

    fn with<T>(&self, key: &str, f: impl FnOnce(&mut Slot) -> T) -> T {
        let mut slots = self.slots.borrow_mut();
        f(slots
            .slots
            .get_or_insert_with(key, || Slot::new(self.breaker_policy(key))))
    }

    /// Queues `report`; sends the batch at once when `now_flush`, or when due.
    fn queue(&self, key: &str, now: UnixMillis, report: Report, now_flush: bool) {
        let batch = self.with(key, |s| {
            s.pending.push(report);
            if now_flush || s.is_due(&self.policy, now) {
                Some(std::mem::take(&mut s.pending))
            } else {
                None
            }
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
        let transition = self.with(key, |s| {
            let before = s.local.state().name();
            s.local.record(now, permit, outcome);
            before != s.local.state().name()
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
        self.queue(key, now, report, transition);
    }

    fn release(&self, key: &str, permit: Permit) {
        match lease_token(permit) {
            Some(token) => {
                let now = self.with(key, |s| s.view.map_or(0, |v| v.as_of));
                self.record_lease(key, now, token, Verdict::Abandoned);
            }
            None => self.with(key, |s| s.local.release(permit)),
        }
    }

    fn snapshot(&self, key: &str) -> Option<Snapshot> {
        let slots = self.slots.borrow();
        let s = slots.slots.get(key)?;
        let mut snap = s.local.snapshot();
        if let Some(view) = s.view {
            // The stricter of the two: the fleet's open beats a local closed.
            let fleet_blocks = !matches!(view.state, State::Closed);
            if fleet_blocks && matches!(snap.state, State::Closed) {
                snap.state = view.state;
            }
            snap.consecutive_failures = snap.consecutive_failures.max(view.consecutive_failures);
        }
        Some(snap)
    }
}

/// A Durable Object stand-in and a link to it, for tests: the object's
/// clock is a [`FakePlatform`](crate::testing::FakePlatform); background
/// calls wait in the link's queue until [`FakeLink::pump`].
#[cfg(any(test, feature = "testing"))]
pub mod fake {
    use std::cell::{Cell, RefCell};
    use std::collections::BTreeMap;
    use std::rc::Rc;
    use std::time::Duration;

    use super::{Fleet, FleetLink, FleetPolicy, Inbox, LeaseAnswer, LinkError, Report};
    use crate::breaker::BreakerPolicy;
    use crate::platform::Platform;
    use crate::testing::FakePlatform;

    /// The fleet objects of every provider. Clones share state.
    #[derive(Clone)]
    pub struct FakeObject(Rc<RefCell<Objects>>);

    struct Objects {
        platform: FakePlatform,
        policy: BreakerPolicy,
        lease_ttl: Duration,
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
                fleets: BTreeMap::new(),
                down: false,
            })))
        }

        /// Sets the probe lease's length.
        pub fn lease_ttl(self, ttl: Duration) -> Self {
            self.0.borrow_mut().lease_ttl = ttl;
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
        Report(String, Vec<Report>, Inbox),
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
                    Job::Report(key, reports, inbox) => {
                        if let Ok(view) = self
                            .object
                            .call(&key, |f, p, now, _| f.fold(p, now, &reports))
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

        fn report(&self, key: &str, reports: Vec<Report>, inbox: Inbox) {
            self.counts.reports.set(self.counts.reports.get() + 1);
            self.counts
                .verdicts
                .set(self.counts.verdicts.get() + reports.len());
            self.queue
                .borrow_mut()
                .push(Job::Report(key.to_string(), reports, inbox));
        }

        fn refresh(&self, key: &str, inbox: Inbox) {
            self.counts.refreshes.set(self.counts.refreshes.get() + 1);
            self.queue
                .borrow_mut()
                .push(Job::Refresh(key.to_string(), inbox));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fake::{FakeLink, FakeObject};
    use super::*;
    use crate::breaker::StateName;
    use crate::testing::{block_on, FakePlatform};
    use crate::Platform;

    fn policy() -> BreakerPolicy {
        BreakerPolicy {
            failure_threshold: 3,
            cooldown: Duration::from_millis(1000),
            max_cooldown: Duration::from_millis(4000),
            ..BreakerPolicy::default()
        }
    }

    const LEASE: Duration = Duration::from_millis(5000);

    fn failure(at: UnixMillis) -> Report {
        Report {
            at,
            verdict: Verdict::Failure,
            lease: None,
        }
    }

    fn verdict(token: u64, verdict: Verdict) -> Report {
        Report {
            at: 0,
            verdict,
            lease: Some(token),
        }
    }

    fn granted(a: LeaseAnswer) -> u64 {
        match a {
            LeaseAnswer::Granted { token, .. } => token,
            other => panic!("expected a lease, got {other:?}"),
        }
    }

    #[test]
    fn reports_from_many_isolates_open_the_fleet_breaker() {
        let mut f = Fleet::new();
        // Two failures from one isolate, one from another: three in a row.
        f.fold(&policy(), 10, &[failure(1), failure(2)]);
        assert_eq!(f.view(&policy(), 11).state, State::Closed);
        let v = f.fold(&policy(), 20, &[failure(15)]);
        assert_eq!(v.state, State::Open { until: 1020 });
        // Verdicts of calls let through by a stale cache say nothing new.
        let v = f.fold(&policy(), 30, &[failure(25), failure(26)]);
        assert_eq!(v.state, State::Open { until: 1020 });
    }

    #[test]
    fn one_probe_per_cooldown_and_the_holders_verdict_decides() {
        let mut f = Fleet::new();
        f.fold(&policy(), 0, &[failure(0), failure(0), failure(0)]);
        assert!(matches!(
            f.lease(&policy(), LEASE, 500, "a"),
            LeaseAnswer::Busy { until: 1000, .. }
        ));
        let token = granted(f.lease(&policy(), LEASE, 1000, "a"));
        assert!(matches!(
            f.lease(&policy(), LEASE, 1001, "b"),
            LeaseAnswer::Busy { until: 6000, .. }
        ));
        // A failed probe re-opens it for twice as long.
        let v = f.fold(&policy(), 1100, &[verdict(token, Verdict::Failure)]);
        assert_eq!(v.state, State::Open { until: 3100 });
        let token = granted(f.lease(&policy(), LEASE, 3100, "b"));
        // A stale token and ordinary verdicts do not decide the probe.
        let v = f.fold(
            &policy(),
            3200,
            &[verdict(token + 7, Verdict::Success), failure(3150)],
        );
        assert_eq!(v.state.name(), StateName::HalfOpen);
        let v = f.fold(&policy(), 3300, &[verdict(token, Verdict::Success)]);
        assert_eq!(v.state, State::Closed);
        assert!(matches!(
            f.lease(&policy(), LEASE, 3400, "c"),
            LeaseAnswer::Closed { .. }
        ));
        assert!(f.leases.is_empty());
    }

    #[test]
    fn a_lapsed_lease_goes_to_someone_else_and_its_late_verdict_is_ignored() {
        let mut f = Fleet::new();
        f.fold(&policy(), 0, &[failure(0), failure(0), failure(0)]);
        let dead = granted(f.lease(&policy(), LEASE, 1000, "dead"));
        assert!(matches!(
            f.lease(&policy(), LEASE, 5999, "b"),
            LeaseAnswer::Busy { .. }
        ));
        let live = granted(f.lease(&policy(), LEASE, 6000, "b"));
        assert_ne!(dead, live);
        let v = f.fold(&policy(), 6100, &[verdict(dead, Verdict::Failure)]);
        assert_eq!(
            v.state.name(),
            StateName::HalfOpen,
            "the dead prober's verdict is void"
        );
        let v = f.fold(&policy(), 6200, &[verdict(live, Verdict::Success)]);
        assert_eq!(v.state, State::Closed);
    }

    #[test]
    fn an_abandoned_probe_gives_the_lease_back() {
        let mut f = Fleet::new();
        f.fold(&policy(), 0, &[failure(0), failure(0), failure(0)]);
        let t = granted(f.lease(&policy(), LEASE, 1000, "a"));
        f.fold(&policy(), 1100, &[verdict(t, Verdict::Abandoned)]);
        granted(f.lease(&policy(), LEASE, 1200, "b"));
    }

    #[test]
    fn verdicts_from_before_a_transition_do_not_count_after_it() {
        let mut f = Fleet::new();
        f.fold(&policy(), 0, &[failure(0), failure(0), failure(0)]);
        let t = granted(f.lease(&policy(), LEASE, 1000, "a"));
        f.fold(&policy(), 1100, &[verdict(t, Verdict::Success)]);
        // Failures of calls that ended while it was open arrive late.
        let v = f.fold(&policy(), 1200, &[failure(900), failure(950), failure(990)]);
        assert_eq!(v.state, State::Closed);
        assert_eq!(v.consecutive_failures, 0);
    }

    #[test]
    fn the_fleet_survives_a_restart_through_serde() {
        let mut f = Fleet::new();
        f.fold(&policy(), 0, &[failure(0), failure(0), failure(0)]);
        let t = granted(f.lease(&policy(), LEASE, 1000, "a"));
        let stored = serde_json::to_string(&f).unwrap();
        let mut back: Fleet = serde_json::from_str(&stored).unwrap();
        assert_eq!(back, f);
        assert!(matches!(
            back.lease(&policy(), LEASE, 1001, "b"),
            LeaseAnswer::Busy { .. }
        ));
        let v = back.fold(&policy(), 1100, &[verdict(t, Verdict::Success)]);
        assert_eq!(v.state, State::Closed);
    }

    // ------------------------------------------------------------ isolates

    struct Isolate {
        store: FleetStore<FakeLink>,
    }

    impl Isolate {
        fn new(obj: &FakeObject, name: &str) -> Self {
            Isolate {
                store: FleetStore::new(FakeLink::new(obj), name, policy()).fleet_policy(
                    FleetPolicy {
                        lease_ttl: LEASE,
                        ..FleetPolicy::default()
                    },
                ),
            }
        }

        fn acquire(&self, p: &FakePlatform) -> Result<Permit, CircuitOpen> {
            block_on(p, self.store.try_acquire("primary", p.now()))
        }

        fn call(&self, p: &FakePlatform, outcome: Outcome) -> Result<(), CircuitOpen> {
            let permit = self.acquire(p)?;
            self.store.record("primary", p.now(), permit, outcome);
            Ok(())
        }

        fn pump(&self) -> usize {
            self.store.link().pump()
        }

        fn counts(&self) -> std::rc::Rc<fake::LinkCounts> {
            self.store.link().counts()
        }
    }

    fn open_fleet(p: &FakePlatform, obj: &FakeObject) {
        let a = Isolate::new(obj, "opener");
        for _ in 0..3 {
            a.call(p, Outcome::Failure).unwrap();
        }
        a.pump();
        assert_eq!(
            obj.fleet("primary").unwrap().breaker.state.name(),
            StateName::Open
        );
    }

    #[test]
    fn one_isolates_failures_open_the_breaker_for_another_after_one_refresh() {
        let p = FakePlatform::new().at(1_000_000);
        let slow = BreakerPolicy {
            cooldown: Duration::from_secs(5),
            max_cooldown: Duration::from_secs(20),
            ..policy()
        };
        let obj = FakeObject::new(&p, slow);
        let a = Isolate::new(&obj, "a");
        let b = Isolate::new(&obj, "b");
        b.call(&p, Outcome::Success).unwrap(); // b has a fresh, closed view
        b.pump();
        for _ in 0..3 {
            a.call(&p, Outcome::Failure).unwrap();
        }
        assert_eq!(
            a.counts().reports.get(),
            1,
            "flushed at once on a's local transition"
        );
        a.pump();
        // b decides from its cached view until it goes stale.
        assert!(b.acquire(&p).is_ok());
        p.advance(Duration::from_millis(1000));
        assert!(
            b.acquire(&p).is_ok(),
            "stale: answered from memory, refresh queued"
        );
        assert_eq!(b.pump(), 1, "one background refresh");
        let until = 1_000_000 + 5000;
        assert_eq!(b.acquire(&p), Err(CircuitOpen { until }));
        assert_eq!(b.counts().leases.get(), 0);
        assert_eq!(
            b.store.snapshot("primary").unwrap().state.name(),
            StateName::Open
        );
    }

    #[test]
    fn only_one_probe_fleet_wide_per_cooldown() {
        let p = FakePlatform::new();
        let obj = FakeObject::new(&p, policy()).lease_ttl(LEASE);
        open_fleet(&p, &obj);
        let isolates: Vec<Isolate> = (0..4)
            .map(|i| Isolate::new(&obj, &format!("i{i}")))
            .collect();
        for i in &isolates {
            assert!(i.acquire(&p).is_ok(), "fresh isolates start closed");
            i.pump();
            assert!(i.acquire(&p).is_err(), "and learn within one refresh");
        }
        p.advance(Duration::from_millis(1000));
        let granted: Vec<bool> = isolates.iter().map(|i| i.acquire(&p).is_ok()).collect();
        assert_eq!(granted.iter().filter(|g| **g).count(), 1, "{granted:?}");
        // Everyone else was told to wait: no more lease questions meanwhile.
        for _ in 0..10 {
            for i in &isolates[1..] {
                assert!(i.acquire(&p).is_err());
            }
        }
        let asked: usize = isolates.iter().map(|i| i.counts().leases.get()).sum();
        assert_eq!(asked, 4);
    }

    #[test]
    fn the_probers_success_closes_the_breaker_fleet_wide() {
        let p = FakePlatform::new();
        let obj = FakeObject::new(&p, policy()).lease_ttl(LEASE);
        open_fleet(&p, &obj);
        let a = Isolate::new(&obj, "a");
        let b = Isolate::new(&obj, "b");
        for i in [&a, &b] {
            let _ = i.acquire(&p);
            i.pump();
        }
        p.advance(Duration::from_millis(1000));
        let probe = a.acquire(&p).expect("a probes");
        assert!(b.acquire(&p).is_err());
        p.advance(Duration::from_millis(100));
        a.store.record("primary", p.now(), probe, Outcome::Success);
        assert!(a.acquire(&p).is_ok(), "a trusts its own probe at once");
        a.pump();
        assert_eq!(obj.fleet("primary").unwrap().breaker.state, State::Closed);
        p.advance(Duration::from_millis(1000));
        let _ = b.acquire(&p);
        b.pump();
        assert!(b.call(&p, Outcome::Success).is_ok());
    }

    #[test]
    fn a_failed_probe_reopens_with_a_longer_cooldown() {
        let p = FakePlatform::new();
        let obj = FakeObject::new(&p, policy()).lease_ttl(LEASE);
        open_fleet(&p, &obj);
        let a = Isolate::new(&obj, "a");
        let _ = a.acquire(&p);
        a.pump();
        p.advance(Duration::from_millis(1000));
        a.call(&p, Outcome::Failure).expect("probe");
        assert!(
            a.acquire(&p).is_err(),
            "assumed open until the object answers"
        );
        a.pump();
        assert_eq!(
            obj.fleet("primary").unwrap().breaker.state,
            State::Open { until: 3000 }
        );
        assert_eq!(a.acquire(&p), Err(CircuitOpen { until: 3000 }));
    }

    #[test]
    fn a_dead_probers_lease_lapses() {
        let p = FakePlatform::new();
        let obj = FakeObject::new(&p, policy()).lease_ttl(LEASE);
        open_fleet(&p, &obj);
        let a = Isolate::new(&obj, "a");
        let b = Isolate::new(&obj, "b");
        for i in [&a, &b] {
            let _ = i.acquire(&p);
            i.pump();
        }
        p.advance(Duration::from_millis(1000));
        let _abandoned_forever = a.acquire(&p).expect("a probes, then its isolate dies");
        drop(a);
        assert!(b.acquire(&p).is_err());
        p.advance(LEASE - Duration::from_millis(1));
        assert!(b.acquire(&p).is_err(), "still leased");
        p.advance(Duration::from_millis(1));
        let probe = b.acquire(&p).expect("the lease lapsed: b probes");
        b.store.record("primary", p.now(), probe, Outcome::Success);
        b.pump();
        assert_eq!(obj.fleet("primary").unwrap().breaker.state, State::Closed);
    }

    #[test]
    fn an_abandoned_probe_lets_another_isolate_probe() {
        let p = FakePlatform::new();
        let obj = FakeObject::new(&p, policy()).lease_ttl(LEASE);
        open_fleet(&p, &obj);
        let a = Isolate::new(&obj, "a");
        let b = Isolate::new(&obj, "b");
        p.advance(Duration::from_millis(1000));
        let probe = a.acquire(&p).expect("probe");
        a.store.release("primary", probe);
        a.pump();
        assert!(b.acquire(&p).is_ok());
    }

    #[test]
    fn steady_state_never_awaits_the_object() {
        let p = FakePlatform::new();
        let obj = FakeObject::new(&p, policy());
        let a = Isolate::new(&obj, "a");
        // 10 s of traffic, one call every 50 ms, background work run as it
        // would be after each request.
        for _ in 0..200 {
            a.call(&p, Outcome::Success).unwrap();
            a.store.flush_due(p.now());
            a.pump();
            p.advance(Duration::from_millis(50));
        }
        let c = a.counts();
        assert_eq!(c.leases.get(), 0, "no awaited call");
        assert!(c.refreshes.get() <= 11, "refreshes {}", c.refreshes.get());
        assert!(c.reports.get() <= 11, "batches {}", c.reports.get());
        assert_eq!(
            c.verdicts.get() + a.store.slots.borrow().slots["primary"].pending.len(),
            200
        );
    }

    #[test]
    fn a_fresh_isolate_warms_its_view_without_a_request() {
        let p = FakePlatform::new();
        let obj = FakeObject::new(&p, policy());
        open_fleet(&p, &obj);
        let fresh = Isolate::new(&obj, "fresh");
        fresh.store.warm(["primary", "backup"], p.now());
        fresh.store.warm(["primary", "backup"], p.now());
        assert_eq!(fresh.counts().refreshes.get(), 2, "once per key");
        fresh.pump();
        assert_eq!(fresh.acquire(&p), Err(CircuitOpen { until: 1000 }));
        fresh.store.warm(["primary"], p.now() + 5000);
        assert_eq!(fresh.counts().refreshes.get(), 2, "only cold keys");
    }

    #[test]
    fn the_breaker_stays_open_across_a_restart_of_the_object() {
        let p = FakePlatform::new();
        let obj = FakeObject::new(&p, policy());
        open_fleet(&p, &obj);
        let stored = obj.persist();
        drop(obj);
        let obj = FakeObject::restore(&p, policy(), &stored);
        let fresh = Isolate::new(&obj, "fresh");
        assert!(fresh.acquire(&p).is_ok());
        fresh.pump();
        assert_eq!(fresh.acquire(&p), Err(CircuitOpen { until: 1000 }));
    }

    #[test]
    fn an_unreachable_object_falls_back_to_the_local_breaker() {
        let p = FakePlatform::new();
        let obj = FakeObject::new(&p, policy());
        open_fleet(&p, &obj);
        let a = Isolate::new(&obj, "a");
        let _ = a.acquire(&p);
        a.pump();
        p.advance(Duration::from_millis(1000));
        obj.set_down(true);
        assert!(
            a.call(&p, Outcome::Success).is_ok(),
            "local breaker decides"
        );
        assert_eq!(a.counts().leases.get(), 1);
        assert!(a.call(&p, Outcome::Success).is_ok());
        assert_eq!(
            a.counts().leases.get(),
            1,
            "no lease question without a fleet view"
        );
    }

    #[test]
    fn wire_shapes_are_stable() {
        let v = View {
            state: State::Open { until: 5 },
            generation: 2,
            consecutive_failures: 0,
            failure_rate: 0.0,
            as_of: 1,
        };
        let a = serde_json::to_value(LeaseAnswer::Busy { until: 5, view: v }).unwrap();
        assert_eq!(a["answer"], "busy");
        assert_eq!(a["view"]["state"]["state"], "open");
        let r: Report = serde_json::from_str(r#"{"at":3,"verdict":"failure"}"#).unwrap();
        assert_eq!(r, failure(3));
    }
}
