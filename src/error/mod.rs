//! Errors, and the one place where each failure's treatment is decided.
//!
//! A provider failure is a [`ProviderError`]: a closed [`ErrorKind`] plus the
//! status, the provider's own message and code, and any Retry-After. Whether
//! the same provider is tried again, whether the chain moves on, and whether
//! the breaker counts it are decided here, exhaustively, from the kind (the
//! failure table of docs/design.md). What reaches the caller is an [`Error`].

mod attempt;
mod call;
mod exhausted;
mod kind;
pub(crate) mod ms;
mod opt_ms;
mod provider;
mod treatment;

pub(crate) use attempt::discarded_usage;
pub use attempt::{Attempt, AttemptBreaker, AttemptOutcome};
pub use call::Error;
pub use exhausted::Exhausted;
pub use kind::ErrorKind;
pub use provider::ProviderError;
pub use treatment::Treatment;
