//! Where a traced call's spans go ([`crate::engine::spans`]): handed over
//! at its end, or opened and closed live by a caller's tracer that picks
//! span ids itself.

use std::rc::Rc;

use opentelemetry::trace::SpanId;

use crate::platform::UnixMillis;
use crate::trace::{Span, TraceParent};

/// Receives each traced call's spans.
#[derive(Clone)]
pub(crate) enum SpanHook {
    /// Handed over once the call is over, the call's own first.
    Finished(Rc<dyn Fn(Vec<Span>)>),
    /// Opened live by the caller's tracer, closed at the call's end.
    Live(Rc<dyn LiveSpans>),
}

/// A tracer that opens spans itself and so picks their ids
/// ([`crate::ClientBuilder::live_spans`]): the npm package's bridge to the
/// app's OpenTelemetry JS tracer, or a Rust tracer whose spans are live. A call's span
/// is opened by its caller, who holds it; [`LiveSpans::hold`] is the
/// engine's hold on it while the call runs. [`LiveSpans::close`] ends a
/// call's spans with what they recorded; a call whose last hold is
/// released without a close (a cached answer, a stream its reader left, an
/// aborted call) has its open spans ended by the tracer as they are.
pub trait LiveSpans {
    /// The engine holds the call whose span `trace` names, until it
    /// closes or releases it.
    fn hold(&self, trace: &TraceParent);
    /// Opens the span of an attempt starting at `start` under `trace`'s
    /// parent (the call's span); its id, or `None` when that call is not
    /// the tracer's (the attempt then gets a random one).
    fn open(&self, trace: &TraceParent, start: UnixMillis) -> Option<SpanId>;
    /// Closes a call's spans with what they recorded: the call's own
    /// first (whose id is its trace's parent), then its attempts'.
    fn close(&self, spans: Vec<Span>);
    /// Releases a hold on the call `trace` names.
    fn release(&self, trace: &TraceParent);
}
