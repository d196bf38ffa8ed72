//! JS objects `{ name, chat(request, signal) }` as [`CustomProvider`]s, so
//! the core applies the same timeout, retries, breaker and failover to them.

use js_sys::{Function, Promise};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

use crate::chat::{ChatRequest, ChatResponse};
use crate::error::ProviderError;
use crate::js::convert::{provider_request, provider_response};
use crate::js::errors::{classify, prop};
use crate::js::thrown;
use crate::provider::{CustomProvider, LocalFuture};
use crate::web::AbortOnDrop;

/// A provider written in JS: `{ name, chat(request, signal) }`, called with the request and an `AbortSignal`.
pub(crate) struct JsProvider {
    name: String,
    object: JsValue,
    chat: Function,
}

/// Classifies what `provider` threw, keeping the thrown value as the
/// failure's `cause` ([`thrown::keep`]).
fn classify_kept(provider: &str, thrown: JsValue) -> ProviderError {
    let error = classify(&thrown);
    thrown::keep(provider, &error, thrown);
    error
}

/// A provider object read from `options.providers[i]`: its name, the model
/// its default-route entry sends (`model`, else the name), and the wrapper.
pub(crate) struct Found {
    pub name: String,
    pub model: String,
    pub provider: JsProvider,
}

impl JsProvider {
    /// Reads `{ name, chat, model? }`; the error names what is missing.
    pub(crate) fn from_js(object: JsValue) -> Result<Found, (&'static str, String)> {
        if !object.is_object() {
            return Err((
                "",
                "must be an object { name, chat(request, signal) }".into(),
            ));
        }
        let name = match prop(&object, "name").as_string() {
            Some(n) if !n.is_empty() => n,
            _ => return Err(("name", "must be a non-empty string".into())),
        };
        let chat = match prop(&object, "chat").dyn_into::<Function>() {
            Ok(f) => f,
            Err(_) => {
                return Err((
                    "chat",
                    "must be a function (request, signal) => Promise".into(),
                ))
            }
        };
        let model = match prop(&object, "model") {
            m if m.is_undefined() || m.is_null() => name.clone(),
            m => match m.as_string() {
                Some(m) if !m.is_empty() => m,
                _ => return Err(("model", "must be a non-empty string when given".into())),
            },
        };
        Ok(Found {
            name: name.clone(),
            model,
            provider: JsProvider { name, object, chat },
        })
    }
}

impl CustomProvider for JsProvider {
    fn chat<'a>(
        &'a self,
        req: &'a ChatRequest,
        model: &'a str,
    ) -> LocalFuture<'a, Result<ChatResponse, ProviderError>> {
        Box::pin(async move {
            // Aborted when this future is dropped: the attempt timed out, or
            // the caller's signal fired, or the client gave up.
            let mut abort = AbortOnDrop::new().map_err(ProviderError::from)?;
            let signal: JsValue = abort.signal().map_or(JsValue::UNDEFINED, Into::into);
            let request = provider_request(req, model);
            let returned = self
                .chat
                .call2(&self.object, &request, &signal)
                .map_err(|e| classify_kept(&self.name, e))?;
            // A plain value works too: Promise.resolve adopts thenables.
            let settled = JsFuture::from(Promise::resolve(&returned)).await;
            abort.disarm();
            match settled {
                Ok(value) => provider_response(&value, model),
                Err(thrown) => Err(classify_kept(&self.name, thrown)),
            }
        })
    }
}
