//! [`ProviderError`]: one failed attempt at one provider, its kind and what
//! the provider said, and the treatment its kind gives it.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::kind::ErrorKind;
use super::opt_ms;
use crate::platform::{TransportError, TransportErrorKind};

/// One failed attempt at one provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "camelCase")]
pub struct ProviderError {
    /// The class of failure; decides the treatment.
    pub kind: ErrorKind,
    /// The HTTP status, when there was a response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The provider's error type or code (`insufficient_quota`,
    /// `overloaded_error`, …), when it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// A human-readable message (the provider's, where it gave one). Never
    /// holds a key.
    pub message: String,
    /// How long the provider asked us to wait.
    #[serde(
        default,
        rename = "retryAfterMs",
        with = "opt_ms",
        skip_serializing_if = "Option::is_none"
    )]
    pub retry_after: Option<Duration>,
    /// The provider's `x-should-retry` verdict, which overrides the kind's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub should_retry: Option<bool>,
}

impl fmt::Display for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind.describe())?;
        if let Some(head) = self.detail_head() {
            write!(f, " ({head})")?;
        }
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        Ok(())
    }
}

impl ProviderError {
    /// The message without the kind's description: the status, any
    /// Retry-After and the provider's message. For lines that already
    /// name the kind.
    pub fn detail(&self) -> String {
        match (self.detail_head(), self.message.is_empty()) {
            (Some(head), false) => format!("{head}: {}", self.message),
            (Some(head), true) => head,
            (None, _) => self.message.clone(),
        }
    }

    /// The provider's message, or the kind's description when it gave none.
    pub(crate) fn message_or_kind(&self) -> &str {
        if self.message.is_empty() {
            self.kind.describe()
        } else {
            &self.message
        }
    }

    /// The status and any Retry-After (`HTTP 429, retry after 2000 ms`),
    /// as [`detail`](Self::detail) and `Display` both write them.
    fn detail_head(&self) -> Option<String> {
        let ms = crate::platform::millis;
        match (self.status, self.retry_after) {
            (Some(s), Some(r)) => Some(format!("HTTP {s}, retry after {} ms", ms(r))),
            (Some(s), None) => Some(format!("HTTP {s}")),
            (None, Some(r)) => Some(format!("retry after {} ms", ms(r))),
            (None, None) => None,
        }
    }
}

impl ProviderError {
    /// An error of `kind` with a message.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ProviderError {
            kind,
            status: None,
            code: None,
            message: message.into(),
            retry_after: None,
            should_retry: None,
        }
    }

    /// Sets the HTTP status.
    pub fn with_status(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }

    /// Sets the provider's error code.
    pub fn with_code(mut self, code: impl Into<String>) -> Self {
        self.code = Some(code.into());
        self
    }

    /// Sets the Retry-After.
    pub fn with_retry_after(mut self, after: Option<Duration>) -> Self {
        self.retry_after = after;
        self
    }

    /// The attempt's deadline passed with no response.
    pub fn timeout(after: Duration) -> Self {
        Self::new(
            ErrorKind::Timeout,
            format!("no response within {} ms", crate::platform::millis(after)),
        )
    }

    /// Whether trying the same provider again may succeed.
    pub fn is_retryable(&self) -> bool {
        self.should_retry.unwrap_or(self.kind.treatment().retry)
    }

    /// Whether the chain should move on to its next entry once retries
    /// are spent (or at once, when not retryable).
    pub fn fails_over(&self) -> bool {
        self.kind.treatment().fail_over
    }

    /// Whether the provider's breaker counts this as a failure.
    pub fn trips_breaker(&self) -> bool {
        self.kind.treatment().trips_breaker
    }

    /// Whether the failure says the whole provider is out, not one model:
    /// its key was refused (401/403), or its host refused the connection,
    /// did not resolve or failed its TLS handshake. Such a failure counts
    /// against every model's breaker of that provider; any other stays
    /// with the model that failed.
    pub fn is_provider_wide(&self) -> bool {
        match self.kind {
            ErrorKind::Auth => true,
            ErrorKind::Transport => !self.may_have_reached(),
            // Exhaustive on purpose: a new kind must choose.
            ErrorKind::RateLimited
            | ErrorKind::QuotaExhausted
            | ErrorKind::Server
            | ErrorKind::Timeout
            | ErrorKind::Stalled
            | ErrorKind::NotFound
            | ErrorKind::ContextLength
            | ErrorKind::ContentFilter
            | ErrorKind::InvalidRequest
            | ErrorKind::Unsupported
            | ErrorKind::Decode
            | ErrorKind::CircuitOpen
            | ErrorKind::DeadlineExceeded => false,
        }
    }

    /// How long the provider asked us to wait before trying again.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }

    /// Whether the request may have reached the provider, judged from the
    /// error alone: a network error whose message says it was refused, did
    /// not resolve or failed its TLS handshake did not ([`TransportError::reached`]).
    /// For providers that report failures as values with text only (JS
    /// providers); an HTTP attempt knows from its transport.
    pub fn may_have_reached(&self) -> bool {
        self.kind != ErrorKind::Transport
            || TransportError::from_message(self.message.as_str()).reached()
    }
}

impl From<TransportError> for ProviderError {
    fn from(e: TransportError) -> Self {
        let kind = match e.kind {
            TransportErrorKind::Reset
            | TransportErrorKind::Refused
            | TransportErrorKind::Dns
            | TransportErrorKind::Tls
            | TransportErrorKind::Aborted
            | TransportErrorKind::Other => ErrorKind::Transport,
            TransportErrorKind::BodyTooLarge => ErrorKind::Decode,
            TransportErrorKind::TimedOut => ErrorKind::Timeout,
        };
        // The kind's own words already open the message: "network error"
        // and "timed out" are not said twice.
        let message = match e.kind {
            TransportErrorKind::Other | TransportErrorKind::TimedOut => e.message,
            _ => e.to_string(),
        };
        ProviderError::new(kind, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn treatment_follows_the_design_table() {
        let e = |k| ProviderError::new(k, "");
        assert!(e(ErrorKind::RateLimited).is_retryable());
        assert!(e(ErrorKind::Server).is_retryable() && e(ErrorKind::Server).trips_breaker());
        assert!(!e(ErrorKind::Auth).is_retryable() && e(ErrorKind::Auth).fails_over());
        assert!(
            !e(ErrorKind::QuotaExhausted).is_retryable()
                && e(ErrorKind::QuotaExhausted).fails_over()
        );
        assert!(
            e(ErrorKind::ContextLength).fails_over()
                && !e(ErrorKind::ContextLength).trips_breaker()
        );
        assert!(
            !e(ErrorKind::ContentFilter).fails_over()
                && !e(ErrorKind::ContentFilter).is_retryable()
        );
        assert!(
            !e(ErrorKind::InvalidRequest).fails_over()
                && !e(ErrorKind::InvalidRequest).trips_breaker()
        );
        assert!(!e(ErrorKind::Timeout).is_retryable() && e(ErrorKind::Timeout).fails_over());
    }

    #[test]
    fn should_retry_header_overrides_the_kind() {
        let mut e = ProviderError::new(ErrorKind::Server, "");
        e.should_retry = Some(false);
        assert!(!e.is_retryable());
        assert!(e.fails_over());
        let mut e = ProviderError::new(ErrorKind::InvalidRequest, "");
        e.should_retry = Some(true);
        assert!(e.is_retryable());
    }

    #[test]
    fn detail_and_display_write_the_same_status_and_message() {
        let mut e = ProviderError::new(ErrorKind::RateLimited, "slow down");
        e.status = Some(429);
        e.retry_after = Some(Duration::from_secs(2));
        assert_eq!(e.detail(), "HTTP 429, retry after 2000 ms: slow down");
        assert_eq!(
            e.to_string(),
            format!(
                "{} (HTTP 429, retry after 2000 ms): slow down",
                e.kind.describe()
            )
        );
        let bare = ProviderError::new(ErrorKind::Server, "");
        assert_eq!(
            (bare.detail(), bare.to_string()),
            (String::new(), bare.kind.describe().to_string())
        );
    }

    #[test]
    fn a_refused_connection_did_not_reach_the_provider() {
        let refused = ProviderError::from(TransportError::from_message(
            "TypeError: fetch failed: Error: connect ECONNREFUSED 127.0.0.1:9",
        ));
        assert!(!refused.may_have_reached());
        let reset = ProviderError::from(TransportError::from_message("socket hang up"));
        assert!(reset.may_have_reached());
        assert!(ProviderError::new(ErrorKind::Server, "refused").may_have_reached());
    }

    #[test]
    fn a_transport_error_says_network_error_once() {
        let e = ProviderError::from(TransportError::from_message("fetch failed"));
        assert_eq!(e.to_string(), "network error: fetch failed");
        let refused = ProviderError::from(TransportError::from_message("connect ECONNREFUSED"));
        assert_eq!(
            refused.to_string(),
            "network error: connection refused: connect ECONNREFUSED"
        );
    }

    #[test]
    fn errors_serialize_with_millisecond_retry_after() {
        let e = ProviderError::new(ErrorKind::RateLimited, "slow down")
            .with_status(429)
            .with_retry_after(Some(Duration::from_millis(1500)));
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["retryAfterMs"], 1500);
        assert_eq!(v["kind"], "rate_limited");
        let back: ProviderError = serde_json::from_value(v).unwrap();
        assert_eq!(back, e);
    }
}
