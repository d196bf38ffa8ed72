//! Spans as OTLP/HTTP wants them: an `ExportTraceServiceRequest`, the
//! official OpenTelemetry protobuf message (the `opentelemetry-proto`
//! crate's, encoded by prost), for a `POST {endpoint}/v1/traces` with
//! `content-type: application/x-protobuf`.

use opentelemetry::trace::{SpanKind, Status};
use opentelemetry::KeyValue;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{self as common, AnyValue, InstrumentationScope};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{self as proto, span, ResourceSpans, ScopeSpans};
use prost::Message;

use super::span::Span;

/// The content type of an encoded export.
pub const CONTENT_TYPE: &str = "application/x-protobuf";

/// The name this crate's spans are recorded under (their scope).
pub const SCOPE: &str = "resilient-llm";

/// `spans`, all from one service called `service`, as the body of an
/// OTLP/HTTP trace export.
pub fn encode(service: &str, spans: &[Span]) -> Vec<u8> {
    let request = ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![attribute(&KeyValue::new(
                    "service.name",
                    service.to_string(),
                ))],
                ..Resource::default()
            }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: SCOPE.to_string(),
                    version: env!("CARGO_PKG_VERSION").to_string(),
                    ..InstrumentationScope::default()
                }),
                spans: spans.iter().map(span).collect(),
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
    };
    request.encode_to_vec()
}

fn nanos(ms: u64) -> u64 {
    ms.saturating_mul(1_000_000)
}

fn attribute(kv: &KeyValue) -> common::KeyValue {
    common::KeyValue {
        key: kv.key.to_string(),
        value: Some(AnyValue::from(kv.value.clone())),
        key_strindex: 0,
    }
}

fn span(s: &Span) -> proto::Span {
    let parent = if s.parent_id == opentelemetry::trace::SpanId::INVALID {
        Vec::new()
    } else {
        s.parent_id.to_bytes().to_vec()
    };
    proto::Span {
        trace_id: s.trace_id.to_bytes().to_vec(),
        span_id: s.span_id.to_bytes().to_vec(),
        trace_state: s.trace_state.clone(),
        parent_span_id: parent,
        flags: u32::from(s.flags.to_u8()),
        name: s.name.to_string(),
        kind: kind(&s.kind) as i32,
        start_time_unix_nano: nanos(s.start),
        end_time_unix_nano: nanos(s.end),
        attributes: s.attributes.iter().map(attribute).collect(),
        events: s
            .events
            .iter()
            .map(|e| span::Event {
                time_unix_nano: nanos(e.time),
                name: e.name.to_string(),
                attributes: e.attributes.iter().map(attribute).collect(),
                dropped_attributes_count: 0,
            })
            .collect(),
        status: Some(status(&s.status)),
        ..proto::Span::default()
    }
}

fn kind(k: &SpanKind) -> span::SpanKind {
    match k {
        SpanKind::Server => span::SpanKind::Server,
        SpanKind::Client => span::SpanKind::Client,
        SpanKind::Producer => span::SpanKind::Producer,
        SpanKind::Consumer => span::SpanKind::Consumer,
        SpanKind::Internal => span::SpanKind::Internal,
    }
}

fn status(s: &Status) -> proto::Status {
    match s {
        Status::Unset => proto::Status::default(),
        Status::Ok => proto::Status {
            message: String::new(),
            code: proto::status::StatusCode::Ok as i32,
        },
        Status::Error { description } => proto::Status {
            message: description.to_string(),
            code: proto::status::StatusCode::Error as i32,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::span::SpanEvent;
    use opentelemetry::trace::{SpanId, TraceFlags, TraceId};

    #[test]
    fn spans_decode_back_from_the_protobuf() {
        let s = Span {
            trace_id: TraceId::from(7u128),
            span_id: SpanId::from(9u64),
            parent_id: SpanId::INVALID,
            flags: TraceFlags::SAMPLED,
            trace_state: "k=v".into(),
            name: "POST /v1/chat/completions".into(),
            kind: SpanKind::Server,
            start: 1_000,
            end: 1_250,
            attributes: vec![
                KeyValue::new("gen_ai.operation.name", "chat"),
                KeyValue::new("http.response.status_code", 200i64),
            ],
            events: vec![SpanEvent::new(
                "retry",
                1_100,
                vec![KeyValue::new("resilient_llm.delay_ms", 40i64)],
            )],
            status: Status::error("server error (HTTP 503)"),
        };
        let bytes = encode("edge", std::slice::from_ref(&s));
        let back = ExportTraceServiceRequest::decode(bytes.as_slice()).unwrap();
        let rs = &back.resource_spans[0];
        let service = &rs.resource.as_ref().unwrap().attributes[0];
        assert_eq!(service.key, "service.name");
        let ss = &rs.scope_spans[0];
        assert_eq!(ss.scope.as_ref().unwrap().name, SCOPE);
        let p = &ss.spans[0];
        assert_eq!(p.trace_id, TraceId::from(7u128).to_bytes().to_vec());
        assert_eq!(p.span_id.len(), 8);
        assert!(p.parent_span_id.is_empty(), "a root has no parent");
        assert_eq!(p.flags, 1);
        assert_eq!(p.kind, span::SpanKind::Server as i32);
        assert_eq!(p.start_time_unix_nano, 1_000_000_000);
        assert_eq!(p.end_time_unix_nano, 1_250_000_000);
        assert_eq!(p.attributes.len(), 2);
        assert_eq!(
            p.attributes[1].value.as_ref().unwrap().value,
            Some(common::any_value::Value::IntValue(200))
        );
        assert_eq!(p.events[0].name, "retry");
        assert_eq!(p.events[0].time_unix_nano, 1_100_000_000);
        let st = p.status.as_ref().unwrap();
        assert_eq!(st.code, proto::status::StatusCode::Error as i32);
        assert_eq!(st.message, "server error (HTTP 503)");
    }
}
