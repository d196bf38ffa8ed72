//! One walk over a route, driven alike by whole and streamed requests.
//!
//! The cursor knows where a request is in its chain: it admits the next
//! entry whose breaker lets a call through, skipping open ones without a
//! call (each skip recorded as an attempt that was not made); when every
//! entry was skipped, it forces a call to the one whose cooldown ends first
//! rather than answer with no call at all; it starts no entry once the
//! end-to-end deadline has passed; and it ends the walk after a forced call.
//! What happens inside an entry (attempts, retries, the breaker's verdict)
//! is the caller's: [`crate::engine::retry`] for whole answers, [`crate::engine::stream`]
//! for streams.

use std::borrow::Cow;
use std::time::Duration;

use crate::chat::{ChatRequest, ChatResponse};
use crate::engine::client::{CallOptions, Client, Entry, Reply, ServedBy};
use crate::engine::store::BreakerStore;
use crate::error::{Attempt, AttemptOutcome, Error, ErrorKind, Exhausted, ProviderError};
use crate::platform::{millis, Platform, UnixMillis};
use crate::policy::breaker::Permit;

/// The request-wide record of one call: its deadline and every attempt.
pub(crate) struct Run {
    pub(crate) deadline_at: UnixMillis,
    /// Whether `deadline_at` is the caller's, tighter than the client's.
    pub(crate) callers_deadline: bool,
    pub(crate) attempts: Vec<Attempt>,
}

impl Run {
    /// An attempt that timed out because the caller's own deadline cut it
    /// short failed by the caller's choice, not the provider's fault: it
    /// becomes `DeadlineExceeded`, which no breaker counts and which ends
    /// the walk (no time is left for another entry).
    pub(crate) fn blame(&self, now: UnixMillis, error: ProviderError) -> ProviderError {
        let timed_out = matches!(error.kind, ErrorKind::Timeout | ErrorKind::Stalled);
        if !(self.callers_deadline && timed_out && now >= self.deadline_at) {
            return error;
        }
        ProviderError::new(
            ErrorKind::DeadlineExceeded,
            format!("the caller's deadline ended the attempt ({error})"),
        )
    }

    /// Records an entry that was not called.
    pub(crate) fn skip(&mut self, entry: &Entry, now: UnixMillis, error: ProviderError) {
        self.attempts.push(Attempt {
            provider: entry.provider.clone(),
            model: entry.model.clone(),
            number: 0,
            started_at: now,
            duration: Duration::ZERO,
            reached: false,
            outcome: AttemptOutcome::Failure { error },
            usage: None,
            omitted: Vec::new(),
        });
    }
}

/// Where a request is in its route.
pub(crate) struct Cursor<'c> {
    chain: Cow<'c, [Entry]>,
    /// The entry admitted last (or being looked at).
    index: usize,
    /// Entries skipped for an open breaker, with the end of its cooldown.
    skipped: Vec<(usize, UnixMillis)>,
    /// Whether any entry was admitted (a forced call is only for a request
    /// that called nothing).
    called: bool,
    /// Whether the walk ended in a forced call.
    forced: bool,
    /// The request's deadline and attempts.
    pub(crate) run: Run,
}

impl<'c> Cursor<'c> {
    /// The walk for `req`: its route resolved, its deadline set (the
    /// client's, or the caller's if tighter), the retry budget credited
    /// with one first attempt.
    pub(crate) fn start<P: Platform, S: BreakerStore>(
        client: &'c Client<P, S>,
        req: &ChatRequest,
        opts: &CallOptions,
    ) -> Result<Self, Error> {
        let chain = client.resolve(req, opts)?;
        if req.messages.is_empty() {
            return Err(Error::InvalidRequest(
                "messages: at least one message is required".into(),
            ));
        }
        let policy = client.policy();
        let start = client.platform().now();
        let deadline = opts
            .deadline
            .map_or(policy.deadline, |d| d.min(policy.deadline));
        let callers_deadline = deadline < policy.deadline;
        client.budget.borrow_mut().deposit(start);
        client
            .store
            .warm(chain.iter().map(|e| e.provider.as_str()), start);
        Ok(Cursor {
            chain,
            index: 0,
            skipped: Vec::new(),
            called: false,
            forced: false,
            run: Run {
                deadline_at: start.saturating_add(millis(deadline)),
                callers_deadline,
                attempts: Vec::new(),
            },
        })
    }

    /// The same walk, owning its route (for a stream that outlives the
    /// borrow of its client).
    pub(crate) fn into_owned(self) -> Cursor<'static> {
        Cursor {
            chain: Cow::Owned(self.chain.into_owned()),
            index: self.index,
            skipped: self.skipped,
            called: self.called,
            forced: self.forced,
            run: self.run,
        }
    }

    /// Admits the next entry: the current one if its breaker lets a call
    /// through, else the first after it that does; when every entry was
    /// skipped and none was called, the one whose cooldown ends first, by
    /// force. `None` when the walk is over: the entries are spent, or the
    /// deadline has passed (recorded as a skip of the entry it left no
    /// time for).
    pub(crate) async fn admit<P: Platform, S: BreakerStore>(
        &mut self,
        client: &Client<P, S>,
    ) -> Option<Permit> {
        loop {
            let now = client.platform().now();
            let index = match self.chain.get(self.index) {
                Some(_) => self.index,
                None => self.earliest_cooldown()?,
            };
            let entry = &self.chain[index];
            if now >= self.run.deadline_at {
                let error =
                    ProviderError::new(ErrorKind::DeadlineExceeded, "no time left for this entry");
                self.run.skip(entry, now, error);
                self.end();
                return None;
            }
            if index != self.index {
                self.index = index;
                self.forced = true;
                self.called = true;
                return Some(client.store.force(&entry.provider, now));
            }
            match client.acquire(&entry.provider, now).await {
                Ok(permit) => {
                    self.called = true;
                    return Some(permit);
                }
                Err(open) => {
                    let error = ProviderError::new(
                        ErrorKind::CircuitOpen,
                        format!(
                            "skipped, open for another {} ms",
                            open.until.saturating_sub(now)
                        ),
                    );
                    client.emit_failover(&self.chain, self.index, &error);
                    self.run.skip(entry, now, error);
                    self.skipped.push((self.index, open.until));
                    self.index += 1;
                }
            }
        }
    }

    /// The entry to force when every entry was skipped and none called.
    fn earliest_cooldown(&self) -> Option<usize> {
        if self.called || self.forced {
            return None;
        }
        let (index, _) = self.skipped.iter().min_by_key(|(_, until)| *until)?;
        Some(*index)
    }

    /// Ends the walk: no entry is admitted after this.
    fn end(&mut self) {
        self.index = self.chain.len();
        self.called = true;
    }

    /// The entry admitted last.
    pub(crate) fn entry(&self) -> &Entry {
        &self.chain[self.index]
    }

    /// The entry admitted last, and the request's record, at once.
    pub(crate) fn entry_and_run(&mut self) -> (&Entry, &mut Run) {
        (&self.chain[self.index], &mut self.run)
    }

    /// Moves past the entry admitted last, which failed with `error` in a
    /// way that fails over; after a forced call the walk is over.
    pub(crate) fn fail_over<P: Platform, S: BreakerStore>(
        &mut self,
        client: &Client<P, S>,
        error: &ProviderError,
    ) {
        if self.forced {
            self.end();
            return;
        }
        client.emit_failover(&self.chain, self.index, error);
        self.index += 1;
    }

    /// Moves past the entry admitted last, whose answer the route's
    /// validators rejected; after a forced call the walk is over.
    pub(crate) fn escalate(&mut self) {
        if self.forced {
            self.end();
            return;
        }
        self.index += 1;
    }

    /// Who answered: the entry admitted last.
    pub(crate) fn served_by(&self) -> ServedBy {
        let entry = self.entry();
        ServedBy {
            provider: entry.provider.clone(),
            model: entry.model.clone(),
            label: entry.label.clone(),
        }
    }

    /// The call's success: `response` from the entry admitted last.
    pub(crate) fn reply(mut self, mut response: ChatResponse) -> Reply {
        let served_by = self.served_by();
        response.provider = served_by.provider.clone();
        Reply {
            response,
            served_by,
            attempts: std::mem::take(&mut self.run.attempts),
        }
    }

    /// The call's end on an error that does not fail over: the provider
    /// rejected the request (or the deadline passed inside it).
    pub(crate) fn stop(&mut self, error: ProviderError) -> Error {
        let attempts = std::mem::take(&mut self.run.attempts);
        match error.kind {
            ErrorKind::DeadlineExceeded => Error::AllProvidersFailed(Exhausted { attempts }),
            _ => Error::Rejected {
                provider: self.entry().provider.clone(),
                error,
                attempts,
            },
        }
    }

    /// The call's end with every entry spent.
    pub(crate) fn exhausted(&mut self) -> Error {
        Error::AllProvidersFailed(Exhausted {
            attempts: std::mem::take(&mut self.run.attempts),
        })
    }
}
