//! `client.chat()` on a route that caches: the caller's `options.cache`
//! (`noCache`, `noStore`, `ttlSeconds`: what an HTTP client says with
//! `cache-control` and `x-cache-ttl`) and the result's `cache`, what the
//! cache did.

use std::time::Duration;

use js_sys::{Object, Reflect};
use wasm_bindgen::{JsCast, JsValue};

use super::errors::{client_error, prop};
use crate::cache::{CacheOutcome, Controls};

/// The longest TTL a caller may ask for: thirty days, as a route's.
const MAX_TTL_SECS: f64 = 2_592_000.0;

const FIELDS: [&str; 3] = ["noCache", "noStore", "ttlSeconds"];

/// `options.cache`, every field checked; a field it does not know is an
/// error with its path, not a control silently ignored.
pub(crate) fn controls(options: &JsValue) -> Result<Controls, JsValue> {
    let bad = |m: String| client_error("invalid_request", 400, &m);
    let c = prop(options, "cache");
    if c.is_undefined() || c.is_null() {
        return Ok(Controls::default());
    }
    if !c.is_object() || js_sys::Array::is_array(&c) {
        return Err(bad("options.cache: must be an object".into()));
    }
    for key in Object::keys(c.unchecked_ref::<Object>()).iter() {
        let key = key.as_string().unwrap_or_default();
        if !FIELDS.contains(&key.as_str()) {
            return Err(bad(format!(
                "options.cache.{key}: unknown field (expected one of {})",
                FIELDS.join(", ")
            )));
        }
    }
    let flag = |name: &str| match prop(&c, name) {
        v if v.is_undefined() || v.is_null() => Ok(false),
        v => v
            .as_bool()
            .ok_or_else(|| bad(format!("options.cache.{name}: must be a boolean"))),
    };
    let ttl = match prop(&c, "ttlSeconds") {
        v if v.is_undefined() || v.is_null() => None,
        v => match v.as_f64() {
            Some(s) if s.is_finite() && s >= 1.0 => {
                Some(Duration::from_secs(s.min(MAX_TTL_SECS) as u64))
            }
            _ => {
                return Err(bad(
                    "options.cache.ttlSeconds: must be a number of seconds, at least 1".into(),
                ))
            }
        },
    };
    Ok(Controls {
        no_cache: flag("noCache")?,
        no_store: flag("noStore")?,
        ttl,
    })
}

/// Sets `result.cache` to what the cache did, on a route that caches:
/// `{ result: "hit" | "miss" | "stale" | "bypass", ageSeconds?, savedUsd?,
/// error? }` (`error`: why the route failed, for a stale answer).
pub(crate) fn describe(result: &JsValue, outcome: &CacheOutcome, saved_usd: Option<f64>) {
    let (name, age, error) = match outcome {
        CacheOutcome::Uncached => return,
        CacheOutcome::Hit { age_secs } => ("hit", Some(*age_secs), None),
        CacheOutcome::Stale { age_secs, error } => {
            ("stale", Some(*age_secs), Some(error.to_string()))
        }
        CacheOutcome::Miss => ("miss", None, None),
        CacheOutcome::Bypass => ("bypass", None, None),
    };
    let cache = Object::new();
    let set = |k: &str, v: JsValue| {
        let _ = Reflect::set(&cache, &k.into(), &v);
    };
    set("result", name.into());
    if let Some(age) = age {
        set("ageSeconds", (age as f64).into());
    }
    if let Some(usd) = saved_usd {
        set("savedUsd", usd.into());
    }
    if let Some(error) = error {
        set("error", error.into());
    }
    let _ = Reflect::set(result, &"cache".into(), &cache);
}
