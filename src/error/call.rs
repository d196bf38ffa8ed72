//! [`Error`]: what a call returns when it cannot answer, and the status a
//! gateway gives it.

use std::time::Duration;

use super::attempt::Attempt;
use super::exhausted::Exhausted;
use super::provider::ProviderError;
use crate::platform::UnixMillis;

/// What a chat call returns when it cannot answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Every provider failed or was skipped; the attempts say why
    /// (`AllProvidersFailedError` in the npm package).
    #[error("{0}")]
    AllProvidersFailed(Exhausted),
    /// A provider refused the request itself (content filter, invalid
    /// request): it is returned as is, neither retried nor failed over.
    #[error("{provider} rejected the request: {error}")]
    Rejected {
        /// The provider that rejected it.
        provider: String,
        /// Its error, with its status and message.
        error: ProviderError,
        /// Every attempt up to and including the rejection.
        attempts: Vec<Attempt>,
    },
    /// The request was unusable before any provider was called.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// A stream failed after its commit point and no attempt could continue
    /// it: the answer the caller holds is incomplete.
    #[error("the answer was interrupted after {delivered} bytes: {error}")]
    Interrupted {
        /// The failure that cut the stream (not a later continuation's).
        error: ProviderError,
        /// Bytes of answer text delivered before it.
        delivered: usize,
        /// Every attempt, in order.
        attempts: Vec<Attempt>,
    },
    /// The request's `model` names no configured route or model.
    #[error("unknown route or model \"{0}\"")]
    UnknownRoute(String),
    /// The route has spent its daily budget and no entry it may still use
    /// is left (429 at the gateway).
    #[error("route \"{route}\" has spent its daily budget of ${budget}{}; it serves again from 00:00 UTC", if *cheaper_only { " and has no entry under its price limit" } else { "" })]
    SpendCapReached {
        /// The route.
        route: String,
        /// Its budget in dollars, as a decimal.
        budget: String,
        /// When the UTC day ends and the budget is whole again.
        resets_at: UnixMillis,
        /// How long until then (the gateway's `retry-after`).
        retry_after: Duration,
        /// Whether the route serves cheaper entries once spent (and none
        /// was left), rather than refusing every request.
        cheaper_only: bool,
    },
    /// The route sheds requests of this class while its providers cannot
    /// carry its load ([`crate::Priority`]): nothing was sent (503 at the
    /// gateway, with its `retry-after`).
    #[error("route \"{route}\" is shedding {priority} requests: its providers cannot carry all of its load now")]
    Shed {
        /// The route.
        route: String,
        /// The call's class (`standard` or `sheddable`).
        priority: &'static str,
        /// When to try again, spread so that the refused do not all come
        /// back at once.
        retry_after: Duration,
    },
    /// Every answer the route got failed its validators (and the route
    /// says `onExhausted: "error"`), or escalation stopped at its cap.
    #[error(
        "no answer passed the route's validators ({})",
        last_rejection(attempts)
    )]
    NoValidAnswer {
        /// Every attempt, the rejected answers' included, in order.
        attempts: Vec<Attempt>,
    },
}

/// The last rejection among `attempts`, for an error's message.
fn last_rejection(attempts: &[Attempt]) -> String {
    attempts
        .iter()
        .rev()
        .find_map(|a| {
            a.rejection()
                .map(|r| format!("last: {}/{}: {r}", a.provider, a.model))
        })
        .unwrap_or_default()
}

impl Error {
    /// [`status`](Self::status), for a caller that holds the providers'
    /// keys itself ([`Exhausted::caller_status`]).
    pub fn caller_status(&self) -> u16 {
        match self {
            Error::AllProvidersFailed(e) => e.caller_status(),
            _ => self.status(),
        }
    }

    /// The HTTP status a gateway should answer with.
    pub fn status(&self) -> u16 {
        match self {
            Error::AllProvidersFailed(e) => e.status(),
            Error::Rejected { error, .. } => error.status.unwrap_or(400),
            Error::InvalidRequest(_) => 400,
            Error::UnknownRoute(_) => 404,
            Error::Interrupted { .. } => 502,
            Error::SpendCapReached { .. } => 429,
            Error::Shed { .. } => 503,
            // The providers answered; the answers were not good enough.
            Error::NoValidAnswer { .. } => 502,
        }
    }

    /// The code of [`Error::AllProvidersFailed`]: every entry of the route
    /// failed (breakers open and the deadline spent included).
    pub const ALL_FAILED: &'static str = "all_providers_failed";

    /// The error's code, as the gateway's error bodies, log lines and
    /// spans name it (`all_providers_failed`, `interrupted`, …).
    pub fn code(&self) -> &'static str {
        match self {
            Error::AllProvidersFailed(_) => Error::ALL_FAILED,
            Error::Rejected { .. } => "rejected_by_provider",
            Error::InvalidRequest(_) => "invalid_request",
            Error::UnknownRoute(_) => "model_not_found",
            Error::Interrupted { .. } => "interrupted",
            Error::SpendCapReached { .. } => "spend_cap_reached",
            Error::Shed { .. } => "load_shed",
            Error::NoValidAnswer { .. } => "no_valid_answer",
        }
    }

    /// Every attempt made, in order.
    pub fn attempts(&self) -> &[Attempt] {
        match self {
            Error::AllProvidersFailed(e) => &e.attempts,
            Error::Rejected { attempts, .. }
            | Error::Interrupted { attempts, .. }
            | Error::NoValidAnswer { attempts } => attempts,
            Error::InvalidRequest(_)
            | Error::UnknownRoute(_)
            | Error::SpendCapReached { .. }
            | Error::Shed { .. } => &[],
        }
    }

    /// When the caller may try again, if known.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::AllProvidersFailed(e) => e.retry_after(),
            Error::Rejected { .. }
            | Error::Interrupted { .. }
            | Error::NoValidAnswer { .. }
            | Error::InvalidRequest(_)
            | Error::UnknownRoute(_) => None,
            Error::SpendCapReached { retry_after, .. } | Error::Shed { retry_after, .. } => {
                Some(*retry_after)
            }
        }
    }
}
