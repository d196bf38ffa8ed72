//! [`Treatment`]: the failure table of docs/design.md, one row per
//! [`ErrorKind`], decided here and nowhere else.

use super::kind::ErrorKind;

/// What a failure of one kind gets: the failure table, one row per kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Treatment {
    /// Try the same provider again (after a backoff or its Retry-After).
    pub retry: bool,
    /// Move on to the route's next entry once retries are spent.
    pub fail_over: bool,
    /// Count as a failure in the provider's circuit breaker.
    pub trips_breaker: bool,
    /// The same call may succeed later ([`crate::Exhausted::is_retryable`]): the
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
