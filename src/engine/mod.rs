//! The only async logic, in the fixed layer order: timeout inside retry
//! inside breaker inside chain. Top down: [`client`] the builder and the
//! public verbs; the walkers ([`stream`], [`hedge`], [`escalate`],
//! [`endpoint`], [`retry`] over [`attempt`]) driving [`cursor`], the one
//! walk over a route; what it asks ([`order`], [`key`], [`cost`],
//! [`latency`], [`store`]); [`core`], the state and helpers they share; and
//! [`route`], the plain data. Nothing imports a module above it.

pub(crate) mod attempt;
pub(crate) mod authorize;
pub(crate) mod capacity;
pub(crate) mod client;
pub(crate) mod core;
pub(crate) mod cost;
pub(crate) mod cursor;
pub(crate) mod endpoint;
pub(crate) mod escalate;
pub(crate) mod hedge;
pub(crate) mod idle;
pub(crate) mod key;
pub(crate) mod latency;
pub(crate) mod order;
pub(crate) mod pace;
pub(crate) mod prefill;
pub(crate) mod retry;
pub(crate) mod route;
pub(crate) mod shedding;
pub(crate) mod span_hook;
pub(crate) mod spans;
pub(crate) mod store;
pub(crate) mod stream;
pub(crate) mod timeout;
