//! `options.cacheStore`: the response cache's store written in JS (Redis,
//! IndexedDB, a file), as `{ get(key), put(key, value, ttlSeconds) }`.
//! `get` returns (or resolves to) the bytes stored, a `Uint8Array`, or
//! `null`/`undefined`; `put` is called without waiting for it. A `get`
//! that throws or rejects is a miss; a `put` that does is a write lost.
//! Either way it is reported on the console, never to the caller.

use std::time::Duration;

use js_sys::{Function, Promise, Uint8Array};
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::{spawn_local, JsFuture};

use super::errors::prop;
use crate::cache::AnswerStore;
use crate::platform::UnixMillis;
use crate::provider::LocalFuture;

/// A store over the caller's `get` and `put`.
pub(crate) struct JsAnswerStore {
    this: JsValue,
    get: Function,
    put: Function,
}

impl JsAnswerStore {
    /// The store `value` describes, or what is wrong with it.
    pub(crate) fn from_js(value: &JsValue) -> Result<JsAnswerStore, &'static str> {
        let get = prop(value, "get").dyn_into::<Function>();
        let put = prop(value, "put").dyn_into::<Function>();
        match (get, put) {
            (Ok(get), Ok(put)) => Ok(JsAnswerStore {
                this: value.clone(),
                get,
                put,
            }),
            _ => Err("must be an object with get(key) and put(key, value, ttlSeconds) functions"),
        }
    }
}

impl AnswerStore for JsAnswerStore {
    fn get<'a>(&'a self, key: &'a str, _now: UnixMillis) -> LocalFuture<'a, Option<Vec<u8>>> {
        let called = self.get.call1(&self.this, &JsValue::from_str(key));
        Box::pin(async move {
            let mut found = called.map_err(|e| warn("get", &e)).ok()?;
            if let Some(promise) = found.dyn_ref::<Promise>() {
                found = JsFuture::from(promise.clone())
                    .await
                    .map_err(|e| warn("get", &e))
                    .ok()?;
            }
            if found.is_undefined() || found.is_null() {
                return None;
            }
            let bytes = found.dyn_into::<Uint8Array>().map_err(|_| {
                warn("get", &JsValue::from_str("neither a Uint8Array nor null"));
            });
            Some(bytes.ok()?.to_vec())
        })
    }

    fn put(&self, key: &str, value: Vec<u8>, _now: UnixMillis, keep: Duration) {
        let bytes = Uint8Array::from(&value[..]);
        let ttl = JsValue::from_f64(keep.as_secs().max(1) as f64);
        let called = self
            .put
            .call3(&self.this, &JsValue::from_str(key), &bytes, &ttl);
        match called {
            Ok(returned) => {
                if let Ok(promise) = returned.dyn_into::<Promise>() {
                    spawn_local(async move {
                        if let Err(e) = JsFuture::from(promise).await {
                            warn("put", &e);
                        }
                    });
                }
            }
            Err(e) => warn("put", &e),
        }
    }
}

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = console, js_name = warn)]
    fn console_warn(label: &str, e: &JsValue);
}

/// A store's failure, on the console.
fn warn(op: &str, e: &JsValue) {
    console_warn(
        &format!("resilient-llm: options.cacheStore.{op} failed:"),
        e,
    );
}
