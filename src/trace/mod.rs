//! Tracing: where a request's work sits in its caller's trace (W3C Trace
//! Context), carried through the gateway to every attempt's provider, and
//! the request's spans in the OpenTelemetry GenAI conventions.
//!
//! - [`context`]: [`TraceParent`], read from a client's `traceparent` and
//!   `tracestate` or started; the `traceparent` an attempt sends.
//! - [`span`]: [`Span`], a finished span as an exporter takes it.
//! - [`genai`]: a request's spans built from its attempts' records.
//! - [`export`]: sampling, the bounded queue and its batches.
//! - `otlp` (feature `otlp`): a batch as an OTLP/HTTP protobuf body.

pub mod context;
pub mod export;
pub mod genai;
#[cfg(feature = "otlp")]
pub mod otlp;
pub mod span;

pub use context::{new_span_id, new_trace_id, AttemptTrace, Random, TraceParent};
pub use span::{Span, SpanEvent};
