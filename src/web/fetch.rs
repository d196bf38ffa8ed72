//! The global `fetch` with an `AbortController` per request, and the
//! response body read whole (`arrayBuffer()`) or as a stream of chunks from
//! its `ReadableStream` reader. A request's time limit is a `setTimeout`
//! whose callback is the controller's own `abort`, bound to it.

use std::time::Duration;

use js_sys::{Function, Promise, Reflect, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::{AbortController, AbortSignal, ReadableStream, RequestInit, Response};

use super::headers::{headers_from_js, headers_to_js};
use super::reader::Chunks;
use super::timer::Timer;
use crate::platform::{
    millis, Body, BodySource, ChunkStream, HttpRequest, HttpResponse, TransportError,
    TransportErrorKind, WholeRead,
};

#[wasm_bindgen]
extern "C" {
    /// The global `fetch` (window, workers, Node ≥ 18, workerd). `catch`:
    /// some hosts throw synchronously instead of rejecting.
    #[wasm_bindgen(catch, js_name = fetch)]
    fn global_fetch(url: &str, init: &RequestInit) -> Result<Promise, JsValue>;

    /// `AbortController.prototype.abort`, read once per thread.
    #[wasm_bindgen(thread_local_v2, js_namespace = ["AbortController", "prototype"], js_name = abort)]
    static ABORT: Function;

}

/// An `AbortController` that aborts when dropped, unless disarmed, and
/// optionally once a time limit passes. Hand its
/// [`signal`](AbortOnDrop::signal) to whatever should stop when the Rust side
/// stops waiting.
#[derive(Debug)]
pub struct AbortOnDrop {
    controller: Option<AbortController>,
    limit: Option<(Timer, Duration)>,
}

impl AbortOnDrop {
    /// A fresh controller.
    pub fn new() -> Result<Self, TransportError> {
        let controller =
            AbortController::new().map_err(|e| TransportError::from_message(error_message(&e)))?;
        Ok(AbortOnDrop {
            controller: Some(controller),
            limit: None,
        })
    }

    /// The signal to pass on.
    pub fn signal(&self) -> Option<AbortSignal> {
        self.controller.as_ref().map(AbortController::signal)
    }

    /// Aborts the controller once `limit` has passed, unless disarmed or
    /// dropped first. The timer calls the controller's `abort` bound to it:
    /// a host function, so firing it runs no wasm, and clearing it leaves no
    /// Rust closure to free.
    pub fn abort_after(&mut self, limit: Duration) {
        let Some(controller) = &self.controller else {
            return;
        };
        let abort = ABORT.with(|abort| abort.bind0(controller));
        self.limit = Some((Timer::call_after(&abort, limit), limit));
    }

    /// What a rejection `e` of the guarded work means: the time limit of
    /// [`abort_after`](AbortOnDrop::abort_after) passing (the signal aborted
    /// while armed: only the timer aborts it then), or what the host says.
    pub fn error(&self, e: &JsValue) -> TransportError {
        match (&self.controller, &self.limit) {
            (Some(c), Some((_, limit))) if c.signal().aborted() => TransportError::new(
                TransportErrorKind::TimedOut,
                format!("no complete response within {} ms", millis(*limit)),
            ),
            _ => transport(e),
        }
    }

    /// The work finished: dropping no longer aborts, and the time limit's
    /// timer is cleared.
    pub fn disarm(&mut self) {
        self.limit = None;
        self.controller = None;
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.limit = None;
        if let Some(c) = self.controller.take() {
            c.abort();
        }
    }
}

/// A human-readable message from a thrown JS value: `name: message`, with
/// the `cause` chain Node's fetch puts the real reason in
/// (`TypeError: fetch failed: connect ECONNREFUSED 127.0.0.1:9`).
pub fn error_message(value: &JsValue) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut current = value.clone();
    // Bounded: cause chains can be cyclic.
    for _ in 0..4 {
        if current.is_undefined() || current.is_null() {
            break;
        }
        if let Some(s) = current.as_string() {
            parts.push(s);
            break;
        }
        let get = |key: &str| {
            Reflect::get(&current, &JsValue::from_str(key))
                .ok()
                .and_then(|v| v.as_string())
                .filter(|s| !s.is_empty())
        };
        let text = match (get("name"), get("message")) {
            (Some(n), Some(m)) => format!("{n}: {m}"),
            (Some(n), None) => n,
            (None, Some(m)) => m,
            (None, None) => String::from(js_sys::JsString::from(current.clone())),
        };
        match get("code") {
            Some(code) if !text.contains(code.as_str()) => parts.push(format!("{text} ({code})")),
            _ => parts.push(text),
        }
        current = Reflect::get(&current, &JsValue::from_str("cause")).unwrap_or(JsValue::UNDEFINED);
    }
    if parts.is_empty() {
        "unknown error".to_string()
    } else {
        parts.join(": ")
    }
}

pub(super) fn transport(e: &JsValue) -> TransportError {
    TransportError::from_message(error_message(e))
}

/// Sends `req` with the global `fetch`. Resolves once the status and headers
/// are in; the body follows, read whole (`arrayBuffer()`) when its reader
/// asks for all of it and its declared length fits, else through the
/// stream's reader. Dropping this future before then, or the [`Body`]
/// after, aborts the request, and so does the request's time limit passing
/// (the wait, or the body's read, then fails as
/// [`TransportErrorKind::TimedOut`]).
pub(crate) async fn fetch(req: HttpRequest) -> Result<HttpResponse, TransportError> {
    let mut guard = AbortOnDrop::new()?;
    let init = RequestInit::new();
    init.set_method(&req.method);
    init.set_headers(&headers_to_js(&req.headers));
    if !req.body.is_empty() {
        init.set_body(&Uint8Array::from(req.body.as_slice()));
    }
    init.set_signal(guard.signal().as_ref());
    if let Some(limit) = req.timeout {
        guard.abort_after(limit);
    }

    let promise = global_fetch(&req.url, &init).map_err(|e| guard.error(&e))?;
    let resp: Response = JsFuture::from(promise)
        .await
        .map_err(|e| guard.error(&e))?
        .dyn_into()
        .map_err(|_| TransportError::from_message("fetch resolved to something not a Response"))?;

    let headers = headers_from_js(&resp.headers());
    // Only an identity-coded body's size is its declared length: the host
    // decodes gzip and brotli on the fly.
    let declared = headers
        .get("content-length")
        .filter(|_| {
            headers
                .get("content-encoding")
                .is_none_or(|e| e.trim() == "identity")
        })
        .and_then(|v| v.trim().parse::<u64>().ok());
    Ok(HttpResponse {
        status: resp.status(),
        headers,
        body: Body::source(ResponseBody {
            resp,
            guard,
            declared,
        }),
    })
}

/// A response body not read yet: whole or by chunks, as its reader asks.
struct ResponseBody {
    resp: Response,
    guard: AbortOnDrop,
    declared: Option<u64>,
}

impl BodySource for ResponseBody {
    fn whole(self: Box<Self>, limit: usize) -> Result<WholeRead, ChunkStream> {
        if self.declared.is_none_or(|n| n > limit as u64) {
            return Err(self.chunks());
        }
        let ResponseBody {
            resp, mut guard, ..
        } = *self;
        Ok(Box::pin(async move {
            let promise = resp.array_buffer().map_err(|e| guard.error(&e))?;
            // Dropped before it resolves: the guard aborts the request.
            let buffer = JsFuture::from(promise).await.map_err(|e| guard.error(&e))?;
            guard.disarm();
            Ok(Uint8Array::new(&buffer).to_vec())
        }))
    }

    fn chunks(self: Box<Self>) -> ChunkStream {
        let ResponseBody {
            resp, mut guard, ..
        } = *self;
        match resp.body() {
            Some(stream) => Box::pin(Chunks::new(stream, Some(guard))),
            None => {
                guard.disarm();
                Box::pin(Chunks::done())
            }
        }
    }
}

/// A `ReadableStream` of bytes (a request's or response's body) as a
/// [`Body`], read chunk by chunk through its reader.
pub fn stream_body(stream: ReadableStream) -> Body {
    Body::stream(Chunks::new(stream, None))
}
