//! The [`Platform`] for every JS runtime: browser window, web worker,
//! Node ≥ 18 and workerd (Cloudflare Workers).
//!
//! Everything is reached through the *global* scope, never `window()`, so
//! one build runs in all of them:
//!
//! | need      | global                                             |
//! |-----------|----------------------------------------------------|
//! | `now`     | `Date.now()`                                       |
//! | `random`  | `crypto.getRandomValues` (`Math.random` if absent) |
//! | `sleep`   | `setTimeout` / `clearTimeout`                      |
//! | `fetch`   | `fetch` with an `AbortController` per request      |
//!
//! Cancellation follows the [`Platform`] contract: dropping a [`sleep`]
//! clears its timer (Node would otherwise stay alive until it fires), and
//! dropping a [`fetch`] future or the response [`Body`] aborts the request's
//! `AbortController`, which closes the connection. A request's
//! [`timeout`](HttpRequest::timeout) is a `setTimeout` whose callback is the
//! controller's own `abort`, bound to it: the host aborts a silent or
//! stalled request without running a Rust closure, and a request that
//! finishes in time clears the timer with no closure to free. A response
//! body read to its end comes in one `arrayBuffer()` call when its declared
//! length fits the limit; otherwise, and for streams, through the
//! `ReadableStream` reader chunk by chunk. Headers cross in a constant number of calls. Fetch rejections only
//! carry text, so they are classified by [`TransportError::from_message`].
//!
//! Compiled for `target_arch = "wasm32"` with the `web` feature. The npm
//! package (`js` feature) and the Worker both use [`WebPlatform`].
//!
//! [`sleep`]: WebPlatform::sleep
//! [`fetch`]: WebPlatform::fetch

mod fetch;
mod headers;
pub(crate) mod notify;
mod reader;
mod timer;

use std::future::Future;
use std::time::Duration;

use wasm_bindgen::prelude::*;

use crate::platform::{HttpRequest, HttpResponse, Platform, TransportError, UnixMillis};

pub(crate) use fetch::fetch;
pub use fetch::{error_message, stream_body, AbortOnDrop};
pub use headers::{headers_from_js, headers_named, headers_to_js};
pub use timer::{sleep, Sleep};

/// The platform over the JS globals. Cheap to copy; holds no state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WebPlatform;

impl WebPlatform {
    /// The platform of the current JS realm.
    pub fn new() -> Self {
        WebPlatform
    }
}

#[wasm_bindgen]
extern "C" {
    /// `crypto.getRandomValues` on the global `crypto` (throws a
    /// `ReferenceError` where there is none, e.g. Node 18 without the flag).
    #[wasm_bindgen(catch, js_namespace = crypto, js_name = getRandomValues)]
    fn get_random_values(buf: &mut [u32]) -> Result<JsValue, JsValue>;
}

/// Random words drawn from `crypto.getRandomValues` a batch at a time: one
/// call into JS per eight draws, not one per draw.
struct RandomWords {
    words: [u32; 16],
    next: usize,
}

impl RandomWords {
    /// Two fresh words, or `None` when the host has no `crypto`.
    fn draw(&mut self) -> Option<[u32; 2]> {
        if self.next + 2 > self.words.len() {
            get_random_values(&mut self.words).ok()?;
            self.next = 0;
        }
        let pair = [self.words[self.next], self.words[self.next + 1]];
        self.next += 2;
        Some(pair)
    }
}

thread_local! {
    static RANDOM: std::cell::RefCell<RandomWords> =
        const { std::cell::RefCell::new(RandomWords { words: [0; 16], next: 16 }) };
}

impl Platform for WebPlatform {
    fn now(&self) -> UnixMillis {
        // Date.now() is a non-negative integer in range; `as` saturates.
        js_sys::Date::now() as UnixMillis
    }

    fn random(&self) -> f64 {
        let Some([a, b]) = RANDOM.with(|r| r.borrow_mut().draw()) else {
            return js_sys::Math::random();
        };
        // 53 random bits: 27 from one word, 26 from the other.
        let bits = (u64::from(a >> 5) << 26) | u64::from(b >> 6);
        bits as f64 / (1u64 << 53) as f64
    }

    fn sleep(&self, dur: Duration) -> impl Future<Output = ()> {
        sleep(dur)
    }

    fn fetch(
        &self,
        req: HttpRequest,
    ) -> impl Future<Output = Result<HttpResponse, TransportError>> {
        fetch(req)
    }
}
