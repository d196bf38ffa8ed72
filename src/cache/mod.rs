//! The response cache: answers to identical requests kept for a while, on
//! the routes that opt in, and served again, fresh (a hit) or, when every
//! entry of the route has failed, stale within a window (RFC 5861's
//! `stale-if-error`).
//!
//! - [`key`]: the digest a request is stored under: the route, the
//!   client's format, the tenant (scope `client`) and the request body in
//!   RFC 8785 canonical form, less the fields that do not change the answer.
//! - [`entry`]: what is stored: the answer, who gave it, when, what it cost.
//! - [`store`]: where: [`AnswerStore`], with [`MemoryCache`] (an LRU bounded
//!   by entries and bytes) as the default.
//! - [`controls`]: the client's `cache-control` and `x-cache-ttl`.
//! - [`policy`]: a route's TTL, stale window and scope.
//! - [`record`]: a streamed answer put together from its deltas, to be
//!   stored once the stream completed; [`events`]: the provider's own
//!   events of one passed through, replayed to a client of its dialect.
//!
//! - [`answers`]: [`ResponseCache`], the cache for a caller of
//!   [`crate::Client`] in code (and the outage simulator).
//!
//! Only answers that ended well are stored ([`entry::storable`]); the
//! gateway (or [`ResponseCache`]) decides when to look and when to write.

pub mod answers;
pub mod controls;
pub mod entry;
pub mod events;
pub mod key;
pub mod policy;
pub mod record;
pub mod store;

pub use answers::{CacheOutcome, Cached, ResponseCache};
pub use controls::Controls;
pub use entry::{Freshness, Stored};
pub use events::{EventRecording, Events};
pub use key::{cache_key, tenant_of, KeyParts, Scope};
pub use policy::{CacheBounds, CachePolicy};
pub use record::Recording;
pub use store::{AnswerStore, MemoryCache, StoreInfo};
