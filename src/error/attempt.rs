//! [`Attempt`]: the record of one attempt at one entry of a route, and how
//! it ended.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::ms;
use super::provider::ProviderError;
use crate::platform::UnixMillis;

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum AttemptOutcome {
    /// The provider answered.
    Success,
    /// It failed, or was skipped.
    Failure {
        /// Why.
        error: ProviderError,
    },
    /// Another entry answered first (a hedge) and this one's request was
    /// aborted: no verdict on its provider.
    Cancelled,
    /// The provider answered, but the answer failed one of the route's
    /// validators: no provider failure (no breaker or error rate counts
    /// it), a reason to escalate to the next entry.
    Rejected {
        /// The validator's name (`json`, `jsonSchema`, …).
        validator: String,
        /// What it found wrong.
        reason: String,
        /// Whether the client was given this answer anyway, every answer
        /// having been rejected (`onExhausted: "lastAnswer"`).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        kept: bool,
    },
}

/// The record of one attempt at one chain entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attempt {
    /// The provider id.
    pub provider: String,
    /// The model sent to it.
    pub model: String,
    /// 1 for the first try at this entry, 2 for its first retry, ….
    pub number: u32,
    /// When the attempt started.
    pub started_at: UnixMillis,
    /// How long it took.
    #[serde(rename = "durationMs", with = "ms")]
    pub duration: Duration,
    /// Whether the request reached the provider (false for a skipped open
    /// breaker, a refused connection or a DNS failure).
    pub reached: bool,
    /// How it ended.
    pub outcome: AttemptOutcome,
    /// The tokens it consumed, as the provider reported them: the answer's
    /// for the attempt that answered, and for one that did not become the
    /// answer (a stream cut after it began) what it had reported by then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<crate::chat::Usage>,
    /// Sampling hints the request had that this provider has no setting
    /// for, so were left out of what was sent (`seed`, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub omitted: Vec<String>,
    /// The attempt's own span in the request's trace, when the request
    /// had one: the id its `traceparent` named to the provider.
    #[serde(skip)]
    pub span: Option<opentelemetry::trace::SpanId>,
    /// What the entry's breaker did about the attempt: the state that let
    /// it through and, on the entry's last attempt, the change its verdict
    /// made.
    #[serde(skip)]
    pub breaker: Option<AttemptBreaker>,
}

/// An attempt's breaker, as its trace tells it: states by their codes,
/// `closed`, `half_open` or `open`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttemptBreaker {
    /// The state that let the attempt through: `half_open` for a probe,
    /// `open` for a forced call.
    pub admitted: &'static str,
    /// The entry's verdict moved its breaker from one state to another
    /// (set on the entry's last attempt, when it did).
    pub moved: Option<(&'static str, &'static str)>,
}

impl AttemptBreaker {
    /// Admitted in `state`; no change (yet).
    pub fn admitted(state: &'static str) -> AttemptBreaker {
        AttemptBreaker {
            admitted: state,
            moved: None,
        }
    }
}

/// The tokens consumed by the attempts that did not become the answer
/// (every failed one: a stream cut after it began, a continuation's earlier
/// part), as their providers reported them; `None` when none reported any.
pub(crate) fn discarded_usage(attempts: &[Attempt]) -> Option<crate::chat::Usage> {
    attempts
        .iter()
        .filter(|a| {
            a.outcome != AttemptOutcome::Success
                && !matches!(a.outcome, AttemptOutcome::Rejected { kept: true, .. })
        })
        .filter_map(|a| a.usage)
        .reduce(|a, b| {
            let sum = |x: Option<u64>, y: Option<u64>| match (x, y) {
                (None, None) => None,
                (x, y) => Some(x.unwrap_or(0).saturating_add(y.unwrap_or(0))),
            };
            crate::chat::Usage {
                input_tokens: a.input_tokens.saturating_add(b.input_tokens),
                output_tokens: a.output_tokens.saturating_add(b.output_tokens),
                cached_input_tokens: sum(a.cached_input_tokens, b.cached_input_tokens),
                cache_write_input_tokens: sum(
                    a.cache_write_input_tokens,
                    b.cache_write_input_tokens,
                ),
                reasoning_tokens: sum(a.reasoning_tokens, b.reasoning_tokens),
            }
        })
}

impl Attempt {
    /// The error, for a failed attempt.
    pub fn error(&self) -> Option<&ProviderError> {
        match &self.outcome {
            AttemptOutcome::Success
            | AttemptOutcome::Cancelled
            | AttemptOutcome::Rejected { .. } => None,
            AttemptOutcome::Failure { error } => Some(error),
        }
    }

    /// `validator: reason`, for an answer a validator rejected.
    pub fn rejection(&self) -> Option<String> {
        match &self.outcome {
            AttemptOutcome::Rejected {
                validator, reason, ..
            } => Some(format!("{validator}: {reason}")),
            AttemptOutcome::Success
            | AttemptOutcome::Failure { .. }
            | AttemptOutcome::Cancelled => None,
        }
    }
}

impl fmt::Display for Attempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{} #{} after {} ms: ",
            self.provider,
            self.model,
            self.number,
            crate::platform::millis(self.duration)
        )?;
        match &self.outcome {
            AttemptOutcome::Success => f.write_str("ok"),
            AttemptOutcome::Failure { error } => write!(f, "{error}"),
            AttemptOutcome::Cancelled => f.write_str("cancelled"),
            AttemptOutcome::Rejected {
                validator, reason, ..
            } => write!(f, "rejected: {validator}: {reason}"),
        }
    }
}
