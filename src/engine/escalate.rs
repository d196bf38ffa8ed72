//! Quality escalation in the walk: an answer the route's validators reject
//! moves the walk to the next entry, like a failure that fails over, but is
//! recorded as a rejection, not a failure: the breaker was told the entry
//! succeeded (it answered), and its health statistics counted a success.

use crate::chat::ChatResponse;
use crate::engine::cursor::Cursor;
use crate::engine::route::{Reply, ServedBy};
use crate::error::{AttemptOutcome, Error};
use crate::quality::{reject_last, OnExhausted, Quality};

/// What became of an answer.
pub(crate) enum Judged {
    /// It passed: the reply.
    Accepted(Box<ChatResponse>),
    /// It was rejected and the walk moved to the next entry.
    Escalated,
    /// It was rejected and no escalation is allowed: the walk is over.
    Stopped,
}

/// One request's escalation: how many answers were rejected, and the last.
pub(crate) struct Escalation<'q> {
    quality: &'q Quality,
    rejected: u32,
    last: Option<(ChatResponse, ServedBy)>,
}

impl<'q> Escalation<'q> {
    pub(crate) fn new(quality: &'q Quality) -> Self {
        Escalation {
            quality,
            rejected: 0,
            last: None,
        }
    }

    /// Judges the answer of the entry `walk` admitted last: accepted, or
    /// rejected (its attempt marked so) and escalated when the limits allow.
    pub(crate) async fn judge(
        &mut self,
        walk: &mut Cursor<'_>,
        mut answer: ChatResponse,
    ) -> Judged {
        // A validator may read who answered, as the reply will say.
        answer.provider.clone_from(&walk.entry().provider);
        let rejection = match self.quality.check(&answer).await {
            Ok(()) => return Judged::Accepted(Box::new(answer)),
            Err(r) => r,
        };
        reject_last(&mut walk.run.attempts, rejection);
        self.rejected += 1;
        self.last = Some((answer, walk.served_by()));
        match self.quality.may_escalate(self.rejected, &walk.run.attempts) {
            Ok(()) => {
                walk.escalate();
                Judged::Escalated
            }
            Err(_) => Judged::Stopped,
        }
    }

    /// The end of a walk that found no acceptable answer, with `error` as
    /// the walk ended: unchanged when no answer was rejected (every entry
    /// failed); else the last answer, or [`Error::NoValidAnswer`], as the
    /// route says.
    pub(crate) fn end(escalation: Option<Self>, error: Error) -> Result<Reply, Error> {
        let Some(Escalation {
            quality,
            last: Some((mut response, served_by)),
            ..
        }) = escalation
        else {
            return Err(error);
        };
        let mut attempts = error.attempts().to_vec();
        match quality.on_exhausted {
            OnExhausted::Error => Err(Error::NoValidAnswer { attempts }),
            OnExhausted::LastAnswer => {
                let kept = attempts.iter_mut().rev().find(|a| {
                    a.provider == served_by.provider
                        && a.model == served_by.model
                        && a.rejection().is_some()
                });
                if let Some(AttemptOutcome::Rejected { kept, .. }) = kept.map(|a| &mut a.outcome) {
                    *kept = true;
                }
                response.provider = served_by.provider.clone();
                Ok(Reply {
                    response,
                    served_by,
                    attempts,
                })
            }
        }
    }
}
