//! The only async logic, in the fixed layer order: timeout inside retry
//! inside breaker inside chain. [`client`] holds the client and its builder,
//! [`cursor`] the one walk over a route that whole answers ([`retry`]) and
//! streams ([`stream`]) both drive, [`store`] where breakers live.

pub(crate) mod authorize;
pub(crate) mod client;
pub(crate) mod cursor;
pub(crate) mod escalate;
pub(crate) mod open;
pub(crate) mod prefill;
pub(crate) mod retry;
pub(crate) mod store;
pub(crate) mod stream;
pub(crate) mod timeout;
