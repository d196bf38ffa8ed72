//! Whether a timeout counts against a breaker (docs/design.md, "The
//! circuit breaker"). A request the provider cannot finish within its
//! time because of its own size says nothing of the provider: three such
//! requests from one client must not open the breaker for everyone. A
//! timeout is therefore a *suspect*, and counts as a failure only when the
//! provider's other recent requests witness against it. The recent
//! requests are the last `window` verdicts of the breaker key (the
//! client's breaker policy), each with the request's size (its estimated
//! input tokens plus the output it may ask for). A timeout counts when
//!
//! 1. it ended a probe or a forced call (the breaker is open already, on
//!    counted failures, and the probe is its test);
//! 2. the recent requests hold a failure other than a timeout (the
//!    provider fails requests of any size);
//! 3. the recent requests hold a success at least as large (the provider
//!    finished as big a request and now does not: it is slow, not the
//!    request big);
//! 4. or the provider finished none of its last `minimum_calls` requests,
//!    this one included (nothing gets through: dead, not merely given big
//!    requests).
//!
//! Otherwise the timeout is ignored, as a bad request is. Requests bigger
//! than anything the provider finished lately thus never open it while it
//! serves the others; a dead provider still opens, at once when it had
//! finished requests as large before dying, else after `minimum_calls`
//! requests.
//!
//! The memory is this process's (the fleet is told only of the verdicts
//! that count) and holds at most `window` entries per breaker key, which
//! the configuration bounds.

use std::collections::{BTreeMap, VecDeque};

use crate::chat::ChatRequest;
use crate::error::{ErrorKind, ProviderError};
use crate::policy::breaker::{BreakerPolicy, Outcome, PermitKind};
use crate::policy::cheapest::expected_usage;

/// A chat request's size: its estimated input tokens plus the output it
/// may ask for (`policy/cheapest.rs`).
pub(crate) fn size_of(req: &ChatRequest) -> u64 {
    let usage = expected_usage(req);
    usage.input_tokens.saturating_add(usage.output_tokens)
}

/// An endpoint body's size: its JSON bytes, at four a token.
pub(crate) fn size_of_body(body: &serde_json::Map<String, serde_json::Value>) -> u64 {
    let bytes = serde_json::to_vec(body).map_or(0, |b| b.len() as u64);
    bytes.div_ceil(4)
}

/// One recent verdict, as the rule reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    Success,
    Timeout,
    /// A failure the breaker counts, other than a timeout.
    Failure,
}

/// The recent verdicts of every breaker key, and the rule over them.
#[derive(Debug, Default)]
pub(crate) struct Timeouts {
    /// How many verdicts are kept per key (the breaker's `window`).
    window: usize,
    /// Requests without a success that make timeouts count (the
    /// breaker's `minimum_calls`).
    minimum_calls: usize,
    recent: BTreeMap<String, VecDeque<(Seen, u64)>>,
}

impl Timeouts {
    /// A memory sized by `policy`'s window and minimum calls.
    pub(crate) fn new(policy: &BreakerPolicy) -> Self {
        Timeouts {
            window: policy.window.max(1) as usize,
            minimum_calls: policy.minimum_calls.max(1) as usize,
            recent: BTreeMap::new(),
        }
    }

    /// The breaker's verdict on a call of `size` at `key` that ended with
    /// `result`, under a permit of `kind`; remembered for the next ones.
    pub(crate) fn verdict(
        &mut self,
        key: &str,
        kind: PermitKind,
        size: u64,
        result: Result<(), &ProviderError>,
    ) -> Outcome {
        let seen = match result {
            Ok(()) => Seen::Success,
            Err(e) if !e.trips_breaker() => return Outcome::Ignored,
            Err(e) if e.kind == ErrorKind::Timeout => Seen::Timeout,
            Err(_) => Seen::Failure,
        };
        let recent = match self.recent.get_mut(key) {
            Some(r) => r,
            None => self.recent.entry(key.to_owned()).or_default(),
        };
        let outcome = match seen {
            Seen::Success => Outcome::Success,
            Seen::Failure => Outcome::Failure,
            Seen::Timeout => {
                let probe = kind != PermitKind::Normal;
                let fails_others = recent.iter().any(|(s, _)| *s == Seen::Failure);
                let finished_larger = recent
                    .iter()
                    .any(|(s, n)| *s == Seen::Success && *n >= size);
                let before = self.minimum_calls - 1;
                let finished_none = recent.len() >= before
                    && !recent
                        .iter()
                        .rev()
                        .take(before)
                        .any(|(s, _)| *s == Seen::Success);
                if probe || fails_others || finished_larger || finished_none {
                    Outcome::Failure
                } else {
                    Outcome::Ignored
                }
            }
        };
        recent.push_back((seen, size));
        while recent.len() > self.window {
            recent.pop_front();
        }
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeouts() -> Timeouts {
        Timeouts::new(&BreakerPolicy::default()) // window 20, minimum calls 10
    }

    fn timeout() -> ProviderError {
        ProviderError::timeout(std::time::Duration::from_secs(30))
    }

    const N: PermitKind = PermitKind::Normal;

    #[test]
    fn a_timeout_larger_than_what_the_provider_finishes_is_ignored() {
        let mut t = timeouts();
        for _ in 0..3 {
            assert_eq!(t.verdict("p/m", N, 1_000, Ok(())), Outcome::Success);
        }
        for _ in 0..8 {
            assert_eq!(
                t.verdict("p/m", N, 50_000, Err(&timeout())),
                Outcome::Ignored
            );
        }
        // As large as a request it finished: it counts.
        assert_eq!(t.verdict("p/m", N, 900, Err(&timeout())), Outcome::Failure);
        // Another key has its own memory.
        assert_eq!(t.verdict("q/m", N, 900, Err(&timeout())), Outcome::Ignored);
    }

    #[test]
    fn another_failure_or_a_probe_makes_timeouts_count() {
        let mut t = timeouts();
        t.verdict("p/m", N, 1_000, Ok(()));
        let server = ProviderError::new(ErrorKind::Server, "boom");
        assert_eq!(t.verdict("p/m", N, 1_000, Err(&server)), Outcome::Failure);
        assert_eq!(
            t.verdict("p/m", N, 50_000, Err(&timeout())),
            Outcome::Failure
        );
        let mut t = timeouts();
        assert_eq!(
            t.verdict("p/m", PermitKind::Probe, 50_000, Err(&timeout())),
            Outcome::Failure
        );
        let bad = ProviderError::new(ErrorKind::InvalidRequest, "bad");
        assert_eq!(t.verdict("p/m", N, 1, Err(&bad)), Outcome::Ignored);
    }

    #[test]
    fn timeouts_count_once_nothing_gets_through() {
        let mut t = timeouts();
        t.verdict("p/m", N, 1_000, Ok(()));
        for i in 0..9 {
            assert_eq!(
                t.verdict("p/m", N, 5_000, Err(&timeout())),
                Outcome::Ignored,
                "{i}"
            );
        }
        // Ten requests without a success: this one counts, and the next.
        assert_eq!(
            t.verdict("p/m", N, 5_000, Err(&timeout())),
            Outcome::Failure
        );
        assert_eq!(
            t.verdict("p/m", N, 5_000, Err(&timeout())),
            Outcome::Failure
        );
    }

    #[test]
    fn the_memory_is_bounded_by_the_window() {
        let mut t = timeouts();
        for _ in 0..100 {
            t.verdict("p/m", N, 1, Ok(()));
        }
        assert_eq!(t.recent["p/m"].len(), 20);
    }
}
