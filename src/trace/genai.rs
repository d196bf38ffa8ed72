//! A request's spans in the OpenTelemetry GenAI semantic conventions
//! (<https://opentelemetry.io/docs/specs/semconv/gen-ai/>): one span for
//! the request (a server span at the gateway) and one client span per
//! attempt under it, built once the request is over from what it left
//! behind: its attempts' records ([`Attempt`], each with its span id, the
//! one its `traceparent` named) and what the host knew of the request.
//!
//! What happened between the attempts (a retry's wait, a failover, a
//! hedge, an escalation, a stream's commit point and continuation, a cache
//! hit or a stale answer) is an event on the request's span; a hedge's
//! loser's abort and a breaker's change of state, on the attempt's.
//! Message contents are recorded only when the configuration says so (the
//! gateway's `content.rs` writes them).

use std::borrow::Cow;

use opentelemetry::trace::{SpanId, SpanKind, Status};
use opentelemetry::{KeyValue, StringValue, Value};

use super::context::TraceParent;
use super::span::{Span, SpanEvent};
use crate::error::{Attempt, AttemptOutcome};
use crate::platform::UnixMillis;

/// The attribute keys this module writes: the conventions' where they
/// have one, this project's own under `resilient_llm.`.
pub mod keys {
    /// `chat`, `embeddings`, ….
    pub const OPERATION: &str = "gen_ai.operation.name";
    /// The provider, as the conventions name it (`openai`, `aws.bedrock`).
    pub const PROVIDER: &str = "gen_ai.provider.name";
    /// The model asked for (the client's, on the request's span; the one
    /// sent, on an attempt's).
    pub const REQUEST_MODEL: &str = "gen_ai.request.model";
    /// The model that answered, as the provider named it.
    pub const RESPONSE_MODEL: &str = "gen_ai.response.model";
    /// The provider's id of its answer.
    pub const RESPONSE_ID: &str = "gen_ai.response.id";
    /// Why the model stopped, one per choice.
    pub const FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
    /// Input tokens, as the provider reported them.
    pub const INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
    /// Output tokens, as the provider reported them.
    pub const OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
    /// The provider's host.
    pub const SERVER_ADDRESS: &str = "server.address";
    /// The provider's port, when its URL names one.
    pub const SERVER_PORT: &str = "server.port";
    /// The failure's class (an attempt's error kind; a request's status).
    pub const ERROR_TYPE: &str = "error.type";
    /// The request's method.
    pub const HTTP_METHOD: &str = "http.request.method";
    /// The request's path.
    pub const URL_PATH: &str = "url.path";
    /// The route of the request (the gateway's paths are fixed).
    pub const HTTP_ROUTE: &str = "http.route";
    /// The answer's status.
    pub const HTTP_STATUS: &str = "http.response.status_code";
    /// The gateway route (the model name the client asked for).
    pub const ROUTE: &str = "resilient_llm.route";
    /// The provider's id in the configuration.
    pub const PROVIDER_ID: &str = "resilient_llm.provider";
    /// 1 for an entry's first attempt, 2 for its first retry, ….
    pub const ATTEMPT: &str = "resilient_llm.attempt";
    /// The state of the entry's breaker that let the attempt through.
    pub const BREAKER_STATE: &str = "resilient_llm.breaker.state";
    /// The breaker's state before the entry's verdict moved it.
    pub const BREAKER_FROM: &str = "resilient_llm.breaker.from";
    /// The state the entry's verdict moved its breaker to.
    pub const BREAKER_TO: &str = "resilient_llm.breaker.to";
    /// `ok`, `failed`, `cancelled` (a hedge's loser) or `rejected` (a
    /// validator's).
    pub const OUTCOME: &str = "resilient_llm.outcome";
    /// The attempts that reached a provider.
    pub const ATTEMPTS: &str = "resilient_llm.attempts";
    /// What the response cache did: `hit`, `miss`, `stale`, `bypass`.
    pub const CACHE: &str = "resilient_llm.cache";
    /// A retry's wait, in milliseconds.
    pub const DELAY_MS: &str = "resilient_llm.delay_ms";
    /// The entry left behind, `provider/model`.
    pub const FROM: &str = "resilient_llm.from";
    /// The entry tried next, `provider/model`.
    pub const TO: &str = "resilient_llm.to";
    /// The validator that rejected an answer (its reason is not recorded:
    /// it may quote the answer).
    pub const VALIDATOR: &str = "resilient_llm.validator";
    /// The messages asked (only when the configuration records contents).
    pub const INPUT_MESSAGES: &str = "gen_ai.input.messages";
    /// The messages answered (only when the configuration records
    /// contents).
    pub const OUTPUT_MESSAGES: &str = "gen_ai.output.messages";
}

/// Who a provider is, as a trace names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// Its `gen_ai.provider.name`.
    pub name: String,
    /// Its host.
    pub address: Option<String>,
    /// Its port, when its URL names one.
    pub port: Option<u16>,
}

impl Peer {
    /// A provider called `name` whose requests go to `base_url`.
    pub fn new(name: &str, base_url: Option<&str>) -> Peer {
        let uri = base_url.and_then(|u| u.parse::<http::Uri>().ok());
        Peer {
            name: name.to_string(),
            address: uri.as_ref().and_then(|u| u.host()).map(str::to_string),
            port: uri.as_ref().and_then(|u| u.port_u16()),
        }
    }
}

/// The request as the host saw it (HTTP, at the gateway).
#[derive(Debug, Clone, Copy)]
pub struct HttpFacts<'a> {
    /// Its method.
    pub method: &'a str,
    /// Its path.
    pub path: &'a str,
    /// The answer's status.
    pub status: u16,
}

/// The answer, as the attempt that gave it reported it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Answered<'a> {
    /// The model that answered.
    pub model: Option<&'a str>,
    /// The provider's id of the answer.
    pub id: Option<&'a str>,
    /// Why it stopped.
    pub finish_reason: Option<&'a str>,
    /// Its `gen_ai.output.messages`, when contents are recorded.
    pub output: Option<&'a str>,
}

/// The provider's id of its answer `raw`: `id` (OpenAI, Anthropic) or
/// `responseId` (Gemini), when it has one.
pub fn response_id(raw: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Ids {
        id: Option<String>,
        #[serde(rename = "responseId")]
        response_id: Option<String>,
    }
    let ids: Ids = serde_json::from_str(raw).ok()?;
    ids.id.or(ids.response_id)
}

/// What a request's spans are built from.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The request's context under its own span: `parent_id` is the
    /// request span's id, the parent of every attempt's.
    pub trace: &'a TraceParent,
    /// The caller's span, the request span's parent
    /// ([`SpanId::INVALID`] when the trace started here).
    pub parent: SpanId,
    /// `chat`, `embeddings`, ….
    pub operation: &'static str,
    /// The HTTP request, at the gateway (a server span); `None` in a
    /// library call (an internal span).
    pub http: Option<HttpFacts<'a>>,
    /// The route (the model the client asked for).
    pub route: Option<&'a str>,
    /// When it started and ended.
    pub start: UnixMillis,
    /// When it ended: the stream's end, for a stream.
    pub end: UnixMillis,
    /// Its attempts, in the order they ended.
    pub attempts: &'a [Attempt],
    /// The answer, if one was given.
    pub answer: Answered<'a>,
    /// A stream's commit point, and how many attempts were made by then.
    pub committed: Option<(UnixMillis, usize)>,
    /// What the response cache did.
    pub cache: Option<&'static str>,
    /// The request's failure, when it failed (an error kind or code).
    pub error: Option<&'a str>,
    /// Its `gen_ai.input.messages`, when contents are recorded.
    pub input: Option<&'a str>,
}

/// The request's span first, then one per attempt that was made.
pub fn spans(req: &Request<'_>, peer: &dyn Fn(&str) -> Option<Peer>) -> Vec<Span> {
    let mut out = Vec::with_capacity(1 + req.attempts.len());
    out.push(request_span(req));
    let answering = req
        .attempts
        .iter()
        .rposition(|a| a.outcome == AttemptOutcome::Success);
    for (i, a) in req.attempts.iter().enumerate() {
        let Some(span_id) = a.span.filter(|_| a.number > 0) else {
            continue; // not made: an event of the request's span
        };
        let answer = (Some(i) == answering).then_some(&req.answer);
        out.push(attempt_span(req, a, span_id, answer, peer(&a.provider)));
    }
    out
}

fn kv(key: &'static str, value: impl Into<Value>) -> KeyValue {
    KeyValue::new(key, value)
}

fn entry(a: &Attempt) -> String {
    format!("{}/{}", a.provider, a.model)
}

fn end_of(a: &Attempt) -> UnixMillis {
    a.started_at
        .saturating_add(crate::platform::millis(a.duration))
}

fn request_span(req: &Request<'_>) -> Span {
    let mut attributes = vec![kv(keys::OPERATION, req.operation)];
    if let Some(route) = req.route {
        attributes.push(kv(keys::REQUEST_MODEL, route.to_string()));
        attributes.push(kv(keys::ROUTE, route.to_string()));
    }
    let reached = req.attempts.iter().filter(|a| a.number > 0).count();
    attributes.push(kv(keys::ATTEMPTS, reached as i64));
    if let Some(cache) = req.cache {
        attributes.push(kv(keys::CACHE, cache));
    }
    if let Some(input) = req.input {
        attributes.push(kv(keys::INPUT_MESSAGES, input.to_string()));
    }
    let (name, kind, failed) = match req.http {
        Some(h) => {
            attributes.push(kv(keys::HTTP_METHOD, h.method.to_string()));
            attributes.push(kv(keys::URL_PATH, h.path.to_string()));
            attributes.push(kv(keys::HTTP_ROUTE, h.path.to_string()));
            attributes.push(kv(keys::HTTP_STATUS, i64::from(h.status)));
            // A server's 4xx is the client's error, not the span's; a
            // stream that failed after its 200 went out is the server's.
            let failed = h.status >= 500 || (h.status < 300 && req.error.is_some());
            if failed {
                attributes.push(kv(keys::ERROR_TYPE, h.status.to_string()));
            }
            let name = Cow::Owned(format!("{} {}", h.method, h.path));
            (name, SpanKind::Server, failed)
        }
        None => {
            if let Some(e) = req.error {
                attributes.push(kv(keys::ERROR_TYPE, e.to_string()));
            }
            let name = match req.route {
                Some(r) => Cow::Owned(format!("{} {r}", req.operation)),
                None => Cow::Borrowed(req.operation),
            };
            (name, SpanKind::Internal, req.error.is_some())
        }
    };
    let status = match (failed, req.error) {
        (true, Some(e)) => Status::error(e.to_string()),
        (true, None) => Status::error("the request failed"),
        (false, _) => Status::Unset,
    };
    Span {
        trace_id: req.trace.trace_id,
        span_id: req.trace.parent_id,
        parent_id: req.parent,
        flags: req.trace.flags,
        trace_state: req.trace.state.header(),
        name,
        kind,
        start: req.start,
        end: req.end.max(req.start),
        attributes,
        events: request_events(req),
        status,
    }
}

/// What happened between the attempts, in time order.
fn request_events(req: &Request<'_>) -> Vec<SpanEvent> {
    let mut events = Vec::new();
    let mut prev: Option<&Attempt> = None;
    for (i, a) in req.attempts.iter().enumerate() {
        let error_type = |a: &Attempt| a.error().map(|e| e.kind.code()).unwrap_or("");
        if a.number == 0 {
            // An entry not called: its breaker open, or no time left.
            events.push(SpanEvent::new(
                "skipped",
                a.started_at,
                vec![
                    kv(keys::PROVIDER_ID, a.provider.clone()),
                    kv(keys::REQUEST_MODEL, a.model.clone()),
                    kv(keys::ERROR_TYPE, error_type(a)),
                ],
            ));
            continue;
        }
        if let Some(p) = prev {
            let same_entry = p.provider == a.provider && p.model == a.model;
            if a.started_at < end_of(p) && !same_entry {
                events.push(SpanEvent::new(
                    "hedge",
                    a.started_at,
                    vec![kv(keys::FROM, entry(p)), kv(keys::TO, entry(a))],
                ));
            } else if same_entry && a.number > p.number && p.error().is_some() {
                events.push(SpanEvent::new(
                    "retry",
                    end_of(p),
                    vec![
                        kv(keys::PROVIDER_ID, a.provider.clone()),
                        kv(keys::ATTEMPT, i64::from(a.number)),
                        kv(
                            keys::DELAY_MS,
                            a.started_at.saturating_sub(end_of(p)) as i64,
                        ),
                        kv(keys::ERROR_TYPE, error_type(p)),
                    ],
                ));
            } else if !same_entry {
                let mut attrs = vec![kv(keys::FROM, entry(p)), kv(keys::TO, entry(a))];
                if let Some(e) = p.error() {
                    attrs.push(kv(keys::ERROR_TYPE, e.kind.code()));
                }
                let name = match p.outcome {
                    AttemptOutcome::Rejected { .. } => "escalation",
                    _ => "failover",
                };
                events.push(SpanEvent::new(name, a.started_at, attrs));
            }
        }
        if let Some((at, made)) = req.committed {
            if i >= made && a.started_at >= at {
                events.push(SpanEvent::new(
                    "continuation",
                    a.started_at,
                    vec![kv(keys::TO, entry(a))],
                ));
            }
        }
        prev = Some(a);
    }
    if let Some((at, _)) = req.committed {
        events.push(SpanEvent::new("stream.commit", at, Vec::new()));
    }
    match req.cache {
        Some("hit") => events.push(SpanEvent::new("cache.hit", req.start, Vec::new())),
        Some("stale") => events.push(SpanEvent::new("cache.stale", req.end, Vec::new())),
        _ => {}
    }
    events.sort_by_key(|e| e.time);
    events
}

fn attempt_span(
    req: &Request<'_>,
    a: &Attempt,
    span_id: SpanId,
    answer: Option<&Answered<'_>>,
    peer: Option<Peer>,
) -> Span {
    let mut attributes = vec![
        kv(keys::OPERATION, req.operation),
        kv(keys::REQUEST_MODEL, a.model.clone()),
        kv(keys::PROVIDER_ID, a.provider.clone()),
        kv(keys::ATTEMPT, i64::from(a.number)),
    ];
    let peer = peer.unwrap_or_else(|| Peer::new(&a.provider, None));
    attributes.push(kv(keys::PROVIDER, peer.name));
    if let Some(address) = peer.address {
        attributes.push(kv(keys::SERVER_ADDRESS, address));
    }
    if let Some(port) = peer.port {
        attributes.push(kv(keys::SERVER_PORT, i64::from(port)));
    }
    if let Some(breaker) = a.breaker {
        attributes.push(kv(keys::BREAKER_STATE, breaker.admitted));
    }
    if let Some(answer) = answer {
        if let Some(model) = answer.model {
            attributes.push(kv(keys::RESPONSE_MODEL, model.to_string()));
        }
        if let Some(id) = answer.id {
            attributes.push(kv(keys::RESPONSE_ID, id.to_string()));
        }
        if let Some(output) = answer.output {
            attributes.push(kv(keys::OUTPUT_MESSAGES, output.to_string()));
        }
        if let Some(reason) = answer.finish_reason {
            let reasons = vec![StringValue::from(reason.to_string())];
            attributes.push(kv(
                keys::FINISH_REASONS,
                Value::Array(opentelemetry::Array::from(reasons)),
            ));
        }
    }
    if let Some(usage) = a.usage {
        attributes.push(kv(keys::INPUT_TOKENS, usage.input_tokens as i64));
        attributes.push(kv(keys::OUTPUT_TOKENS, usage.output_tokens as i64));
    }
    let end = end_of(a);
    let mut events = Vec::new();
    let (outcome, status) = match &a.outcome {
        AttemptOutcome::Success => ("ok", Status::Unset),
        AttemptOutcome::Failure { error } => {
            attributes.push(kv(keys::ERROR_TYPE, error.kind.code()));
            let status = match error.status {
                Some(s) => format!("{} (HTTP {s})", error.kind.describe()),
                None => error.kind.describe().to_string(),
            };
            ("failed", Status::error(status))
        }
        AttemptOutcome::Cancelled => {
            events.push(SpanEvent::new("hedge.abort", end, Vec::new()));
            ("cancelled", Status::Unset)
        }
        AttemptOutcome::Rejected { validator, .. } => {
            events.push(SpanEvent::new(
                "rejected",
                end,
                vec![kv(keys::VALIDATOR, validator.clone())],
            ));
            ("rejected", Status::Unset)
        }
    };
    attributes.push(kv(keys::OUTCOME, outcome));
    if let Some((from, to)) = a.breaker.and_then(|b| b.moved) {
        events.push(SpanEvent::new(
            "breaker.transition",
            end,
            vec![kv(keys::BREAKER_FROM, from), kv(keys::BREAKER_TO, to)],
        ));
    }
    Span {
        trace_id: req.trace.trace_id,
        span_id,
        parent_id: req.trace.parent_id,
        flags: req.trace.flags,
        trace_state: req.trace.state.header(),
        name: Cow::Owned(format!("{} {}", req.operation, a.model)),
        kind: SpanKind::Client,
        start: a.started_at,
        end,
        attributes,
        events,
        status,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use opentelemetry::trace::{TraceFlags, TraceId, TraceState};

    use super::*;
    use crate::error::{ErrorKind, ProviderError};

    fn attempt(
        provider: &str,
        number: u32,
        start: u64,
        ms: u64,
        outcome: AttemptOutcome,
    ) -> Attempt {
        Attempt {
            provider: provider.into(),
            model: "m".into(),
            number,
            started_at: start,
            duration: Duration::from_millis(ms),
            reached: number > 0,
            outcome,
            usage: None,
            omitted: Vec::new(),
            span: (number > 0).then(|| SpanId::from(u64::from(number) << 8 | start)),
            breaker: None,
        }
    }

    fn build(attempts: &[Attempt]) -> Vec<Span> {
        let trace = TraceParent {
            trace_id: TraceId::from(5u128),
            parent_id: SpanId::from(1u64),
            flags: TraceFlags::SAMPLED,
            state: TraceState::default(),
        };
        let req = Request {
            trace: &trace,
            parent: SpanId::INVALID,
            operation: "chat",
            http: None,
            route: Some("default"),
            start: 0,
            end: 1_000,
            attempts,
            answer: Answered::default(),
            committed: None,
            cache: None,
            error: None,
            input: None,
        };
        spans(&req, &|_| None)
    }

    fn names(s: &Span) -> Vec<&'static str> {
        s.events.iter().map(|e| e.name).collect()
    }

    #[test]
    fn a_hedge_is_an_event_and_its_loser_ends_aborted() {
        let spans = build(&[
            attempt("b", 1, 200, 300, AttemptOutcome::Success),
            attempt("a", 1, 0, 500, AttemptOutcome::Cancelled),
        ]);
        assert_eq!(spans[0].kind, SpanKind::Internal, "a library call");
        assert_eq!(spans[0].name, "chat default");
        // The loser was recorded after the winner, but started first.
        let loser = &spans[2];
        assert_eq!(names(loser), ["hedge.abort"]);
        assert_eq!(
            loser.attribute(keys::OUTCOME),
            Some(&Value::from("cancelled"))
        );
        assert_eq!(loser.status, Status::Unset, "no verdict on its provider");
        assert_eq!(spans[1].attribute(keys::OUTCOME), Some(&Value::from("ok")));
    }

    #[test]
    fn an_escalation_names_the_validator_never_its_reason() {
        let rejected = AttemptOutcome::Rejected {
            validator: "json".into(),
            reason: "the answer said: my secret".into(),
            kept: false,
        };
        let spans = build(&[
            attempt("a", 1, 0, 100, rejected),
            attempt("b", 1, 100, 100, AttemptOutcome::Success),
        ]);
        assert_eq!(names(&spans[0]), ["escalation"]);
        assert_eq!(names(&spans[1]), ["rejected"]);
        assert_eq!(
            spans[1].events[0].attribute(keys::VALIDATOR),
            Some(&Value::from("json"))
        );
        assert!(!format!("{spans:?}").contains("secret"));
    }

    #[test]
    fn a_skipped_entry_is_an_event_not_a_span() {
        let open = AttemptOutcome::Failure {
            error: ProviderError::new(ErrorKind::CircuitOpen, "open"),
        };
        let failed = AttemptOutcome::Failure {
            error: ProviderError::new(ErrorKind::Timeout, "slow").with_status(504),
        };
        let spans = build(&[attempt("a", 0, 0, 0, open), attempt("b", 1, 0, 100, failed)]);
        assert_eq!(spans.len(), 2);
        assert_eq!(names(&spans[0]), ["skipped"]);
        let skipped = &spans[0].events[0];
        assert_eq!(
            skipped.attribute(keys::ERROR_TYPE),
            Some(&Value::from("circuit_open"))
        );
        assert_eq!(
            spans[1].attribute(keys::ERROR_TYPE),
            Some(&Value::from("timeout"))
        );
        assert_eq!(spans[1].status, Status::error("timed out (HTTP 504)"));
    }
}
