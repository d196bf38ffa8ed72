//! Steering by the providers' rate-limit pools, before any 429: an entry
//! whose provider last said its pool cannot take the request now
//! ([`PoolReading::can_take`] on the request's expected usage) goes behind
//! the entries that can, in their order, until its reset; then it is back
//! by itself. When no entry can, or every one can, the chain is left as it
//! is: nothing is skipped for capacity alone. (Within a weighted tier,
//! weights follow the share of each pool left: `engine/order.rs`.)
//!
//! A pool's reading is the newest of this client's own (from the headers
//! of every answer, and a 429's Retry-After, which marks the pool empty
//! until then) and the fleet's (any isolate's, as the breaker store last
//! heard it): an isolate that never called a provider steers by what
//! another one was told.
//!
//! [`PoolReading::can_take`]: crate::policy::pool::PoolReading::can_take

use std::borrow::Cow;
use std::cell::RefCell;

use crate::chat::ChatRequest;
use crate::engine::core::Core;
use crate::engine::route::Entry;
use crate::engine::store::BreakerStore;
use crate::error::{ErrorKind, ProviderError};
use crate::platform::{millis, Platform, UnixMillis};
use crate::policy::cheapest::expected_usage;
use crate::policy::pool::{newest, PoolReading, Pools};

impl<P: Platform, S: BreakerStore> Core<P, S> {
    /// `chain` with the entries whose pools cannot take `req` moved last.
    pub(crate) fn by_capacity<'c>(
        &self,
        chain: Cow<'c, [Entry]>,
        req: &ChatRequest,
    ) -> Cow<'c, [Entry]> {
        if !self.policy.steer_by_capacity || chain.len() < 2 {
            return chain; // nothing to steer to
        }
        let now = self.platform.now();
        let mut usage = None;
        let mut can = |e: &Entry| {
            let (reading, in_flight) = self.pool_state(&self.key_of(e));
            reading.is_none_or(|r| {
                let u = usage.get_or_insert_with(|| expected_usage(req));
                r.can_take(u.input_tokens, u.output_tokens, in_flight, now)
            })
        };
        // The usual case, every pool able (or silent), in one pass and
        // without allocating.
        if chain.iter().all(&mut can) {
            return chain;
        }
        let can: Vec<bool> = chain.iter().map(can).collect();
        if !can.iter().any(|c| *c) {
            return chain;
        }
        let ready = chain.iter().zip(&can).filter(|(_, c)| **c);
        let behind = chain.iter().zip(&can).filter(|(_, c)| !**c);
        ready.chain(behind).map(|(e, _)| e.clone()).collect()
    }
}

impl<P: Platform, S: BreakerStore> Core<P, S> {
    /// Counts a call to `key` in flight until the guard is dropped (its
    /// answer's headers read, or the call given up).
    pub(super) fn sending<'c>(&'c self, key: &'c str) -> Sending<'c> {
        self.pools.borrow_mut().sent(key);
        Sending {
            pools: &self.pools,
            key,
        }
    }

    /// What is known of `key`'s pool: the newest of this client's reading
    /// and the fleet's.
    pub(crate) fn pool_of(&self, key: &str) -> Option<PoolReading> {
        self.pool_state(key).0
    }

    /// [`pool_of`](Self::pool_of), with the calls this client has in
    /// flight to `key`, which no reading counts yet.
    pub(crate) fn pool_state(&self, key: &str) -> (Option<PoolReading>, u64) {
        let (own, in_flight) = self.pools.borrow().state(key);
        (newest(own, self.store.fleet_pool(key)), in_flight)
    }

    /// A 429 of `key` at `now` that said how long to wait marks its pool
    /// empty until then, here and, through the store, fleet-wide.
    pub(super) fn hold_pool(&self, key: &str, now: UnixMillis, error: &ProviderError) {
        let Some(wait) = error
            .retry_after
            .filter(|_| error.kind == ErrorKind::RateLimited)
        else {
            return;
        };
        let until = now.saturating_add(millis(wait));
        let held = self.pools.borrow_mut().hold(key, now, until);
        self.store.share_pool(key, now, held);
    }
}

/// A call in flight to a pool ([`Core::sending`]).
pub(super) struct Sending<'c> {
    pools: &'c RefCell<Pools>,
    key: &'c str,
}

impl Drop for Sending<'_> {
    fn drop(&mut self) {
        self.pools.borrow_mut().answered(self.key);
    }
}
