//! The edge benchmark's Rust/wasm reference (target (f) of `scripts/bench-worker.mjs`).
//!
//! `POST /v1/chat/completions` does what the JS reference (e) does: parse the request to
//! route it, a new upstream request with its own headers under an attempt timer, the answer
//! read and checked, a new response, one JSON log line; no retry, breaker or translation.
//! Its I/O is done as resilient-llm's Worker does it (`src/worker/mod.rs`, `src/web/`): the
//! raw `web_sys` request and response, bodies in one `arrayBuffer()`, the global `fetch`,
//! headers as one `JSON.parse`d record, an `AbortController` aborted by a `setTimeout` whose
//! callback is the controller's own `abort` bound to it (no Rust closure), cleared after,
//! `console.log`, JSON by `serde_json`.
//!
//! With `"stream": true`, the upstream request asks for a stream and the answer is passed
//! on as it comes, with the least a gateway must do to a stream: the upstream body read
//! through its `ReadableStream` reader chunk by chunk (as `src/web/fetch.rs` reads it), cut
//! into SSE events, each event's data parsed as JSON (a gateway must see each event to know
//! whether the answer finished), the complete events forwarded in a `ReadableStream` made by
//! `worker::Response::from_stream` (as `src/worker/mod.rs` makes it), one log line at the end.
//!
//! Any other path is the floor in Rust: the request passed to the upstream as is.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context as TaskContext, Poll};

use futures_core::Stream;
use js_sys::{Promise, Reflect, Uint8Array, JSON};
use serde_json::Value;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::{AbortController, ReadableStreamDefaultReader, RequestInit, ResponseInit};
use worker::{event, Context, Env, Result};

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(catch, js_name = fetch)]
    fn global_fetch(url: &str, init: &RequestInit) -> std::result::Result<Promise, JsValue>;

    #[wasm_bindgen(js_name = setTimeout)]
    fn set_timeout(handler: &js_sys::Function, ms: f64) -> JsValue;

    #[wasm_bindgen(js_name = clearTimeout)]
    fn clear_timeout(handle: &JsValue);

    /// `AbortController.prototype.abort`, read once per thread.
    #[wasm_bindgen(thread_local_v2, js_namespace = ["AbortController", "prototype"], js_name = abort)]
    static ABORT: js_sys::Function;
}

struct Upstream {
    url: String,
    key: String,
}

thread_local! {
    static UPSTREAM: std::cell::OnceCell<Rc<Upstream>> = const { std::cell::OnceCell::new() };
}

fn upstream(env: &Env) -> Rc<Upstream> {
    let var = |name: &str| env.var(name).map(|v| v.to_string()).unwrap_or_default();
    UPSTREAM.with(|u| {
        u.get_or_init(|| {
            Rc::new(Upstream {
                url: var("UPSTREAM"),
                key: var("KEY"),
            })
        })
        .clone()
    })
}

/// As in resilient-llm: the futures executor is created with `queueMicrotask` hidden, so it
/// schedules with a promise's `then` (cheaper in workerd).
#[event(start)]
fn start() {
    let global = js_sys::global();
    let key = JsValue::from_str("queueMicrotask");
    let original = Reflect::get(&global, &key).unwrap_or(JsValue::UNDEFINED);
    if Reflect::set(&global, &key, &JsValue::UNDEFINED).unwrap_or(false) {
        wasm_bindgen_futures::spawn_local(async {});
        let _ = Reflect::set(&global, &key, &original);
    }
}

#[event(fetch)]
async fn fetch(req: web_sys::Request, env: Env, _ctx: Context) -> Result<web_sys::Response> {
    let up = upstream(&env);
    if req.url().ends_with("/v1/chat/completions") {
        gateway_io(req, &up).await
    } else {
        floor(req, &up).await
    }
}

/// The floor: `fetch(UPSTREAM, { method, headers, body })`, its response returned as is.
async fn floor(req: web_sys::Request, up: &Upstream) -> Result<web_sys::Response> {
    let init = RequestInit::new();
    init.set_method(&req.method());
    init.set_headers(&req.headers());
    if let Some(body) = req.body() {
        init.set_body(&body);
    }
    Ok(JsFuture::from(global_fetch(&up.url, &init)?)
        .await?
        .unchecked_into())
}

/// The I/O a gateway must do, and nothing else.
async fn gateway_io(req: web_sys::Request, up: &Upstream) -> Result<web_sys::Response> {
    let started = js_sys::Date::now();
    let request = match bytes(req.array_buffer()).await {
        Ok(b) => serde_json::from_slice::<Value>(&b).ok(),
        Err(_) => None,
    };
    let Some(request) = request else {
        return error(400, "malformed JSON", "invalid_request_error");
    };
    let (Some(route), Some(messages)) = (
        request.get("model").and_then(Value::as_str),
        request.get("messages").filter(|m| m.is_array()),
    ) else {
        return error(
            400,
            "model and messages are required",
            "invalid_request_error",
        );
    };
    let mut body = serde_json::Map::new();
    body.insert("model".into(), "bench-model".into());
    body.insert("messages".into(), messages.clone());
    if let Some(max) = request.get("max_tokens") {
        body.insert("max_completion_tokens".into(), max.clone());
    }
    let stream = request.get("stream") == Some(&Value::Bool(true));
    if stream {
        body.insert("stream".into(), true.into());
    }
    let body = serde_json::to_vec(&body).unwrap_or_default();

    let timer = Timer::new(30_000.0)?;
    let init = RequestInit::new();
    init.set_method("POST");
    let auth = format!("Bearer {}", up.key);
    init.set_headers(&headers(&[
        ("content-type", "application/json"),
        ("authorization", &auth),
    ]));
    init.set_body(&Uint8Array::from(body.as_slice()));
    init.set_signal(Some(&timer.controller.signal()));
    let resp: web_sys::Response = JsFuture::from(global_fetch(&up.url, &init)?)
        .await?
        .dyn_into()?;
    let status = resp.status();
    if stream {
        return match resp.body() {
            Some(body) if status == 200 => forward(body, timer, route.to_string(), started),
            _ => error(502, "upstream failed", "api_error"),
        };
    }
    let answer = bytes(resp.array_buffer()).await?;
    drop(timer);
    let answer = serde_json::from_slice::<Value>(&answer).unwrap_or(Value::Null);
    if status != 200
        || answer.get("error").is_some_and(|e| !e.is_null())
        || !answer.get("choices").is_some_and(Value::is_array)
    {
        return error(502, "upstream failed", "api_error");
    }
    let line = serde_json::json!({
        "level": "info", "msg": "request", "route": route, "servedBy": "healthy/bench-model",
        "attempts": 1, "status": 200, "latencyMs": js_sys::Date::now() - started,
    });
    web_sys::console::log_1(&JsValue::from_str(&line.to_string()));
    respond(
        200,
        &[
            ("content-type", "application/json"),
            ("x-served-by", "healthy/bench-model"),
            ("x-attempts", "1"),
        ],
        serde_json::to_vec(&answer).unwrap_or_default(),
    )
}

/// The upstream event stream passed on as a response, event by event.
fn forward(
    body: web_sys::ReadableStream,
    timer: Timer,
    route: String,
    started: f64,
) -> Result<web_sys::Response> {
    let events = Events {
        reader: Some(body.get_reader().unchecked_into()),
        pending: None,
        buffer: Vec::new(),
        events: 0,
        finished: false,
        timer: Some(timer),
        route,
        started,
    };
    let response = worker::Response::from_stream(events)?;
    let worker::ResponseBody::Stream(stream) = response.body() else {
        return Err(worker::Error::RustError("a stream without a stream".into()));
    };
    let init = ResponseInit::new();
    init.set_status(200);
    init.set_headers(&headers(&[
        ("content-type", "text/event-stream"),
        ("x-served-by", "healthy/bench-model"),
        ("x-attempts", "1"),
    ]));
    Ok(web_sys::Response::new_with_opt_readable_stream_and_init(
        Some(stream),
        &init,
    )?)
}

/// The upstream body read chunk by chunk; each poll yields the complete events received.
struct Events {
    reader: Option<ReadableStreamDefaultReader>,
    pending: Option<JsFuture>,
    buffer: Vec<u8>,
    events: u32,
    finished: bool,
    timer: Option<Timer>,
    route: String,
    started: f64,
}

impl Events {
    /// The complete events at the front of the buffer, each one's data parsed; they are
    /// taken out of the buffer and returned as they came.
    fn complete(&mut self) -> std::result::Result<Vec<u8>, worker::Error> {
        let Some(end) = self.buffer.windows(2).rposition(|w| w == b"\n\n") else {
            return Ok(Vec::new());
        };
        let rest = self.buffer.split_off(end + 2);
        let out = std::mem::replace(&mut self.buffer, rest);
        for line in out
            .split(|&b| b == b'\n')
            .filter(|l| l.starts_with(b"data: "))
        {
            let data = &line[6..];
            if data == b"[DONE]" {
                self.finished = true;
            } else {
                serde_json::from_slice::<Value>(data)
                    .map_err(|e| worker::Error::RustError(format!("upstream event: {e}")))?;
                self.events += 1;
            }
        }
        Ok(out)
    }

    fn end(&mut self) {
        self.reader = None;
        self.timer = None;
        let line = serde_json::json!({
            "level": "info", "msg": "request", "route": self.route, "servedBy": "healthy/bench-model",
            "attempts": 1, "status": 200, "events": self.events, "finished": self.finished,
            "latencyMs": js_sys::Date::now() - self.started,
        });
        web_sys::console::log_1(&JsValue::from_str(&line.to_string()));
    }
}

impl Stream for Events {
    type Item = std::result::Result<Vec<u8>, worker::Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            let Some(reader) = &this.reader else {
                return Poll::Ready(None);
            };
            let read = this
                .pending
                .get_or_insert_with(|| JsFuture::from(reader.read()));
            let result = match Pin::new(read).poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(r) => r,
            };
            this.pending = None;
            let result = match result {
                Ok(r) => r,
                Err(e) => {
                    this.end();
                    return Poll::Ready(Some(Err(e.into())));
                }
            };
            let done = Reflect::get(&result, &JsValue::from_str("done"))
                .map(|d| d.is_truthy())
                .unwrap_or(true);
            if done {
                this.end();
                return Poll::Ready(None);
            }
            let value = Reflect::get(&result, &JsValue::from_str("value")).unwrap_or_default();
            let Ok(chunk) = value.dyn_into::<Uint8Array>() else {
                this.end();
                return Poll::Ready(Some(Err(worker::Error::RustError(
                    "a body chunk that is not a Uint8Array".into(),
                ))));
            };
            this.buffer.extend_from_slice(&chunk.to_vec());
            match this.complete() {
                Ok(out) if out.is_empty() => continue,
                Ok(out) => return Poll::Ready(Some(Ok(out))),
                Err(e) => {
                    this.end();
                    return Poll::Ready(Some(Err(e)));
                }
            }
        }
    }
}

/// An `AbortController` aborted by a `setTimeout` whose callback is the controller's `abort`
/// bound to it, as resilient-llm's attempt timer (`src/web/fetch.rs`): a host function, so
/// firing it runs no wasm and clearing it leaves no closure to free. Cleared on drop.
struct Timer {
    controller: AbortController,
    handle: JsValue,
}

impl Timer {
    fn new(ms: f64) -> Result<Timer> {
        let controller = AbortController::new()?;
        let abort = ABORT.with(|abort| abort.bind0(&controller));
        let handle = set_timeout(&abort, ms);
        Ok(Timer { controller, handle })
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        clear_timeout(&self.handle);
    }
}

async fn bytes(
    promise: std::result::Result<Promise, JsValue>,
) -> std::result::Result<Vec<u8>, JsValue> {
    let buffer = JsFuture::from(promise?).await?;
    Ok(Uint8Array::new(&buffer).to_vec())
}

/// Headers as a `{name: value}` record in one `JSON.parse`, as resilient-llm passes them.
fn headers(pairs: &[(&str, &str)]) -> JsValue {
    let record: serde_json::Map<String, Value> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), Value::from(*v)))
        .collect();
    JSON::parse(&Value::Object(record).to_string()).unwrap_or(JsValue::UNDEFINED)
}

fn respond(status: u16, pairs: &[(&str, &str)], mut body: Vec<u8>) -> Result<web_sys::Response> {
    let init = ResponseInit::new();
    init.set_status(status);
    init.set_headers(&headers(pairs));
    Ok(web_sys::Response::new_with_opt_u8_array_and_init(
        Some(&mut body),
        &init,
    )?)
}

fn error(status: u16, message: &str, kind: &str) -> Result<web_sys::Response> {
    let body = serde_json::json!({ "error": { "message": message, "type": kind } });
    respond(
        status,
        &[("content-type", "application/json")],
        body.to_string().into_bytes(),
    )
}
