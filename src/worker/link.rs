//! The isolate's [`FleetLink`] to the breaker Durable Object: one object
//! per provider (`get_by_name`), JSON over `fetch` with absolute URLs
//! (`http://do/…`). Background calls start at once and are handed to the
//! request's `ctx.wait_until` by [`Background::hand_to`].

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use worker::js_sys::Promise;
use worker::wasm_bindgen::JsValue;
use worker::wasm_bindgen_futures::{future_to_promise, JsFuture};
use worker::{Context, Delay, Env, Method, Request, RequestInit};

use crate::fleet::{FleetLink, Inbox, LeaseAnswer, LinkError, Report, View};
use crate::timeout::timeout;

/// The Durable Object binding, as named in wrangler.toml.
pub const BINDING: &str = "BREAKERS";

/// How long a call to the object may take (the lease is awaited by a
/// request: past this, the isolate decides locally).
const CALL_TIMEOUT: Duration = Duration::from_millis(1500);

/// Background calls started in this isolate and not yet handed to a
/// request's `waitUntil`.
#[derive(Clone, Default)]
pub struct Background(Rc<RefCell<Vec<Promise>>>);

impl Background {
    fn spawn(&self, fut: impl std::future::Future<Output = ()> + 'static) {
        let promise = future_to_promise(async move {
            fut.await;
            Ok(JsValue::UNDEFINED)
        });
        self.0.borrow_mut().push(promise);
    }

    /// Keeps every started call alive past the response.
    pub fn hand_to(&self, ctx: &Context) {
        for p in self.0.borrow_mut().drain(..) {
            ctx.wait_until(async move {
                let _ = JsFuture::from(p).await;
            });
        }
    }
}

/// The link to the `BREAKERS` namespace.
pub struct DoLink {
    env: Env,
    background: Background,
}

impl DoLink {
    /// A link over `env`'s binding; background calls go to `background`.
    pub fn new(env: Env, background: Background) -> Self {
        DoLink { env, background }
    }
}

#[derive(Serialize)]
struct Call<'a, T: Serialize> {
    key: &'a str,
    #[serde(flatten)]
    body: T,
}

async fn call<T: DeserializeOwned>(
    env: &Env,
    key: &str,
    op: &str,
    body: impl Serialize,
) -> Result<T, LinkError> {
    let fail = |e: worker::Error| LinkError(e.to_string());
    let stub = env
        .durable_object(BINDING)
        .and_then(|ns| ns.get_by_name(key))
        .map_err(fail)?;
    let json = serde_json::to_string(&Call { key, body }).map_err(|e| LinkError(e.to_string()))?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post).with_body(Some(json.into()));
    let req = Request::new_with_init(&format!("http://do/{op}"), &init).map_err(fail)?;
    let fut = async {
        let mut resp = stub.fetch_with_request(req).await.map_err(fail)?;
        if resp.status_code() != 200 {
            return Err(LinkError(format!("object answered {}", resp.status_code())));
        }
        resp.json::<T>().await.map_err(fail)
    };
    timeout(Delay::from(CALL_TIMEOUT), fut)
        .await
        .unwrap_or_else(|_| Err(LinkError("object timed out".into())))
}

#[derive(Serialize)]
struct Holder<'a> {
    holder: &'a str,
}

#[derive(Serialize)]
struct Reports {
    reports: Vec<Report>,
}

#[derive(Serialize)]
struct Nothing {}

impl FleetLink for DoLink {
    async fn lease(&self, key: &str, holder: &str) -> Result<LeaseAnswer, LinkError> {
        call(&self.env, key, "lease", Holder { holder }).await
    }

    fn report(&self, key: &str, reports: Vec<Report>, inbox: Inbox) {
        let (env, key) = (self.env.clone(), key.to_string());
        self.background.spawn(async move {
            if let Ok(view) = call::<View>(&env, &key, "report", Reports { reports }).await {
                inbox.deliver(&key, view);
            }
        });
    }

    fn refresh(&self, key: &str, inbox: Inbox) {
        let (env, key) = (self.env.clone(), key.to_string());
        self.background.spawn(async move {
            if let Ok(view) = call::<View>(&env, &key, "view", Nothing {}).await {
                inbox.deliver(&key, view);
            }
        });
    }
}
