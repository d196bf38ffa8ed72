//! Errors, and the one place where each failure's treatment is decided.
//!
//! A provider failure is a [`ProviderError`]: a closed [`ErrorKind`] plus the
//! status, the provider's own message and code, and any Retry-After. Whether
//! the same provider is tried again, whether the chain moves on, and whether
//! the breaker counts it are decided here, exhaustively, from the kind (the
//! failure table of docs/design.md). What reaches the caller is an [`Error`].

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::platform::{TransportError, TransportErrorKind, UnixMillis};

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

/// What a failure of one kind gets: the failure table, one row per kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Treatment {
    /// Try the same provider again (after a backoff or its Retry-After).
    pub retry: bool,
    /// Move on to the route's next entry once retries are spent.
    pub fail_over: bool,
    /// Count as a failure in the provider's circuit breaker.
    pub trips_breaker: bool,
    /// The same call may succeed later ([`Exhausted::is_retryable`]): the
    /// failure was transient, though perhaps not worth a retry within the
    /// request (a timeout, an open breaker, a spent deadline).
    pub transient: bool,
}

impl Treatment {
    const fn new(retry: bool, fail_over: bool, trips_breaker: bool, transient: bool) -> Self {
        Treatment {
            retry,
            fail_over,
            trips_breaker,
            transient,
        }
    }
}

impl ErrorKind {
    /// The treatment of this kind of failure. Exhaustive on purpose: a new
    /// kind must not compile without its row.
    pub const fn treatment(self) -> Treatment {
        match self {
            ErrorKind::RateLimited => Treatment::new(true, true, true, true),
            ErrorKind::QuotaExhausted => Treatment::new(false, true, true, false),
            ErrorKind::Server => Treatment::new(true, true, true, true),
            ErrorKind::Timeout => Treatment::new(false, true, true, true),
            ErrorKind::Stalled => Treatment::new(true, true, true, true),
            ErrorKind::Transport => Treatment::new(true, true, true, true),
            ErrorKind::Auth => Treatment::new(false, true, true, false),
            // A missing model says nothing of the provider's other models.
            ErrorKind::NotFound => Treatment::new(false, true, false, false),
            ErrorKind::ContextLength => Treatment::new(false, true, false, false),
            ErrorKind::ContentFilter => Treatment::new(false, false, false, false),
            ErrorKind::InvalidRequest => Treatment::new(false, false, false, false),
            ErrorKind::Unsupported => Treatment::new(false, true, false, false),
            ErrorKind::Decode => Treatment::new(true, true, true, true),
            ErrorKind::CircuitOpen => Treatment::new(false, true, false, true),
            ErrorKind::DeadlineExceeded => Treatment::new(false, false, false, true),
        }
    }
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

/// Every chain entry failed or was skipped: the attempts, in order.
/// Every entry of the route failed or was skipped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exhausted {
    /// Every attempt, skipped entries included, in the order they happened.
    pub attempts: Vec<Attempt>,
}

impl Exhausted {
    /// The errors of the failed attempts, in order.
    pub fn errors(&self) -> impl Iterator<Item = &ProviderError> {
        self.attempts.iter().filter_map(Attempt::error)
    }

    /// The HTTP status to give the caller: 400 when every provider found the
    /// request itself unusable (too long for every window, or a feature no
    /// provider has), 404 when every provider said the model does not
    /// exist, 504 when the deadline ended the walk, 503 otherwise.
    pub fn status(&self) -> u16 {
        let mut errors = self.errors().peekable();
        let all_request_problems = errors.peek().is_some()
            && errors.all(|e| matches!(e.kind, ErrorKind::ContextLength | ErrorKind::Unsupported));
        let mut errors = self.errors().peekable();
        let all_not_found =
            errors.peek().is_some() && errors.all(|e| e.kind == ErrorKind::NotFound);
        let out_of_time = self
            .errors()
            .last()
            .is_some_and(|e| e.kind == ErrorKind::DeadlineExceeded);
        if all_request_problems {
            400
        } else if all_not_found {
            404
        } else if out_of_time {
            504
        } else {
            503
        }
    }

    /// The last failure, the one that ended the call.
    pub fn last_error(&self) -> Option<&ProviderError> {
        self.errors().last()
    }

    /// The status the failures share, when every one had the same (a lone
    /// 401 is a 401); `None` when they differ or one had none (a network
    /// error, a skipped breaker). A host that must answer in one status
    /// uses [`status`](Self::status).
    pub fn common_status(&self) -> Option<u16> {
        let mut statuses = self.errors().map(|e| e.status);
        let first = statuses.next()??;
        statuses.all(|s| s == Some(first)).then_some(first)
    }

    /// The status for a caller that holds the providers' keys itself (the
    /// npm package's `chat()` and `client.fetch`): the one the failures
    /// share (a lone 401 is a 401, a route of 429s a 429), else
    /// [`status`](Self::status). A gateway's own clients get `status`: the
    /// upstream's 401 is not theirs to fix.
    pub fn caller_status(&self) -> u16 {
        self.common_status().unwrap_or_else(|| self.status())
    }

    /// Whether the same call may succeed later: some failure was transient
    /// (rate limit, server fault, timeout, network, an open breaker). A call
    /// every provider refused for its key or its content is not.
    pub fn is_retryable(&self) -> bool {
        self.errors()
            .any(|e| e.should_retry.unwrap_or(e.kind.treatment().transient))
    }

    /// The earliest moment worth trying again, from the providers'
    /// Retry-After headers, when any gave one.
    pub fn retry_after(&self) -> Option<Duration> {
        self.errors().filter_map(|e| e.retry_after).min()
    }

    /// A one-line diagnosis: what the failures have in common, then each
    /// provider's last error.
    pub fn headline(&self) -> String {
        // Last error per provider, in first-seen order.
        let mut last: Vec<(&str, &ProviderError)> = Vec::new();
        for a in &self.attempts {
            if let Some(e) = a.error() {
                match last.iter_mut().find(|(p, _)| *p == a.provider) {
                    Some(seen) => seen.1 = e,
                    None => last.push((&a.provider, e)),
                }
            }
        }
        let n = last.len();
        let common = match last.first() {
            Some((_, e)) if last.iter().all(|(_, x)| x.kind == e.kind) => Some(e.kind),
            _ => None,
        };
        let lead = match (n, common) {
            (0, _) => "no provider was tried".to_string(),
            (1, Some(k)) => format!("the only provider failed: {k}"),
            (n, Some(k)) => format!("all {n} providers failed the same way: {k}"),
            (n, None) => format!("all {n} providers failed"),
        };
        // With one kind in common the lead names it: each detail leaves it out.
        let detail: Vec<String> = last
            .iter()
            .map(|(p, e)| match (common, e.detail()) {
                (Some(_), d) if d.is_empty() => p.to_string(),
                (Some(_), d) => format!("{p}: {d}"),
                (None, _) => format!("{p}: {e}"),
            })
            .collect();
        if detail.is_empty() {
            lead
        } else {
            format!("{lead} ({})", detail.join("; "))
        }
    }
}

impl fmt::Display for Exhausted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.headline())
    }
}

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
            // The providers answered; the answers were not good enough.
            Error::NoValidAnswer { .. } => 502,
        }
    }

    /// Every attempt made, in order.
    pub fn attempts(&self) -> &[Attempt] {
        match self {
            Error::AllProvidersFailed(e) => &e.attempts,
            Error::Rejected { attempts, .. }
            | Error::Interrupted { attempts, .. }
            | Error::NoValidAnswer { attempts } => attempts,
            Error::InvalidRequest(_) | Error::UnknownRoute(_) | Error::SpendCapReached { .. } => {
                &[]
            }
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
            Error::SpendCapReached { retry_after, .. } => Some(*retry_after),
        }
    }
}

/// Serde for `Duration` as whole milliseconds.
pub(crate) mod ms {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub(crate) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(crate::platform::millis(*d))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

/// Serde for `Option<Duration>` as whole milliseconds.
pub(crate) mod opt_ms {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub(crate) fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&crate::platform::millis(*d)),
            None => s.serialize_none(),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        Option::<u64>::deserialize(d).map(|o| o.map(Duration::from_millis))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn attempt(provider: &str, kind: ErrorKind, status: Option<u16>) -> Attempt {
        let mut error = ProviderError::new(kind, "");
        error.status = status;
        Attempt {
            provider: provider.into(),
            model: "m".into(),
            number: 1,
            started_at: 0,
            duration: Duration::from_millis(5),
            reached: true,
            outcome: AttemptOutcome::Failure { error },
            usage: None,
            omitted: Vec::new(),
        }
    }

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
    fn an_exhausted_call_is_retryable_when_a_failure_was_transient() {
        let of = |kinds: &[ErrorKind]| Exhausted {
            attempts: kinds.iter().map(|k| attempt("p", *k, None)).collect(),
        };
        // Not worth a retry within the request, but the call may succeed later.
        for later in [
            ErrorKind::Timeout,
            ErrorKind::CircuitOpen,
            ErrorKind::DeadlineExceeded,
        ] {
            assert!(
                !later.treatment().retry && of(&[later]).is_retryable(),
                "{later:?}"
            );
        }
        assert!(!of(&[ErrorKind::Auth, ErrorKind::ContentFilter]).is_retryable());
        assert!(of(&[ErrorKind::Auth, ErrorKind::RateLimited]).is_retryable());
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
    fn the_headline_names_a_shared_kind_once() {
        let mut timed_out = attempt("p", ErrorKind::Timeout, None);
        timed_out.outcome = AttemptOutcome::Failure {
            error: ProviderError::timeout(Duration::from_millis(100)),
        };
        let one = Exhausted {
            attempts: vec![timed_out],
        };
        assert_eq!(
            one.headline(),
            "the only provider failed: timed out (p: no response within 100 ms)"
        );
        let revoked = Exhausted {
            attempts: vec![attempt("a", ErrorKind::Auth, Some(401))],
        };
        assert_eq!(
            revoked.headline(),
            "the only provider failed: authentication failed (a: HTTP 401)"
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
    fn an_exhausted_call_takes_status_and_retryability_from_its_failures() {
        let revoked = Exhausted {
            attempts: vec![attempt("a", ErrorKind::Auth, Some(401))],
        };
        assert_eq!(revoked.common_status(), Some(401));
        assert!(!revoked.is_retryable());
        assert_eq!(revoked.last_error().map(|e| e.kind), Some(ErrorKind::Auth));
        let mixed = Exhausted {
            attempts: vec![
                attempt("a", ErrorKind::Auth, Some(401)),
                attempt("b", ErrorKind::RateLimited, Some(429)),
            ],
        };
        assert_eq!(mixed.common_status(), None);
        assert_eq!(mixed.status(), 503);
        let unanswered = Exhausted {
            attempts: vec![
                attempt("a", ErrorKind::Auth, Some(401)),
                attempt("b", ErrorKind::Transport, None),
            ],
        };
        assert_eq!(unanswered.common_status(), None);
        assert!(mixed.is_retryable());
        assert_eq!(
            mixed.last_error().map(|e| e.kind),
            Some(ErrorKind::RateLimited)
        );
        let skipped = Exhausted {
            attempts: vec![attempt("a", ErrorKind::CircuitOpen, None)],
        };
        assert_eq!(skipped.common_status(), None);
        assert!(skipped.is_retryable());
    }

    #[test]
    fn headline_tells_uniform_rate_limits_from_a_revoked_key() {
        let all_limited = Exhausted {
            attempts: vec![
                attempt("anthropic", ErrorKind::RateLimited, Some(429)),
                attempt("openai", ErrorKind::RateLimited, Some(429)),
                attempt("groq", ErrorKind::RateLimited, Some(429)),
            ],
        };
        assert!(all_limited
            .headline()
            .starts_with("all 3 providers failed the same way: rate limited"));
        let revoked = Exhausted {
            attempts: vec![attempt("anthropic", ErrorKind::Auth, Some(401))],
        };
        assert!(revoked
            .headline()
            .starts_with("the only provider failed: authentication failed"));
        let mixed = Exhausted {
            attempts: vec![
                attempt("a", ErrorKind::Server, Some(503)),
                attempt("b", ErrorKind::Timeout, None),
            ],
        };
        assert_eq!(
            mixed.headline(),
            "all 2 providers failed (a: server error (HTTP 503); b: timed out)"
        );
        assert_eq!(mixed.status(), 503);
    }

    #[test]
    fn context_length_everywhere_is_a_400() {
        let e = Exhausted {
            attempts: vec![
                attempt("a", ErrorKind::ContextLength, Some(400)),
                attempt("b", ErrorKind::ContextLength, Some(400)),
            ],
        };
        assert_eq!(e.status(), 400);
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
