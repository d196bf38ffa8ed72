//! What the client tells an observer while it works: retries, providers
//! given up on, failovers, breaker transitions (the npm package's
//! `onRetry`, `onProviderError`, `onFailover` and `onEvent` hooks).

use std::time::Duration;

use serde::Serialize;

use crate::error::ProviderError;
use crate::policy::breaker::StateName;
use crate::policy::latency::Measure;

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
    /// An entry's recent p95 passed its objective: it is tried after the
    /// entries that meet theirs.
    Demoted(Standing<'a>),
    /// A demoted entry's p95 came back below its lower mark.
    Restored(Standing<'a>),
}

/// An entry's latency standing as it changed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Standing<'a> {
    /// The provider id.
    pub provider: &'a str,
    /// The model sent.
    pub model: &'a str,
    /// The route entry's label, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<&'a str>,
    /// What was measured.
    pub measure: Measure,
    /// Its p95 over the recent window, in ms.
    pub p95_ms: u64,
    /// The objective, in ms.
    pub slo_ms: u64,
}

/// Receives events. Called synchronously; keep it cheap.
pub type Observer = Box<dyn Fn(&Event<'_>)>;
