//! Rust errors as the JS error classes of `errors.js`, and thrown JS values
//! classified into [`ProviderError`]s.

use std::time::Duration;

use js_sys::Reflect;
use serde::Deserialize;
use wasm_bindgen::prelude::*;

use crate::config::ConfigError;
use crate::error::{Attempt, Error, ErrorKind, ProviderError};
use crate::js::shapes::{Attempts, Init, Issues, Name};
use crate::js::thrown::thrown_by;
use crate::platform::{millis, TransportError};
use crate::web::error_message;

/// The error classes, re-exported from the package's entry module. They
/// are imported as functions only because `skip_typescript` is honoured for
/// function imports (for type imports wasm-bindgen would emit
/// `let X: unknown`); their TypeScript is in `types.d.ts`. Never called.
#[allow(dead_code)]
mod exported {
    use wasm_bindgen::prelude::*;

    #[wasm_bindgen(module = "/src/js/errors.js")]
    extern "C" {
        #[wasm_bindgen(reexport, skip_typescript, js_name = LLMError)]
        fn llm_error_class();
        #[wasm_bindgen(reexport, skip_typescript, js_name = RateLimitError)]
        fn rate_limit_error_class();
        #[wasm_bindgen(reexport, skip_typescript, js_name = ServerError)]
        fn server_error_class();
        #[wasm_bindgen(reexport, skip_typescript, js_name = TimeoutError)]
        fn timeout_error_class();
        #[wasm_bindgen(reexport, skip_typescript, js_name = NetworkError)]
        fn network_error_class();
        #[wasm_bindgen(reexport, skip_typescript, js_name = ClientRequestError)]
        fn client_request_error_class();
        #[wasm_bindgen(reexport, skip_typescript, js_name = CircuitOpenError)]
        fn circuit_open_error_class();
        #[wasm_bindgen(reexport, skip_typescript, js_name = AbortError)]
        fn abort_error_class();
        #[wasm_bindgen(reexport, skip_typescript, js_name = AllProvidersFailedError)]
        fn all_providers_failed_error_class();
        #[wasm_bindgen(reexport, skip_typescript, js_name = ConfigError)]
        fn config_error_class();
    }
}

#[wasm_bindgen(module = "/src/js/errors.js")]
extern "C" {
    /// The classes by name.
    #[wasm_bindgen(js_name = __classes)]
    pub(crate) fn classes() -> js_sys::Object;
    /// Builds an error of the named class.
    #[wasm_bindgen(js_name = __makeError)]
    fn make_error(class: &str, message: &str, init: &JsValue) -> JsValue;
}

/// The JS class for a kind. Exhaustive on purpose.
fn class_of(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::RateLimited | ErrorKind::QuotaExhausted => "RateLimitError",
        ErrorKind::Server | ErrorKind::Decode => "ServerError",
        ErrorKind::Timeout | ErrorKind::Stalled | ErrorKind::DeadlineExceeded => "TimeoutError",
        ErrorKind::Transport => "NetworkError",
        ErrorKind::Auth
        | ErrorKind::NotFound
        | ErrorKind::ContextLength
        | ErrorKind::ContentFilter
        | ErrorKind::InvalidRequest
        | ErrorKind::Unsupported => "ClientRequestError",
        ErrorKind::CircuitOpen => "CircuitOpenError",
    }
}

/// `value` as a plain JS value: its JSON text, written by serde_json, built
/// by the engine's `JSON.parse` in one crossing.
pub(crate) fn to_js(value: &impl serde::Serialize) -> JsValue {
    serde_json::to_string(value)
        .ok()
        .and_then(|text| js_sys::JSON::parse(&text).ok())
        .unwrap_or(JsValue::NULL)
}

fn build(class: &str, message: &str, init: &Init<'_>) -> JsValue {
    make_error(class, message, &to_js(init))
}

/// A provider's error as its JS class (`error` of events, a rejection).
pub(crate) fn provider_error(
    e: &ProviderError,
    provider: Option<&str>,
    attempts: &[Attempt],
) -> JsValue {
    let message = match provider {
        Some(p) => format!("{p}: {e}"),
        None => e.to_string(),
    };
    let init = to_js(&Init {
        attempts: (!attempts.is_empty()).then_some(Attempts(attempts)),
        ..Init::of(e, provider)
    });
    // What a JS provider threw to fail so, as `cause` (Error.cause).
    if let Some(thrown) = provider.and_then(|p| thrown_by(p, e)) {
        let _ = Reflect::set(&init, &"cause".into(), &thrown);
    }
    make_error(class_of(e.kind), &message, &init)
}

/// How a call reports every provider failing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Exhaustion {
    /// Always an `AllProvidersFailedError` (its `cause` the last failure).
    #[default]
    Aggregate,
    /// The provider's own typed error when the route had a single entry
    /// (`options.unwrapSingleProvider`), an `AllProvidersFailedError` otherwise.
    UnwrapSingle,
}

/// Whether every attempt went to one route entry (one provider and model).
fn single_entry(attempts: &[Attempt]) -> bool {
    attempts.split_first().is_some_and(|(first, rest)| {
        rest.iter()
            .all(|a| a.provider == first.provider && a.model == first.model)
    })
}

/// What a failed call rejects with.
pub(crate) fn call_error(e: &Error, exhaustion: Exhaustion) -> JsValue {
    match e {
        Error::AllProvidersFailed(ex) => {
            let last = ex
                .attempts
                .iter()
                .rev()
                .find_map(|a| a.error().map(|e| (a.provider.as_str(), e)));
            if let (Exhaustion::UnwrapSingle, Some((provider, error))) = (exhaustion, last) {
                if single_entry(&ex.attempts) {
                    return provider_error(error, Some(provider), &ex.attempts);
                }
            }
            let init = to_js(&Init {
                kind: Name::Str("all_providers_failed"),
                retryable: ex.is_retryable(),
                status: Some(ex.caller_status()),
                retry_after_ms: ex.retry_after().map(millis),
                failures: Some(Attempts(&ex.attempts)),
                ..Init::default()
            });
            if let Some((provider, error)) = last {
                // `cause`: the last failure as its own class, so
                // `err.cause instanceof TimeoutError` reads as it says.
                let _ = Reflect::set(
                    &init,
                    &"cause".into(),
                    &provider_error(error, Some(provider), &[]),
                );
            }
            make_error("AllProvidersFailedError", &ex.headline(), &init)
        }
        Error::Rejected {
            provider,
            error,
            attempts,
        } => provider_error(error, Some(provider), attempts),
        // The answer so far is incomplete: say so, and name what cut it.
        Error::Interrupted {
            error, attempts, ..
        } => build(
            "LLMError",
            &e.to_string(),
            &Init {
                kind: Name::Str("interrupted"),
                retryable: true,
                status: Some(e.status()),
                code: Some(Name::Kind(error.kind)),
                attempts: Some(Attempts(attempts)),
                ..Init::default()
            },
        ),
        Error::InvalidRequest(message) => client_error("invalid_request", 400, message),
        Error::UnknownRoute(_) => client_error("unknown_route", 404, &e.to_string()),
        Error::SpendCapReached { .. } => client_error("spend_cap_reached", 429, &e.to_string()),
        // Nothing was sent: the route keeps its capacity for higher classes.
        Error::Shed { retry_after, .. } => build(
            "LLMError",
            &e.to_string(),
            &Init {
                kind: Name::Str("load_shed"),
                retryable: true,
                status: Some(e.status()),
                retry_after_ms: Some(millis(*retry_after)),
                ..Init::default()
            },
        ),
        // Every answer failed the route's validators: the attempts say how.
        Error::NoValidAnswer { attempts } => build(
            "LLMError",
            &e.to_string(),
            &Init {
                kind: Name::Str("no_valid_answer"),
                retryable: false,
                status: Some(e.status()),
                attempts: Some(Attempts(attempts)),
                ..Init::default()
            },
        ),
    }
}

/// A `ClientRequestError` raised before any provider was called.
pub(crate) fn client_error(kind: &str, status: u16, message: &str) -> JsValue {
    build(
        "ClientRequestError",
        message,
        &Init {
            kind: Name::Str(kind),
            status: Some(status),
            ..Init::default()
        },
    )
}

/// The rejection of an aborted call; `cause` is the signal's reason.
pub(crate) fn abort_error(reason: &JsValue) -> JsValue {
    let init = to_js(&Init {
        kind: Name::Str("aborted"),
        ..Init::default()
    });
    if !reason.is_undefined() {
        let _ = Reflect::set(&init, &"cause".into(), reason);
    }
    make_error("AbortError", "the call was aborted", &init)
}

/// A configuration error with every issue.
pub(crate) fn config_error(e: &ConfigError) -> JsValue {
    build(
        "ConfigError",
        &e.to_string(),
        &Init {
            kind: Name::Str("config"),
            issues: Some(Issues(&e.issues)),
            ..Init::default()
        },
    )
}

/// Reads a property of an object; `undefined` for anything else.
pub(crate) fn prop(v: &JsValue, key: &str) -> JsValue {
    if v.is_object() || v.is_function() {
        Reflect::get(v, &JsValue::from_str(key)).unwrap_or(JsValue::UNDEFINED)
    } else {
        JsValue::UNDEFINED
    }
}

/// The kind serde names `name` (`rate_limited`, …).
fn kind_from_name(name: &str) -> Option<ErrorKind> {
    let name = serde::de::value::StrDeserializer::<serde::de::value::Error>::new(name);
    ErrorKind::deserialize(name).ok()
}

/// The kind of an HTTP status a JS provider reported.
fn kind_of_status(status: u16) -> ErrorKind {
    match status {
        429 => ErrorKind::RateLimited,
        402 => ErrorKind::QuotaExhausted,
        401 | 403 => ErrorKind::Auth,
        404 => ErrorKind::NotFound,
        408 | 409 | 500..=599 => ErrorKind::Server,
        400..=499 => ErrorKind::InvalidRequest,
        _ => ErrorKind::Server,
    }
}

/// Classifies what a JS provider threw or rejected with:
/// `kind` (this package's classes) → `status` → the class name
/// (`RateLimitError`, …; a `TypeError` is fetch's network failure)
/// → a server error with the message. `retryable` overrides the verdict,
/// `retryAfterMs` and `code` are kept.
pub(crate) fn classify(thrown: &JsValue) -> ProviderError {
    let status = prop(thrown, "status")
        .as_f64()
        .filter(|s| s.fract() == 0.0 && (100.0..=599.0).contains(s))
        .map(|s| s as u16);
    let name = prop(thrown, "name").as_string().unwrap_or_default();
    let message = match prop(thrown, "message").as_string() {
        Some(m) => m,
        None => error_message(thrown),
    };
    let by_name = match name.as_str() {
        "RateLimitError" => Some(ErrorKind::RateLimited),
        "ServerError" => Some(ErrorKind::Server),
        "TimeoutError" => Some(ErrorKind::Timeout),
        "ClientRequestError" => Some(ErrorKind::InvalidRequest),
        _ => None,
    };
    let kind = prop(thrown, "kind")
        .as_string()
        .and_then(|k| kind_from_name(&k));
    let mut error = match (kind, status, by_name) {
        (Some(k), _, _) => ProviderError::new(k, message),
        (None, Some(s), _) => ProviderError::new(kind_of_status(s), message),
        (None, None, Some(k)) => ProviderError::new(k, message),
        (None, None, None) if name == "TypeError" || name == "NetworkError" => {
            // fetch's "TypeError: fetch failed" and friends: the network.
            ProviderError::from(TransportError::from_message(error_message(thrown)))
        }
        (None, None, None) => ProviderError::new(ErrorKind::Server, message),
    };
    error.status = status;
    error.code = prop(thrown, "code").as_string().filter(|c| !c.is_empty());
    error.should_retry = prop(thrown, "retryable").as_bool();
    error.retry_after = prop(thrown, "retryAfterMs")
        .as_f64()
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
        .map(|ms| Duration::from_millis(ms.min(86_400_000.0) as u64));
    error
}
