//! Steering by the providers' rate-limit pools, before any 429: an entry
//! whose provider last said its pool cannot take the request now
//! ([`PoolReading::can_take`] on the request's expected usage) goes behind
//! the entries that can, in their order, until its reset; then it is back
//! by itself. When no entry can, or every one can, the chain is left as it
//! is: nothing is skipped for capacity alone.
//!
//! [`PoolReading::can_take`]: crate::policy::pool::PoolReading::can_take

use std::borrow::Cow;

use crate::chat::ChatRequest;
use crate::engine::core::Core;
use crate::engine::route::Entry;
use crate::engine::store::BreakerStore;
use crate::platform::Platform;
use crate::policy::cheapest::expected_usage;

impl<P: Platform, S: BreakerStore> Core<P, S> {
    /// `chain` with the entries whose pools cannot take `req` moved last.
    pub(crate) fn by_capacity<'c>(
        &self,
        chain: Cow<'c, [Entry]>,
        req: &ChatRequest,
    ) -> Cow<'c, [Entry]> {
        let pools = self.pools.borrow();
        if !self.policy.steer_by_capacity || pools.is_empty() || chain.len() < 2 {
            return chain; // nothing said, or nothing to steer to: no lookups
        }
        let now = self.platform.now();
        let usage = expected_usage(req);
        let can: Vec<bool> = chain
            .iter()
            .map(|e| {
                pools
                    .get(&self.key_of(e))
                    .is_none_or(|r| r.can_take(usage.input_tokens, usage.output_tokens, now))
            })
            .collect();
        if can.iter().all(|c| *c) || !can.iter().any(|c| *c) {
            return chain;
        }
        let ready = chain.iter().zip(&can).filter(|(_, c)| **c);
        let behind = chain.iter().zip(&can).filter(|(_, c)| !**c);
        ready.chain(behind).map(|(e, _)| e.clone()).collect()
    }
}
