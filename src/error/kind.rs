//! [`ErrorKind`]: the closed list of the ways a provider call fails, each
//! with a short human name.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The class of a provider failure. Closed on purpose: adding a variant must
/// break every `match` on it, so no classification is forgotten.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// 429 without a quota problem: wait (Retry-After if given) and retry.
    RateLimited,
    /// The account's quota or credit is spent (`insufficient_quota`, 402):
    /// waiting will not help, so fail over at once.
    QuotaExhausted,
    /// 5xx, 529 overloaded, 408, 409: a transient fault of the provider.
    Server,
    /// The attempt's deadline passed before any response arrived: the
    /// provider is silent, so fail over rather than wait on it again.
    Timeout,
    /// The response began but its body stalled past the attempt's deadline.
    Stalled,
    /// Reset, refused, DNS or TLS failure.
    Transport,
    /// 401 or 403: the key is wrong, revoked or lacks access.
    Auth,
    /// 404: the model or endpoint does not exist at this provider.
    NotFound,
    /// The prompt does not fit the model's context window.
    ContextLength,
    /// The provider's content policy refused the request; its reason is
    /// returned to the caller as is.
    ContentFilter,
    /// 400, 413, 422 and other 4xx: the request itself is bad.
    InvalidRequest,
    /// This provider cannot express the request (a feature it lacks); the
    /// next entry may.
    Unsupported,
    /// The provider answered with a body that could not be decoded.
    Decode,
    /// The provider's circuit breaker is open; it was skipped without a call.
    CircuitOpen,
    /// The end-to-end deadline left no time for this attempt.
    DeadlineExceeded,
}

impl ErrorKind {
    /// Every kind, in declaration order.
    pub const ALL: [ErrorKind; 15] = [
        ErrorKind::RateLimited,
        ErrorKind::QuotaExhausted,
        ErrorKind::Server,
        ErrorKind::Timeout,
        ErrorKind::Stalled,
        ErrorKind::Transport,
        ErrorKind::Auth,
        ErrorKind::NotFound,
        ErrorKind::ContextLength,
        ErrorKind::ContentFilter,
        ErrorKind::InvalidRequest,
        ErrorKind::Unsupported,
        ErrorKind::Decode,
        ErrorKind::CircuitOpen,
        ErrorKind::DeadlineExceeded,
    ];

    /// The kind's name as it is serialized (`rate_limited`, …): a
    /// trace's `error.type`.
    pub fn code(self) -> &'static str {
        match self {
            ErrorKind::RateLimited => "rate_limited",
            ErrorKind::QuotaExhausted => "quota_exhausted",
            ErrorKind::Server => "server",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Stalled => "stalled",
            ErrorKind::Transport => "transport",
            ErrorKind::Auth => "auth",
            ErrorKind::NotFound => "not_found",
            ErrorKind::ContextLength => "context_length",
            ErrorKind::ContentFilter => "content_filter",
            ErrorKind::InvalidRequest => "invalid_request",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::Decode => "decode",
            ErrorKind::CircuitOpen => "circuit_open",
            ErrorKind::DeadlineExceeded => "deadline_exceeded",
        }
    }

    /// A short human name.
    pub fn describe(self) -> &'static str {
        match self {
            ErrorKind::RateLimited => "rate limited",
            ErrorKind::QuotaExhausted => "quota exhausted",
            ErrorKind::Server => "server error",
            ErrorKind::Timeout => "timed out",
            ErrorKind::Stalled => "response stalled",
            ErrorKind::Transport => "network error",
            ErrorKind::Auth => "authentication failed",
            ErrorKind::NotFound => "not found",
            ErrorKind::ContextLength => "context length exceeded",
            ErrorKind::ContentFilter => "refused by content filter",
            ErrorKind::InvalidRequest => "invalid request",
            ErrorKind::Unsupported => "unsupported request",
            ErrorKind::Decode => "undecodable response",
            ErrorKind::CircuitOpen => "circuit open",
            ErrorKind::DeadlineExceeded => "deadline exceeded",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_the_serialized_names() {
        for k in ErrorKind::ALL {
            assert_eq!(serde_json::to_value(k).unwrap(), k.code());
        }
    }

    #[test]
    fn all_lists_every_kind_once() {
        // Exhaustive: a new variant breaks this match until ALL lists it.
        let position = |k: ErrorKind| match k {
            ErrorKind::RateLimited => 0,
            ErrorKind::QuotaExhausted => 1,
            ErrorKind::Server => 2,
            ErrorKind::Timeout => 3,
            ErrorKind::Stalled => 4,
            ErrorKind::Transport => 5,
            ErrorKind::Auth => 6,
            ErrorKind::NotFound => 7,
            ErrorKind::ContextLength => 8,
            ErrorKind::ContentFilter => 9,
            ErrorKind::InvalidRequest => 10,
            ErrorKind::Unsupported => 11,
            ErrorKind::Decode => 12,
            ErrorKind::CircuitOpen => 13,
            ErrorKind::DeadlineExceeded => 14,
        };
        for (i, k) in ErrorKind::ALL.into_iter().enumerate() {
            assert_eq!(position(k), i, "{k:?}");
        }
    }
}
