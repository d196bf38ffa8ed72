//! The response cache's store in the Worker: the data centre's HTTP cache
//! (the Workers Cache API, `caches.default`), one entry per key under a
//! URL of this gateway's own that no request can name, kept for the
//! answer's TTL and stale window by its `Cache-Control: max-age`. Reads are
//! awaited; writes go out in the background, handed to the request's
//! `waitUntil`.

use std::time::Duration;

use worker::js_sys::{self, Reflect, Uint8Array};
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::web_sys;

use super::link::Background;
use crate::cache::{AnswerStore, StoreInfo};
use crate::platform::UnixMillis;
use crate::provider::LocalFuture;

/// Where the keys live: a host no DNS resolves (`.invalid`), so an entry
/// cannot collide with anything a zone caches.
const PREFIX: &str = "https://answers.resilient-llm.invalid/v1/";

/// `caches.default`, with the background its writes go to.
pub(super) struct EdgeCache {
    cache: web_sys::Cache,
    background: Background,
}

impl EdgeCache {
    /// The data centre's cache, if the runtime has one (`caches.default`).
    pub(super) fn default_cache(background: Background) -> Option<EdgeCache> {
        let caches = Reflect::get(&js_sys::global(), &JsValue::from_str("caches")).ok()?;
        let default = Reflect::get(&caches, &JsValue::from_str("default")).ok()?;
        let cache = default.dyn_into::<web_sys::Cache>().ok()?;
        Some(EdgeCache { cache, background })
    }
}

impl AnswerStore for EdgeCache {
    fn get<'a>(&'a self, key: &'a str, _now: UnixMillis) -> LocalFuture<'a, Option<Vec<u8>>> {
        let promise = self.cache.match_with_str(&format!("{PREFIX}{key}"));
        Box::pin(async move {
            let found = JsFuture::from(promise).await.ok()?;
            let response = found.dyn_into::<web_sys::Response>().ok()?;
            if !response.ok() {
                return None;
            }
            let bytes = JsFuture::from(response.array_buffer().ok()?).await.ok()?;
            Some(Uint8Array::new(&bytes).to_vec())
        })
    }

    fn put(&self, key: &str, mut value: Vec<u8>, _now: UnixMillis, keep: Duration) {
        let Ok(headers) = web_sys::Headers::new() else {
            return;
        };
        let max_age = keep.as_secs().max(1);
        let set = headers
            .set("content-type", "application/json")
            .and_then(|()| headers.set("cache-control", &format!("max-age={max_age}")));
        if set.is_err() {
            return;
        }
        let init = web_sys::ResponseInit::new();
        init.set_status(200);
        init.set_headers(&headers);
        let Ok(response) =
            web_sys::Response::new_with_opt_u8_array_and_init(Some(&mut value), &init)
        else {
            return;
        };
        let promise = self
            .cache
            .put_with_str(&format!("{PREFIX}{key}"), &response);
        self.background.spawn(async move {
            // A write the cache refuses is an answer not kept: the next
            // request asks again.
            let _ = JsFuture::from(promise).await;
        });
    }

    fn describe(&self) -> StoreInfo {
        // The data centre's cache does not count what it holds.
        StoreInfo {
            kind: "edge",
            entries: None,
            bytes: None,
        }
    }
}
