//! The order one request walks its route in: weighted tiers.
//!
//! Entries of a route that share a `priority` form a tier; tiers are tried
//! lowest priority first, and a later tier only once the whole tier before
//! it could not serve. Inside a tier, each request draws its own order, an
//! entry coming first with probability `weight / tier weight` (a weighted
//! draw without replacement, randomness from the [`Platform`]), so load
//! splits by weight and a failing member's tier mates are next in line.
//! A member that answered 429 within its Retry-After (1 s without one) is
//! put after its tier mates: its traffic moves to them first, before its
//! breaker has anything to say.
//! With [`Policy::steer_by_capacity`](crate::Policy::steer_by_capacity)
//! (the default), each member's weight is scaled by the share of its
//! rate-limit pool left ([`PoolReading::share_left`]): load follows the
//! capacity its providers say they have, and comes back as they refill.
//!
//! [`PoolReading::share_left`]: crate::policy::pool::PoolReading::share_left
//!
//! A route without priorities keeps its written order and costs nothing
//! here. The cursor calls [`order`] once, at the start of a request.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::time::Duration;

use crate::engine::core::Core;
use crate::engine::route::Entry;
use crate::engine::store::BreakerStore;
use crate::error::{ErrorKind, ProviderError};
use crate::platform::{millis, Platform, UnixMillis};

/// How long a 429 without a Retry-After moves its member behind its tier
/// mates: about one backoff step, so a burst moves over and comes back.
const HOLD_WITHOUT_RETRY_AFTER: Duration = Duration::from_secs(1);

/// The longest a Retry-After moves a member behind its mates; longer
/// outages are the breaker's to judge.
const MAX_HOLD: Duration = Duration::from_secs(60);

/// Breaker keys that answered 429 recently, with when that ends.
#[derive(Debug, Default)]
pub(crate) struct RateLimited {
    until: BTreeMap<String, UnixMillis>,
}

impl RateLimited {
    /// Notes `key`'s failure at `now`, if it was a rate limit. Holds at
    /// most one mark per breaker key, which the configuration bounds.
    pub(crate) fn note(&mut self, key: &str, now: UnixMillis, error: &ProviderError) {
        if error.kind != ErrorKind::RateLimited {
            return;
        }
        let hold = error
            .retry_after
            .unwrap_or(HOLD_WITHOUT_RETRY_AFTER)
            .min(MAX_HOLD);
        self.until.retain(|_, until| *until > now);
        self.until
            .insert(key.to_owned(), now.saturating_add(millis(hold)));
    }

    /// Whether `key` answered 429 and its hold has not ended at `now`.
    pub(crate) fn is_limited(&self, key: &str, now: UnixMillis) -> bool {
        self.until.get(key).is_some_and(|until| now < *until)
    }
}

/// `chain` in the order this request tries it.
pub(crate) fn order<'c, P: Platform, S: BreakerStore>(
    core: &Core<P, S>,
    chain: Cow<'c, [Entry]>,
) -> Cow<'c, [Entry]> {
    if chain.iter().all(|e| e.priority.is_none()) {
        return chain;
    }
    let mut indexes: Vec<usize> = (0..chain.len()).collect();
    // Stable: equal priorities keep their written order before the draw;
    // an entry without one (a route built in code) comes after every tier.
    indexes.sort_by_key(|&i| chain[i].priority.unwrap_or(u32::MAX));
    let mut out: Vec<Entry> = Vec::with_capacity(chain.len());
    let mut start = 0;
    while start < indexes.len() {
        let priority = chain[indexes[start]].priority;
        let len = indexes[start..]
            .iter()
            .take_while(|&&i| priority.is_some() && chain[i].priority == priority)
            .count()
            .max(1);
        let tier = &mut indexes[start..start + len];
        arrange(core, &chain, tier);
        out.extend(tier.iter().map(|&i| chain[i].clone()));
        start += len;
    }
    Cow::Owned(out)
}

/// Puts one tier's members (indexes into `chain`) in this request's order.
/// This is where a route's ordering strategy plugs in; the one there is
/// today is the weighted draw, members rate-limited just now last.
fn arrange<P: Platform, S: BreakerStore>(core: &Core<P, S>, chain: &[Entry], tier: &mut [usize]) {
    if tier.len() < 2 {
        return;
    }
    let now = core.platform.now();
    let steer = core.policy.steer_by_capacity;
    let limited = core.limited.borrow();
    let (mut fresh, mut held): (Vec<Member>, Vec<Member>) = (Vec::new(), Vec::new());
    for &i in tier.iter() {
        let key = core.key_of(&chain[i]);
        // Its weight, scaled by the share of its pool left.
        let share = if steer {
            let (reading, in_flight) = core.pool_state(&key);
            reading.map_or(1.0, |r| r.share_left(in_flight, now))
        } else {
            1.0
        };
        let member = (i, f64::from(chain[i].weight) * share);
        if limited.is_limited(&key, now) {
            held.push(member);
        } else {
            fresh.push(member);
        }
    }
    drop(limited);
    let platform = &core.platform;
    weighted_draw(&mut fresh, || platform.random());
    weighted_draw(&mut held, || platform.random());
    for (slot, (i, _)) in tier.iter_mut().zip(fresh.into_iter().chain(held)) {
        *slot = i;
    }
}

/// A tier member: its index into the chain and its weight this request.
type Member = (usize, f64);

/// Orders `members` by repeated weighted draws without replacement: each
/// next one is picked with probability its weight over the weight left.
fn weighted_draw(members: &mut [Member], mut random: impl FnMut() -> f64) {
    for next in 0..members.len().saturating_sub(1) {
        let rest = &members[next..];
        let total: f64 = rest.iter().map(|&(_, w)| w).sum();
        if total <= 0.0 {
            return; // all weights zero: keep the written order
        }
        let mut target = random().clamp(0.0, 1.0) * total;
        let mut pick = rest.len() - 1;
        for (k, &(_, w)) in rest.iter().enumerate() {
            if target < w {
                pick = k;
                break;
            }
            target -= w;
        }
        members.swap(next, next + pick);
        // Keep the members not picked in their written order, so a draw
        // depends only on weights, not on earlier swaps.
        members[next + 1..].sort_unstable_by_key(|&(i, _)| i);
    }
}

/// Whether the entry at `index` has a tier mate after it in this
/// request's order: a rate limit then moves on to it at once instead of
/// waiting out a retry on the member that said 429.
pub(crate) fn has_mate_after(chain: &[Entry], index: usize) -> bool {
    let Some(priority) = chain.get(index).and_then(|e| e.priority) else {
        return false;
    };
    chain[index + 1..]
        .iter()
        .any(|e| e.priority == Some(priority))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tier(weights: &[u32]) -> Vec<Entry> {
        weights
            .iter()
            .enumerate()
            .map(|(i, w)| Entry::new(format!("p{i}"), "m").priority(1).weight(*w))
            .collect()
    }

    #[test]
    fn a_draw_picks_by_cumulative_weight() {
        let first = |r: f64| {
            let mut m = vec![(0, 3.0), (1, 1.0)];
            weighted_draw(&mut m, || r);
            m.iter().map(|&(i, _)| i).collect::<Vec<_>>()
        };
        assert_eq!(first(0.0), [0, 1]);
        assert_eq!(first(0.74), [0, 1]);
        assert_eq!(first(0.75), [1, 0]);
        assert_eq!(first(0.999), [1, 0]);
    }

    #[test]
    fn zero_weights_keep_the_written_order() {
        let mut m = vec![(0, 0.0), (1, 0.0), (2, 0.0)];
        weighted_draw(&mut m, || 0.9);
        assert_eq!(m.iter().map(|&(i, _)| i).collect::<Vec<_>>(), [0, 1, 2]);
    }

    #[test]
    fn a_mate_after_is_one_of_the_same_priority() {
        let mut chain = tier(&[1, 1]);
        chain.push(Entry::new("later", "m").priority(2));
        assert!(has_mate_after(&chain, 0));
        assert!(!has_mate_after(&chain, 1));
        assert!(!has_mate_after(&chain, 2));
        assert!(!has_mate_after(&[Entry::new("a", "m")], 0));
    }

    #[test]
    fn a_rate_limit_holds_for_its_retry_after_capped() {
        let mut r = RateLimited::default();
        let e = ProviderError::new(ErrorKind::RateLimited, "429")
            .with_retry_after(Some(Duration::from_secs(5)));
        r.note("a/m", 1_000, &e);
        assert!(r.is_limited("a/m", 5_999));
        assert!(!r.is_limited("a/m", 6_000));
        r.note("b/m", 0, &ProviderError::new(ErrorKind::RateLimited, "429"));
        assert!(r.is_limited("b/m", 999) && !r.is_limited("b/m", 1_000));
        let long = e.with_retry_after(Some(Duration::from_secs(3600)));
        r.note("c/m", 0, &long);
        assert!(!r.is_limited("c/m", 60_000));
        r.note("d/m", 0, &ProviderError::new(ErrorKind::Server, "503"));
        assert!(!r.is_limited("d/m", 0));
    }
}
