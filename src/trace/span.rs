//! [`Span`]: one finished span of a request's trace, as an exporter takes
//! it. Its identifiers, kind, status and attributes are the `opentelemetry`
//! API crate's types; its times are the platform's clock (milliseconds
//! since the Unix epoch), which is all this crate's clock resolves.

use std::borrow::Cow;

use opentelemetry::trace::{SpanId, SpanKind, Status, TraceFlags, TraceId};
use opentelemetry::{KeyValue, Value};

use crate::platform::UnixMillis;

/// A finished span.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    /// The trace.
    pub trace_id: TraceId,
    /// The span's own id.
    pub span_id: SpanId,
    /// Its parent's id: [`SpanId::INVALID`] for a trace's root.
    pub parent_id: SpanId,
    /// The sampling flags it was recorded under.
    pub flags: TraceFlags,
    /// The vendors' `tracestate` it was recorded under (empty if none).
    pub trace_state: String,
    /// Its name (`POST /v1/chat/completions`, `chat gpt-4o`).
    pub name: Cow<'static, str>,
    /// Server for the gateway's request, client for an attempt.
    pub kind: SpanKind,
    /// When it started.
    pub start: UnixMillis,
    /// When it ended.
    pub end: UnixMillis,
    /// Its attributes, keys unique.
    pub attributes: Vec<KeyValue>,
    /// What happened during it, in time order.
    pub events: Vec<SpanEvent>,
    /// Unset, or an error with its description.
    pub status: Status,
}

/// Something that happened at one moment of a span.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanEvent {
    /// What (`retry`, `failover`, …).
    pub name: &'static str,
    /// When.
    pub time: UnixMillis,
    /// Its details.
    pub attributes: Vec<KeyValue>,
}

impl SpanEvent {
    /// An event `name` at `time` with `attributes`.
    pub fn new(name: &'static str, time: UnixMillis, attributes: Vec<KeyValue>) -> Self {
        SpanEvent {
            name,
            time,
            attributes,
        }
    }
}

/// The value of `key` among `attributes`.
fn find<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a Value> {
    attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

impl Span {
    /// The value of attribute `key`, if the span has it.
    pub fn attribute(&self, key: &str) -> Option<&Value> {
        find(&self.attributes, key)
    }

    /// The first event named `name`, if any.
    pub fn event(&self, name: &str) -> Option<&SpanEvent> {
        self.events.iter().find(|e| e.name == name)
    }
}

impl SpanEvent {
    /// The value of attribute `key`, if the event has it.
    pub fn attribute(&self, key: &str) -> Option<&Value> {
        find(&self.attributes, key)
    }
}
