//! Tracing: where a request's work sits in its caller's trace (W3C Trace
//! Context), carried through the gateway to every attempt's provider.
//!
//! - [`context`]: [`TraceParent`], read from a client's `traceparent` and
//!   `tracestate` or started; the `traceparent` an attempt sends.

pub mod context;

pub use context::{new_span_id, new_trace_id, Random, TraceParent};
