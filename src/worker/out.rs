//! A streamed answer's body when splicing is on (the `STREAM_SPLICE`
//! variable, see [`crate::Splice`]): an `IdentityTransformStream` the
//! gateway's pieces are written to, into which the provider's rest is piped
//! natively from the piece that hands it over, its bytes never crossing
//! into wasm on the way to the client. The pipe leaves the response open
//! (`preventClose`, `preventAbort`): what the gateway writes after it (a
//! continuation, the error event, the end) goes in once it has settled.

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::rc::Rc;
use std::task::Poll;

use js_sys::{Object, Promise, Reflect, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use worker::{web_sys, Context};

use super::{Background, EdgeGateway};
use crate::gateway::{Piece, PieceStream};
use crate::web::Forward;

#[wasm_bindgen]
extern "C" {
    /// workerd's byte stream whose readable gives what its writable took.
    type IdentityTransformStream;

    #[wasm_bindgen(catch, constructor)]
    fn new() -> Result<IdentityTransformStream, JsValue>;

    #[wasm_bindgen(method, getter)]
    fn readable(this: &IdentityTransformStream) -> web_sys::ReadableStream;

    #[wasm_bindgen(method, getter)]
    fn writable(this: &IdentityTransformStream) -> Writable;

    type Writable;

    #[wasm_bindgen(catch, method, js_name = getWriter)]
    fn get_writer(this: &Writable) -> Result<Writer, JsValue>;

    type Writer;

    #[wasm_bindgen(method)]
    fn write(this: &Writer, chunk: &Uint8Array) -> Promise;

    #[wasm_bindgen(method)]
    fn close(this: &Writer) -> Promise;

    #[wasm_bindgen(method, js_name = releaseLock)]
    fn release_lock(this: &Writer);

    #[wasm_bindgen(method)]
    fn abort(this: &Writer) -> Promise;

    /// `null` once the stream errored (the client went away).
    #[wasm_bindgen(method, getter, js_name = desiredSize)]
    fn desired_size(this: &Writer) -> Option<f64>;

    /// A `ReadableStream`, for a `pipeTo` with options.
    type Source;

    #[wasm_bindgen(method, js_name = pipeTo)]
    fn pipe_to(this: &Source, dest: &Writable, options: &Object) -> Promise;
}

/// What the writing task owns: dropping it (the client gone) drops the
/// stream, which aborts the upstream request.
pub(super) struct Out {
    pub(super) stream: PieceStream,
    pub(super) gateway: Rc<EdgeGateway>,
    pub(super) background: Background,
    pub(super) ctx: Context,
}

/// The response for `out`, its body written by a task of its own.
pub(super) fn respond(
    out: Out,
    init: &web_sys::ResponseInit,
) -> Result<web_sys::Response, JsValue> {
    let pipe = IdentityTransformStream::new()?;
    let writable = pipe.writable();
    let writer = writable.get_writer()?;
    let response =
        web_sys::Response::new_with_opt_readable_stream_and_init(Some(&pipe.readable()), init)?;
    wasm_bindgen_futures::spawn_local(write_all(out, writable, writer));
    Ok(response)
}

enum Step {
    Piece(Option<Piece>),
    /// The pipe settled (either way).
    Piped,
}

async fn write(w: &Writer, bytes: &[u8]) -> bool {
    JsFuture::from(w.write(&Uint8Array::from(bytes)))
        .await
        .is_ok()
}

fn pipe_options() -> Object {
    let options = Object::new();
    for key in ["preventClose", "preventAbort"] {
        let _ = Reflect::set(&options, &JsValue::from_str(key), &JsValue::TRUE);
    }
    options
}

/// Writes the pieces, and pipes the provider's rest when handed it; bytes
/// the gateway writes while the pipe runs wait for it. Returns early, and
/// so drops the stream, when the client went away.
async fn write_all(mut out: Out, writable: Writable, writer: Writer) {
    let mut writer = Some(writer);
    let mut piping: Option<(JsFuture, Rc<dyn std::any::Any>)> = None;
    let mut queued: Vec<u8> = Vec::new();
    let mut ended = false;
    loop {
        let step = poll_fn(|cx| {
            if let Some((pipe, _)) = &mut piping {
                if Pin::new(pipe).poll(cx).is_ready() {
                    return Poll::Ready(Step::Piped);
                }
            }
            if ended {
                return Poll::Pending;
            }
            out.stream.as_mut().poll_next(cx).map(Step::Piece)
        })
        .await;
        match step {
            Step::Piped => {
                let Some((_, rest)) = piping.take() else {
                    return;
                };
                let Ok(w) = writable.get_writer() else {
                    return;
                };
                if w.desired_size().is_none() {
                    return; // the client went away: the pipe failed on its side
                }
                if let Ok(rest) = rest.downcast::<Forward>() {
                    rest.forwarded();
                }
                if !queued.is_empty() && !write(&w, &std::mem::take(&mut queued)).await {
                    return;
                }
                if ended {
                    let _ = JsFuture::from(w.close()).await;
                    return;
                }
                writer = Some(w);
            }
            Step::Piece(Some(Piece::Bytes(b))) => match &writer {
                Some(w) => {
                    if !write(w, &b).await {
                        return;
                    }
                }
                None => queued.extend_from_slice(&b),
            },
            Step::Piece(Some(Piece::Log(line))) => {
                worker::console_log!("{}", line);
                let now = js_sys::Date::now() as u64;
                out.gateway.client().store().flush_due(now);
                out.background.hand_to(&out.ctx);
            }
            Step::Piece(Some(Piece::Splice { head, rest })) => {
                let Some(w) = writer.take() else {
                    return;
                };
                if !head.is_empty() && !write(&w, &head).await {
                    return;
                }
                let Some(forward) = rest.0.downcast_ref::<Forward>() else {
                    // Not the web platform's: nothing to pipe, and the
                    // answer must not look complete.
                    let _ = w.abort();
                    return;
                };
                w.release_lock();
                let source: &Source = forward.stream().unchecked_ref();
                let promise = source.pipe_to(&writable, &pipe_options());
                piping = Some((JsFuture::from(promise), rest.0));
            }
            Step::Piece(None) => {
                ended = true;
                if let Some(w) = writer.take() {
                    let _ = JsFuture::from(w.close()).await;
                    return;
                }
            }
        }
    }
}
