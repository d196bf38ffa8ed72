//! The Cloudflare Worker edge proxy (feature `worker`, wasm32 only).
//!
//! A thin shell: the `#[event(fetch)]` entry turns a workerd request into a
//! [`gateway::Inbound`], hands it to the isolate's [`Gateway`] and turns the
//! [`gateway::Outbound`] back into a response. Everything that decides
//! anything lives in [`crate::gateway`] and [`crate::fleet`], where native
//! tests reach it.
//!
//! Per isolate, once: `CONFIG` (wrangler `[vars]`, one JSON document) is
//! read and validated with the secrets it names; an invalid configuration
//! answers every request with a 500 listing each problem with its path.
//! Breakers live in a [`FleetStore`] over the `BREAKERS` Durable Object
//! namespace ([`object::BreakerStore`], one owner per model), reached
//! through the `RELAYS` namespace when it is bound ([`relay::FleetRelay`],
//! one per model and data centre: `request.cf.colo`), and so do the spend
//! caps' calls ([`spend_relay`], one relay per cap and data centre).
//! A limited client's counts go to its object in the same namespace
//! (`client:<name>`, [`crate::fleet::FleetClients`]), directly.

mod answers;
mod fault;
mod link;
#[allow(missing_docs)] // the `#[durable_object]` macro generates undocumented JS glue
mod object;
mod out;
#[allow(missing_docs)] // the `#[durable_object]` macro generates undocumented JS glue
mod relay;
mod spend_relay;
mod watch;

use std::cell::RefCell;
use std::rc::Rc;

use worker::wasm_bindgen::JsValue;
use worker::wasm_bindgen_futures::JsFuture;
use worker::{event, web_sys, Context, Env, Result};

use crate::config::ConfigError;
use crate::fleet::{FleetPolicy, FleetStore};
use crate::gateway::{self, Gateway, Inbound, Setup};
use crate::platform::{Body, TransportError};
use crate::web::{self, WebPlatform};

pub(crate) use link::{Background, DoLink};

/// The gateway of this isolate.
pub(crate) type EdgeGateway = Gateway<WebPlatform, FleetStore<DoLink>>;

enum Loaded {
    Ready(Rc<EdgeGateway>, Background),
    Invalid(ConfigError),
}

thread_local! {
    static LOADED: RefCell<Option<Rc<Loaded>>> = const { RefCell::new(None) };
}

/// A secret or variable by name (secrets first).
pub(crate) fn secret(env: &Env, name: &str) -> Option<String> {
    env.secret(name)
        .map(|s| s.to_string())
        .or_else(|_| env.var(name).map(|v| v.to_string()))
        .ok()
}

/// The data centre a request reached (`request.cf.colo`), `local` where the
/// runtime says none (a self-hosted workerd).
fn colo(req: &web_sys::Request) -> String {
    use worker::js_sys::Reflect;
    Reflect::get(req, &JsValue::from_str("cf"))
        .ok()
        .filter(|cf| cf.is_object())
        .and_then(|cf| Reflect::get(&cf, &JsValue::from_str("colo")).ok())
        .and_then(|c| c.as_string())
        .filter(|c| !c.is_empty() && c.len() <= 16 && c.bytes().all(|b| b.is_ascii_alphanumeric()))
        .unwrap_or_else(|| "local".into())
}

/// The isolate's gateway, made by its first request (an isolate stays in
/// one data centre: its `colo` names its relays).
fn load(env: &Env, req: &web_sys::Request) -> Rc<Loaded> {
    if let Some(l) = LOADED.with(|l| l.borrow().clone()) {
        return l;
    }
    let config = env.var("CONFIG").ok().map(|v| v.to_string());
    let lookup = |name: &str| secret(env, name);
    let loaded = match Setup::load(config.as_deref(), &lookup) {
        Ok(setup) => {
            if setup.auth().is_open() {
                worker::console_warn!(
                    "{}",
                    r#"{"level":"warn","msg":"GATEWAY AUTH IS DISABLED (gateway.allowUnauthenticated): anyone can use this gateway and its provider keys. For local demos only."}"#
                );
            }
            let background = Background::default();
            let holder = format!(
                "isolate-{:08x}",
                (worker::js_sys::Math::random() * 4e9) as u64
            );
            let link = DoLink::new(env.clone(), background.clone()).relayed(&colo(req));
            let fleet_policy = if link.is_relayed() {
                FleetPolicy::relayed()
            } else {
                FleetPolicy::default()
            };
            let mut store =
                FleetStore::new(link, holder.clone(), setup.breaker()).fleet_policy(fleet_policy);
            for (id, p) in setup.breakers() {
                store = store.with_policy(id.clone(), *p);
            }
            // Only capped entries' requests ever reach the spend objects.
            let link = DoLink::new(env.clone(), background.clone()).relayed(&colo(req));
            let ttl = FleetPolicy::default().ttl;
            let ledger = crate::fleet::FleetSpend::new(link, ttl, holder.clone());
            let setup = setup.spend_ledger(Rc::new(ledger));
            // Only limited clients' counts reach the client objects.
            let setup = if setup.has_limited_clients() {
                let link = DoLink::new(env.clone(), background.clone());
                let clients = crate::fleet::FleetClients::new(link, ttl, holder.clone());
                setup.client_ledger(Rc::new(clients))
            } else {
                setup
            };
            // The status page and `/metrics` read the breaker objects' journals.
            let setup = setup.journals(Rc::new(DoLink::new(env.clone(), background.clone())));
            let mut gateway = setup.into_gateway(WebPlatform::new(), store);
            // Cached answers in the data centre's HTTP cache, where there
            // is one; in the isolate's memory otherwise.
            if let Some(cache) = answers::EdgeCache::default_cache(background.clone()) {
                gateway = gateway.answer_store(Rc::new(cache));
            }
            Loaded::Ready(
                Rc::new(
                    gateway
                        // A stream the client left writes its end line here.
                        .log_to(|line| worker::console_log!("{}", line)),
                ),
                background,
            )
        }
        Err(e) => {
            let issues: Vec<String> = e.issues.iter().map(|i| i.to_string()).collect();
            worker::console_error!(
                "{}",
                serde_json::json!({
                    "level": "error",
                    "msg": "invalid configuration",
                    "issues": issues,
                })
            );
            Loaded::Invalid(e)
        }
    };
    let loaded = Rc::new(loaded);
    LOADED.with(|l| *l.borrow_mut() = Some(loaded.clone()));
    loaded
}

/// Once per wasm instance, before any request: creates the futures
/// executor (`wasm-bindgen-futures`) with the global `queueMicrotask`
/// hidden, so that it schedules its runs with a resolved promise's `then`
/// instead. It picks once, when created, and prefers `queueMicrotask`,
/// which in workerd costs several times as much (measured under the edge
/// benchmark: some 45 µs of a 530 µs request, at four runs a request).
#[event(start)]
fn start() {
    use worker::js_sys::Reflect;
    let global = worker::js_sys::global();
    let key = JsValue::from_str("queueMicrotask");
    let original = Reflect::get(&global, &key).unwrap_or(JsValue::UNDEFINED);
    if Reflect::set(&global, &key, &JsValue::UNDEFINED).unwrap_or(false) {
        worker::wasm_bindgen_futures::spawn_local(async {});
        let _ = Reflect::set(&global, &key, &original);
    }
}

/// The entry: the raw `web_sys` request and response, not the worker
/// crate's wrappers, whose conversions make JS calls this proxy has no use
/// for (`request.cf`, every header, a call or more each); of the headers,
/// only those the gateway reads.
#[event(fetch)]
async fn fetch(req: web_sys::Request, env: Env, ctx: Context) -> Result<web_sys::Response> {
    let headers = web::headers_named(&req.headers(), gateway::REQUEST_HEADERS);
    let url = req.url();
    let signal = req.signal();
    let path = gateway::url_path(&url).to_string();
    let loaded = load(&env, &req);
    let mut out = match &*loaded {
        Loaded::Invalid(e) => {
            let rid = format!("{:016x}", (worker::js_sys::Math::random() * 1e15) as u64);
            gateway::config_error(e, &path, &headers, &rid)
        }
        Loaded::Ready(gw, background) => {
            let method = req.method();
            let body = if gw.reads_body_whole(&headers) {
                Body::whole(whole_body(req))
            } else {
                match req.body() {
                    None => Body::full(Vec::new()),
                    Some(stream) => web::stream_body(stream),
                }
            };
            let inbound = Inbound {
                method,
                path,
                headers,
                body,
            };
            let out = gw.handle(inbound).await;
            if let Some(point) = gw.take_point() {
                write_point(&env, point);
            }
            let now = worker::js_sys::Date::now() as u64;
            gw.client().store().flush_due(now);
            if let Some(export) = gw.export_traces() {
                background.spawn(export);
            }
            background.hand_to(&ctx);
            out
        }
    };
    web_sys::console::log_1(&JsValue::from_str(&out.log));
    let init = web_sys::ResponseInit::new();
    init.set_status(out.status);
    init.set_headers(&web::headers_to_js(&out.headers));
    match (out.stream.take(), &*loaded) {
        (Some(stream), Loaded::Ready(gw, background)) => {
            let body = worker::Response::from_stream(out::SseOut::new(
                stream,
                Rc::clone(gw),
                background.clone(),
                ctx,
                signal,
            ))?;
            let worker::ResponseBody::Stream(stream) = body.body() else {
                return Err(worker::Error::RustError("a stream without a stream".into()));
            };
            Ok(web_sys::Response::new_with_opt_readable_stream_and_init(
                Some(stream),
                &init,
            )?)
        }
        _ => Ok(web_sys::Response::new_with_opt_u8_array_and_init(
            Some(&mut out.body),
            &init,
        )?),
    }
}

/// One Analytics Engine data point per request, when a dataset is bound as
/// `ANALYTICS` (`[[analytics_engine_datasets]]` in wrangler.toml); without
/// the binding, nothing.
fn write_point(env: &Env, point: gateway::DataPoint) {
    let Ok(dataset) = env.analytics_engine("ANALYTICS") else {
        return;
    };
    let written = worker::AnalyticsEngineDataPointBuilder::new()
        .indexes([point.index.as_str()])
        .blobs(point.blobs)
        .doubles(point.doubles)
        .write_to(&dataset);
    if let Err(e) = written {
        worker::console_warn!("{{\"level\":\"warn\",\"msg\":\"analytics engine: {e}\"}}");
    }
}

/// A request body in one `arrayBuffer()` call.
async fn whole_body(req: web_sys::Request) -> std::result::Result<Vec<u8>, TransportError> {
    let fail = |e: JsValue| TransportError::from_message(web::error_message(&e));
    let buffer = JsFuture::from(req.array_buffer().map_err(fail)?)
        .await
        .map_err(fail)?;
    Ok(worker::js_sys::Uint8Array::new(&buffer).to_vec())
}
