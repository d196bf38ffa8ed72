//! A streamed answer's body, handed to workerd as a `ReadableStream`. Its
//! end logs the stream's outcome and reports the breaker verdict it
//! produced, in the background.
//!
//! A client that goes away aborts the request's `signal` (the
//! `enable_request_signal` compatibility flag); workerd then stops reading
//! the body without dropping it, so the abort listener drops the gateway's
//! stream itself: its end line (`client_closed`) is written and its
//! upstream request aborted, as when a native host drops the body.

use std::cell::RefCell;
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::task::{Context as TaskContext, Poll};

use futures_core::Stream;
use worker::wasm_bindgen::closure::Closure;
use worker::wasm_bindgen::JsCast;
use worker::{web_sys, Context};

use super::{Background, EdgeGateway};
use crate::gateway;

/// What the body and its abort listener share.
struct Shared {
    /// The gateway's stream, until it ends or the client goes away.
    stream: RefCell<Option<gateway::PieceStream>>,
    gateway: Rc<EdgeGateway>,
    background: Background,
    ctx: Context,
}

impl Shared {
    /// Reports what the stream's end settled, in the background.
    fn flush(&self) {
        let now = worker::js_sys::Date::now() as u64;
        self.gateway.client().store().flush_due(now);
        if let Some(export) = self.gateway.export_traces() {
            self.background.spawn(export);
        }
        self.background.hand_to(&self.ctx);
    }
}

/// The body: the gateway's pieces, their bytes for the client.
pub(super) struct SseOut {
    shared: Rc<Shared>,
    signal: web_sys::AbortSignal,
    /// The listener on `signal`, removed when the body is dropped.
    _on_abort: Closure<dyn FnMut()>,
}

impl SseOut {
    pub(super) fn new(
        stream: gateway::PieceStream,
        gateway: Rc<EdgeGateway>,
        background: Background,
        ctx: Context,
        signal: web_sys::AbortSignal,
    ) -> Self {
        let shared = Rc::new(Shared {
            stream: RefCell::new(Some(stream)),
            gateway,
            background,
            ctx,
        });
        let weak: Weak<Shared> = Rc::downgrade(&shared);
        let on_abort = Closure::<dyn FnMut()>::new(move || {
            let Some(shared) = weak.upgrade() else {
                return;
            };
            // Never while a poll holds it: JS runs one thing at a time.
            let stream = match shared.stream.try_borrow_mut() {
                Ok(mut slot) => slot.take(),
                Err(_) => None,
            };
            if stream.is_some() {
                drop(stream); // writes the end line, aborts the upstream request
                shared.flush();
            }
        });
        signal.set_onabort(Some(on_abort.as_ref().unchecked_ref()));
        SseOut {
            shared,
            signal,
            _on_abort: on_abort,
        }
    }
}

impl Drop for SseOut {
    fn drop(&mut self) {
        self.signal.set_onabort(None);
    }
}

impl Stream for SseOut {
    type Item = Result<Vec<u8>, worker::Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Self::Item>> {
        let shared = &self.shared;
        loop {
            let polled = {
                let mut slot = shared.stream.borrow_mut();
                let Some(stream) = slot.as_mut() else {
                    return Poll::Ready(None); // the client went away
                };
                let polled = stream.as_mut().poll_next(cx);
                if let Poll::Ready(None) = polled {
                    *slot = None;
                }
                polled
            };
            match polled {
                Poll::Ready(Some(gateway::Piece::Bytes(b))) => return Poll::Ready(Some(Ok(b))),
                Poll::Ready(Some(gateway::Piece::Log(line))) => {
                    worker::console_log!("{}", line);
                    shared.flush();
                }
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}
