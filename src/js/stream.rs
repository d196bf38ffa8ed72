//! `client.stream(request)`: a Rust [`ChatStream`] behind a handle whose
//! `next()` returns a Promise, wrapped by `stream.js` as an async iterator
//! with the stream helpers (`textStream`, `finalResponse`, …).

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::Promise;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;
use web_sys::AbortSignal;

use super::errors::{self, Exhaustion};
use super::judged::Judged;
use super::spans::Begun;
use super::Aborted;
use crate::chat::Delta;
use crate::engine::client::Client;
use crate::engine::store::MemoryStore;
use crate::engine::timeout::timeout;
use crate::error::Error;
use crate::web::WebPlatform;

type Stream = crate::engine::stream::ChatStream<Rc<Client<WebPlatform>>, WebPlatform, MemoryStore>;

/// Where a stream's events come from.
pub(crate) enum Source {
    /// The provider's deltas as they arrive.
    Live(Box<Stream>),
    /// The whole answer, once the route's validators accepted it.
    Judged(Box<Judged>),
}

impl Source {
    async fn next(&mut self) -> Option<Result<Delta, Error>> {
        match self {
            Source::Live(s) => s.next().await,
            Source::Judged(j) => j.next().await,
        }
    }
}

/// Where the stream is between calls to `next()`.
enum Slot {
    /// Waiting for the next `next()`.
    Ready(Source),
    /// A `next()` is in flight and holds the stream.
    Busy,
    /// Finished, failed or aborted; dropping the stream aborted any request.
    Ended,
}

#[wasm_bindgen(module = "/src/js/stream.js")]
extern "C" {
    /// Wraps a stream handle as the object `client.stream()` returns.
    #[wasm_bindgen(js_name = __streamResult)]
    fn stream_result(handle: JsValue, options: &JsValue) -> JsValue;
}

/// What `client.stream()` returns for `handle`, with `options.onFinish`.
pub(crate) fn iterable(handle: JsValue, options: &JsValue) -> JsValue {
    stream_result(handle, options)
}

/// The handle behind one `client.stream()` iterator (internal: iterate
/// the stream instead). Freeing it (the iterator's `return()`) drops the
/// stream, which aborts the upstream request.
#[wasm_bindgen]
pub struct StreamHandle {
    slot: Rc<RefCell<Slot>>,
    signal: Option<AbortSignal>,
    exhaustion: Exhaustion,
    /// The call's span (`options.tracing`), released with the handle.
    _span: Option<Begun>,
}

impl StreamHandle {
    pub(crate) fn new(source: Source, signal: Option<AbortSignal>, exhaustion: Exhaustion) -> Self {
        StreamHandle {
            slot: Rc::new(RefCell::new(Slot::Ready(source))),
            signal,
            exhaustion,
            _span: None,
        }
    }

    /// Holds the call's span (`options.tracing`) as long as the stream.
    pub(crate) fn holding(self, span: Option<Begun>) -> Self {
        StreamHandle {
            _span: span,
            ..self
        }
    }
}

#[wasm_bindgen]
impl StreamHandle {
    /// The next event, `undefined` at the end; rejects with an `LLMError`
    /// (an `AbortError` when the signal fires).
    #[wasm_bindgen(unchecked_return_type = "Promise<StreamEvent | undefined>")]
    pub fn next(&self) -> Promise {
        let slot = Rc::clone(&self.slot);
        let signal = self.signal.clone();
        let exhaustion = self.exhaustion;
        future_to_promise(async move {
            let taken = std::mem::replace(&mut *slot.borrow_mut(), Slot::Busy);
            let mut stream = match taken {
                Slot::Ready(s) => s,
                Slot::Busy => {
                    return Err(errors::client_error(
                        "invalid_state",
                        400,
                        "next() called before the previous next() settled",
                    ))
                }
                Slot::Ended => {
                    *slot.borrow_mut() = Slot::Ended;
                    return Ok(JsValue::UNDEFINED);
                }
            };
            let item = match &signal {
                None => stream.next().await,
                Some(signal) if signal.aborted() => {
                    *slot.borrow_mut() = Slot::Ended;
                    return Err(errors::abort_error(&signal.reason()));
                }
                Some(signal) => match timeout(Aborted::new(signal), stream.next()).await {
                    Ok(item) => item,
                    Err(_) => {
                        *slot.borrow_mut() = Slot::Ended; // drops the stream: aborts upstream
                        return Err(errors::abort_error(&signal.reason()));
                    }
                },
            };
            match item {
                Some(Ok(Delta::Done)) | None => {
                    *slot.borrow_mut() = Slot::Ended;
                    Ok(JsValue::UNDEFINED)
                }
                Some(Ok(delta)) => {
                    *slot.borrow_mut() = Slot::Ready(stream);
                    Ok(errors::to_js(&delta))
                }
                Some(Err(e)) => {
                    *slot.borrow_mut() = Slot::Ended;
                    Err(errors::call_error(&e, exhaustion))
                }
            }
        })
    }
}
