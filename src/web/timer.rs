//! `setTimeout` as a future that clears its timer when dropped.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use js_sys::{Function, Promise};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

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
#[must_use = "a Sleep does nothing unless awaited"]
pub struct Sleep {
    handle: JsValue,
    done: JsFuture,
}

/// A timer of `dur` on the global `setTimeout` (clamped to its maximum).
pub fn sleep(dur: Duration) -> Sleep {
    let ms = dur.as_millis().min(MAX_DELAY_MS) as f64;
    let mut handle = JsValue::UNDEFINED;
    // The executor runs synchronously, so `handle` is set before `new` returns.
    let promise = Promise::new(&mut |resolve, _reject| {
        handle = set_timeout(&resolve, ms);
    });
    Sleep {
        handle,
        done: JsFuture::from(promise),
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // The promise never rejects; either way the wait is over.
        Pin::new(&mut self.done).poll(cx).map(|_| ())
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        // Harmless after the timer fired; essential before it (a pending
        // Node timer keeps the process alive).
        clear_timeout(&self.handle);
    }
}
