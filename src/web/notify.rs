//! A one-shot flag that a JS callback raises and a Rust future waits on,
//! with no promise in between: a `JsFuture` over a promise that never
//! settles (a timer cleared before it fired, a caller's signal that never
//! aborts) never frees its callbacks, which hold each other through the
//! externref table.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use wasm_bindgen::prelude::*;

/// Raised once by [`callback`]; [`poll`](Notify::poll) is ready from then on.
#[derive(Default)]
pub(crate) struct Notify {
    fired: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

impl Notify {
    /// Whether it has been raised.
    pub(crate) fn fired(&self) -> bool {
        self.fired.get()
    }

    /// Ready once raised; otherwise wakes `cx`'s task when it is.
    pub(crate) fn poll(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.fired.get() {
            return Poll::Ready(());
        }
        let mut waker = self.waker.borrow_mut();
        match &*waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => *waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

/// A JS function that raises `notify`. Keep it until JS can no longer call
/// it (timer cleared, listener removed): calling a dropped closure throws.
pub(crate) fn callback(notify: &Rc<Notify>) -> Closure<dyn FnMut()> {
    let notify = Rc::clone(notify);
    Closure::new(move || {
        notify.fired.set(true);
        if let Some(waker) = notify.waker.borrow_mut().take() {
            waker.wake();
        }
    })
}
