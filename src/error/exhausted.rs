//! [`Exhausted`]: every entry of a route failed or was skipped; the status,
//! retryability and one-line diagnosis the failures add up to.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::attempt::Attempt;
use super::kind::ErrorKind;
use super::provider::ProviderError;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::AttemptOutcome;

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
            span: None,
            breaker: None,
        }
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
}
