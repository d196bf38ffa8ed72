//! `setTimeout` as a future that clears its timer when dropped.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use js_sys::Function;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

#[wasm_bindgen]
extern "C" {
    /// The global `setTimeout`. Node returns an object, browsers and workerd
    /// a number: the handle stays an opaque `JsValue`.
    #[wasm_bindgen(js_name = setTimeout)]
    fn set_timeout(handler: &Function, ms: f64) -> JsValue;

    /// The global `clearTimeout`.
    #[wasm_bindgen(js_name = clearTimeout)]
    fn clear_timeout(handle: &JsValue);
}

/// The longest delay `setTimeout` honours (2^31 − 1 ms); longer ones would
/// fire at once.
const MAX_DELAY_MS: u128 = i32::MAX as u128;

/// Completes after a delay; dropping it clears the timer.
///
/// One JS timer per sleep, though a timer costs far more than the sleep it
/// usually serves (an attempt timeout whose work ends first): sleeps cannot
/// share one timer across requests, because workerd cancels the timers a
/// request set when that request ends, so a sleep of the next request
/// relying on it would never wake (workerd then cancels that request as
/// hung).
///
/// The timer calls a Rust callback that wakes the task, with no promise in
/// between: a `JsFuture` over a promise that never settles (the timer of a
/// timeout whose work finished first) never frees its callbacks, which hold
/// each other through the externref table; one leaked per request.
#[must_use = "a Sleep does nothing unless awaited"]
pub struct Sleep {
    handle: JsValue,
    state: Rc<State>,
    // Dropped after the timer is cleared (fields drop after `Drop::drop`),
    // so the timer never calls a dropped closure.
    _callback: Closure<dyn FnMut()>,
}

#[derive(Default)]
struct State {
    fired: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

/// A timer of `dur` on the global `setTimeout` (clamped to its maximum).
pub fn sleep(dur: Duration) -> Sleep {
    let ms = dur.as_millis().min(MAX_DELAY_MS) as f64;
    let state = Rc::new(State::default());
    let fire = Rc::clone(&state);
    let callback = Closure::<dyn FnMut()>::new(move || {
        fire.fired.set(true);
        if let Some(waker) = fire.waker.borrow_mut().take() {
            waker.wake();
        }
    });
    let handle = set_timeout(callback.as_ref().unchecked_ref(), ms);
    Sleep {
        handle,
        state,
        _callback: callback,
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.state.fired.get() {
            return Poll::Ready(());
        }
        let mut waker = self.state.waker.borrow_mut();
        match &*waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => *waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        // Essential before the timer fires (a pending Node timer keeps the
        // process alive, and it would call a dropped closure).
        if !self.state.fired.get() {
            clear_timeout(&self.handle);
        }
    }
}
