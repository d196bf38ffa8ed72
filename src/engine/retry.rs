//! One chain entry: attempts under a deadline, retried with full-jitter
//! backoff or the provider's Retry-After, within the retry budget.

use std::future::Future;
use std::time::Duration;

use crate::chat::{ChatRequest, ChatResponse, Usage};
use crate::engine::authorize::{is_refused, renewing};
use crate::engine::core::Core;
use crate::engine::cursor::Run;
use crate::engine::route::{Entry, Keyed, Step};
use crate::engine::store::BreakerStore;
use crate::engine::timeout::timeout;
use crate::error::{AttemptBreaker, ErrorKind, ProviderError};
use crate::event::Event;
use crate::platform::{millis, Platform, UnixMillis};
use crate::policy::breaker::{Permit, PermitKind};
use crate::policy::latency::Measure;
use crate::policy::timeouts::size_of;
use crate::provider::Upstream;
use crate::trace::{AttemptTrace, TraceParent};

/// One attempt's end: its result, whether the request reached the
/// provider, and the hints its encoder left out.
pub(crate) type Tried<T> = (Result<T, ProviderError>, bool, Vec<String>);

/// What an entry's attempts ask for, as [`Client::retry_entry`] treats it.
pub(crate) trait Answer {
    /// Whether a success's latency feeds the entry's latency figures (which
    /// rank entries for chat).
    const RANKS_LATENCY: bool;
    /// Whether a rate-limited attempt gives way at once to a mate of the
    /// entry's tier after it, which serves sooner than a wait here.
    const GIVES_WAY: bool;
    /// The tokens the answer reports, kept on its attempt.
    fn usage(&self) -> Option<Usage>;
}

/// A chat answer.
impl Answer for ChatResponse {
    const RANKS_LATENCY: bool = true;
    const GIVES_WAY: bool = true;
    fn usage(&self) -> Option<Usage> {
        self.usage
    }
}

impl<P: Platform, S: BreakerStore> Core<P, S> {
    /// Runs one entry (its retries included) and records the breaker's one
    /// verdict for it.
    pub(crate) async fn step(
        &self,
        entry: Keyed<'_>,
        permit: Permit,
        req: &ChatRequest,
        run: &mut Run,
    ) -> Step {
        let (result, moved) = self
            .run_admitted(entry, permit, size_of(req), async |permit| {
                self.run_entry(entry, permit, req, run).await
            })
            .await;
        run.breaker_moved(&entry, moved);
        match result {
            Ok(resp) => Step::Answered(Box::new(resp)),
            Err(error) if error.fails_over() => Step::Next(error),
            Err(error) => Step::Stop(error),
        }
    }

    /// Tries `entry` until it answers, fails in a way retrying cannot fix,
    /// or runs out of attempts, budget or time. Every attempt goes into
    /// `run.attempts`. A half-open probe (or a forced call) gets one attempt:
    /// a sick provider is asked once, not hammered. A failed attempt marks
    /// the permit's holder as failing, and a retry goes out only while the
    /// breaker would still admit it.
    pub(crate) async fn run_entry(
        &self,
        entry: Keyed<'_>,
        permit: &mut Permit,
        req: &ChatRequest,
        run: &mut Run,
    ) -> Result<ChatResponse, ProviderError> {
        let Some(upstream) = self.upstreams.get(&entry.provider) else {
            return Err(ProviderError::new(
                ErrorKind::Unsupported,
                format!("no provider \"{}\" is configured", entry.provider),
            ));
        };
        let trace = req.trace.as_ref();
        self.retry_entry(entry, permit, run, trace, |limit, at| {
            self.attempt(upstream, req, entry, limit, at)
        })
        .await
    }

    /// The attempts at `entry`, each made by `attempt` under its time
    /// limit and with its place in `trace`, until one answers, one fails in a way retrying cannot fix,
    /// or attempts, budget or time run out (see [`Client::run_entry`]).
    /// Chat and the other endpoints share it; what differs by the answer
    /// is in [`Answer`].
    pub(crate) async fn retry_entry<'t, T, F, Fut>(
        &self,
        entry: Keyed<'_>,
        permit: &mut Permit,
        run: &mut Run,
        trace: Option<&'t TraceParent>,
        mut attempt: F,
    ) -> Result<T, ProviderError>
    where
        T: Answer,
        F: FnMut(Duration, Option<AttemptTrace<'t>>) -> Fut,
        Fut: Future<Output = Tried<T>>,
    {
        let mut number = 0;
        loop {
            number += 1;
            let started = self.platform.now();
            let left = run.deadline_at.saturating_sub(started);
            if left == 0 {
                // Recorded, so the call's end says why (a 504, not "no
                // provider was tried"): admission itself can spend the
                // last of a short deadline.
                let error = ProviderError::new(
                    ErrorKind::DeadlineExceeded,
                    "the request's deadline passed",
                );
                run.skip(&entry, started, error.clone());
                return Err(error);
            }
            let limit = entry
                .timeout
                .unwrap_or(self.policy.attempt_timeout)
                .min(Duration::from_millis(left));
            let at = self.attempt_trace(trace);
            let span = at.map(|a| a.span);
            run.in_flight = Some((number, started, span));
            let (result, reached, omitted) = attempt(limit, at).await;
            run.in_flight = None;
            let result = result.map_err(|e| run.blame(self.platform.now(), e));
            let record = self.record_attempt(
                run,
                entry,
                number,
                started,
                reached,
                result.as_ref().map(|_| ()),
            );
            record.omitted = omitted;
            record.usage = result.as_ref().ok().and_then(Answer::usage);
            record.span = span;
            record.breaker = Some(AttemptBreaker::admitted(permit.kind.state().code()));
            let record_duration = record.duration;
            let error = match result {
                Ok(answer) => {
                    if T::RANKS_LATENCY {
                        self.record_latency(entry, Measure::Latency, millis(record_duration));
                    }
                    return Ok(answer);
                }
                Err(e) => e,
            };
            if T::GIVES_WAY && error.kind == ErrorKind::RateLimited && run.mate_after {
                return Err(error); // its tier mate serves sooner than a wait here
            }
            let kind = permit.kind;
            if !self
                .wait_to_retry(
                    entry,
                    kind,
                    Some(permit),
                    &error,
                    (number, run.deadline_at),
                    T::GIVES_WAY && run.later_ready,
                )
                .await
            {
                return Err(error);
            }
        }
    }

    /// After attempt `number` at `entry` failed with `error`: waits out the
    /// backoff and tells whether to try the entry again, or tells at once
    /// that the chain moves on. A retry needs a retryable error, attempts
    /// left (one in all for a probe or a forced call), budget and time, and
    /// the breaker's leave, asked before the wait and again after it (other
    /// requests' verdicts may land meanwhile). The entry's `permit`, if still
    /// held, is first marked failing when the error trips breakers. With
    /// `later_ready` (a later entry of the route can serve now), a 429 whose
    /// wait would pass the retry policy's `rate_limit_wait` moves on at once.
    pub(crate) async fn wait_to_retry(
        &self,
        entry: Keyed<'_>,
        kind: PermitKind,
        mut permit: Option<&mut Permit>,
        error: &ProviderError,
        (number, deadline_at): (u32, UnixMillis),
        later_ready: bool,
    ) -> bool {
        let retry = entry.retry.unwrap_or(self.policy.retry);
        let max_attempts = match kind {
            PermitKind::Normal => retry.max_attempts.max(1),
            PermitKind::Probe | PermitKind::Forced => 1,
        };
        if !self.breaker_admits_retry(entry, permit.as_deref_mut(), error) {
            return false;
        }
        let now = self.platform.now();
        let left = Duration::from_millis(deadline_at.saturating_sub(now));
        let delay = error.is_retryable().then(|| {
            retry.next_delay(number, max_attempts, error.retry_after, left, || {
                self.platform.random()
            })
        });
        let Some(delay) = delay.flatten() else {
            return false;
        };
        if later_ready && error.kind == ErrorKind::RateLimited && delay > retry.rate_limit_wait {
            return false; // a later entry serves now: no long wait here
        }
        if !self.spend_retry(&entry, error, number, delay, now) {
            return false;
        }
        self.platform.sleep(delay).await;
        self.breaker_admits_retry(entry, permit, error)
    }

    /// Marks the holder of `permit` as failing when `error` trips breakers
    /// (once), and tells whether the breaker would admit a retry now.
    fn breaker_admits_retry(
        &self,
        entry: Keyed<'_>,
        permit: Option<&mut Permit>,
        error: &ProviderError,
    ) -> bool {
        permit.is_none_or(|p| {
            let now = self.platform.now();
            self.store
                .may_retry(entry.key, now, p, error.trips_breaker())
        })
    }

    /// Takes retry `number` of `entry`, after `delay`, from the retry
    /// budget and tells the observer; `false` when the budget is empty.
    fn spend_retry(
        &self,
        entry: &Entry,
        error: &ProviderError,
        number: u32,
        delay: Duration,
        now: UnixMillis,
    ) -> bool {
        if !self.budget.borrow_mut().try_withdraw(now) {
            self.emit(|| Event::BudgetExhausted {
                provider: &entry.provider,
            });
            return false;
        }
        self.emit(|| Event::Retry {
            provider: &entry.provider,
            model: &entry.model,
            label: entry.label.as_deref(),
            attempt: number,
            delay,
            error,
        });
        true
    }

    /// One attempt at `entry` under `limit` (at its place `at` in the
    /// request's trace), its token renewed once if the provider refused it
    /// ([`renewing`]). Returns the result, whether the
    /// request reached the provider, and the hints its encoder left out.
    async fn attempt(
        &self,
        upstream: &Upstream,
        req: &ChatRequest,
        entry: Keyed<'_>,
        limit: Duration,
        at: Option<AttemptTrace<'_>>,
    ) -> Tried<ChatResponse> {
        let http = match upstream {
            Upstream::Http(provider) => Some(provider.as_ref()),
            Upstream::Custom(_) => None,
        };
        let refused = |t: &Tried<ChatResponse>| t.0.as_ref().is_err_and(is_refused);
        let fail = |e| (Err(e), false, Vec::new());
        renewing(&self.platform, http, limit, refused, fail, |limit| {
            self.attempt_once(upstream, req, entry, limit, at)
        })
        .await
    }

    /// [`attempt`](Self::attempt), once.
    async fn attempt_once(
        &self,
        upstream: &Upstream,
        req: &ChatRequest,
        entry: Keyed<'_>,
        limit: Duration,
        at: Option<AttemptTrace<'_>>,
    ) -> Tried<ChatResponse> {
        let model = entry.model.as_str();
        match upstream {
            Upstream::Http(provider) => {
                let (resp, reached, omitted) = self
                    .exchange(provider.as_ref(), entry.key, limit, at, || {
                        provider.encode(req, model)
                    })
                    .await;
                let mut result = resp.and_then(|b| provider.decode(&b, self.platform.now()));
                if let Ok(answer) = &mut result {
                    crate::format::structured::unwrap_answer(req, answer);
                }
                (result, reached, omitted)
            }
            Upstream::Custom(custom) => {
                match timeout(self.platform.sleep(limit), custom.chat(req, model)).await {
                    Ok(mut result) => {
                        if let Ok(answer) = &mut result {
                            crate::format::structured::unwrap_answer(req, answer);
                        }
                        let reached = result
                            .as_ref()
                            .err()
                            .is_none_or(ProviderError::may_have_reached);
                        (result, reached, Vec::new())
                    }
                    Err(_) => (Err(ProviderError::timeout(limit)), true, Vec::new()),
                }
            }
        }
    }
}
