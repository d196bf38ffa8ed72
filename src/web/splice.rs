//! A fetched stream's rest handed to the host ([`crate::Splice`]): the
//! body's `ReadableStream` is `tee()`d; one branch goes to the host, which
//! pipes it to its client natively, and the body reads the other, its
//! copy, with a BYOB reader in reads as large as what has arrived, and only
//! when let ([`Splice::poke`]) or once the host has forwarded everything.
//!
//! A tee branch keeps what it buffered readable after the source fails (a
//! cut upstream), and an unread branch does not hold the other back: both
//! checked in workerd by the splice end-to-end tests.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::task::Waker;

use js_sys::{ArrayBuffer, Object, Reflect, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{ReadableStream, ReadableStreamDefaultReader};

use super::gather::shows_comment;
use crate::platform::{Splice, Spliced};

/// The most a read of the copy takes at once.
const COPY_READ: u32 = 256 * 1024;
/// The most a read of a gathered body takes at once.
const GATHERED_READ: u32 = 64 * 1024;

thread_local! {
    static ENABLED: Cell<bool> = const { Cell::new(false) };
}

/// Has every streamed body fetched from now on offer [`Splice`]; for a
/// host that forwards what it is handed (the Worker). Without it nothing
/// is ever spliced.
pub fn enable_splice() {
    ENABLED.with(|e| e.set(true));
}

/// Whether [`enable_splice`] was called.
pub fn splice_enabled() -> bool {
    enabled()
}

pub(super) fn enabled() -> bool {
    ENABLED.with(Cell::get)
}

#[wasm_bindgen]
extern "C" {
    /// A BYOB reader of the copy.
    pub(super) type CopyReader;

    #[wasm_bindgen(method, js_name = read)]
    fn read_into(this: &CopyReader, view: &Uint8Array) -> JsValue;

    /// workerd's BYOB read that waits for at least `min` bytes.
    #[wasm_bindgen(method, js_name = readAtLeast)]
    fn read_at_least(this: &CopyReader, min: u32, view: &Uint8Array) -> JsValue;

    /// A `ReadableStream`, for the calls `web_sys` has no binding of.
    type Source;

    #[wasm_bindgen(catch, method, js_name = getReader)]
    fn byob_reader(this: &Source, options: &Object) -> Result<CopyReader, JsValue>;

    /// A stream's default reader, for a `releaseLock` that may throw.
    type Lock;

    #[wasm_bindgen(catch, method, js_name = releaseLock)]
    fn release(this: &Lock) -> Result<(), JsValue>;
}

/// How a body's stream is read.
pub(super) enum Reader {
    /// Ended, failed, or not read yet.
    None,
    /// Read as it comes; the stream kept for a splice.
    Direct(ReadableStreamDefaultReader, ReadableStream),
    /// Gathered ([`super::gather`]): each read a whole HTTP chunk; the
    /// stream kept for a splice.
    Gathered(CopyReader, ReadableStream),
    /// Spliced: the copy.
    Copy(CopyReader),
}

impl Reader {
    /// A read's promise (`None`: nothing to read), into `spare` when it
    /// is a buffer of the read's size (the last read's, handed back); a
    /// gathered read waits for `at_least` bytes.
    pub(super) fn read(&self, spare: Option<ArrayBuffer>, at_least: u32) -> Option<JsValue> {
        let view = |size: u32| match spare {
            Some(b) if b.byte_length() == size => Uint8Array::new(&b),
            _ => Uint8Array::new_with_length(size),
        };
        match self {
            Reader::None => None,
            Reader::Direct(r, _) => Some(r.read().into()),
            Reader::Gathered(r, _) => Some(r.read_at_least(at_least, &view(GATHERED_READ))),
            Reader::Copy(r) => Some(r.read_into(&view(COPY_READ))),
        }
    }
}

/// A BYOB reader of `stream`, if it is a byte stream.
pub(super) fn byob(stream: &ReadableStream) -> Option<CopyReader> {
    let options = Object::new();
    Reflect::set(&options, &"mode".into(), &"byob".into()).ok()?;
    stream.unchecked_ref::<Source>().byob_reader(&options).ok()
}

/// A body's read state, shared by its reader and its [`Splice`] handle.
pub(super) struct Shared {
    pub(super) reader: RefCell<Reader>,
    pub(super) in_flight: Cell<bool>,
    /// The last BYOB read's buffer, for the next.
    pub(super) spare: RefCell<Option<ArrayBuffer>>,
    /// The fewest bytes a gathered read waits for.
    pub(super) at_least: Cell<u32>,
    /// Spliced: reads wait for leave.
    spliced: Cell<bool>,
    /// One read is let.
    leave: Cell<bool>,
    /// The host has forwarded all it was handed (or given up): the copy is
    /// read to its end.
    forwarded: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

impl Shared {
    pub(super) fn new() -> Rc<Self> {
        Rc::new(Shared {
            reader: RefCell::new(Reader::None),
            in_flight: Cell::new(false),
            spare: RefCell::new(None),
            at_least: Cell::new(super::gather::AT_LEAST),
            spliced: Cell::new(false),
            leave: Cell::new(false),
            forwarded: Cell::new(false),
            waker: RefCell::new(None),
        })
    }

    /// What a read brought (`bytes`, copied as `chunk`): a BYOB read's
    /// buffer is kept for the next read, and a gathered body that shows an
    /// SSE comment is read as it comes from then on. Nothing for a default
    /// reader's chunk.
    pub(super) fn took(&self, bytes: &Uint8Array, chunk: &[u8]) {
        match &*self.reader.borrow() {
            Reader::Gathered(..) => {
                if self.at_least.get() > 1 && shows_comment(chunk) {
                    self.at_least.set(1);
                }
            }
            Reader::Copy(_) => {}
            Reader::None | Reader::Direct(..) => return,
        }
        *self.spare.borrow_mut() = Some(bytes.buffer());
    }

    /// Whether a read may start now; else `waker` is woken when one may.
    pub(super) fn may_read(&self, waker: &Waker) -> bool {
        if !self.spliced.get() || self.forwarded.get() || self.leave.replace(false) {
            return true;
        }
        let mut slot = self.waker.borrow_mut();
        match &*slot {
            Some(w) if w.will_wake(waker) => {}
            _ => *slot = Some(waker.clone()),
        }
        false
    }

    fn wake(&self) {
        let waker = self.waker.borrow_mut().take();
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// A fetched body's [`Splice`].
pub(super) struct SpliceHandle(pub(super) Rc<Shared>);

impl Splice for SpliceHandle {
    fn splice(&self) -> Option<Spliced> {
        let shared = &self.0;
        if shared.in_flight.get() || shared.spliced.get() {
            return None;
        }
        let mut reader = shared.reader.borrow_mut();
        let (lock, stream): (&Lock, _) = match &*reader {
            Reader::Direct(r, s) => (r.unchecked_ref(), s),
            Reader::Gathered(r, s) => (r.unchecked_ref(), s),
            _ => return None,
        };
        lock.release().ok()?;
        let branches = stream.tee();
        let (Ok(rest), Ok(copy)) = (
            branches.get(0).dyn_into::<ReadableStream>(),
            branches.get(1).dyn_into::<ReadableStream>(),
        ) else {
            *reader = Reader::None;
            return None;
        };
        // A copy that is no byte stream is read by its default reader,
        // chunk by chunk, still only when let.
        *reader = match byob(&copy) {
            Some(byob) => Reader::Copy(byob),
            None => Reader::Direct(copy.get_reader().unchecked_into(), copy),
        };
        shared.spliced.set(true);
        Some(Spliced(Rc::new(Forward {
            stream: rest,
            shared: Rc::clone(shared),
        })))
    }

    fn poke(&self) -> bool {
        let shared = &self.0;
        if !shared.spliced.get()
            || shared.forwarded.get()
            || shared.in_flight.get()
            || shared.leave.get()
        {
            return false;
        }
        shared.leave.set(true);
        shared.wake();
        true
    }

    fn waits_for_poke(&self) -> bool {
        self.0.spliced.get() && !self.0.forwarded.get()
    }
}

/// What a spliced body hands its host: the stream to forward.
pub struct Forward {
    stream: ReadableStream,
    shared: Rc<Shared>,
}

impl Forward {
    /// The bytes to forward, from where the body stopped reading.
    pub fn stream(&self) -> &ReadableStream {
        &self.stream
    }

    /// The host forwarded everything it will: the body reads its copy to
    /// the end.
    pub fn forwarded(&self) {
        self.shared.forwarded.set(true);
        self.shared.wake();
    }
}
