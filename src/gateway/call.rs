//! What every call handler (chat, whole or buffered, and the other
//! endpoints) does around its own part: the deadline the client asked for,
//! and the answer's log fields and headers, with an error in the client's
//! format. The body is read first ([`super::body`]).

use crate::engine::spans::AnswerFacts;
use std::time::Duration;

use super::http::{Format, Outbound};
use super::log::LogLine;
use super::proxy::Gateway;
use super::render::render_error_as;
use crate::engine::client::{Reply, ServedBy};
use crate::engine::endpoint::EndpointReply;
use crate::engine::store::BreakerStore;
use crate::error::{Attempt, Error};
use crate::platform::{Headers, Platform};

/// The deadline the client asked for in `x-request-timeout-ms` (a positive
/// whole number of milliseconds; anything else asks for none).
pub(super) fn asked_deadline(headers: &Headers) -> Option<Duration> {
    headers
        .get("x-request-timeout-ms")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|ms| *ms > 0)
        .map(Duration::from_millis)
}

/// A call's successful result, as the log line reads it.
pub(super) trait Answered {
    /// Every attempt, in order, the successful one last.
    fn attempts(&self) -> &[Attempt];
    /// The entry that answered.
    fn served_by(&self) -> &ServedBy;
    /// The answer as `gen_ai.output.messages`, when it is a chat answer.
    fn output(&self) -> Option<String> {
        None
    }
    /// What the answer says of itself, for its trace.
    fn facts(&self) -> AnswerFacts {
        AnswerFacts {
            model: Some(self.served_by().model.clone()),
            ..AnswerFacts::default()
        }
    }
}

impl Answered for Reply {
    fn attempts(&self) -> &[Attempt] {
        &self.attempts
    }
    fn served_by(&self) -> &ServedBy {
        &self.served_by
    }
    fn output(&self) -> Option<String> {
        let r = &self.response;
        let reason = r.finish_reason.as_ref();
        let reason = reason.map(crate::format::openai::finish_reason_name);
        let out = super::content::output_messages(&r.text, &r.tool_calls, reason);
        Some(out)
    }
    fn facts(&self) -> AnswerFacts {
        AnswerFacts::of(&self.response)
    }
}

impl Answered for EndpointReply {
    fn attempts(&self) -> &[Attempt] {
        &self.attempts
    }
    fn served_by(&self) -> &ServedBy {
        &self.served_by
    }
}

impl<P: Platform + 'static, S: BreakerStore + 'static> Gateway<P, S> {
    /// A chain error in the client's format, in the status this gateway's
    /// callers get ([`Gateway::caller_holds_keys`]).
    pub(super) fn render_error(&self, format: Format, e: &Error) -> Outbound {
        render_error_as(format, e, error_status(self.caller_holds_keys, e))
    }
}

/// The status of an error answer: [`Error::caller_status`] when the caller
/// holds the providers' keys, else [`Error::status`].
fn error_status(caller_holds_keys: bool, e: &Error) -> u16 {
    if caller_holds_keys {
        e.caller_status()
    } else {
        e.status()
    }
}

/// The answer to a call that ended with `result`: its attempts and the
/// entry that answered go into `log`, a success is rendered by `render`,
/// an error in `format` (with [`Error::caller_status`] when
/// `caller_holds_keys`), and the answer carries the log's headers.
pub(super) fn answer<'l, R: Answered>(
    format: Format,
    caller_holds_keys: bool,
    result: Result<R, Error>,
    log: &mut LogLine<'l>,
    render: impl FnOnce(R, &mut LogLine<'l>) -> Outbound,
) -> Outbound {
    log.record_attempts(
        result
            .as_ref()
            .map_or_else(|e| e.attempts(), Answered::attempts),
    );
    let mut out = match result {
        Ok(reply) => {
            let served_by = reply.served_by();
            log.served_by = Some(format!("{}/{}", served_by.provider, served_by.model));
            if let Some(t) = &log.traced {
                let output = t.content.then(|| reply.output()).flatten();
                log.answer_facts = AnswerFacts {
                    output,
                    ..reply.facts()
                };
            }
            render(reply, log)
        }
        Err(e) => {
            log.error = Some(e.code());
            render_error_as(format, &e, error_status(caller_holds_keys, &e))
        }
    };
    log.answer_headers(&mut out);
    out
}
