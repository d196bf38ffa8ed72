//! `client.fetch` / `createFetch(config)`: a `fetch`-compatible function
//! that answers OpenAI Chat Completions and Anthropic Messages requests in
//! process with the gateway's own request handling (the code the Worker
//! runs: routing, failover, breakers, format translation, streaming), over
//! the client's providers. An official SDK given it as its `fetch` gains
//! failover without a proxy; the URL's host is never contacted.

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::{Function, Promise, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::{future_to_promise, JsFuture};

use super::spans::{Begun, JsTracer};
use super::Aborted;
use crate::engine::store::MemoryStore;
use crate::engine::timeout::timeout;
use crate::gateway::{self, Inbound, Piece, PieceStream};
use crate::platform::{Body, Headers};
use crate::trace::TraceParent;
use crate::web::{self, WebPlatform};

/// The gateway over a `ResilientClient`'s client, without gateway auth:
/// the caller is this process.
pub(crate) type Gateway = gateway::Gateway<WebPlatform, MemoryStore>;

#[wasm_bindgen(module = "/src/js/fetch.js")]
extern "C" {
    /// The `fetch` function over a [`Server`].
    #[wasm_bindgen(js_name = __makeFetch)]
    pub(crate) fn make_fetch(server: JsValue) -> Function;
}

/// What the function from `__makeFetch` calls: one `serve(request)` per
/// `fetch`. Internal to the package.
#[wasm_bindgen(skip_typescript)]
pub struct Server {
    gateway: Rc<Gateway>,
    /// `options.tracing`, which opens each request's call span.
    tracer: Option<Rc<JsTracer>>,
}

impl Server {
    pub(crate) fn new(gateway: Rc<Gateway>, tracer: Option<Rc<JsTracer>>) -> Self {
        Server { gateway, tracer }
    }

    /// Opens the call span of a request with `headers` under the
    /// `traceparent` its SDK sent (or the app's active span) and has the
    /// request carry it instead.
    fn begin_span(&self, headers: &mut Headers) -> Option<Begun> {
        let tracer = self.tracer.as_ref()?;
        let begun = tracer.begin(TraceParent::from_headers(headers).as_ref())?;
        headers.insert("traceparent", begun.trace.header_for(begun.trace.parent_id));
        // Its tracestate is the one it inherited from the SDK's, if any.
        if let Some(state) = begun.trace.state_header() {
            headers.insert("tracestate", state);
        }
        Some(begun)
    }
}

#[wasm_bindgen]
impl Server {
    /// Answers a `Request`: resolves to `{ status, headers, body }` with
    /// `body` a `Uint8Array`, or `stream` a [`ResponseBody`] for server-sent
    /// events. Rejects with the request signal's reason when it aborts
    /// before the answer starts, as `fetch` does.
    pub fn serve(&self, request: web_sys::Request) -> Promise {
        let gateway = Rc::clone(&self.gateway);
        let mut headers = web::headers_named(&request.headers(), gateway::REQUEST_HEADERS);
        let span = self.begin_span(&mut headers);
        future_to_promise(async move {
            // Held until the answer's head: a streamed answer's is the engine's.
            let _span = span;
            let signal = request.signal();
            if signal.aborted() {
                return Err(signal.reason());
            }
            let served = async {
                let path = gateway::url_path(&request.url()).to_string();
                let body = read_body(&request).await?;
                let inbound = Inbound {
                    method: request.method(),
                    path,
                    headers,
                    body: Body::full(body),
                };
                Ok::<_, JsValue>(gateway.handle(inbound).await)
            };
            let mut out = match timeout(Aborted::new(&signal), served).await {
                Ok(out) => out?,
                Err(_) => return Err(signal.reason()),
            };
            let answer = js_sys::Object::new();
            let set = |k: &str, v: &JsValue| js_sys::Reflect::set(&answer, &k.into(), v);
            set("status", &out.status.into())?;
            set("headers", &web::headers_to_js(&out.headers))?;
            match out.stream.take() {
                Some(stream) => set("stream", &ResponseBody::new(stream).into())?,
                None => set("body", &Uint8Array::from(out.body.as_slice()).into())?,
            };
            Ok(answer.into())
        })
    }
}

/// The request's body, whole (an SDK's request is a JSON document).
async fn read_body(request: &web_sys::Request) -> Result<Vec<u8>, JsValue> {
    if request.body().is_none() {
        return Ok(Vec::new());
    }
    let buffer = JsFuture::from(request.array_buffer()?).await?;
    Ok(Uint8Array::new(&buffer).to_vec())
}

/// A streamed answer's body, pulled chunk by chunk by a `ReadableStream`.
/// Freeing it (the stream cancelled) drops the gateway's stream, which
/// aborts the upstream request.
#[wasm_bindgen(skip_typescript)]
pub struct ResponseBody {
    stream: Rc<RefCell<Option<PieceStream>>>,
}

impl ResponseBody {
    fn new(stream: PieceStream) -> Self {
        ResponseBody {
            stream: Rc::new(RefCell::new(Some(stream))),
        }
    }
}

#[wasm_bindgen]
impl ResponseBody {
    /// The next bytes, `undefined` at the end. The log lines the Worker
    /// writes are not for an in-process caller: skipped.
    pub fn next(&self) -> Promise {
        let slot = Rc::clone(&self.stream);
        future_to_promise(async move {
            let Some(mut stream) = slot.borrow_mut().take() else {
                return Ok(JsValue::UNDEFINED);
            };
            loop {
                let piece = std::future::poll_fn(|cx| stream.as_mut().poll_next(cx)).await;
                match piece {
                    Some(Piece::Bytes(bytes)) => {
                        *slot.borrow_mut() = Some(stream);
                        return Ok(Uint8Array::from(bytes.as_slice()).into());
                    }
                    Some(Piece::Log(_)) => continue,
                    None => return Ok(JsValue::UNDEFINED),
                }
            }
        })
    }
}
