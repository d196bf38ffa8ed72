//! `client.stream(request)`: a Rust [`ChatStream`] behind a handle whose
//! `next()` returns a Promise, wrapped by `errors.js` as an async iterator.

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::Promise;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;
use web_sys::AbortSignal;

use super::{errors, Aborted};
use crate::chat::Delta;
use crate::engine::client::Client;
use crate::engine::store::MemoryStore;
use crate::engine::timeout::timeout;
use crate::web::WebPlatform;

type Stream = crate::engine::stream::ChatStream<Rc<Client<WebPlatform>>, WebPlatform, MemoryStore>;

/// Where the stream is between calls to `next()`.
enum Slot {
    /// Waiting for the next `next()`.
    Ready(Box<Stream>),
    /// A `next()` is in flight and holds the stream.
    Busy,
    /// Finished, failed or aborted; dropping the stream aborted any request.
    Ended,
}

/// The JS side of one stream. Freeing it (the iterator's `return()`) drops
/// the stream, which aborts the upstream request.
#[wasm_bindgen(skip_typescript)]
pub struct StreamHandle {
    slot: Rc<RefCell<Slot>>,
    signal: Option<AbortSignal>,
}

impl StreamHandle {
    pub(crate) fn new(stream: Stream, signal: Option<AbortSignal>) -> Self {
        StreamHandle {
            slot: Rc::new(RefCell::new(Slot::Ready(Box::new(stream)))),
            signal,
        }
    }
}

#[wasm_bindgen]
impl StreamHandle {
    /// The next event, `undefined` at the end; rejects with an `LLMError`
    /// (an `AbortError` when the signal fires).
    pub fn next(&self) -> Promise {
        let slot = Rc::clone(&self.slot);
        let signal = self.signal.clone();
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
                    Err(errors::call_error(&e))
                }
            }
        })
    }
}
