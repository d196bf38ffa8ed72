//! One chain entry: attempts under a deadline, retried with full-jitter
//! backoff or the provider's Retry-After, within the retry budget.

use std::cell::Cell;
use std::time::Duration;

use crate::breaker::{Permit, PermitKind};
use crate::chain::{Client, Entry, Run};
use crate::chat::{ChatRequest, ChatResponse};
use crate::error::{Attempt, AttemptOutcome, ErrorKind, ProviderError};
use crate::event::Event;
use crate::platform::{millis, BufferedResponse, Platform, TransportError};
use crate::provider::Upstream;
use crate::store::BreakerStore;
use crate::timeout::timeout;

impl<P: Platform, S: BreakerStore> Client<P, S> {
    /// Tries `entry` until it answers, fails in a way retrying cannot fix,
    /// or runs out of attempts, budget or time. Every attempt goes into
    /// `run.attempts`. A half-open probe (or a forced call) gets one attempt:
    /// a sick provider is asked once, not hammered.
    pub(crate) async fn run_entry(
        &self,
        entry: &Entry,
        permit: Permit,
        req: &ChatRequest,
        run: &mut Run,
    ) -> Result<ChatResponse, ProviderError> {
        let Some(upstream) = self.upstreams.get(&entry.provider) else {
            return Err(ProviderError::new(
                ErrorKind::Unsupported,
                format!("no provider \"{}\" is configured", entry.provider),
            ));
        };
        let retry = entry.retry.unwrap_or(self.policy.retry);
        let max_attempts = match permit.kind {
            PermitKind::Normal => retry.max_attempts.max(1),
            PermitKind::Probe | PermitKind::Forced => 1,
        };
        let mut number = 0;
        loop {
            number += 1;
            let started = self.platform.now();
            let left = run.deadline_at.saturating_sub(started);
            if left == 0 {
                return Err(ProviderError::new(
                    ErrorKind::DeadlineExceeded,
                    "the request's deadline passed",
                ));
            }
            let limit = entry
                .timeout
                .unwrap_or(self.policy.attempt_timeout)
                .min(Duration::from_millis(left));
            let (result, reached) = self.attempt(upstream, req, &entry.model, limit).await;
            let ended = self.platform.now();
            let duration = Duration::from_millis(ended.saturating_sub(started));
            self.stats
                .borrow_mut()
                .entry(entry.provider.clone())
                .or_default()
                .record(ended, millis(duration), result.as_ref().err());
            run.attempts.push(Attempt {
                provider: entry.provider.clone(),
                model: entry.model.clone(),
                number,
                started_at: started,
                duration,
                reached,
                outcome: match &result {
                    Ok(_) => AttemptOutcome::Success,
                    Err(error) => AttemptOutcome::Failure {
                        error: error.clone(),
                    },
                },
            });
            let error = match result {
                Ok(resp) => return Ok(resp),
                Err(e) => e,
            };
            if !error.is_retryable() || number >= max_attempts {
                return Err(error);
            }
            let left = Duration::from_millis(run.deadline_at.saturating_sub(ended));
            let delay = match error.retry_after {
                // The server said how long: listen, if it fits.
                Some(after) if after <= retry.max_delay && after < left => after,
                // Longer than we would ever wait, or than the deadline
                // allows: another provider is the faster answer.
                Some(_) => return Err(error),
                None => retry.jittered(number, self.platform.random()),
            };
            if delay >= left {
                return Err(error); // no wait is started that cannot finish in time
            }
            if !self.budget.borrow_mut().try_withdraw(ended) {
                self.emit(|| Event::BudgetExhausted {
                    provider: &entry.provider,
                });
                return Err(error);
            }
            self.emit(|| Event::Retry {
                provider: &entry.provider,
                model: &entry.model,
                attempt: number,
                delay,
                error: &error,
            });
            self.platform.sleep(delay).await;
        }
    }

    /// One attempt under `limit`. Returns the result and whether the request
    /// reached the provider.
    async fn attempt(
        &self,
        upstream: &Upstream,
        req: &ChatRequest,
        model: &str,
        limit: Duration,
    ) -> (Result<ChatResponse, ProviderError>, bool) {
        match upstream {
            Upstream::Http(provider) => {
                let http = match provider.encode(req, model) {
                    Ok(h) => h,
                    Err(e) => return (Err(e), false),
                };
                // Set once the status line is in: a timeout after it is a
                // stalled body, before it a silent provider.
                let responded = Cell::new(false);
                let call = async {
                    let resp = self.platform.fetch(http).await?;
                    responded.set(true);
                    let body = resp
                        .body
                        .read_to_end(self.policy.max_response_bytes)
                        .await?;
                    Ok::<_, TransportError>(BufferedResponse {
                        status: resp.status,
                        headers: resp.headers,
                        body,
                    })
                };
                match timeout(self.platform.sleep(limit), call).await {
                    Ok(Ok(buffered)) => (provider.decode(&buffered, self.platform.now()), true),
                    Ok(Err(transport)) => {
                        let reached = responded.get() || transport.reached();
                        (Err(transport.into()), reached)
                    }
                    Err(_) if responded.get() => (
                        Err(ProviderError::new(
                            ErrorKind::Stalled,
                            format!("response body incomplete after {} ms", limit.as_millis()),
                        )),
                        true,
                    ),
                    Err(_) => (Err(ProviderError::timeout(limit)), true),
                }
            }
            Upstream::Custom(custom) => {
                match timeout(self.platform.sleep(limit), custom.chat(req, model)).await {
                    Ok(result) => (result, true),
                    Err(_) => (Err(ProviderError::timeout(limit)), true),
                }
            }
        }
    }
}
