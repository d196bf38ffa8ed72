//! The trace a request that calls providers joins: its caller's
//! (`traceparent`, `tracestate`) continued, or one started; the gateway's
//! own span under it is the parent of every attempt's. The trace id is in
//! the log line and the answer's `x-trace-id`.
//!
//! When spans are exported (`tracing.export`) and the trace is sampled,
//! the request's spans ([`crate::trace::genai`]) are queued once it is
//! over: at the answer for a whole one, at the stream's end for a stream
//! ([`TraceEnd`]). [`Gateway::export_traces`] sends them in the background.

use std::rc::Rc;

use opentelemetry::trace::{SpanId, TraceFlags};

use super::content;
use super::log::LogLine;
use super::proxy::Gateway;
use crate::engine::client::Client;
use crate::engine::store::BreakerStore;
use crate::error::Attempt;
use crate::platform::{Headers, Platform, UnixMillis};
use crate::trace::export::Exporter;
use crate::trace::genai::{self, Answered, HttpFacts};
use crate::trace::{new_span_id, TraceParent};

/// A request whose spans are recorded: its context under its own span,
/// its caller's span and when it started.
#[derive(Debug, Clone)]
pub(super) struct Traced {
    pub(super) trace: TraceParent,
    pub(super) parent: SpanId,
    pub(super) start: UnixMillis,
    /// `chat`, `embeddings`, `count_tokens`.
    pub(super) operation: &'static str,
    /// Whether its spans record message contents (`captureContent`).
    pub(super) content: bool,
    /// Its `gen_ai.input.messages`, when they are recorded.
    pub(super) input: Option<String>,
}

impl<P: Platform + 'static, S: BreakerStore + 'static> Gateway<P, S> {
    /// The trace of a `operation` request with `headers`, named in `log`
    /// (and, when its spans are exported and it is sampled, marked to be
    /// recorded). A trace started here is sampled as the exporter decides.
    pub(super) fn trace_of(
        &self,
        operation: &'static str,
        headers: &Headers,
        log: &mut LogLine<'_>,
    ) -> TraceParent {
        let random = || self.client.platform().random();
        let caller = TraceParent::from_headers(headers);
        let parent = caller.as_ref().map_or(SpanId::INVALID, |c| c.parent_id);
        let callers_flags = caller.as_ref().map(|c| c.flags);
        let mut trace = caller.unwrap_or_else(|| TraceParent::start(&random));
        let keep = self
            .exporter
            .as_ref()
            .map(|e| e.sampled(callers_flags, trace.trace_id));
        if callers_flags.is_none() && keep == Some(false) {
            trace.flags = TraceFlags::default(); // providers see it is not kept
        }
        log.trace_id = Some(trace.trace_id.to_string());
        if keep != Some(true) {
            // Not recorded: no span of its own, so the attempts' spans sit
            // under the caller's (in the npm package, the call's span its
            // tracer opened), not under one no tracer holds.
            return trace;
        }
        let under = trace.under(new_span_id(&random));
        log.traced = Some(Traced {
            trace: under.clone(),
            parent,
            start: self.client.platform().now(),
            operation,
            content: self
                .exporter
                .as_ref()
                .is_some_and(|e| e.policy().capture_content),
            input: None,
        });
        under
    }

    /// Records `request`'s messages in its spans, when they are traced
    /// and contents are recorded.
    pub(super) fn trace_input(&self, request: &crate::chat::ChatRequest, log: &mut LogLine<'_>) {
        if let Some(t) = log.traced.as_mut().filter(|t| t.content) {
            t.input = Some(content::input_messages(&request.messages));
        }
    }

    /// Queues the spans of a request answered whole (a stream's are
    /// queued at its end, its [`TraceEnd`] having taken `log.traced`).
    pub(super) fn record_spans(&self, log: &LogLine<'_>, method: &str, end: UnixMillis) {
        let (Some(exporter), Some(t)) = (&self.exporter, &log.traced) else {
            return;
        };
        let http = HttpFacts {
            method,
            path: log.path,
            status: log.status,
        };
        let req = genai::Request {
            trace: &t.trace,
            parent: t.parent,
            operation: t.operation,
            http: Some(http),
            route: log.route.as_deref(),
            start: t.start,
            end,
            attempts: &log.trace_attempts,
            answer: log.answer_facts.view(),
            committed: None,
            cache: log.cache,
            error: log.error,
            input: t.input.as_deref(),
        };
        exporter.record(genai::spans(&req, &|id| self.client.peer(id)));
    }

    /// A stream's end to record, when the request is traced; takes
    /// `log.traced`.
    pub(super) fn trace_end(&self, log: &mut LogLine<'_>) -> Option<TraceEnd> {
        let exporter = Rc::clone(self.exporter.as_ref()?);
        let traced = log.traced.take()?;
        Some(TraceEnd {
            exporter,
            traced,
            method: log.method.unwrap_or("POST").to_string(),
            path: log.path.to_string(),
            route: log.route.clone(),
            cache: log.cache,
        })
    }
}

/// What a traced stream's spans are built from at its end.
pub(crate) struct TraceEnd {
    exporter: Rc<Exporter>,
    traced: Traced,
    method: String,
    path: String,
    route: Option<String>,
    cache: Option<&'static str>,
}

/// How a traced stream ended.
pub(crate) struct Ending<'a> {
    /// Every attempt.
    pub(crate) attempts: &'a [Attempt],
    /// Its commit point, and the attempts made by then.
    pub(crate) committed: (UnixMillis, usize),
    /// When it ended.
    pub(crate) end: UnixMillis,
    /// The model that answered, as the stream named it.
    pub(crate) model: Option<&'a str>,
    /// `stale` when a stored answer was served instead of the error.
    pub(crate) cache: Option<&'static str>,
    /// Its failure's kind, when it failed.
    pub(crate) error: Option<&'a str>,
    /// The text it gave, for its `gen_ai.output.messages`.
    pub(crate) text: &'a str,
}

impl TraceEnd {
    /// Queues the spans of a stream that ended as `ending` says.
    pub(crate) fn record<P: Platform, S: BreakerStore>(
        self,
        client: &Client<P, S>,
        ending: Ending<'_>,
    ) {
        let output = self
            .traced
            .content
            .then(|| content::output_messages(ending.text, &[], None));
        let req = genai::Request {
            trace: &self.traced.trace,
            parent: self.traced.parent,
            operation: self.traced.operation,
            http: Some(HttpFacts {
                method: &self.method,
                path: &self.path,
                status: 200,
            }),
            route: self.route.as_deref(),
            start: self.traced.start,
            end: ending.end,
            attempts: ending.attempts,
            answer: Answered {
                model: ending.model,
                output: output.as_deref(),
                ..Answered::default()
            },
            committed: Some(ending.committed),
            cache: ending.cache.or(self.cache),
            error: ending.error,
            input: self.traced.input.as_deref(),
        };
        self.exporter
            .record(genai::spans(&req, &|id| client.peer(id)));
    }
}
