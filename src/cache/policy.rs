//! A route's cache settings, as its configuration validates into.

use std::time::Duration;

use super::key::Scope;

/// How one route caches its answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CachePolicy {
    /// How long a stored answer is served as fresh.
    pub ttl: Duration,
    /// How long after its TTL an answer may still be served when every
    /// entry of the route has failed (zero: never).
    pub stale_if_error: Duration,
    /// Whose answers a request may be served.
    pub scope: Scope,
}

impl CachePolicy {
    /// The TTL of an answer whose request asked for `asked` at most
    /// (`x-cache-ttl`): a client may shorten the TTL, never lengthen it.
    pub fn ttl_for(&self, asked: Option<Duration>) -> Duration {
        asked.map_or(self.ttl, |a| a.min(self.ttl))
    }

    /// How long a store keeps an answer with TTL `ttl`: its fresh life and
    /// the stale window after it.
    pub fn keep_for(&self, ttl: Duration) -> Duration {
        ttl + self.stale_if_error
    }
}

/// How many answers and bytes the in-memory store ([`super::MemoryCache`]) keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheBounds {
    /// Answers.
    pub max_entries: usize,
    /// Bytes of answers and keys.
    pub max_bytes: usize,
}
