//! `ClientBuilder::live_spans`, a tracer that picks span ids itself, on the
//! fake platform: the call's span is the caller's, each attempt's is the
//! tracer's (its id in the attempt's `traceparent`), a stream left before
//! its end closes its spans, and a call dropped before its end (aborted) is
//! released unclosed.

use std::cell::RefCell;
use std::rc::Rc;

use futures_util::FutureExt;
use opentelemetry::trace::SpanId;
use serde_json::json;

use resilient_llm::testing::{block_on, hang, reply, FakePlatform};
use resilient_llm::trace::{Span, TraceParent};
use resilient_llm::{
    CallOptions, ChatRequest, Client, Config, Headers, LiveSpans, Message, UnixMillis,
};

const PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

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

fn client(p: &FakePlatform, tracer: &Rc<Tracer>) -> Client<FakePlatform> {
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
        .live_spans(Rc::clone(tracer) as Rc<dyn LiveSpans>)
        .build()
}

fn traced(traceparent: &str) -> ChatRequest {
    let headers: Headers = [("traceparent", traceparent)].into_iter().collect();
    let mut req = ChatRequest::new(vec![Message::user("hi")]);
    req.trace = TraceParent::from_headers(&headers);
    req
}

fn ok() -> String {
    json!({ "id": "c", "model": "m2", "choices": [{ "index": 0, "finish_reason": "stop",
            "message": { "role": "assistant", "content": "fine" } }] })
    .to_string()
}

/// The span id each provider request's `traceparent` named, in order.
fn sent(p: &FakePlatform) -> Vec<String> {
    let ids = p.requests().into_iter().map(|r| {
        let tp = r.headers.get("traceparent").expect("a traceparent");
        tp.split('-').nth(2).unwrap().to_string()
    });
    ids.collect()
}

#[test]
fn the_callers_span_is_the_calls_and_the_tracer_opens_each_attempts() {
    let p = FakePlatform::new();
    p.script("https://first.test", [reply(503)]);
    p.script("https://second.test", [reply(200).body(ok())]);
    let tracer = Rc::new(Tracer::default());
    let c = client(&p, &tracer);
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
    let chunk = |v: serde_json::Value| format!("data: {v}\n\n");
    let events = vec![
        chunk(json!({ "id": "c1", "model": "m1", "choices": [{ "index": 0,
              "delta": { "role": "assistant", "content": "hi" }, "finish_reason": null }] })),
        chunk(json!({ "id": "c1", "model": "m1", "choices": [{ "index": 0,
              "delta": { "content": " there" }, "finish_reason": null }] })),
    ];
    let sse = reply(200)
        .header("content-type", "text/event-stream")
        .chunks(events)
        .chunk_delay(std::time::Duration::from_millis(30));
    p.script("https://first.test", [sse, hang()]);
    let tracer = Rc::new(Tracer::default());
    let c = client(&p, &tracer);
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
    p.script("https://first.test", [reply(200).body(ok())]);
    let tracer = Rc::new(Tracer::default());
    let c = client(&p, &tracer);
    block_on(&p, c.chat(traced(&PARENT.replace("-01", "-00")))).unwrap();
    assert!(tracer.opened.borrow().is_empty());
    assert!(tracer.held.borrow().is_empty());
    assert!(tracer.closed.borrow().is_empty());
}
