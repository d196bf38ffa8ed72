//! The npm package (`pkg/`): a `#[wasm_bindgen]` facade over [`Client`] on
//! the [`WebPlatform`], with TypeScript types.
//!
//! ```js
//! import { ResilientClient, AllProvidersFailedError } from "resilient-llm";
//! const client = new ResilientClient(
//!   { retry: { maxAttempts: 2 }, timeoutMs: 5000 },
//!   { providers: [primary, backup], onFailover: (e) => console.warn(e.from, "→", e.to) },
//! );
//! const res = await client.chat({ messages: [{ role: "user", content: "Hi" }] });
//! ```
//!
//! JS providers are any `{ name, chat(request, signal) }` returning a
//! Promise; they get the same timeout, retries,
//! breaker and failover as the built-in adapters, and their `signal` aborts
//! when the core stops waiting. What they throw is classified by
//! [`errors::classify`]; what a call rejects with is always an `LLMError`
//! subclass from `errors.js`. `client.stream()` is wrapped with its helpers
//! by `stream.js`; `client.fetch` serves the gateway's routes in process
//! ([`fetch`]). The package's entries per runtime are in `npm/`.

mod answers;
mod cached;
mod config;
mod convert;
mod endpoints;
mod errors;
mod fetch;
mod judged;
mod parts;
mod provider;
mod request;
mod shapes;
mod simulate;
mod spans;
mod stream;
mod thrown;
mod validate;

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use js_sys::{Function, Object, Promise};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::future_to_promise;
use web_sys::AbortSignal;

use crate::cache::{AnswerStore, MemoryCache, ResponseCache};
use crate::config::{ConfigError, ConfigIssue};
use crate::engine::client::{CallOptions, Client};
use crate::engine::span_hook::LiveSpans;
use crate::engine::timeout::timeout;
use crate::event::{Event, Observer};
use crate::provider::Upstream;
use crate::web::notify::{self, Notify};
use crate::web::WebPlatform;

use errors::{prop, Exhaustion};

/// The package's error classes by name (`LLMError`, …), for tests that
/// check `instanceof` from Rust.
#[doc(hidden)]
pub fn error_classes() -> js_sys::Object {
    errors::classes()
}

#[wasm_bindgen(typescript_custom_section)]
const TYPES: &'static str = include_str!("types.d.ts");

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = console, js_name = error)]
    fn console_error(label: &str, e: &JsValue);
}

/// A resilient client over JS providers (and, with the config work, the
/// built-in Anthropic/OpenAI adapters).
#[wasm_bindgen]
pub struct ResilientClient {
    inner: Rc<Client<WebPlatform>>,
    gateway: Rc<fetch::Gateway>,
    /// `chat()`'s response cache, on the same store as `fetch`'s: `None`
    /// when no route caches.
    cache: Option<Rc<ResponseCache>>,
    exhaustion: Exhaustion,
    /// `options.tracing`: the app's OpenTelemetry tracer, through its bridge.
    tracer: Option<Rc<spans::JsTracer>>,
}

/// The event hooks of `options`.
struct Hooks {
    on_event: Option<Function>,
    on_retry: Option<Function>,
    on_provider_error: Option<Function>,
    on_failover: Option<Function>,
}

impl Hooks {
    fn read(options: &JsValue, issues: &mut Vec<ConfigIssue>) -> Option<Self> {
        let mut get = |key: &str| match prop(options, key) {
            v if v.is_undefined() || v.is_null() => None,
            v => match v.dyn_into::<Function>() {
                Ok(f) => Some(f),
                Err(_) => {
                    issues.push(ConfigIssue::new(
                        format!("options.{key}"),
                        "must be a function",
                    ));
                    None
                }
            },
        };
        let hooks = Hooks {
            on_event: get("onEvent"),
            on_retry: get("onRetry"),
            on_provider_error: get("onProviderError"),
            on_failover: get("onFailover"),
        };
        let any = hooks.on_event.is_some()
            || hooks.on_retry.is_some()
            || hooks.on_provider_error.is_some()
            || hooks.on_failover.is_some();
        any.then_some(hooks)
    }

    fn observer(self) -> Observer {
        Box::new(move |event: &Event<'_>| {
            let (hook, error, provider) = match event {
                Event::Retry {
                    error, provider, ..
                } => (&self.on_retry, Some(*error), Some(*provider)),
                Event::ProviderFailed {
                    error, provider, ..
                } => (&self.on_provider_error, Some(*error), Some(*provider)),
                Event::Failover { error, from, .. } => {
                    (&self.on_failover, Some(*error), Some(*from))
                }
                Event::MalformedChunk { error, provider } => (&None, Some(*error), Some(*provider)),
                Event::Breaker { .. }
                | Event::BudgetExhausted { .. }
                | Event::Demoted(_)
                | Event::Restored(_) => (&None, None, None),
            };
            let value = errors::to_js(event);
            if let Some(e) = error {
                // `error` as its class, so `e.error instanceof RateLimitError`.
                let _ = js_sys::Reflect::set(
                    &value,
                    &"error".into(),
                    &errors::provider_error(e, provider, &[]),
                );
            }
            for f in [&self.on_event, hook].into_iter().flatten() {
                // A throwing hook must not break the call; say so, though.
                if let Err(e) = f.call1(&JsValue::NULL, &value) {
                    console_error("resilient-llm: an event hook threw:", &e);
                }
            }
        })
    }
}

/// Reads `options.providers`.
fn read_providers(
    options: &JsValue,
    issues: &mut Vec<ConfigIssue>,
) -> Vec<(String, String, Upstream)> {
    let list = prop(options, "providers");
    if list.is_undefined() || list.is_null() {
        return Vec::new();
    }
    if !js_sys::Array::is_array(&list) {
        issues.push(ConfigIssue::new(
            "options.providers",
            "must be an array of { name, chat }",
        ));
        return Vec::new();
    }
    let mut out: Vec<(String, String, Upstream)> = Vec::new();
    for (i, item) in js_sys::Array::from(&list).iter().enumerate() {
        match provider::JsProvider::from_js(item) {
            Ok(found) if out.iter().any(|(n, _, _)| *n == found.name) => {
                issues.push(ConfigIssue::new(
                    format!("options.providers[{i}].name"),
                    format!("duplicate provider name \"{}\"", found.name),
                ))
            }
            Ok(found) => out.push((
                found.name,
                found.model,
                Upstream::Custom(Box::new(found.provider)),
            )),
            Err((field, message)) => {
                let path = if field.is_empty() {
                    format!("options.providers[{i}]")
                } else {
                    format!("options.providers[{i}].{field}")
                };
                issues.push(ConfigIssue::new(path, message));
            }
        }
    }
    out
}

#[wasm_bindgen]
impl ResilientClient {
    /// Validates `config` (an object or its JSON text) and `options`; throws
    /// a `ConfigError` listing every problem with its path.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "Config | string")] config: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "ClientOptions")] options: Option<Object>,
    ) -> Result<ResilientClient, JsValue> {
        let options: JsValue = options.map_or(JsValue::UNDEFINED, Into::into);
        let mut issues = Vec::new();
        let customs = read_providers(&options, &mut issues);
        let checks = validate::read(&options, &mut issues);
        let hooks = Hooks::read(&options, &mut issues);
        let tracer = spans::JsTracer::read(&options, &mut issues);
        let exhaustion = match prop(&options, "unwrapSingleProvider") {
            v if v.is_undefined() || v.is_null() || v == JsValue::FALSE => Exhaustion::Aggregate,
            v if v == JsValue::TRUE => Exhaustion::UnwrapSingle,
            _ => {
                issues.push(ConfigIssue::new(
                    "options.unwrapSingleProvider",
                    "must be a boolean",
                ));
                Exhaustion::Aggregate
            }
        };
        let store = match prop(&options, "cacheStore") {
            v if v.is_undefined() || v.is_null() => None,
            v => answers::JsAnswerStore::from_js(&v)
                .map_err(|m| issues.push(ConfigIssue::new("options.cacheStore", m)))
                .ok(),
        };
        let from_text = config.as_string().is_some();
        let json = match config.as_string() {
            Some(text) => text,
            None if config.is_undefined() || config.is_null() => "{}".to_string(),
            None => convert::stringify(&config).unwrap_or_else(|m| {
                issues.push(ConfigIssue::new("(root)", m));
                "{}".to_string()
            }),
        };
        let live = tracer.clone().map(|t| t as Rc<dyn LiveSpans>);
        let built = config::build_client(&json, customs, checks, hooks.map(Hooks::observer), live);
        if let (Ok(built), Some(_)) = (&built, &store) {
            if built.cache.is_empty() {
                issues.push(ConfigIssue::new(
                    "options.cacheStore",
                    "no route caches its answers: set cache.<route> in the configuration",
                ));
            }
        }
        match built {
            Ok(built) if issues.is_empty() => {
                let inner = Rc::new(built.client);
                let bounds = built.cache_bounds;
                let store: Rc<dyn AnswerStore> = match store {
                    Some(store) => Rc::new(store),
                    None => Rc::new(MemoryCache::new(bounds.max_entries, bounds.max_bytes)),
                };
                let cache = (!built.cache.is_empty()).then(|| {
                    let policies = built.cache.clone();
                    Rc::new(ResponseCache::with_store(policies, Rc::clone(&store)))
                });
                let gateway =
                    fetch::Gateway::shared(Rc::clone(&inner), crate::gateway::Auth::open())
                        .caller_holds_keys()
                        .cache(built.cache, bounds)
                        .answer_store(store);
                Ok(ResilientClient {
                    gateway: Rc::new(gateway),
                    inner,
                    cache,
                    exhaustion,
                    tracer,
                })
            }
            Ok(_) => Err(errors::config_error(&ConfigError { issues })),
            Err(e) => {
                let e = if from_text {
                    e
                } else {
                    convert::without_position(e)
                };
                issues.extend(e.issues);
                Err(errors::config_error(&ConfigError { issues }))
            }
        }
    }

    /// Answers `request` on the route its `model` names (or `options.route`,
    /// or the default route). Rejects with an `LLMError` subclass; with an
    /// `AbortError` when `options.signal` fires (the upstream call is
    /// abandoned and its own signal aborted).
    #[wasm_bindgen(unchecked_return_type = "Promise<ChatResult>")]
    pub fn chat(
        &self,
        #[wasm_bindgen(unchecked_param_type = "ChatRequest")] request: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "ChatOptions")] options: Option<Object>,
    ) -> Promise {
        let client = Rc::clone(&self.inner);
        let options: JsValue = options.map_or(JsValue::UNDEFINED, Into::into);
        let parsed = self.call_args(&request, &options);
        let controls = cached::controls(&options);
        let cache = self.cache.clone();
        let exhaustion = self.exhaustion;
        future_to_promise(async move {
            // The call's span (if traced) is released when its answer is.
            let (req, opts, signal, _span) = parsed?;
            let controls = controls?;
            let call = async {
                match &cache {
                    Some(cache) => cache
                        .chat_controlled(&client, req, opts, None, controls)
                        .await
                        .map(|c| (c.reply, Some((c.outcome, c.saved_usd)))),
                    None => client.chat_with(req, opts).await.map(|r| (r, None)),
                }
            };
            let result = match signal {
                None => call.await,
                Some(signal) => {
                    if signal.aborted() {
                        return Err(errors::abort_error(&signal.reason()));
                    }
                    match timeout(Aborted::new(&signal), call).await {
                        Ok(r) => r,
                        // Dropping `call` dropped the attempt: its provider's
                        // signal (or fetch) is aborted.
                        Err(_) => return Err(errors::abort_error(&signal.reason())),
                    }
                }
            };
            match result {
                Ok((reply, seen)) => {
                    let result = convert::chat_result(&reply, &client.cost_policy().prices);
                    if let Some((outcome, saved_usd)) = seen {
                        cached::describe(&result, &outcome, saved_usd);
                    }
                    Ok(result)
                }
                Err(e) => Err(errors::call_error(&e, exhaustion)),
            }
        })
    }

    /// Streams the answer to `request` as an async iterable of events
    /// (`start`, `thinking`, `text`, `tool_call`, `finish`, `usage`), with
    /// `textStream`, `finalResponse`, `toReadableStream()`, `toResponse()`
    /// and `options.onFinish` (`stream.js`). Failover happens
    /// until the first content; after it an interrupted answer rejects the
    /// iterator's `next()` with an `LLMError` of kind `interrupted`, never a
    /// clean end. On a route with validators the answer is buffered whole,
    /// judged and escalated as `chat()` does, and then delivered as the
    /// stream's events (`judged`). Breaking out of the loop, or `options.signal`, aborts the
    /// upstream request. Throws at once for a malformed request.
    #[wasm_bindgen(unchecked_return_type = "StreamResult")]
    pub fn stream(
        &self,
        #[wasm_bindgen(unchecked_param_type = "ChatRequest")] request: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "StreamOptions")] options: Option<Object>,
    ) -> Result<JsValue, JsValue> {
        let options: JsValue = options.map_or(JsValue::UNDEFINED, Into::into);
        let (req, opts, signal, span) = self.call_args(&request, &options)?;
        if !prop(&options, "cache").is_undefined() {
            return Err(errors::client_error(
                "invalid_request",
                400,
                "options.cache: client.stream() does not use the response cache (a stream through client.fetch does)",
            ));
        }
        let source = if self.inner.quality_for(&req, &opts).is_some() {
            // Its deltas cannot reach the caller before the answer is judged.
            stream::Source::Judged(Box::new(judged::Judged::new(
                Rc::clone(&self.inner),
                req,
                opts,
            )))
        } else {
            let s = crate::engine::stream::ChatStream::open(Rc::clone(&self.inner), req, opts)
                .map_err(|e| errors::call_error(&e, self.exhaustion))?;
            stream::Source::Live(Box::new(s))
        };
        let handle = stream::StreamHandle::new(source, signal, self.exhaustion).holding(span);
        Ok(stream::iterable(handle.into(), &options))
    }

    /// A `fetch`-compatible function answering OpenAI Chat Completions
    /// (`POST …/v1/chat/completions`), OpenAI Responses (`POST
    /// …/v1/responses`) and Anthropic Messages (`POST …/v1/messages`)
    /// requests in process, with the gateway's request
    /// handling over this client: its routes, failover and breakers. Give
    /// it to an official SDK as its `fetch`; the URL's host is not used.
    #[wasm_bindgen(getter, unchecked_return_type = "typeof fetch")]
    pub fn fetch(&self) -> Function {
        let server = fetch::Server::new(Rc::clone(&self.gateway), self.tracer.clone());
        fetch::make_fetch(server.into())
    }

    /// Every provider's health: breaker state, error rate, latency
    /// percentiles, last failure.
    #[wasm_bindgen(unchecked_return_type = "ProviderHealth[]")]
    pub fn health(&self) -> JsValue {
        errors::to_js(&self.inner.health())
    }

    /// What was spent: per provider and model since the client started,
    /// and each route with a daily budget today (`costs`, `spend`).
    #[wasm_bindgen(unchecked_return_type = "CostReport")]
    pub fn costs(&self) -> JsValue {
        errors::to_js(&crate::js::shapes::CostReport {
            costs: self.inner.cost_totals(),
            spend: self.inner.spend(),
        })
    }
}

/// `createFetch(config, options)`: `new ResilientClient(config, options).fetch`.
#[wasm_bindgen(js_name = createFetch, unchecked_return_type = "typeof fetch")]
pub fn create_fetch(
    #[wasm_bindgen(unchecked_param_type = "Config | string")] config: JsValue,
    #[wasm_bindgen(unchecked_optional_param_type = "ClientOptions")] options: Option<Object>,
) -> Result<Function, JsValue> {
    Ok(ResilientClient::new(config, options)?.fetch())
}

type CallArgs = (
    crate::chat::ChatRequest,
    CallOptions,
    Option<AbortSignal>,
    Option<spans::Begun>,
);

impl ResilientClient {
    /// The request, its options, its signal and, when `options.tracing`
    /// records it, the call's span (opened here, in the caller's turn, so
    /// under the app's active span).
    fn call_args(&self, request: &JsValue, options: &JsValue) -> Result<CallArgs, JsValue> {
        let mut req = convert::read_request(request).map_err(|e| {
            let detail: Vec<String> = e.issues.iter().map(|i| i.to_string()).collect();
            errors::client_error(
                "invalid_request",
                400,
                &format!("invalid request: {}", detail.join("; ")),
            )
        })?;
        let (opts, signal) = Self::call_options(options)?;
        req.trace = Self::trace_option(options)?;
        let span = self
            .tracer
            .as_ref()
            .and_then(|t| t.begin(req.trace.as_ref()));
        if let Some(span) = &span {
            req.trace = Some(span.trace.clone());
        }
        Ok((req, opts, signal, span))
    }

    /// `options.traceparent` (and `options.tracestate`): the caller's span,
    /// each attempt's a child of it. An invalid one is the caller's error.
    fn trace_option(options: &JsValue) -> Result<Option<crate::trace::TraceParent>, JsValue> {
        let bad = |m: &str| errors::client_error("invalid_request", 400, m);
        let text = |name: &str| match prop(options, name) {
            v if v.is_undefined() || v.is_null() => Ok(None),
            v => v
                .as_string()
                .map(Some)
                .ok_or_else(|| bad(&format!("options.{name}: must be a string"))),
        };
        let Some(parent) = text("traceparent")? else {
            return Ok(None);
        };
        let mut headers = crate::platform::Headers::new();
        headers.insert("traceparent", parent);
        if let Some(state) = text("tracestate")? {
            headers.insert("tracestate", state);
        }
        crate::trace::TraceParent::from_headers(&headers)
            .map(Some)
            .ok_or_else(|| {
                bad("options.traceparent: not a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)")
            })
    }

    /// `options.route`, `options.deadlineMs` and `options.signal`.
    fn call_options(options: &JsValue) -> Result<(CallOptions, Option<AbortSignal>), JsValue> {
        let bad = |m: &str| errors::client_error("invalid_request", 400, m);
        let route = match prop(options, "route") {
            v if v.is_undefined() || v.is_null() => None,
            v => Some(
                v.as_string()
                    .ok_or_else(|| bad("options.route: must be a string"))?,
            ),
        };
        let deadline = match prop(options, "deadlineMs") {
            v if v.is_undefined() || v.is_null() => None,
            v => match v.as_f64() {
                Some(ms) if ms.is_finite() && ms > 0.0 => {
                    Some(Duration::from_millis(ms.min(86_400_000.0) as u64))
                }
                _ => return Err(bad("options.deadlineMs: must be a positive number")),
            },
        };
        let signal = match prop(options, "signal") {
            v if v.is_undefined() || v.is_null() => None,
            v => Some(
                v.dyn_into::<AbortSignal>()
                    .map_err(|_| bad("options.signal: must be an AbortSignal"))?,
            ),
        };
        let no_hedge = match prop(options, "hedge") {
            v if v.is_undefined() || v.is_null() => false,
            v => match v.as_bool() {
                Some(on) => !on,
                None => return Err(bad("options.hedge: must be a boolean")),
            },
        };
        let priority = match prop(options, "priority") {
            v if v.is_undefined() || v.is_null() => crate::Priority::default(),
            v => match v.as_string().as_deref().and_then(crate::Priority::parse) {
                Some(p) => p,
                None => {
                    return Err(bad(
                        "options.priority: must be \"critical\", \"standard\" or \"sheddable\"",
                    ))
                }
            },
        };
        Ok((
            CallOptions {
                route,
                deadline,
                no_hedge,
                priority,
                share: None,
            },
            signal,
        ))
    }
}

/// Resolves when a signal aborts; removes its listener when dropped. The
/// listener raises a [`Notify`] directly: a promise would never settle for
/// a signal that never aborts, and keep its callbacks for good.
pub(crate) struct Aborted {
    signal: AbortSignal,
    state: Rc<Notify>,
    // Dropped after the listener is removed (fields drop after `Drop::drop`).
    listener: Closure<dyn FnMut()>,
}

impl Aborted {
    pub(crate) fn new(signal: &AbortSignal) -> Self {
        let state = Rc::default();
        let listener = notify::callback(&state);
        let _ = signal.add_event_listener_with_callback("abort", listener.as_ref().unchecked_ref());
        Aborted {
            signal: signal.clone(),
            state,
            listener,
        }
    }
}

impl Future for Aborted {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.state.poll(cx)
    }
}

impl Drop for Aborted {
    fn drop(&mut self) {
        let f = self.listener.as_ref().unchecked_ref();
        let _ = self.signal.remove_event_listener_with_callback("abort", f);
    }
}
