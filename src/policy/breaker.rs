//! The circuit breaker: a pure state machine with resilience4j semantics
//! (docs/design.md, "The circuit breaker"). Time is passed in; the state is a serde snapshot so a
//! store can persist it.
//!
//! - **Closed** counts verdicts. It opens on `failure_threshold` consecutive
//!   failures, or on a failure rate ≥ `failure_rate` over the last `window`
//!   verdicts once `minimum_calls` are in it.
//! - **Open** rejects every call until its cooldown ends. The cooldown doubles
//!   on each consecutive re-open, up to `max_cooldown`.
//! - **Half-open** is entered lazily, by the first `try_acquire` after the
//!   cooldown. It grants `half_open_permits` probes; `success_threshold`
//!   successes close it, any failure re-opens it, an abandoned probe gives
//!   its permit back.

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::platform::{millis, UnixMillis};

/// The breaker's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BreakerPolicy {
    /// Consecutive failures that open a closed breaker (default 5).
    pub failure_threshold: u32,
    /// Failure rate over the window that opens it, in `(0, 1]` (default 0.5).
    pub failure_rate: f64,
    /// How many recent verdicts the rate is computed over (default 20).
    pub window: u32,
    /// Verdicts needed in the window before the rate counts (default 10).
    pub minimum_calls: u32,
    /// How long the first opening lasts (default 10 s).
    pub cooldown: Duration,
    /// The longest a re-opening lasts (default 20 s).
    pub max_cooldown: Duration,
    /// Probes granted at once in half-open (default 1).
    pub half_open_permits: u32,
    /// Probe successes that close it (default 1).
    pub success_threshold: u32,
}

impl Default for BreakerPolicy {
    /// Chosen so that, with one request every 4 s, a primary that is dead
    /// for 60 s never costs a request its answer (every one fails over) and
    /// is used again within 30 s of recovering: the longest cooldown (20 s)
    /// plus one request interval stays under 30 s.
    fn default() -> Self {
        BreakerPolicy {
            failure_threshold: 5,
            failure_rate: 0.5,
            window: 20,
            minimum_calls: 10,
            cooldown: Duration::from_secs(10),
            max_cooldown: Duration::from_secs(20),
            half_open_permits: 1,
            success_threshold: 1,
        }
    }
}

/// Where the breaker stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum State {
    /// Calls flow; verdicts are counted.
    Closed,
    /// Calls are rejected until `until`.
    Open {
        /// When the cooldown ends.
        until: UnixMillis,
    },
    /// Probes are let through to test recovery.
    HalfOpen {
        /// Probes granted and not yet finished.
        in_flight: u32,
        /// Probe successes so far.
        successes: u32,
    },
}

/// The state's name, for events and health reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StateName {
    /// See [`State::Closed`].
    Closed,
    /// See [`State::Open`].
    Open,
    /// See [`State::HalfOpen`].
    HalfOpen,
}

impl fmt::Display for StateName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StateName::Closed => "closed",
            StateName::Open => "open",
            StateName::HalfOpen => "half-open",
        })
    }
}

impl StateName {
    /// The state's name as it is serialized (`half_open`).
    pub fn code(self) -> &'static str {
        match self {
            StateName::Closed => "closed",
            StateName::Open => "open",
            StateName::HalfOpen => "half_open",
        }
    }
}

impl State {
    /// The state's name.
    pub fn name(&self) -> StateName {
        match self {
            State::Closed => StateName::Closed,
            State::Open { .. } => StateName::Open,
            State::HalfOpen { .. } => StateName::HalfOpen,
        }
    }
}

/// What kind of call a permit allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PermitKind {
    /// A normal call through a closed breaker.
    Normal,
    /// A half-open probe.
    Probe,
    /// A call through an open breaker, granted because every entry of the
    /// chain was open (see [`Breaker::force`]).
    Forced,
}

impl PermitKind {
    /// The breaker's state that grants a permit of this kind.
    pub fn state(self) -> StateName {
        match self {
            PermitKind::Normal => StateName::Closed,
            PermitKind::Probe => StateName::HalfOpen,
            PermitKind::Forced => StateName::Open,
        }
    }
}

/// Leave to make one call. Hand it back through [`Breaker::record`] or
/// [`Breaker::release`]; a permit from an earlier state is ignored.
#[must_use = "a permit must be recorded or released"]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Permit {
    /// What it allows.
    pub kind: PermitKind,
    /// The breaker generation it was granted in.
    pub generation: u64,
    /// Whether its holder counts as failing (see [`Breaker::mark_failing`]);
    /// never leaves the process.
    #[serde(skip)]
    pub(crate) failing: bool,
}

/// A call was rejected because the breaker is open, its probes are all in
/// flight, or as many requests are failing on it as would open it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CircuitOpen {
    /// When a call may next be admitted (now, for busy probes or requests
    /// failing now).
    pub until: UnixMillis,
}

/// A call's verdict, as far as the breaker cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The provider answered.
    Success,
    /// The provider failed (after its retries).
    Failure,
    /// Says nothing about the provider's health (the request itself was bad).
    Ignored,
}

/// A breaker's whole state, for persistence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    /// Where it stands.
    pub state: State,
    /// Failures since the last success, in closed state.
    pub consecutive_failures: u32,
    /// Recent verdicts, oldest first; `true` is a failure.
    pub window: Vec<bool>,
    /// Openings since it was last closed (drives cooldown growth).
    pub trips: u32,
    /// Bumped on every transition; permits carry it.
    pub generation: u64,
}

/// A circuit breaker for one provider.
#[derive(Debug, Clone, PartialEq)]
pub struct Breaker {
    policy: BreakerPolicy,
    state: State,
    consecutive_failures: u32,
    window: VecDeque<bool>,
    /// How many of `window` are failures: kept as verdicts come and go,
    /// so the rate is not a scan of the window (a window of 10,000, as a
    /// breaker set never to open has, made the scan the simulator's first
    /// cost).
    window_failures: usize,
    trips: u32,
    generation: u64,
    /// Requests of this generation whose last attempt failed and whose
    /// verdict is not in yet (not persisted: calls in flight are this
    /// process's own).
    failing: u32,
}

impl Breaker {
    /// A closed breaker.
    pub fn new(policy: BreakerPolicy) -> Self {
        Breaker {
            policy,
            state: State::Closed,
            consecutive_failures: 0,
            window: VecDeque::new(),
            window_failures: 0,
            trips: 0,
            generation: 0,
            failing: 0,
        }
    }

    /// A breaker restored from a snapshot.
    pub fn restore(policy: BreakerPolicy, snap: Snapshot) -> Self {
        let mut window: VecDeque<bool> = snap.window.into();
        while window.len() > policy.window as usize {
            window.pop_front();
        }
        let window_failures = window.iter().filter(|f| **f).count();
        Breaker {
            policy,
            state: snap.state,
            consecutive_failures: snap.consecutive_failures,
            window,
            window_failures,
            trips: snap.trips,
            generation: snap.generation,
            failing: 0,
        }
    }

    /// The state for persistence.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            state: self.state,
            consecutive_failures: self.consecutive_failures,
            window: self.window.iter().copied().collect(),
            trips: self.trips,
            generation: self.generation,
        }
    }

    /// Where it stands (an expired Open is still Open until asked).
    pub fn state(&self) -> State {
        self.state
    }

    /// The settings.
    pub fn policy(&self) -> &BreakerPolicy {
        &self.policy
    }

    /// Failures since the last success.
    pub fn consecutive_failures(&self) -> u32 {
        self.consecutive_failures
    }

    /// The failure rate over the window, in `[0, 1]` (0 when empty).
    pub fn failure_rate(&self) -> f64 {
        if self.window.is_empty() {
            return 0.0;
        }
        self.window_failures as f64 / self.window.len() as f64
    }

    /// Asks to make a call at `now`. A closed breaker turns calls away while
    /// its failures plus the requests failing on it now reach the threshold:
    /// their verdicts, once in, will open it.
    pub fn try_acquire(&mut self, now: UnixMillis) -> Result<Permit, CircuitOpen> {
        match self.state {
            State::Closed if self.doomed(0) => Err(CircuitOpen { until: now }),
            State::Closed => Ok(self.permit(PermitKind::Normal)),
            State::Open { until } if now < until => Err(CircuitOpen { until }),
            State::Open { .. } => {
                self.transition(State::HalfOpen {
                    in_flight: 1,
                    successes: 0,
                });
                Ok(self.permit(PermitKind::Probe))
            }
            State::HalfOpen {
                in_flight,
                successes,
            } => {
                if in_flight >= self.policy.half_open_permits.max(1) {
                    return Err(CircuitOpen { until: now });
                }
                self.state = State::HalfOpen {
                    in_flight: in_flight + 1,
                    successes,
                };
                Ok(self.permit(PermitKind::Probe))
            }
        }
    }

    /// A call through an open breaker, for when every entry of a chain is
    /// open and the one whose cooldown ends first is tried rather than none.
    /// Its success closes the breaker; its failure re-opens it.
    pub fn force(&mut self, now: UnixMillis) -> Permit {
        match self.try_acquire(now) {
            Ok(p) => p,
            Err(_) => self.permit(PermitKind::Forced),
        }
    }

    /// Marks the holder of `permit` as failing: its last attempt failed in a
    /// way that trips the breaker, and its verdict comes after its retries.
    /// Until then it counts against the threshold, so that requests failing
    /// on a provider at the same time stop calling it before their verdicts
    /// are in (one verdict per request stays the rule).
    pub fn mark_failing(&mut self, permit: &mut Permit) {
        if permit.kind == PermitKind::Normal
            && !permit.failing
            && permit.generation == self.generation
        {
            permit.failing = true;
            self.failing += 1;
        }
    }

    /// Whether the holder of `permit` may call again (a retry): the breaker
    /// has not moved since it was granted, and its failures plus the other
    /// requests failing on it stay under the threshold.
    pub fn may_retry(&self, permit: Permit) -> bool {
        permit.generation == self.generation
            && permit.kind == PermitKind::Normal
            && !self.doomed(u32::from(permit.failing))
    }

    /// Whether the failures counted plus the requests failing now (less
    /// `own`, the asker's) reach the consecutive-failure threshold.
    fn doomed(&self, own: u32) -> bool {
        let failing = self.failing.saturating_sub(own);
        self.consecutive_failures.saturating_add(failing) >= self.policy.failure_threshold.max(1)
    }

    /// Records the verdict of the call `permit` allowed.
    pub fn record(&mut self, now: UnixMillis, permit: Permit, outcome: Outcome) {
        if permit.generation != self.generation {
            return; // granted before the last transition: stale
        }
        self.unmark(permit);
        let permit = Permit {
            failing: false,
            ..permit
        };
        match (permit.kind, self.state, outcome) {
            (_, _, Outcome::Ignored) => self.release(permit),
            (PermitKind::Normal, State::Closed, Outcome::Success) => {
                // resilience4j evaluates the rate after every verdict.
                self.consecutive_failures = 0;
                self.push(false);
                if self.should_open() {
                    self.open(now);
                }
            }
            (PermitKind::Normal, State::Closed, Outcome::Failure) => {
                self.consecutive_failures += 1;
                self.push(true);
                if self.should_open() {
                    self.open(now);
                }
            }
            (
                PermitKind::Probe,
                State::HalfOpen {
                    in_flight,
                    successes,
                },
                Outcome::Success,
            ) => {
                let successes = successes + 1;
                if successes >= self.policy.success_threshold {
                    self.close();
                } else {
                    self.state = State::HalfOpen {
                        in_flight: in_flight.saturating_sub(1),
                        successes,
                    };
                }
            }
            (PermitKind::Probe, State::HalfOpen { .. }, Outcome::Failure) => self.open(now),
            (PermitKind::Forced, State::Open { .. }, Outcome::Success) => self.close(),
            (PermitKind::Forced, State::Open { .. }, Outcome::Failure) => self.open(now),
            // A permit kind that does not belong to the state it was granted
            // in cannot carry the current generation.
            (PermitKind::Normal, State::Open { .. } | State::HalfOpen { .. }, _)
            | (PermitKind::Probe, State::Closed | State::Open { .. }, _)
            | (PermitKind::Forced, State::Closed | State::HalfOpen { .. }, _) => {}
        }
    }

    /// Counts a failure no call of this breaker's saw: another model of the
    /// same provider failed in a way that says the whole provider is down
    /// (its key refused, its host unreachable). Counted like a verdict of
    /// its own while closed; an open or half-open breaker already waits on
    /// its own cooldown or probe.
    pub fn note_failure(&mut self, now: UnixMillis) {
        if self.state != State::Closed {
            return;
        }
        self.consecutive_failures += 1;
        self.push(true);
        if self.should_open() {
            self.open(now);
        }
    }

    /// Gives back a permit whose call was abandoned (timeout of the whole
    /// request, caller gone) without a verdict.
    pub fn release(&mut self, permit: Permit) {
        if permit.generation != self.generation {
            return;
        }
        self.unmark(permit);
        if permit.kind != PermitKind::Probe {
            return;
        }
        if let State::HalfOpen { in_flight, .. } = &mut self.state {
            *in_flight = in_flight.saturating_sub(1);
        }
    }

    fn unmark(&mut self, permit: Permit) {
        if permit.failing {
            self.failing = self.failing.saturating_sub(1);
        }
    }

    fn permit(&self, kind: PermitKind) -> Permit {
        Permit {
            kind,
            generation: self.generation,
            failing: false,
        }
    }

    fn push(&mut self, failed: bool) {
        self.window.push_back(failed);
        self.window_failures += usize::from(failed);
        while self.window.len() > self.policy.window.max(1) as usize {
            if self.window.pop_front() == Some(true) {
                self.window_failures -= 1;
            }
        }
    }

    fn should_open(&self) -> bool {
        let p = &self.policy;
        self.consecutive_failures >= p.failure_threshold.max(1)
            || (self.window.len() >= p.minimum_calls.max(1) as usize
                && self.failure_rate() >= p.failure_rate)
    }

    fn open(&mut self, now: UnixMillis) {
        let cooldown = millis(self.policy.cooldown)
            .saturating_mul(1u64 << self.trips.min(32))
            .min(millis(self.policy.max_cooldown).max(millis(self.policy.cooldown)));
        self.trips = self.trips.saturating_add(1);
        self.transition(State::Open {
            until: now.saturating_add(cooldown),
        });
    }

    fn close(&mut self) {
        self.trips = 0;
        self.transition(State::Closed);
    }

    fn transition(&mut self, to: State) {
        self.state = to;
        self.generation += 1;
        self.consecutive_failures = 0;
        self.failing = 0; // their permits are stale now
        self.window.clear();
        self.window_failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn state_codes_are_the_serialized_names() {
        for s in [StateName::Closed, StateName::Open, StateName::HalfOpen] {
            assert_eq!(serde_json::to_value(s).unwrap(), s.code());
        }
    }

    fn policy() -> BreakerPolicy {
        BreakerPolicy {
            failure_threshold: 3,
            cooldown: Duration::from_millis(1000),
            max_cooldown: Duration::from_millis(4000),
            ..BreakerPolicy::default()
        }
    }

    fn fail(b: &mut Breaker, now: UnixMillis) {
        let p = b.try_acquire(now).expect("admitted");
        b.record(now, p, Outcome::Failure);
    }

    #[test]
    fn opens_after_consecutive_failures_and_reopens_after_cooldown() {
        // The article's test: threshold 1, cooldown 1000, injected clock.
        let mut b = Breaker::new(BreakerPolicy {
            failure_threshold: 1,
            cooldown: Duration::from_millis(1000),
            ..policy()
        });
        fail(&mut b, 0);
        assert_eq!(b.try_acquire(0), Err(CircuitOpen { until: 1000 }));
        assert_eq!(b.try_acquire(999), Err(CircuitOpen { until: 1000 }));
        let probe = b.try_acquire(1000).expect("half-open after cooldown");
        assert_eq!(probe.kind, PermitKind::Probe);
        assert_eq!(b.state().name(), StateName::HalfOpen);
        b.record(1000, probe, Outcome::Success);
        assert_eq!(b.state(), State::Closed);
    }

    #[test]
    fn a_success_resets_the_consecutive_count() {
        let mut b = Breaker::new(policy());
        fail(&mut b, 0);
        fail(&mut b, 0);
        let p = b.try_acquire(0).unwrap();
        b.record(0, p, Outcome::Success);
        fail(&mut b, 0);
        fail(&mut b, 0);
        assert_eq!(b.state(), State::Closed);
        fail(&mut b, 0);
        assert_eq!(b.state().name(), StateName::Open);
    }

    #[test]
    fn opens_on_failure_rate_once_minimum_calls_are_in() {
        let mut b = Breaker::new(BreakerPolicy {
            failure_threshold: 100,
            failure_rate: 0.5,
            window: 10,
            minimum_calls: 6,
            ..policy()
        });
        // fail, ok, fail, ok, fail: 60 % but only 5 calls.
        for i in 0..5 {
            let p = b.try_acquire(0).unwrap();
            b.record(
                0,
                p,
                if i % 2 == 0 {
                    Outcome::Failure
                } else {
                    Outcome::Success
                },
            );
        }
        assert_eq!(b.state(), State::Closed);
        let p = b.try_acquire(0).unwrap();
        b.record(0, p, Outcome::Success); // 6 calls, 50 %
        assert_eq!(b.state().name(), StateName::Open);
    }

    #[test]
    fn ignored_outcomes_do_not_count() {
        let mut b = Breaker::new(policy());
        for _ in 0..10 {
            let p = b.try_acquire(0).unwrap();
            b.record(0, p, Outcome::Ignored);
        }
        assert_eq!(b.state(), State::Closed);
        assert_eq!(b.failure_rate(), 0.0);
    }

    #[test]
    fn half_open_grants_n_permits_and_any_failure_reopens_with_growth() {
        let mut b = Breaker::new(BreakerPolicy {
            half_open_permits: 2,
            success_threshold: 2,
            ..policy()
        });
        for _ in 0..3 {
            fail(&mut b, 0);
        }
        assert_eq!(b.state(), State::Open { until: 1000 });
        let p1 = b.try_acquire(1000).unwrap();
        let p2 = b.try_acquire(1000).unwrap();
        assert!(b.try_acquire(1000).is_err(), "only two probes");
        b.record(1000, p1, Outcome::Success);
        assert_eq!(b.state().name(), StateName::HalfOpen);
        b.record(1100, p2, Outcome::Failure);
        assert_eq!(
            b.state(),
            State::Open { until: 3100 },
            "second opening lasts 2 s"
        );
        let p = b.try_acquire(3100).unwrap();
        b.record(3100, p, Outcome::Failure);
        assert_eq!(b.state(), State::Open { until: 7100 }, "4 s");
        let p = b.try_acquire(7100).unwrap();
        b.record(7100, p, Outcome::Failure);
        assert_eq!(b.state(), State::Open { until: 11100 }, "capped at 4 s");
        let p = b.try_acquire(11100).unwrap();
        let p2 = b.try_acquire(11100).unwrap();
        b.record(11100, p, Outcome::Success);
        b.record(11100, p2, Outcome::Success);
        assert_eq!(b.state(), State::Closed);
        for _ in 0..3 {
            fail(&mut b, 20000);
        }
        assert_eq!(
            b.state(),
            State::Open { until: 21000 },
            "growth resets once closed"
        );
    }

    #[test]
    fn an_abandoned_probe_gives_its_permit_back() {
        let mut b = Breaker::new(policy());
        for _ in 0..3 {
            fail(&mut b, 0);
        }
        let p = b.try_acquire(1000).unwrap();
        assert!(b.try_acquire(1000).is_err());
        b.release(p);
        assert!(b.try_acquire(1000).is_ok());
    }

    #[test]
    fn stale_permits_are_ignored() {
        let mut b = Breaker::new(policy());
        let slow = b.try_acquire(0).unwrap();
        for _ in 0..3 {
            fail(&mut b, 0);
        }
        let probe = b.try_acquire(1000).unwrap();
        b.record(1000, slow, Outcome::Failure); // from the closed generation
        assert_eq!(b.state().name(), StateName::HalfOpen);
        b.record(1000, probe, Outcome::Success);
        assert_eq!(b.state(), State::Closed);
    }

    #[test]
    fn forced_call_through_an_open_breaker() {
        let mut b = Breaker::new(policy());
        for _ in 0..3 {
            fail(&mut b, 0);
        }
        let p = b.force(10);
        assert_eq!(p.kind, PermitKind::Forced);
        b.record(20, p, Outcome::Success);
        assert_eq!(b.state(), State::Closed);
    }

    #[test]
    fn requests_failing_now_count_against_the_threshold_until_their_verdicts() {
        let mut b = Breaker::new(policy()); // threshold 3
        let mut p: Vec<Permit> = (0..4).map(|_| b.try_acquire(0).unwrap()).collect();
        b.mark_failing(&mut p[0]);
        b.mark_failing(&mut p[0]); // once per request
        b.mark_failing(&mut p[1]);
        assert!(b.try_acquire(0).is_ok_and(|q| {
            b.release(q);
            true
        }));
        b.mark_failing(&mut p[2]);
        // Three requests are failing: a new call is turned away now...
        assert_eq!(b.try_acquire(5), Err(CircuitOpen { until: 5 }));
        assert_eq!(b.state(), State::Closed);
        // ...and a failing one may retry only if the others stay under it.
        assert!(b.may_retry(p[0]), "0 failures + 2 others < 3");
        b.mark_failing(&mut p[3]);
        assert!(!b.may_retry(p[0]), "0 failures + 3 others");
        // A verdict, a release and an ignored outcome each count it once.
        b.record(10, p[3], Outcome::Ignored);
        b.release(p[2]);
        assert!(b.may_retry(p[0]));
        b.record(10, p[1], Outcome::Failure);
        assert_eq!(b.consecutive_failures(), 1);
        assert!(b.may_retry(p[0]), "1 failure + 0 others");
        assert!(b.try_acquire(10).is_ok_and(|q| {
            b.release(q);
            true
        }));
        fail(&mut b, 20);
        assert!(b.try_acquire(20).is_err(), "2 failures + 1 failing");
        assert!(b.may_retry(p[0]), "2 failures + 0 others");
        // Its verdict opens it; a permit of the closed state is stale then.
        let mut other = Breaker::new(policy()).try_acquire(0).unwrap();
        b.record(30, p[0], Outcome::Failure);
        assert_eq!(b.state().name(), StateName::Open);
        assert!(!b.may_retry(p[0]));
        b.mark_failing(&mut other);
        assert!(!other.failing, "not of this generation");
    }

    #[test]
    fn only_normal_permits_of_the_current_generation_are_marked() {
        let mut b = Breaker::new(policy());
        for _ in 0..3 {
            fail(&mut b, 0);
        }
        let mut probe = b.try_acquire(1000).unwrap();
        b.mark_failing(&mut probe);
        assert!(!probe.failing);
        assert!(!b.may_retry(probe), "a probe is asked once");
        let mut forced = b.force(1000);
        b.mark_failing(&mut forced);
        assert!(!forced.failing);
    }

    #[test]
    fn snapshot_round_trips_through_json() {
        let mut b = Breaker::new(policy());
        fail(&mut b, 0);
        let json = serde_json::to_string(&b.snapshot()).unwrap();
        let back = Breaker::restore(policy(), serde_json::from_str(&json).unwrap());
        assert_eq!(back, b);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Acquire(u64),
        Record(usize, u8),
        Release(usize),
        Mark(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u64..3000).prop_map(Op::Acquire),
            (0usize..8, 0u8..3).prop_map(|(i, o)| Op::Record(i, o)),
            (0usize..8).prop_map(Op::Release),
            (0usize..8).prop_map(Op::Mark),
        ]
    }

    proptest! {
        #[test]
        fn invariants_hold_for_any_sequence(
            ops in proptest::collection::vec(op(), 1..200),
            permits in 1u32..4,
        ) {
            let mut b = Breaker::new(BreakerPolicy { half_open_permits: permits, failure_threshold: 2, ..policy() });
            let mut now = 0u64;
            let mut held: Vec<Permit> = Vec::new();
            for op in ops {
                match op {
                    Op::Acquire(dt) => {
                        now += dt;
                        let before = b.state();
                        match b.try_acquire(now) {
                            Ok(p) => {
                                // Open never admits before its time.
                                if let State::Open { until } = before {
                                    prop_assert!(now >= until);
                                }
                                held.push(p);
                            }
                            Err(CircuitOpen { until }) => prop_assert!(until >= now),
                        }
                    }
                    Op::Record(i, o) if !held.is_empty() => {
                        let p = held.remove(i % held.len());
                        let outcome = [Outcome::Success, Outcome::Failure, Outcome::Ignored][o as usize];
                        b.record(now, p, outcome);
                    }
                    Op::Release(i) if !held.is_empty() => {
                        let p = held.remove(i % held.len());
                        b.release(p);
                    }
                    Op::Mark(i) if !held.is_empty() => {
                        let n = held.len();
                        b.mark_failing(&mut held[i % n]);
                    }
                    Op::Record(..) | Op::Release(_) | Op::Mark(_) => {}
                }
                // Failing requests are counted once each, and not after
                // their verdicts or the next transition.
                let generation = b.snapshot().generation;
                let failing = held.iter().filter(|p| p.failing && p.generation == generation).count();
                prop_assert_eq!(b.failing as usize, failing);
                if b.state() == State::Closed && b.consecutive_failures() as usize + failing >= 2 {
                    prop_assert!(b.try_acquire(now).is_err());
                }
                // The kept count is the window's.
                prop_assert_eq!(b.window_failures, b.window.iter().filter(|f| **f).count());
                // Half-open never grants more than N permits.
                if let State::HalfOpen { in_flight, .. } = b.state() {
                    prop_assert!(in_flight <= permits);
                    let live = held.iter().filter(|p| p.kind == PermitKind::Probe && p.generation == b.snapshot().generation).count();
                    prop_assert_eq!(live as u32, in_flight);
                }
            }
        }
    }
}
