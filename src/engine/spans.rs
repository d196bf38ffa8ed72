//! A library call's spans, handed to the caller's hook
//! ([`ClientBuilder::on_spans`]): the Rust client's exporter hook.
//!
//! A call whose [`ChatRequest::trace`] is sampled gets a span of its own
//! under the caller's (an internal span, `chat {route}`), the parent of
//! every attempt's, whose ids are the ones the attempts' `traceparent`
//! named. Once the call is over (a whole answer or its error; a stream at
//! its end or at its error) its spans ([`crate::trace::genai`]) go to the
//! hook, which exports them as it likes: an OTLP body
//! (`resilient_llm::trace::otlp`, feature `otlp`), the `opentelemetry`
//! SDK's exporter, a log. A call without a trace, or not sampled, costs
//! nothing; a stream dropped before its end hands nothing over. Message
//! contents are not recorded here: the caller has them.
//!
//! [`ClientBuilder::on_spans`]: crate::ClientBuilder::on_spans

use std::rc::Rc;

use opentelemetry::trace::SpanId;

use crate::chat::{ChatRequest, ChatResponse};
use crate::engine::core::Client;
use crate::engine::route::{CallOptions, Reply};
use crate::engine::store::BreakerStore;
use crate::error::{Attempt, Error};
use crate::format::openai::finish_reason_name;
use crate::platform::{Platform, UnixMillis};
use crate::trace::genai::{self, Answered};
use crate::trace::{new_span_id, Span, TraceParent};

/// Receives each traced call's spans, the call's own first.
pub(crate) type SpanHook = Rc<dyn Fn(Vec<Span>)>;

/// A call whose spans are recorded: its context under its own span.
pub(crate) struct CallSpans {
    hook: SpanHook,
    trace: TraceParent,
    parent: SpanId,
    start: UnixMillis,
    route: Option<String>,
    /// A stream's commit point, and the attempts made by then.
    pub(crate) committed: Option<(UnixMillis, usize)>,
}

/// How a call ended.
pub(crate) struct CallEnd<'a> {
    pub(crate) attempts: &'a [Attempt],
    /// The answer, for a whole one.
    pub(crate) response: Option<&'a ChatResponse>,
    /// The model that answered, for a stream.
    pub(crate) model: Option<&'a str>,
    pub(crate) error: Option<&'a Error>,
}

impl<'a> CallEnd<'a> {
    /// A whole answer's end: `result` of [`Client::chat_with`].
    pub(crate) fn of(result: &'a Result<Reply, Error>) -> Self {
        match result {
            Ok(reply) => CallEnd {
                attempts: &reply.attempts,
                response: Some(&reply.response),
                model: None,
                error: None,
            },
            Err(e) => CallEnd {
                attempts: e.attempts(),
                response: None,
                model: None,
                error: Some(e),
            },
        }
    }
}

impl<P: Platform, S: BreakerStore> Client<P, S> {
    /// When a hook is set and `req`'s trace is sampled: puts `req` under a
    /// new span of its own and tells what its spans will need at its end.
    /// Otherwise nothing is done, nothing allocated.
    pub(crate) fn begin_spans(
        &self,
        req: &mut ChatRequest,
        opts: &CallOptions,
    ) -> Option<CallSpans> {
        let hook = self.span_hook.as_ref()?;
        let caller = req.trace.as_ref().filter(|t| t.flags.is_sampled())?;
        let random = || self.core.platform.random();
        let trace = caller.under(new_span_id(&random));
        let parent = caller.parent_id;
        let route = self.route_name(req, opts).map(str::to_string);
        req.trace = Some(trace.clone());
        Some(CallSpans {
            hook: Rc::clone(hook),
            trace,
            parent,
            start: self.core.platform.now(),
            route,
            committed: None,
        })
    }

    /// Hands the spans of a call that ended as `end` says to the hook.
    pub(crate) fn end_spans(&self, spans: CallSpans, end: CallEnd<'_>) {
        let r = end.response;
        let id = r.and_then(|r| genai::response_id(r.raw.as_ref()?.get()));
        let answer = Answered {
            model: r
                .map(|r| r.model.as_str())
                .or(end.model)
                .filter(|m| !m.is_empty()),
            id: id.as_deref(),
            finish_reason: r
                .and_then(|r| r.finish_reason.as_ref())
                .map(finish_reason_name),
            output: None,
        };
        let req = genai::Request {
            trace: &spans.trace,
            parent: spans.parent,
            operation: "chat",
            http: None,
            route: spans.route.as_deref(),
            start: spans.start,
            end: self.core.platform.now(),
            attempts: end.attempts,
            answer,
            committed: spans.committed,
            cache: None,
            error: end.error.map(Error::code),
            input: None,
        };
        (spans.hook)(genai::spans(&req, &|id| self.peer(id)));
    }
}
