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
//! nothing; a stream dropped before its end hands over its spans then,
//! with the attempts recorded by then. Message
//! contents are not recorded here: the caller has them.
//!
//! A caller whose own tracer picks span ids (the npm package's
//! OpenTelemetry bridge, `src/js/spans.rs`) takes the spans live instead
//! ([`LiveSpans`]): the trace it hands a call names the call's own span,
//! already open; each attempt's span is opened by it when the attempt
//! starts, so the id the attempt's `traceparent` names is its tracer's;
//! at the call's end it closes them with what they recorded, and a call
//! dropped before its end (an aborted call) is released unclosed.
//!
//! [`ClientBuilder::on_spans`]: crate::ClientBuilder::on_spans

use opentelemetry::trace::SpanId;

use crate::chat::{ChatRequest, ChatResponse};
use crate::engine::core::Client;
use crate::engine::route::{CallOptions, Reply};
use crate::engine::span_hook::SpanHook;
use crate::engine::store::BreakerStore;
use crate::error::{Attempt, Error};
use crate::format::openai::finish_reason_name;
use crate::platform::{Platform, UnixMillis};
use crate::trace::genai::{self, Answered};
use crate::trace::{new_span_id, TraceParent};

/// A call whose spans are recorded: its context under its own span.
pub(crate) struct CallSpans {
    hook: SpanHook,
    trace: TraceParent,
    parent: SpanId,
    start: UnixMillis,
    route: Option<String>,
    /// A stream's commit point, and the attempts made by then.
    pub(crate) committed: Option<(UnixMillis, usize)>,
    /// Whether its spans were handed over (or closed).
    ended: bool,
}

impl Drop for CallSpans {
    /// A live call dropped before its end is released unclosed, so its
    /// tracer's spans do not stay open.
    fn drop(&mut self) {
        if let (false, SpanHook::Live(live)) = (self.ended, &self.hook) {
            live.release(&self.trace);
        }
    }
}

/// What a traced call's answer said of itself (the gateway's and the
/// client's spans alike).
#[derive(Debug, Clone, Default)]
pub(crate) struct AnswerFacts {
    pub(crate) model: Option<String>,
    pub(crate) id: Option<String>,
    pub(crate) finish_reason: Option<String>,
    /// Its `gen_ai.output.messages`, when contents are recorded.
    pub(crate) output: Option<String>,
}

impl AnswerFacts {
    /// What the whole answer `r` says: its model, the provider's id of it
    /// and why it stopped.
    pub(crate) fn of(r: &ChatResponse) -> AnswerFacts {
        AnswerFacts {
            model: Some(r.model.clone()).filter(|m| !m.is_empty()),
            id: r.raw.as_ref().and_then(|raw| genai::response_id(raw.get())),
            finish_reason: r
                .finish_reason
                .as_ref()
                .map(|f| finish_reason_name(f).to_string()),
            output: None,
        }
    }

    /// The facts as a span takes them.
    pub(crate) fn view(&self) -> Answered<'_> {
        Answered {
            model: self.model.as_deref(),
            id: self.id.as_deref(),
            finish_reason: self.finish_reason.as_deref(),
            output: self.output.as_deref(),
        }
    }
}

/// How a call ended.
pub(crate) struct CallEnd<'a> {
    pub(crate) attempts: &'a [Attempt],
    pub(crate) answer: AnswerFacts,
    pub(crate) error: Option<&'a Error>,
}

impl<'a> CallEnd<'a> {
    /// A whole answer's end: `result` of [`Client::chat_with`].
    pub(crate) fn of(result: &'a Result<Reply, Error>) -> Self {
        match result {
            Ok(reply) => CallEnd {
                attempts: &reply.attempts,
                answer: AnswerFacts::of(&reply.response),
                error: None,
            },
            Err(e) => CallEnd::failed(e),
        }
    }

    /// The end of a call that failed with `e`.
    pub(crate) fn failed(e: &'a Error) -> Self {
        CallEnd {
            attempts: e.attempts(),
            answer: AnswerFacts::default(),
            error: Some(e),
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
        let hook = self.core.span_hook.as_ref()?;
        let caller = req.trace.as_ref().filter(|t| t.flags.is_sampled())?;
        let (trace, parent) = match hook {
            // The caller's span is the call's own, open in its tracer.
            SpanHook::Live(live) => {
                live.hold(caller);
                (caller.clone(), SpanId::INVALID)
            }
            SpanHook::Finished(_) => {
                let random = || self.core.platform.random();
                (caller.under(new_span_id(&random)), caller.parent_id)
            }
        };
        let route = self.route_name(req, opts).map(str::to_string);
        req.trace = Some(trace.clone());
        Some(CallSpans {
            hook: hook.clone(),
            trace,
            parent,
            start: self.core.platform.now(),
            route,
            committed: None,
            ended: false,
        })
    }

    /// Hands the spans of a call that ended as `end` says to the hook.
    pub(crate) fn end_spans(&self, mut spans: CallSpans, end: CallEnd<'_>) {
        spans.ended = true;
        let req = genai::Request {
            trace: &spans.trace,
            parent: spans.parent,
            operation: "chat",
            http: None,
            route: spans.route.as_deref(),
            start: spans.start,
            end: self.core.platform.now(),
            attempts: end.attempts,
            answer: end.answer.view(),
            committed: spans.committed,
            cache: None,
            error: end.error.map(Error::code),
            input: None,
        };
        let list = genai::spans(&req, &|id| self.peer(id));
        match &spans.hook {
            SpanHook::Finished(hook) => hook(list),
            SpanHook::Live(live) => live.close(list),
        }
    }
}
