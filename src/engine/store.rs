//! Where breakers live: [`MemoryStore`] in one process; the Worker's store
//! shares state fleet-wide through a Durable Object. The chain asks the store
//! for permits and tells it verdicts; it never holds a borrow across an
//! `.await`, so many requests can share one store.

use std::cell::RefCell;
use std::collections::BTreeMap;

use crate::engine::key::provider_of;
use crate::platform::UnixMillis;
use crate::policy::breaker::{
    Breaker, BreakerPolicy, CircuitOpen, Outcome, Permit, Snapshot, State,
};
use crate::policy::latency::{Latencies, Sample};
use crate::policy::pool::PoolReading;

/// Breakers keyed by (provider, model) ([`crate::engine::key`]).
#[allow(async_fn_in_trait)] // single-threaded by design; futures are !Send on wasm
pub trait BreakerStore {
    /// Asks leave to call `key` at `now`. May await (a fleet-wide store asks
    /// its Durable Object for the half-open probe lease); in steady state it
    /// answers from memory.
    async fn try_acquire(&self, key: &str, now: UnixMillis) -> Result<Permit, CircuitOpen>;

    /// Leave to call `key` although its breaker is open: every entry of the
    /// chain was open, and this one's cooldown ends first.
    fn force(&self, key: &str, now: UnixMillis) -> Permit;

    /// Whether the holder of `permit` may call `key` again at `now`
    /// ([`Breaker::may_retry`]); when its attempt just `failed` in a way that
    /// trips the breaker, it is first marked as failing until its verdict or
    /// release ([`Breaker::mark_failing`]).
    fn may_retry(&self, key: &str, now: UnixMillis, permit: &mut Permit, failed: bool) -> bool;

    /// Records the verdict of a call.
    fn record(&self, key: &str, now: UnixMillis, permit: Permit, outcome: Outcome);

    /// Gives back a permit whose call ended without a verdict.
    fn release(&self, key: &str, permit: Permit);

    /// Counts against `key` a failure another model of its provider saw,
    /// one that says the whole provider is out ([`Breaker::note_failure`]).
    fn note_failure(&self, key: &str, now: UnixMillis);

    /// Shares a latency sample of `key` with the fleet, for a store that
    /// shares with one (sent with its verdicts); a store in memory keeps
    /// none, the client's own figures decide.
    fn sample(&self, _key: &str, _now: UnixMillis, _sample: Sample) {}

    /// `key`'s latency standing as the fleet decided it; `None` for a
    /// store in memory, or while the fleet's view of it is unknown: the
    /// client's own figures decide then.
    fn latencies(&self, _key: &str) -> Option<Latencies> {
        None
    }

    /// Shares what `key`'s provider said of its rate-limit pool at `now`
    /// with the fleet, for a store that shares with one (sent with its
    /// verdicts, never in a call of its own); a store in memory keeps none.
    fn share_pool(&self, _key: &str, _now: UnixMillis, _reading: PoolReading) {}

    /// `key`'s pool as the fleet last heard of it, from any isolate; `None`
    /// for a store in memory: the client's own readings decide then.
    fn fleet_pool(&self, _key: &str) -> Option<PoolReading> {
        None
    }

    /// The breaker's current state, if it has been used.
    fn snapshot(&self, key: &str) -> Option<Snapshot>;

    /// The state alone, as [`snapshot`](BreakerStore::snapshot) has it: asked
    /// around every verdict, so a store may answer without copying the
    /// verdict window.
    fn state(&self, key: &str) -> Option<State> {
        self.snapshot(key).map(|s| s.state)
    }

    /// A request is about to walk `keys` (its route): a store that learns
    /// state from elsewhere starts fetching what it does not know yet, so
    /// that a failover finds it there. Never awaits. A store in memory
    /// already knows everything.
    fn warm<'k>(&self, _keys: impl IntoIterator<Item = &'k str>, _now: UnixMillis) {}

    /// Someone looks at the state of `keys` (`/health`, the status page):
    /// a store that learns state from elsewhere also refreshes what it
    /// knows only from too long ago, so that the next look shows the fleet
    /// as it stands even in an isolate no request walks. Never awaits.
    fn look<'k>(&self, keys: impl IntoIterator<Item = &'k str>, now: UnixMillis) {
        self.warm(keys, now);
    }
}

/// Breakers in this process's memory.
#[derive(Debug, Default)]
pub struct MemoryStore {
    default_policy: BreakerPolicy,
    pub(crate) policies: BTreeMap<String, BreakerPolicy>,
    breakers: RefCell<BTreeMap<String, Breaker>>,
}

impl MemoryStore {
    /// A store whose breakers all use `policy`.
    pub fn new(policy: BreakerPolicy) -> Self {
        MemoryStore {
            default_policy: policy,
            policies: BTreeMap::new(),
            breakers: RefCell::default(),
        }
    }

    /// Gives `key` its own policy.
    pub fn with_policy(mut self, key: impl Into<String>, policy: BreakerPolicy) -> Self {
        self.policies.insert(key.into(), policy);
        self
    }

    /// The policy for `key`: its own, else its provider's, else the
    /// default.
    pub fn policy(&self, key: &str) -> BreakerPolicy {
        self.policies
            .get(key)
            .or_else(|| self.policies.get(provider_of(key)))
            .copied()
            .unwrap_or(self.default_policy)
    }

    /// Runs `f` on `key`'s breaker, creating it closed on first use.
    pub fn with<T>(&self, key: &str, f: impl FnOnce(&mut Breaker) -> T) -> T {
        let mut breakers = self.breakers.borrow_mut();
        if let Some(b) = breakers.get_mut(key) {
            return f(b);
        }
        f(breakers
            .entry(key.to_owned())
            .or_insert_with(|| Breaker::new(self.policy(key))))
    }
}

impl BreakerStore for MemoryStore {
    async fn try_acquire(&self, key: &str, now: UnixMillis) -> Result<Permit, CircuitOpen> {
        self.with(key, |b| b.try_acquire(now))
    }

    fn force(&self, key: &str, now: UnixMillis) -> Permit {
        self.with(key, |b| b.force(now))
    }

    fn may_retry(&self, key: &str, _now: UnixMillis, permit: &mut Permit, failed: bool) -> bool {
        self.with(key, |b| {
            if failed {
                b.mark_failing(permit);
            }
            b.may_retry(*permit)
        })
    }

    fn record(&self, key: &str, now: UnixMillis, permit: Permit, outcome: Outcome) {
        self.with(key, |b| b.record(now, permit, outcome))
    }

    fn release(&self, key: &str, permit: Permit) {
        self.with(key, |b| b.release(permit))
    }

    fn note_failure(&self, key: &str, now: UnixMillis) {
        self.with(key, |b| b.note_failure(now))
    }

    fn snapshot(&self, key: &str) -> Option<Snapshot> {
        self.breakers.borrow().get(key).map(Breaker::snapshot)
    }

    fn state(&self, key: &str) -> Option<State> {
        self.breakers.borrow().get(key).map(Breaker::state)
    }
}
