//! The global `fetch` with an `AbortController` per request, and the
//! response body as a stream of chunks from its `ReadableStream` reader.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_core::Stream;
use js_sys::{Array, Promise, Reflect, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::{AbortController, AbortSignal, ReadableStreamDefaultReader, RequestInit, Response};

use crate::platform::{Body, Headers, HttpRequest, HttpResponse, TransportError};

#[wasm_bindgen]
extern "C" {
    /// The global `fetch` (window, workers, Node ≥ 18, workerd). `catch`:
    /// some hosts throw synchronously instead of rejecting.
    #[wasm_bindgen(catch, js_name = fetch)]
    fn global_fetch(url: &str, init: &RequestInit) -> Result<Promise, JsValue>;
}

/// An `AbortController` that aborts when dropped, unless disarmed. Hand its
/// [`signal`](AbortOnDrop::signal) to whatever should stop when the Rust side
/// stops waiting.
#[derive(Debug)]
pub struct AbortOnDrop {
    controller: Option<AbortController>,
}

impl AbortOnDrop {
    /// A fresh controller.
    pub fn new() -> Result<Self, TransportError> {
        let controller =
            AbortController::new().map_err(|e| TransportError::from_message(error_message(&e)))?;
        Ok(AbortOnDrop {
            controller: Some(controller),
        })
    }

    /// The signal to pass on.
    pub fn signal(&self) -> Option<AbortSignal> {
        self.controller.as_ref().map(AbortController::signal)
    }

    /// The work finished: dropping no longer aborts.
    pub fn disarm(&mut self) {
        self.controller = None;
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
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
            Some(code) if !crate::text::contains(&text, &code) => {
                parts.push(format!("{text} ({code})"))
            }
            _ => parts.push(text),
        }
        current = Reflect::get(&current, &JsValue::from_str("cause")).unwrap_or(JsValue::UNDEFINED);
    }
    if parts.is_empty() {
        "unknown error".to_string()
    } else {
        crate::text::join(&parts, ": ")
    }
}

fn transport(e: &JsValue) -> TransportError {
    TransportError::from_message(error_message(e))
}

/// Sends `req` with the global `fetch`. Resolves once the status and headers
/// are in; the body streams afterwards. Dropping this future before then,
/// or the [`Body`] after, aborts the request.
pub async fn fetch(req: HttpRequest) -> Result<HttpResponse, TransportError> {
    let mut guard = AbortOnDrop::new()?;
    let headers = web_sys::Headers::new().map_err(|e| transport(&e))?;
    for (name, value) in req.headers.iter() {
        headers.append(name, value).map_err(|e| transport(&e))?;
    }
    let init = RequestInit::new();
    init.set_method(&req.method);
    init.set_headers(&headers);
    if !req.body.is_empty() {
        init.set_body(&Uint8Array::from(req.body.as_slice()));
    }
    init.set_signal(guard.signal().as_ref());

    let promise = global_fetch(&req.url, &init).map_err(|e| transport(&e))?;
    let resp: Response = JsFuture::from(promise)
        .await
        .map_err(|e| transport(&e))?
        .dyn_into()
        .map_err(|_| TransportError::from_message("fetch resolved to something not a Response"))?;

    let mut out = Headers::new();
    if let Ok(Some(entries)) = js_sys::try_iter(&resp.headers()) {
        for entry in entries.flatten() {
            let pair = Array::from(&entry);
            if let (Some(n), Some(v)) = (pair.get(0).as_string(), pair.get(1).as_string()) {
                out.append(&n, v);
            }
        }
    }
    let body = match resp.body() {
        Some(stream) => {
            let reader: ReadableStreamDefaultReader = stream.get_reader().unchecked_into();
            Body::stream(Chunks {
                reader,
                pending: None,
                guard,
            })
        }
        None => {
            guard.disarm();
            Body::full(Vec::new())
        }
    };
    Ok(HttpResponse {
        status: resp.status(),
        headers: out,
        body,
    })
}

/// A response body read through its `ReadableStream` reader. Dropping it
/// before the end aborts the request (its guard's controller), which also
/// errors the stream; a read still pending then rejects into a dropped
/// `JsFuture`, whose handlers were attached, so nothing goes unhandled.
struct Chunks {
    reader: ReadableStreamDefaultReader,
    pending: Option<JsFuture>,
    guard: AbortOnDrop,
}

impl Stream for Chunks {
    type Item = Result<Vec<u8>, TransportError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if this.guard.controller.is_none() && this.pending.is_none() {
                return Poll::Ready(None); // ended (or failed) earlier
            }
            let read = this
                .pending
                .get_or_insert_with(|| JsFuture::from(this.reader.read()));
            let result = match Pin::new(read).poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(r) => r,
            };
            this.pending = None;
            let result = match result {
                Ok(r) => r,
                Err(e) => {
                    this.guard.disarm();
                    return Poll::Ready(Some(Err(transport(&e))));
                }
            };
            let done = Reflect::get(&result, &JsValue::from_str("done"))
                .map(|d| d.is_truthy())
                .unwrap_or(true);
            if done {
                this.guard.disarm();
                return Poll::Ready(None);
            }
            let value = Reflect::get(&result, &JsValue::from_str("value")).unwrap_or_default();
            match value.dyn_into::<Uint8Array>() {
                Ok(bytes) if bytes.length() > 0 => return Poll::Ready(Some(Ok(bytes.to_vec()))),
                Ok(_) => continue, // an empty chunk: read on
                Err(_) => {
                    this.guard.disarm();
                    return Poll::Ready(Some(Err(TransportError::from_message(
                        "response body chunk is not a Uint8Array",
                    ))));
                }
            }
        }
    }
}
