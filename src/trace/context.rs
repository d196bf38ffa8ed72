//! W3C Trace Context (<https://www.w3.org/TR/trace-context/>): a client's
//! `traceparent` and `tracestate` read and continued, or a trace started;
//! the `traceparent` each attempt sends its provider, naming the attempt's
//! own span. The identifiers, flags and the `tracestate` list are the
//! `opentelemetry` API crate's types (its `TraceState` parses and checks
//! the list); what is this module's own is the `traceparent` header's
//! layout, checked as the recommendation says before the crate reads each
//! field.

use std::str::FromStr;

use opentelemetry::trace::{SpanId, TraceFlags, TraceId, TraceState};

use crate::platform::Headers;

/// Where a request's work sits in a trace: the trace, the span its work
/// is a child of, the caller's sampling decision and vendor state.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceParent {
    /// The trace.
    pub trace_id: TraceId,
    /// The span the work is a child of: the caller's, or the gateway's
    /// own server span once it took over.
    pub parent_id: SpanId,
    /// The caller's flags (bit 0: sampled).
    pub flags: TraceFlags,
    /// The vendors' `tracestate`, passed on as it came (empty if none, or
    /// if it did not read as a list).
    pub state: TraceState,
}

/// An attempt's place in its request's trace: the request's context and
/// the attempt's own span, the one its `traceparent` names and its record
/// keeps ([`crate::error::Attempt::span`]).
#[derive(Debug, Clone, Copy)]
pub struct AttemptTrace<'t> {
    /// The request's context (its parent: the gateway's server span).
    pub trace: &'t TraceParent,
    /// The attempt's span.
    pub span: SpanId,
}

/// A source of random bits: the platform's `random()`, 53 bits a draw.
pub trait Random {
    /// A draw in [0, 1).
    fn draw(&self) -> f64;
}

impl<F: Fn() -> f64> Random for F {
    fn draw(&self) -> f64 {
        self()
    }
}

/// 32 random bits from one draw.
fn bits32(rng: &dyn Random) -> u64 {
    ((rng.draw() * 4_294_967_296.0) as u64) & 0xFFFF_FFFF
}

/// A span id no other span of the trace is likely to have, never zero.
pub fn new_span_id(rng: &dyn Random) -> SpanId {
    let id = (bits32(rng) << 32) | bits32(rng);
    SpanId::from(id.max(1))
}

/// A trace id, never zero.
pub fn new_trace_id(rng: &dyn Random) -> TraceId {
    let hi = u128::from((bits32(rng) << 32) | bits32(rng));
    let lo = u128::from((bits32(rng) << 32) | bits32(rng));
    TraceId::from(((hi << 64) | lo).max(1))
}

impl TraceParent {
    /// The caller's trace context from its `traceparent` and `tracestate`
    /// headers; `None` when it sent none, or one that is not valid (a new
    /// trace is then started, as the specification says).
    pub fn from_headers(headers: &Headers) -> Option<TraceParent> {
        let (trace_id, parent_id, flags) = parse_traceparent(headers.get("traceparent")?)?;
        // An invalid `tracestate` is dropped; the `traceparent` stands.
        let state = headers
            .get("tracestate")
            .and_then(|s| TraceState::from_str(s.trim()).ok())
            .unwrap_or_default();
        Some(TraceParent {
            trace_id,
            parent_id,
            flags,
            state,
        })
    }

    /// A new trace, sampled, with no vendor state.
    pub fn start(rng: &dyn Random) -> TraceParent {
        TraceParent {
            trace_id: new_trace_id(rng),
            parent_id: SpanId::INVALID,
            flags: TraceFlags::SAMPLED,
            state: TraceState::default(),
        }
    }

    /// The same trace, with `span` as the parent of what follows.
    pub fn under(&self, span: SpanId) -> TraceParent {
        TraceParent {
            parent_id: span,
            ..self.clone()
        }
    }

    /// The `traceparent` of a child span `span` of this context.
    pub fn header_for(&self, span: SpanId) -> String {
        format!("00-{}-{}-{:02x}", self.trace_id, span, self.flags.to_u8())
    }

    /// The `tracestate` to send on, if there is one.
    pub fn state_header(&self) -> Option<String> {
        Some(self.state.header()).filter(|s| !s.is_empty())
    }
}

/// `version-traceid-parentid-flags`, each field lowercase hex of its
/// length; version `ff` and all-zero ids are invalid. A version above 00
/// may add fields after a dash; version 00 has exactly these.
fn parse_traceparent(value: &str) -> Option<(TraceId, SpanId, TraceFlags)> {
    let value = value.trim();
    let mut parts = value.split('-');
    let version = parts.next()?;
    let (trace, parent, flags) = (parts.next()?, parts.next()?, parts.next()?);
    let lower_hex = |s: &str, len: usize| {
        s.len() == len
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    if !lower_hex(version, 2) || version == "ff" {
        return None;
    }
    if version == "00" && parts.next().is_some() {
        return None;
    }
    if !(lower_hex(trace, 32) && lower_hex(parent, 16) && lower_hex(flags, 2)) {
        return None;
    }
    let trace_id = TraceId::from_hex(trace).ok()?;
    let parent_id = SpanId::from_hex(parent).ok()?;
    if trace_id == TraceId::INVALID || parent_id == SpanId::INVALID {
        return None;
    }
    // Only the sampled bit is defined; the others are not passed on.
    let flags = u8::from_str_radix(flags, 16).ok()? & TraceFlags::SAMPLED.to_u8();
    Some((trace_id, parent_id, TraceFlags::new(flags)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    fn headers(parent: &str, state: Option<&str>) -> Headers {
        let mut h = Headers::new();
        h.insert("traceparent", parent);
        if let Some(s) = state {
            h.insert("tracestate", s);
        }
        h
    }

    #[test]
    fn a_valid_traceparent_and_tracestate_are_read() {
        let t = TraceParent::from_headers(&headers(
            GOOD,
            Some("congo=t61rcWkgMzE, rojo=00f067aa0ba902b7"),
        ))
        .expect("valid");
        assert_eq!(t.trace_id.to_string(), "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(t.parent_id.to_string(), "b7ad6b7169203331");
        assert!(t.flags.is_sampled());
        assert_eq!(t.state.get("rojo"), Some("00f067aa0ba902b7"));
        let child = SpanId::from_hex("00f067aa0ba902b7").unwrap();
        assert_eq!(
            t.header_for(child),
            "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"
        );
        assert_eq!(
            t.state_header().as_deref(),
            Some("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")
        );
    }

    #[test]
    fn what_the_specification_rejects_is_no_context() {
        for bad in [
            "",
            "00",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "00-0af7651916cd43dd8448eb211c8031-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
            "00-+af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "0-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-1",
        ] {
            assert_eq!(
                TraceParent::from_headers(&headers(bad, None)),
                None,
                "{bad:?}"
            );
        }
        assert_eq!(TraceParent::from_headers(&Headers::new()), None);
    }

    #[test]
    fn a_later_version_may_add_fields_and_unknown_flags_are_dropped() {
        let later = "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-03-what-next";
        let t = TraceParent::from_headers(&headers(later, None)).expect("forward compatible");
        assert_eq!(t.flags.to_u8(), 1);
        let unsampled = GOOD.replace("-01", "-00");
        let t = TraceParent::from_headers(&headers(&unsampled, None)).expect("valid");
        assert!(!t.flags.is_sampled());
    }

    #[test]
    fn an_invalid_tracestate_is_dropped_and_the_traceparent_kept() {
        let t = TraceParent::from_headers(&headers(GOOD, Some("not a list=,,="))).expect("kept");
        assert_eq!(t.state_header(), None);
    }

    #[test]
    fn started_traces_and_spans_have_nonzero_ids_from_the_random_source() {
        let zero = || 0.0;
        assert_ne!(new_trace_id(&zero), TraceId::INVALID);
        assert_ne!(new_span_id(&zero), SpanId::INVALID);
        let draws = std::cell::Cell::new(0u32);
        let counting = || {
            draws.set(draws.get() + 1);
            0.5
        };
        let t = TraceParent::start(&counting);
        assert_eq!(draws.get(), 4, "128 bits from four draws of 32");
        assert_eq!(t.trace_id.to_string(), "80000000800000008000000080000000");
        assert!(t.flags.is_sampled());
        assert_eq!(new_span_id(&counting).to_string(), "8000000080000000");
    }
}
