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
//! namespace ([`object::BreakerStore`], one object per provider).

mod link;
#[allow(missing_docs)] // the `#[durable_object]` macro generates undocumented JS glue
mod object;

use std::cell::RefCell;
use std::rc::Rc;

use futures_core::Stream;
use worker::{event, Context, Env, Request, Response, Result};

use crate::config::ConfigError;
use crate::fleet::FleetStore;
use crate::gateway::{self, Gateway, Inbound, Setup};
use crate::platform::{Body, Headers, TransportError, TransportErrorKind};
use crate::web::WebPlatform;

pub use link::{Background, DoLink};
pub use object::BreakerStore;

/// The gateway of this isolate.
pub type EdgeGateway = Gateway<WebPlatform, FleetStore<DoLink>>;

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

fn load(env: &Env) -> Rc<Loaded> {
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
            let mut store = FleetStore::new(
                DoLink::new(env.clone(), background.clone()),
                holder,
                setup.breaker(),
            );
            for (id, p) in setup.breakers() {
                store = store.with_policy(id.clone(), *p);
            }
            Loaded::Ready(
                Rc::new(setup.into_gateway(WebPlatform::new(), store)),
                background,
            )
        }
        Err(e) => {
            let issues: Vec<String> = e.issues.iter().map(|i| i.to_string()).collect();
            worker::console_error!(
                "{}",
                crate::json::text_of(&crate::json::json_value!({
                    "level": "error",
                    "msg": "invalid configuration",
                    "issues": issues,
                }))
            );
            Loaded::Invalid(e)
        }
    };
    let loaded = Rc::new(loaded);
    LOADED.with(|l| *l.borrow_mut() = Some(loaded.clone()));
    loaded
}

#[event(fetch)]
async fn fetch(mut req: Request, env: Env, ctx: Context) -> Result<Response> {
    let headers: Headers = req.headers().entries().collect();
    let path = req.path();
    let method = req.method().to_string();
    let loaded = load(&env);
    let mut out = match &*loaded {
        Loaded::Invalid(e) => {
            let rid = format!("{:016x}", (worker::js_sys::Math::random() * 1e15) as u64);
            gateway::config_error(e, &path, &headers, &rid)
        }
        Loaded::Ready(gw, background) => {
            let body = match req.stream() {
                Ok(s) => Body::stream(RequestBody(s)),
                Err(_) => Body::full(Vec::new()),
            };
            let inbound = Inbound {
                method,
                path,
                headers,
                body,
            };
            let store = gw.client().store();
            let now = worker::js_sys::Date::now() as u64;
            let providers = gw.client().routes().values().flatten();
            store.warm(providers.map(|e| e.provider.as_str()), now);
            let out = gw.handle(inbound).await;
            store.flush_due(worker::js_sys::Date::now() as u64);
            background.hand_to(&ctx);
            out
        }
    };
    worker::console_log!("{}", out.log);
    let headers = worker::Headers::new();
    for (name, value) in out.headers.iter() {
        headers.append(name, value)?;
    }
    let response = match (out.stream.take(), &*loaded) {
        (Some(stream), Loaded::Ready(gw, background)) => Response::from_stream(SseOut {
            stream,
            gateway: Rc::clone(gw),
            background: background.clone(),
            ctx,
        })?,
        _ => Response::from_bytes(out.body)?,
    };
    Ok(response.with_status(out.status).with_headers(headers))
}

/// A streamed answer's body. Its end logs the stream's outcome and reports
/// the breaker verdict it produced, in the background. Dropped when the
/// client goes away, which aborts the upstream request.
struct SseOut {
    stream: gateway::PieceStream,
    gateway: Rc<EdgeGateway>,
    background: Background,
    ctx: Context,
}

impl Stream for SseOut {
    type Item = std::result::Result<Vec<u8>, worker::Error>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        loop {
            match self.stream.as_mut().poll_next(cx) {
                std::task::Poll::Ready(Some(gateway::Piece::Bytes(b))) => {
                    return std::task::Poll::Ready(Some(Ok(b)))
                }
                std::task::Poll::Ready(Some(gateway::Piece::Log(line))) => {
                    worker::console_log!("{}", line);
                    let now = worker::js_sys::Date::now() as u64;
                    self.gateway.client().store().flush_due(now);
                    self.background.hand_to(&self.ctx);
                }
                std::task::Poll::Ready(None) => return std::task::Poll::Ready(None),
                std::task::Poll::Pending => return std::task::Poll::Pending,
            }
        }
    }
}

/// The request body as the core's chunk stream.
struct RequestBody(worker::ByteStream);

impl Stream for RequestBody {
    type Item = std::result::Result<Vec<u8>, TransportError>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        std::pin::Pin::new(&mut self.0).poll_next(cx).map(|c| {
            c.map(|r| r.map_err(|e| TransportError::new(TransportErrorKind::Other, e.to_string())))
        })
    }
}
