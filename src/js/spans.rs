//! `options.tracing`: a call's spans in the app's own OpenTelemetry JS
//! tracer, through the bridge `openTelemetry()` of
//! `resilient-llm/opentelemetry` builds (npm/opentelemetry.mjs).
//!
//! The app's tracer picks its spans' ids, so its spans are opened live
//! ([`LiveSpans`]): when a call is made the bridge opens the call's span
//! under the app's active span (or under `options.traceparent`, or the
//! `traceparent` an SDK sent `client.fetch`), and the call carries that
//! span's context; each attempt's span is opened by the bridge when the
//! attempt starts, so the `traceparent` the provider gets names it; at the
//! call's end the bridge closes them with the attributes, events and
//! status the engine recorded ([`crate::trace::genai`]). The call's span is
//! held by this side ([`Begun`]) and by the engine while it runs; one whose
//! last hold is released without a close (a cached answer, a stream its
//! reader left, an aborted call) has its open spans ended. Without a registered
//! tracer (or not sampled) the bridge opens nothing and the call is
//! untraced, as without `options.tracing`. A bridge that throws never
//! fails a call.

use std::rc::Rc;

use js_sys::{Array, Function, Object, Reflect, JSON};
use opentelemetry::trace::{SpanId, SpanKind, Status};
use opentelemetry::{Array as Values, KeyValue, Value};
use serde_json::{json, Map, Value as Json};
use wasm_bindgen::prelude::*;

use crate::config::ConfigIssue;
use crate::engine::span_hook::LiveSpans;
use crate::js::errors::prop;
use crate::platform::{Headers, UnixMillis};
use crate::trace::{Span, TraceParent};

/// The bridge's functions.
pub(crate) struct JsTracer {
    this: JsValue,
    begin: Function,
    hold: Function,
    open: Function,
    close: Function,
    release: Function,
}

/// A call's span opened by the bridge, and this side's hold on it:
/// released when dropped.
pub(crate) struct Begun {
    tracer: Rc<JsTracer>,
    pub(crate) trace: TraceParent,
}

impl Drop for Begun {
    fn drop(&mut self) {
        self.tracer.release(&self.trace);
    }
}

const SHAPE: &str = "must be the value of openTelemetry() from \"resilient-llm/opentelemetry\" \
                     (an object with begin, hold, open, close and release functions)";

impl JsTracer {
    /// `options.tracing`, if given.
    pub(crate) fn read(options: &JsValue, issues: &mut Vec<ConfigIssue>) -> Option<Rc<JsTracer>> {
        let bridge = prop(options, "tracing");
        if bridge.is_undefined() || bridge.is_null() {
            return None;
        }
        let function = |name: &str| prop(&bridge, name).dyn_into::<Function>().ok();
        let read = (|| {
            Some(JsTracer {
                begin: function("begin")?,
                hold: function("hold")?,
                open: function("open")?,
                close: function("close")?,
                release: function("release")?,
                this: bridge.clone(),
            })
        })();
        if read.is_none() {
            issues.push(ConfigIssue::new("options.tracing", SHAPE));
        }
        read.map(Rc::new)
    }

    /// Opens the span of a call under `parent` (the caller's explicit
    /// context) or else the app's active span: the trace the call then
    /// carries, or `None` when the tracer records nothing.
    pub(crate) fn begin(self: &Rc<Self>, parent: Option<&TraceParent>) -> Option<Begun> {
        let parent = parent.map_or(JsValue::UNDEFINED, context);
        let opened = self.begin.call1(&self.this, &parent).ok()?;
        let trace = from_context(&opened)?;
        Some(Begun {
            tracer: Rc::clone(self),
            trace,
        })
    }
}

impl JsTracer {
    /// Calls `f(traceId, spanId)` of the call `trace` names.
    fn tell(&self, f: &Function, trace: &TraceParent) {
        let (trace_id, span_id) = (trace.trace_id.to_string(), trace.parent_id.to_string());
        let _ = f.call2(&self.this, &trace_id.into(), &span_id.into());
    }
}

impl LiveSpans for JsTracer {
    fn hold(&self, trace: &TraceParent) {
        self.tell(&self.hold, trace);
    }

    fn open(&self, trace: &TraceParent, start: UnixMillis) -> Option<SpanId> {
        let args = Array::of3(
            &trace.trace_id.to_string().into(),
            &trace.parent_id.to_string().into(),
            &(start as f64).into(),
        );
        let id = self.open.apply(&self.this, &args).ok()?.as_string()?;
        SpanId::from_hex(&id)
            .ok()
            .filter(|id| *id != SpanId::INVALID)
    }

    fn close(&self, spans: Vec<Span>) {
        let list: Vec<Json> = spans.iter().map(span_json).collect();
        if let Ok(value) = JSON::parse(&Json::Array(list).to_string()) {
            let _ = self.close.call1(&self.this, &value);
        }
    }

    fn release(&self, trace: &TraceParent) {
        self.tell(&self.release, trace);
    }
}

/// `{ traceId, spanId, traceFlags, traceState }`, as an OpenTelemetry JS
/// `SpanContext` has them.
fn context(t: &TraceParent) -> JsValue {
    let o = Object::new();
    let set = |k: &str, v: JsValue| Reflect::set(&o, &k.into(), &v);
    let _ = set("traceId", t.trace_id.to_string().into());
    let _ = set("spanId", t.parent_id.to_string().into());
    let _ = set("traceFlags", t.flags.to_u8().into());
    if let Some(state) = t.state_header() {
        let _ = set("traceState", state.into());
    }
    o.into()
}

/// The context of the span `begin` opened (`{ traceparent, tracestate }`),
/// if it opened one to record.
fn from_context(v: &JsValue) -> Option<TraceParent> {
    let mut headers = Headers::new();
    headers.insert("traceparent", prop(v, "traceparent").as_string()?);
    if let Some(state) = prop(v, "tracestate").as_string() {
        headers.insert("tracestate", state);
    }
    TraceParent::from_headers(&headers).filter(|t| t.flags.is_sampled())
}

/// A finished span as the bridge takes it.
fn span_json(s: &Span) -> Json {
    let (code, message) = match &s.status {
        Status::Unset => ("unset", None),
        Status::Ok => ("ok", None),
        Status::Error { description } => ("error", Some(description.to_string())),
    };
    let events: Vec<Json> = s
        .events
        .iter()
        .map(|e| json!({ "name": e.name, "time": e.time, "attributes": attributes(&e.attributes) }))
        .collect();
    json!({
        "traceId": s.trace_id.to_string(),
        "spanId": s.span_id.to_string(),
        "parentSpanId": s.parent_id.to_string(),
        "name": s.name,
        "kind": kind(&s.kind),
        "startTime": s.start,
        "endTime": s.end,
        "attributes": attributes(&s.attributes),
        "events": events,
        "status": { "code": code, "message": message },
    })
}

fn kind(k: &SpanKind) -> &'static str {
    match k {
        SpanKind::Client => "client",
        SpanKind::Server => "server",
        SpanKind::Producer => "producer",
        SpanKind::Consumer => "consumer",
        SpanKind::Internal => "internal",
    }
}

fn attributes(list: &[KeyValue]) -> Json {
    let map: Map<String, Json> = list
        .iter()
        .map(|kv| (kv.key.to_string(), value(&kv.value)))
        .collect();
    Json::Object(map)
}

fn value(v: &Value) -> Json {
    match v {
        Value::Bool(b) => json!(b),
        Value::I64(i) => json!(i),
        Value::F64(f) => json!(f),
        Value::String(s) => json!(s.as_str()),
        Value::Array(Values::Bool(a)) => json!(a),
        Value::Array(Values::I64(a)) => json!(a),
        Value::Array(Values::F64(a)) => json!(a),
        Value::Array(Values::String(a)) => {
            Json::Array(a.iter().map(|s| json!(s.as_str())).collect())
        }
        other => json!(other.to_string()),
    }
}
