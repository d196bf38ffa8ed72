//! A `ReadableStream` read chunk by chunk, with no closure made per read:
//! each read's promise settles into two functions made once per stream
//! (one Rust callback for the thread, bound to the stream's number), which
//! put the outcome in the stream's slot and wake its task.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use futures_core::Stream;
use js_sys::{Function, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{ReadableStream, ReadableStreamDefaultReader};

use super::fetch::{transport, AbortOnDrop};
use crate::platform::TransportError;

#[wasm_bindgen]
extern "C" {
    /// What a reader's `read()` resolves to: `{ done, value }`, read with
    /// two property getters (no key string crosses per read).
    type ReadResult;

    #[wasm_bindgen(method, getter)]
    fn done(this: &ReadResult) -> bool;

    #[wasm_bindgen(method, getter)]
    fn value(this: &ReadResult) -> JsValue;

    /// A read's promise, for its two-callback `then`.
    type ReadPromise;

    #[wasm_bindgen(method)]
    fn then(this: &ReadPromise, fulfilled: &Function, rejected: &Function) -> JsValue;
}

/// A read's outcome and the task waiting for it.
#[derive(Default)]
struct Slot {
    outcome: RefCell<Option<Result<JsValue, JsValue>>>,
    waker: RefCell<Option<Waker>>,
}

thread_local! {
    /// The streams being read, by number.
    static SLOTS: RefCell<HashMap<u32, Rc<Slot>>> = RefCell::new(HashMap::new());
    static NEXT: Cell<u32> = const { Cell::new(0) };
    /// Called as `(number, value)` by every read's promise, for the life of
    /// the thread: a stream dropped with a read in flight leaves no closure
    /// behind for its promise to call (its number is just no longer there).
    static FULFILLED: Closure<dyn FnMut(u32, JsValue)> =
        Closure::new(|id, v| settle(id, Ok(v)));
    static REJECTED: Closure<dyn FnMut(u32, JsValue)> =
        Closure::new(|id, e| settle(id, Err(e)));
}

fn settle(id: u32, outcome: Result<JsValue, JsValue>) {
    let Some(slot) = SLOTS.with(|s| s.borrow().get(&id).cloned()) else {
        return;
    };
    *slot.outcome.borrow_mut() = Some(outcome);
    let waker = slot.waker.borrow_mut().take();
    if let Some(w) = waker {
        w.wake();
    }
}

/// The callbacks of one stream's reads.
struct Reads {
    id: u32,
    slot: Rc<Slot>,
    fulfilled: Function,
    rejected: Function,
    in_flight: bool,
}

impl Reads {
    fn new() -> Self {
        let id = NEXT.with(|n| {
            let id = n.get();
            n.set(id.wrapping_add(1));
            id
        });
        let slot = Rc::new(Slot::default());
        SLOTS.with(|s| s.borrow_mut().insert(id, Rc::clone(&slot)));
        let bind = |f: &Closure<dyn FnMut(u32, JsValue)>| {
            f.as_ref()
                .unchecked_ref::<Function>()
                .bind1(&JsValue::NULL, &JsValue::from(id))
                .unchecked_into::<Function>()
        };
        Reads {
            id,
            slot,
            fulfilled: FULFILLED.with(bind),
            rejected: REJECTED.with(bind),
            in_flight: false,
        }
    }
}

impl Drop for Reads {
    fn drop(&mut self) {
        SLOTS.with(|s| s.borrow_mut().remove(&self.id));
    }
}

/// A body read through its `ReadableStream` reader. With a guard (a fetch
/// response), dropping it before the end aborts the request (the guard's
/// controller), which also errors the stream; a read still pending then
/// rejects into callbacks that find no slot, so nothing goes unhandled.
pub(super) struct Chunks {
    reader: Option<ReadableStreamDefaultReader>,
    reads: Option<Reads>,
    guard: Option<AbortOnDrop>,
}

impl Chunks {
    pub(super) fn new(stream: ReadableStream, guard: Option<AbortOnDrop>) -> Self {
        Chunks {
            reader: Some(stream.get_reader().unchecked_into()),
            reads: Some(Reads::new()),
            guard,
        }
    }

    pub(super) fn done() -> Self {
        Chunks {
            reader: None,
            reads: None,
            guard: None,
        }
    }

    /// The body ended or failed: nothing more to read, nothing to abort.
    fn finish(&mut self) {
        self.reader = None;
        self.reads = None;
        if let Some(mut g) = self.guard.take() {
            g.disarm();
        }
    }
}

impl Stream for Chunks {
    type Item = Result<Vec<u8>, TransportError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            let (Some(reader), Some(reads)) = (&this.reader, &mut this.reads) else {
                return Poll::Ready(None); // ended (or failed) earlier
            };
            if !reads.in_flight {
                let promise: ReadPromise = reader.read().unchecked_into();
                promise.then(&reads.fulfilled, &reads.rejected);
                reads.in_flight = true;
            }
            let outcome = reads.slot.outcome.borrow_mut().take();
            let Some(outcome) = outcome else {
                let mut waker = reads.slot.waker.borrow_mut();
                match &*waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => *waker = Some(cx.waker().clone()),
                }
                return Poll::Pending;
            };
            reads.in_flight = false;
            let result = match outcome {
                Ok(r) => r,
                Err(e) => {
                    let error = match &this.guard {
                        Some(guard) => guard.error(&e),
                        None => transport(&e),
                    };
                    this.finish();
                    return Poll::Ready(Some(Err(error)));
                }
            };
            let result: ReadResult = result.unchecked_into();
            if result.done() {
                this.finish();
                return Poll::Ready(None);
            }
            match result.value().dyn_into::<Uint8Array>() {
                Ok(bytes) if bytes.length() > 0 => return Poll::Ready(Some(Ok(bytes.to_vec()))),
                Ok(_) => continue, // an empty chunk: read on
                Err(_) => {
                    this.finish();
                    return Poll::Ready(Some(Err(TransportError::from_message(
                        "response body chunk is not a Uint8Array",
                    ))));
                }
            }
        }
    }
}
