//! After an attempt fails: the same entry again (after a wait), the next
//! entry, or the end of the stream; and, past the commit point, the request
//! that continues the answer (the delivered text as a prefill, or a restart
//! whose repeat of it is swallowed).

use std::ops::Deref;
use std::rc::Rc;

use super::{ChatStream, Error, ErrorKind, ProviderError};
use crate::chat::{ChatRequest, Message, Part, Role};
use crate::engine::core::Client;
use crate::engine::pace::moves_on;
use crate::engine::prefill::prefill_native;
use crate::engine::route::Keyed;
use crate::engine::store::BreakerStore;
use crate::error::AttemptBreaker;
use crate::platform::Platform;
use crate::policy::timeouts::size_of;

/// How the attempt in flight relates to text already delivered.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Mode {
    /// Nothing delivered yet, or a prefill continuation: forward everything.
    Forward,
    /// Restarted without prefill: swallow text until it has repeated what
    /// was delivered (`skip`), then forward only what extends it.
    Match { skip: String, seen: String },
}

impl<C, P, S> ChatStream<C, P, S>
where
    C: Deref<Target = Client<P, S>> + Clone,
    P: Platform,
    S: BreakerStore,
{
    /// The request for the next attempt: as asked, or (continuing after
    /// the commit point with prefill) with the delivered text as the start
    /// of the assistant's answer, in the neutral messages and in the
    /// client's own body alike, so a provider sent that body continues the
    /// same conversation with every field the client wrote.
    pub(super) fn attempt_request(&self, prefill: bool) -> ChatRequest {
        let mut req = self.req.clone();
        if prefill && !self.sent.text.is_empty() {
            if let Some(native) = req.native.as_deref_mut() {
                prefill_native(native, &self.sent.text);
            }
            match req.messages.last_mut() {
                Some(last) if last.role == Role::Assistant => {
                    last.content.push(Part::text(self.sent.text.clone()))
                }
                _ => req
                    .messages
                    .push(Message::assistant(self.sent.text.clone())),
            }
        }
        req
    }

    /// The attempt in flight failed after it opened.
    pub(super) async fn failed(&mut self, error: ProviderError) -> Result<(), Error> {
        let Some(conn) = self.conn.take() else {
            return Ok(());
        };
        self.malformed += conn.malformed;
        self.walk.run.in_flight = None;
        drop(conn.body); // abort the transfer now
        let error = self.walk.run.blame(self.client.core.platform.now(), error);
        let (entry, key) = (self.walk.entry().clone(), Rc::clone(self.walk.key()));
        let entry = Keyed::new(&entry, &key);
        let record = self.client.core.record_attempt(
            &mut self.walk.run,
            entry,
            self.held.number,
            conn.started,
            true,
            Err(&error),
        );
        record.usage = conn.usage;
        record.omitted = conn.omitted;
        record.span = conn.span;
        record.breaker = Some(AttemptBreaker::admitted(self.held.kind.state().code()));
        if self.sent.committed && self.sent.interruption.is_none() {
            self.sent.interruption = Some(error.clone());
        }
        self.after_failure(entry, error, conn.prefill).await
    }

    /// Decides what follows a failed attempt: the same entry again (after a
    /// wait), the next entry, or the end of the stream.
    pub(super) async fn after_failure(
        &mut self,
        entry: Keyed<'_>,
        error: ProviderError,
        prefill: bool,
    ) -> Result<(), Error> {
        let client = self.client.clone();
        let client = &client.core;
        if prefill && error.kind == ErrorKind::InvalidRequest && !self.held.prefill_refused {
            // The model refused the prefill: continue here by restarting
            // instead. The refusal never replaces the original failure.
            self.held.prefill_refused = true;
            return Ok(());
        }
        let kind = self.held.kind;
        let (number, deadline_at) = (self.held.number, self.walk.run.deadline_at);
        if !moves_on(self.sent.committed, &error)
            && client
                .wait_to_retry(
                    entry,
                    kind,
                    self.held.permit.as_mut(),
                    &error,
                    (number, deadline_at),
                    false,
                )
                .await
        {
            return Ok(());
        }
        self.next_entry(entry, &error)
    }

    /// Records the entry's verdict and moves on, or ends the stream when
    /// the error does not fail over (before the commit point).
    pub(super) fn next_entry(
        &mut self,
        entry: Keyed<'_>,
        error: &ProviderError,
    ) -> Result<(), Error> {
        let client = self.client.clone();
        let client = &client.core;
        if let Some(permit) = self.held.permit.take() {
            let moved = client.settle(entry, permit, size_of(&self.req), Err(error));
            self.walk.run.breaker_moved(&entry, moved);
        }
        if !self.sent.committed && !error.fails_over() {
            return Err(self.walk.stop(error.clone()));
        }
        self.walk.fail_over(client, error);
        Ok(())
    }

    pub(super) fn exhausted(&mut self) -> Error {
        if self.sent.committed {
            return self.interrupted();
        }
        self.walk.exhausted()
    }

    pub(super) fn interrupted(&mut self) -> Error {
        Error::Interrupted {
            error: self.sent.interruption.clone().unwrap_or_else(|| {
                ProviderError::new(ErrorKind::Transport, "the stream was interrupted")
            }),
            delivered: self.sent.text.len(),
            attempts: self.walk.run.take_attempts(),
        }
    }
}

/// A restart that does not repeat the delivered text cannot continue it:
/// not worth retrying here, worth trying elsewhere.
pub(super) fn diverged() -> ProviderError {
    ProviderError::new(
        ErrorKind::Unsupported,
        "the restarted answer did not repeat the text already delivered, so it cannot continue it",
    )
}
