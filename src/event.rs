//! What the client tells an observer while it works: retries, providers
//! given up on, failovers, breaker transitions (the npm package's
//! `onRetry`, `onProviderError`, `onFailover` and `onEvent` hooks).

use std::time::Duration;

use serde::Serialize;

use crate::error::ProviderError;
use crate::policy::breaker::StateName;

/// One thing that happened during a request.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
#[non_exhaustive]
pub enum Event<'a> {
    /// A failed attempt will be retried on the same provider after `delay`.
    Retry {
        /// The provider id.
        provider: &'a str,
        /// The model sent.
        model: &'a str,
        /// The route entry's label, when it has one.
        #[serde(skip_serializing_if = "Option::is_none")]
        label: Option<&'a str>,
        /// The attempt that failed (1-based).
        attempt: u32,
        /// The wait before the next attempt.
        #[serde(rename = "delayMs", serialize_with = "crate::error::ms::serialize")]
        delay: Duration,
        /// Why it failed.
        error: &'a ProviderError,
    },
    /// A provider is done for this request: retries spent or not retryable.
    ProviderFailed {
        /// The provider id.
        provider: &'a str,
        /// The model sent.
        model: &'a str,
        /// The route entry's label, when it has one.
        #[serde(skip_serializing_if = "Option::is_none")]
        label: Option<&'a str>,
        /// The last error.
        error: &'a ProviderError,
    },
    /// The chain moves from one entry to the next.
    Failover {
        /// The provider left behind.
        from: &'a str,
        /// The model it was sent.
        from_model: &'a str,
        /// The left entry's label, when it has one.
        #[serde(skip_serializing_if = "Option::is_none")]
        from_label: Option<&'a str>,
        /// The provider tried next.
        to: &'a str,
        /// The model it is sent.
        to_model: &'a str,
        /// The next entry's label, when it has one.
        #[serde(skip_serializing_if = "Option::is_none")]
        to_label: Option<&'a str>,
        /// Why.
        error: &'a ProviderError,
    },
    /// A breaker changed state.
    Breaker {
        /// The provider id.
        provider: &'a str,
        /// The model whose breaker it is (`*` for the one shared by models
        /// no route lists).
        model: &'a str,
        /// The route entry's label, when it has one.
        #[serde(skip_serializing_if = "Option::is_none")]
        label: Option<&'a str>,
        /// The state before.
        from: StateName,
        /// The state after.
        to: StateName,
    },
    /// A malformed chunk in an otherwise healthy stream was skipped.
    MalformedChunk {
        /// The provider id.
        provider: &'a str,
        /// What was wrong with it.
        error: &'a ProviderError,
    },
    /// A retry was skipped because the retry budget is spent.
    BudgetExhausted {
        /// The provider that would have been retried.
        provider: &'a str,
    },
}

/// Receives events. Called synchronously; keep it cheap.
pub type Observer = Box<dyn Fn(&Event<'_>)>;
