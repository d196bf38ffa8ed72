//! The Rust client's exporter hook (`ClientBuilder::on_spans`), on the fake
//! platform: a traced call's spans handed over once it is over — its own
//! internal span under the caller's, one client span per attempt under it
//! whose id is the one its `traceparent` named — for a failed-over whole
//! answer, a stream (at its end, with its commit point; when dropped, if
//! its reader left) and a call that failed; nothing for an untraced or
//! unsampled call. And the same calls' spans taken live by a tracer that
//! picks span ids itself (`ClientBuilder::live_spans`).

use std::cell::RefCell;
use std::rc::Rc;

use futures_util::FutureExt;
use opentelemetry::trace::{SpanId, SpanKind, Status};
use opentelemetry::Value;
use resilient_llm::testing::{block_on, hang, reply, FakePlatform, Reply};
use resilient_llm::trace::{Span, TraceParent};
use resilient_llm::{
    CallOptions, ChatRequest, Client, ClientBuilder, Config, Headers, LiveSpans, Message,
    UnixMillis,
};
use serde_json::json;

const PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

type Seen = Rc<RefCell<Vec<Vec<Span>>>>;

/// A client of two entries (`first`, `second`), without span hooks.
fn builder(p: &FakePlatform) -> ClientBuilder<FakePlatform> {
    let cfg = json!({
        "providers": {
            "first": { "kind": "openai", "baseUrl": "https://first.test" },
            "second": { "kind": "openai", "baseUrl": "https://second.test" }
        },
        "routes": { "default": [ { "provider": "first", "model": "m1" },
                                 { "provider": "second", "model": "m2" } ] },
        "retry": { "maxAttempts": 1 }
    });
    let secret = |_: &str| Some("sk-test".to_string());
    Config::parse(&cfg.to_string())
        .unwrap()
        .client_builder(p.clone(), vec![], &secret)
        .unwrap()
}

fn client(p: &FakePlatform) -> (Client<FakePlatform>, Seen) {
    let seen: Seen = Rc::default();
    let sink = seen.clone();
    let c = builder(p)
        .on_spans(move |spans| sink.borrow_mut().push(spans))
        .build();
    (c, seen)
}

/// A stream that gives two deltas, 30 ms apart, and no end.
fn unfinished_sse() -> Reply {
    let chunk = |c: serde_json::Value| format!("data: {c}\n\n");
    let events = vec![
        chunk(json!({ "id": "c1", "model": "m1", "choices": [{ "index": 0,
              "delta": { "role": "assistant", "content": "hi" }, "finish_reason": null }] })),
        chunk(json!({ "id": "c1", "model": "m1", "choices": [{ "index": 0,
              "delta": { "content": " there" }, "finish_reason": null }] })),
    ];
    reply(200)
        .header("content-type", "text/event-stream")
        .chunks(events)
        .chunk_delay(std::time::Duration::from_millis(30))
}

fn traced(traceparent: &str) -> ChatRequest {
    let headers: Headers = [("traceparent", traceparent)].into_iter().collect();
    let mut req = ChatRequest::new(vec![Message::user("a private question")]);
    req.trace = TraceParent::from_headers(&headers);
    req
}

fn ok(model: &str) -> String {
    json!({ "id": "chatcmpl-9", "model": model, "choices": [{ "index": 0, "finish_reason": "stop",
            "message": { "role": "assistant", "content": "fine" } }],
            "usage": { "prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6 } })
    .to_string()
}

fn attr<'a>(s: &'a Span, key: &str) -> Option<&'a Value> {
    s.attribute(key)
}

/// The span id each provider request's `traceparent` named, in order.
fn sent(p: &FakePlatform) -> Vec<String> {
    p.requests()
        .iter()
        .map(|r| {
            let tp = r.headers.get("traceparent").expect("a traceparent");
            tp.split('-').nth(2).unwrap().to_string()
        })
        .collect()
}

#[test]
fn a_failed_over_call_hands_over_its_span_and_one_per_attempt() {
    let p = FakePlatform::new();
    p.script("https://first.test", [reply(503)]);
    p.script("https://second.test", [reply(200).body(ok("m2-live"))]);
    let (c, seen) = client(&p);
    let reply = block_on(&p, c.chat(traced(PARENT))).expect("the second answers");
    assert_eq!(reply.served_by.provider, "second");
    let seen = seen.borrow();
    assert_eq!(seen.len(), 1, "one call, one hand-over");
    let spans = &seen[0];
    assert_eq!(spans.len(), 3);
    let call = &spans[0];
    assert_eq!(call.kind, SpanKind::Internal);
    assert_eq!(call.name, "chat default");
    assert_eq!(
        call.trace_id.to_string(),
        "0af7651916cd43dd8448eb211c80319c"
    );
    assert_eq!(call.parent_id.to_string(), "b7ad6b7169203331");
    assert_eq!(
        attr(call, "gen_ai.request.model"),
        Some(&Value::from("default"))
    );
    let names: Vec<&str> = call.events.iter().map(|e| e.name).collect();
    assert_eq!(names, ["failover"]);
    let ids: Vec<String> = spans[1..].iter().map(|s| s.span_id.to_string()).collect();
    assert_eq!(
        ids,
        sent(&p),
        "each attempt's span is the one its traceparent named"
    );
    for a in &spans[1..] {
        assert_eq!(a.kind, SpanKind::Client);
        assert_eq!(a.parent_id, call.span_id);
        assert_eq!(a.trace_id, call.trace_id);
    }
    assert_eq!(attr(&spans[1], "error.type"), Some(&Value::from("server")));
    let last = &spans[2];
    assert_eq!(
        attr(last, "gen_ai.response.model"),
        Some(&Value::from("m2-live"))
    );
    assert_eq!(
        attr(last, "gen_ai.response.id"),
        Some(&Value::from("chatcmpl-9"))
    );
    assert_eq!(
        attr(last, "gen_ai.usage.output_tokens"),
        Some(&Value::from(2i64))
    );
    assert_eq!(
        attr(last, "server.address"),
        Some(&Value::from("second.test"))
    );
    assert!(!format!("{spans:?}").contains("private question"));
}

#[test]
fn a_failed_call_ends_its_span_in_error() {
    let p = FakePlatform::new();
    p.script("https://first.test", [reply(503)]);
    p.script("https://second.test", [reply(503)]);
    let (c, seen) = client(&p);
    let err = block_on(&p, c.chat(traced(PARENT))).expect_err("both fail");
    let seen = seen.borrow();
    let call = &seen[0][0];
    assert_eq!(seen[0].len(), 3);
    assert_eq!(attr(call, "error.type"), Some(&Value::from(err.code())));
    assert_eq!(call.status, Status::error("all_providers_failed"));
}

#[test]
fn a_stream_hands_over_its_spans_at_its_end() {
    let p = FakePlatform::new();
    let chunk = |c: serde_json::Value| format!("data: {c}\n\n");
    let events = vec![
        chunk(json!({ "id": "c1", "model": "m1", "choices": [{ "index": 0,
              "delta": { "role": "assistant", "content": "hi" }, "finish_reason": null }] })),
        chunk(json!({ "id": "c1", "model": "m1", "choices": [{ "index": 0,
              "delta": {}, "finish_reason": "stop" }] })),
        "data: [DONE]\n\n".to_string(),
    ];
    let sse = reply(200)
        .header("content-type", "text/event-stream")
        .chunks(events)
        .chunk_delay(std::time::Duration::from_millis(30));
    p.script("https://first.test", [sse]);
    let (c, seen) = client(&p);
    let mut stream = c.stream(traced(PARENT), CallOptions::default()).unwrap();
    let mut deltas = 0;
    block_on(&p, async {
        while let Some(d) = stream.next().await {
            d.expect("no error");
            deltas += 1;
            if deltas == 1 {
                assert!(seen.borrow().is_empty(), "nothing before the stream's end");
            }
        }
    });
    let seen = seen.borrow();
    assert_eq!(seen.len(), 1);
    let (call, attempt) = (&seen[0][0], &seen[0][1]);
    let names: Vec<&str> = call.events.iter().map(|e| e.name).collect();
    assert_eq!(names, ["stream.commit"]);
    assert!(
        call.end >= call.events[0].time + 30,
        "ended at the stream's end"
    );
    assert_eq!(attempt.end, call.end);
    assert_eq!(
        attr(attempt, "resilient_llm.outcome"),
        Some(&Value::from("ok"))
    );
    assert_eq!(sent(&p), [attempt.span_id.to_string()]);
}

#[test]
fn a_stream_its_reader_leaves_hands_over_its_spans_when_dropped() {
    let p = FakePlatform::new();
    p.script("https://first.test", [unfinished_sse()]);
    let (c, seen) = client(&p);
    let mut stream = c.stream(traced(PARENT), CallOptions::default()).unwrap();
    block_on(&p, async { stream.next().await.expect("an item").unwrap() });
    assert!(seen.borrow().is_empty());
    drop(stream);
    let seen = seen.borrow();
    assert_eq!(seen.len(), 1, "handed over when dropped");
    assert_eq!(seen[0][0].name, "chat default");
    assert_eq!(seen[0][0].status, Status::Unset, "leaving is not an error");
}

#[test]
fn an_untraced_or_unsampled_call_hands_over_nothing() {
    let p = FakePlatform::new();
    p.script(
        "https://first.test",
        [reply(200).body(ok("m1")), reply(200).body(ok("m1"))],
    );
    let (c, seen) = client(&p);
    let plain = ChatRequest::new(vec![Message::user("hi")]);
    block_on(&p, c.chat(plain)).unwrap();
    block_on(&p, c.chat(traced(&PARENT.replace("-01", "-00")))).unwrap();
    assert!(seen.borrow().is_empty());
    let unsampled = p.requests()[1]
        .headers
        .get("traceparent")
        .unwrap()
        .to_string();
    assert!(unsampled.ends_with("-00"), "{unsampled}");
}

// A tracer that picks span ids itself (`ClientBuilder::live_spans`): the
// call's span is the caller's, each attempt's is the tracer's (its id in the
// attempt's `traceparent`), a stream left before its end closes its spans,
// and a call dropped before its end (aborted) is released unclosed.

#[derive(Default)]
struct Tracer {
    opened: RefCell<Vec<(SpanId, SpanId, UnixMillis)>>,
    closed: RefCell<Vec<Vec<Span>>>,
    held: RefCell<Vec<SpanId>>,
    released: RefCell<Vec<SpanId>>,
}

impl LiveSpans for Tracer {
    fn hold(&self, trace: &TraceParent) {
        self.held.borrow_mut().push(trace.parent_id);
    }
    fn open(&self, trace: &TraceParent, start: UnixMillis) -> Option<SpanId> {
        let mut opened = self.opened.borrow_mut();
        let id = SpanId::from(0x1000 + opened.len() as u64);
        opened.push((trace.parent_id, id, start));
        Some(id)
    }
    fn close(&self, spans: Vec<Span>) {
        self.closed.borrow_mut().push(spans);
    }
    fn release(&self, trace: &TraceParent) {
        self.released.borrow_mut().push(trace.parent_id);
    }
}

fn live(p: &FakePlatform, tracer: &Rc<Tracer>) -> Client<FakePlatform> {
    builder(p)
        .live_spans(Rc::clone(tracer) as Rc<dyn LiveSpans>)
        .build()
}

#[test]
fn the_callers_span_is_the_calls_and_the_tracer_opens_each_attempts() {
    let p = FakePlatform::new();
    p.script("https://first.test", [reply(503)]);
    p.script("https://second.test", [reply(200).body(ok("m2"))]);
    let tracer = Rc::new(Tracer::default());
    let c = live(&p, &tracer);
    block_on(&p, c.chat(traced(PARENT))).expect("the second answers");

    let call = SpanId::from_hex("b7ad6b7169203331").unwrap();
    let opened = tracer.opened.borrow();
    assert_eq!(opened.len(), 2);
    assert!(opened.iter().all(|(parent, _, _)| *parent == call));
    let ids: Vec<String> = opened.iter().map(|(_, id, _)| id.to_string()).collect();
    assert_eq!(
        sent(&p),
        ids,
        "each attempt names the span its tracer opened"
    );

    let closed = tracer.closed.borrow();
    assert_eq!(closed.len(), 1);
    let spans = &closed[0];
    assert_eq!(spans[0].span_id, call, "the call's span is the caller's");
    assert_eq!(spans[0].name, "chat default");
    let attempts: Vec<String> = spans[1..].iter().map(|s| s.span_id.to_string()).collect();
    assert_eq!(attempts, ids);
    assert!(spans[1..].iter().all(|s| s.parent_id == call));
    assert_eq!(*tracer.held.borrow(), [call]);
    assert!(tracer.released.borrow().is_empty(), "closed, not released");
}

#[test]
fn a_stream_left_before_its_end_closes_an_aborted_call_releases() {
    let p = FakePlatform::new();
    p.script("https://first.test", [unfinished_sse(), hang()]);
    let tracer = Rc::new(Tracer::default());
    let c = live(&p, &tracer);
    let call = SpanId::from_hex("b7ad6b7169203331").unwrap();

    let mut stream = c.stream(traced(PARENT), CallOptions::default()).unwrap();
    block_on(&p, async {
        stream.next().await.expect("a first item").unwrap()
    });
    assert!(tracer.closed.borrow().is_empty(), "open while it is read");
    drop(stream);
    let closed = tracer.closed.borrow().clone();
    assert_eq!(closed.len(), 1, "the reader left: its spans end");
    assert_eq!(closed[0][0].span_id, call);
    assert!(tracer.released.borrow().is_empty());

    // A whole answer dropped before it came (a caller's abort).
    let pending = c.chat(traced(PARENT)).now_or_never();
    assert!(pending.is_none(), "the first provider hangs");
    assert_eq!(tracer.closed.borrow().len(), 1);
    assert_eq!(
        *tracer.released.borrow(),
        [call],
        "released without a close"
    );
}

#[test]
fn an_unsampled_call_opens_nothing() {
    let p = FakePlatform::new();
    p.script("https://first.test", [reply(200).body(ok("m1"))]);
    let tracer = Rc::new(Tracer::default());
    let c = live(&p, &tracer);
    block_on(&p, c.chat(traced(&PARENT.replace("-01", "-00")))).unwrap();
    assert!(tracer.opened.borrow().is_empty());
    assert!(tracer.held.borrow().is_empty());
    assert!(tracer.closed.borrow().is_empty());
}
