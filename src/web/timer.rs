//! `setTimeout` as a future that clears its timer when dropped, and as a
//! native callback's timer.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use js_sys::Function;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use super::notify::{self, Notify};

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
/// between (see [`notify`]): the timer of a timeout whose work finished first
/// never fires.
#[must_use = "a Sleep does nothing unless awaited"]
pub struct Sleep {
    handle: JsValue,
    state: Rc<Notify>,
    // Dropped after the timer is cleared (fields drop after `Drop::drop`),
    // so the timer never calls a dropped closure.
    _callback: Closure<dyn FnMut()>,
}

/// `dur` in the milliseconds `setTimeout` takes, clamped to its maximum.
fn delay_ms(dur: Duration) -> f64 {
    dur.as_millis().min(MAX_DELAY_MS) as f64
}

/// A timer of `dur` on the global `setTimeout` (clamped to its maximum).
pub fn sleep(dur: Duration) -> Sleep {
    let state = Rc::default();
    let callback = notify::callback(&state);
    let handle = set_timeout(callback.as_ref().unchecked_ref(), delay_ms(dur));
    Sleep {
        handle,
        state,
        _callback: callback,
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.state.poll(cx)
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        // Essential before the timer fires (a pending Node timer keeps the
        // process alive, and it would call a dropped closure).
        if !self.state.fired() {
            clear_timeout(&self.handle);
        }
    }
}

/// A JS function's pending call on the global `setTimeout`; dropping it
/// clears the timer (harmless once it has fired).
#[derive(Debug)]
pub(crate) struct Timer {
    handle: JsValue,
}

impl Timer {
    /// Calls `f` after `dur` (clamped to `setTimeout`'s maximum). A host
    /// function rather than a Rust closure: firing it runs no wasm, and
    /// clearing it leaves no closure to free.
    pub(crate) fn call_after(f: &Function, dur: Duration) -> Timer {
        Timer {
            handle: set_timeout(f, delay_ms(dur)),
        }
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        clear_timeout(&self.handle);
    }
}
