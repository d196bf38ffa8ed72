//! Pure decisions: they never await and never touch the [`Platform`]; time
//! and randomness come in as arguments, so each is tested on its own.
//!
//! [`Platform`]: crate::Platform

pub(crate) mod backoff;
pub(crate) mod breaker;
pub(crate) mod budget;
pub(crate) mod cheapest;
pub(crate) mod fair;
pub(crate) mod latency;
pub(crate) mod pool;
pub(crate) mod price;
pub(crate) mod shed;
pub(crate) mod spend;
pub(crate) mod stats;
pub(crate) mod tenant;
pub(crate) mod timeouts;
pub(crate) mod window;
