//! The isolate's [`FleetLink`] to the breaker Durable Objects: one owner
//! per model (`get_by_name`), reached through the data centre's relay of
//! it when `RELAYS` is bound; JSON over `fetch` with absolute URLs
//! (`http://do/…`). Background calls start at once and are handed to the
//! request's `ctx.wait_until` by [`Background::hand_to`].

use std::cell::RefCell;
use std::rc::Rc;

use worker::js_sys::Promise;
use worker::wasm_bindgen::JsValue;
use worker::wasm_bindgen_futures::{future_to_promise, JsFuture};
use worker::{web_sys, Context, Delay, Env};

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::engine::timeout::timeout;
use crate::fleet::{
    client_key, spend_key, Batch, Call, ClientInbox, ClientLink, ClientReport, FleetLink,
    HoldAnswer, HoldCall, Inbox, Journal, LeaseAnswer, LinkError, Outage, SettleCall, SpendCall,
    SpendInbox, SpendLink, Used, View, OUTAGE_LOG_INTERVAL,
};
use crate::policy::spend::Tally;

/// The Durable Object binding of the owners, as named in wrangler.toml.
pub(super) const BINDING: &str = "BREAKERS";

/// The binding of the relays ([`super::relay::FleetRelay`]); without it,
/// isolates call the owners directly.
pub(super) const RELAYS: &str = "RELAYS";

/// The relay of `key` in data centre `colo`.
pub(super) fn relay_name(colo: &str, key: &str) -> String {
    format!("{colo} {key}")
}

/// Background calls started in this isolate and not yet handed to a
/// request's `waitUntil`.
#[derive(Clone, Default)]
pub(crate) struct Background(Rc<RefCell<Vec<Promise>>>);

impl Background {
    /// Starts `fut`, to be kept alive past the response by [`Background::hand_to`].
    pub(crate) fn spawn(&self, fut: impl std::future::Future<Output = ()> + 'static) {
        let promise = future_to_promise(async move {
            fut.await;
            Ok(JsValue::UNDEFINED)
        });
        self.0.borrow_mut().push(promise);
    }

    /// Keeps every started call alive past the response.
    pub(crate) fn hand_to(&self, ctx: &Context) {
        for p in self.0.borrow_mut().drain(..) {
            ctx.wait_until(async move {
                let _ = JsFuture::from(p).await;
            });
        }
    }
}

/// The link to the `BREAKERS` namespace, through the `RELAYS` one when it
/// is bound.
pub(crate) struct DoLink {
    env: Env,
    background: Background,
    outage: Rc<RefCell<Outage>>,
    /// The data centre whose relays take the breaker calls (`None`: the
    /// owners do).
    colo: Option<String>,
}

impl DoLink {
    /// A link over `env`'s binding; background calls go to `background`.
    pub(crate) fn new(env: Env, background: Background) -> Self {
        DoLink {
            env,
            background,
            outage: Rc::default(),
            colo: None,
        }
    }

    /// Sends refreshes, reports and lease questions to the relays of data
    /// centre `colo`, when the `RELAYS` binding exists.
    pub(crate) fn relayed(mut self, colo: &str) -> Self {
        if self.env.durable_object(RELAYS).is_ok() {
            self.colo = Some(colo.to_owned());
        }
        self
    }

    /// Whether breaker calls go through relays.
    pub(crate) fn is_relayed(&self) -> bool {
        self.colo.is_some()
    }

    /// Where `key`'s breaker calls (or a spend object's, `spend:<route>`)
    /// go: (binding, object name).
    fn breaker(&self, key: &str) -> (&'static str, String) {
        match &self.colo {
            Some(colo) => (RELAYS, relay_name(colo, key)),
            None => (BINDING, key.to_owned()),
        }
    }
}

/// One call to the object `target` (binding, name), with its failure or recovery noted in
/// `outage` and logged when that is due (not once per failed call).
pub(super) async fn call<T: DeserializeOwned>(
    env: &Env,
    outage: &RefCell<Outage>,
    op: &str,
    target: (&str, &str),
    body: &impl Serialize,
) -> Result<T, LinkError> {
    let result = call_object(env, target, op, body).await;
    let now = worker::js_sys::Date::now() as u64;
    match &result {
        Ok(_) => {
            if let Some(line) = outage.borrow_mut().answered(now) {
                worker::console_log!("{}", line);
            }
        }
        Err(e) => {
            let line = outage
                .borrow_mut()
                .failed(now, &e.to_string(), OUTAGE_LOG_INTERVAL);
            if let Some(line) = line {
                worker::console_warn!("{}", line);
            }
        }
    }
    result
}

/// One call to the object `name` of `binding`: `POST http://do/<op>` with
/// `body`; the answer, read as a `T`.
pub(super) async fn call_object<T: DeserializeOwned>(
    env: &Env,
    (binding, name): (&str, &str),
    op: &str,
    body: &impl Serialize,
) -> Result<T, LinkError> {
    let fail = |e: worker::Error| LinkError(e.to_string());
    let fut = async {
        let mut resp = post(env, (binding, name), op, body).await?;
        if resp.status_code() != 200 {
            return Err(LinkError(format!("object answered {}", resp.status_code())));
        }
        let text = resp.text().await.map_err(fail)?;
        serde_json::from_str(&text)
            .map_err(|e| LinkError(format!("the object answered malformed JSON: {e}")))
    };
    timeout(Delay::from(crate::fleet::CALL_TIMEOUT), fut)
        .await
        .unwrap_or_else(|_| Err(LinkError("object timed out".into())))
}

/// An object's answer to a call: `value` as JSON.
pub(super) fn json(value: &impl Serialize) -> worker::Result<worker::Response> {
    let text = serde_json::to_string(value).map_err(|e| worker::Error::RustError(e.to_string()))?;
    let headers = worker::Headers::new();
    headers.set("content-type", "application/json")?;
    Ok(worker::Response::ok(text)?.with_headers(headers))
}

/// `POST http://do/<op>` with `body` to the object `name` of `binding`: its
/// response, not yet read (a watch reads it as it comes).
pub(super) async fn post(
    env: &Env,
    (binding, name): (&str, &str),
    op: &str,
    body: &impl Serialize,
) -> Result<worker::Response, LinkError> {
    let fail = |e: worker::Error| LinkError(e.to_string());
    let body = serde_json::to_string(body).map_err(|e| LinkError(e.to_string()))?;
    let stub = env
        .durable_object(binding)
        .and_then(|ns| ns.get_by_name(name))
        .map_err(fail)?;
    // A plain fetch Request: worker's RequestInit would bring its `cf`
    // serializer along.
    let init = web_sys::RequestInit::new();
    init.set_method("POST");
    init.set_body(&JsValue::from_str(&body));
    let req = web_sys::Request::new_with_str_and_init(&format!("http://do/{op}"), &init)
        .map_err(|e| LinkError(crate::web::error_message(&e)))?;
    stub.fetch_with_request(req.into()).await.map_err(fail)
}

impl FleetLink for DoLink {
    async fn lease(&self, key: &str, holder: &str) -> Result<LeaseAnswer, LinkError> {
        let body = Call {
            key: key.to_string(),
            holder: Some(holder.to_string()),
            ..Call::default()
        };
        let (binding, name) = self.breaker(key);
        call(&self.env, &self.outage, "lease", (binding, &name), &body).await
    }

    fn report(&self, key: &str, batch: Batch, inbox: Inbox) {
        let env = self.env.clone();
        let outage = Rc::clone(&self.outage);
        let body = batch.into_call(key);
        let (binding, name) = self.breaker(key);
        self.background.spawn(async move {
            let target = (binding, name.as_str());
            if let Ok(view) = call::<View>(&env, &outage, "report", target, &body).await {
                inbox.deliver(&body.key, view);
            }
        });
    }

    fn refresh(&self, key: &str, inbox: Inbox) {
        let env = self.env.clone();
        let outage = Rc::clone(&self.outage);
        let body = Call {
            key: key.to_string(),
            ..Call::default()
        };
        let (binding, name) = self.breaker(key);
        self.background.spawn(async move {
            let target = (binding, name.as_str());
            if let Ok(view) = call::<View>(&env, &outage, "view", target, &body).await {
                inbox.deliver(&body.key, view);
            }
        });
    }

    async fn journal(&self, key: &str) -> Result<Journal, LinkError> {
        let body = Call {
            key: key.to_string(),
            ..Call::default()
        };
        // Only the owner keeps the journal.
        call(&self.env, &self.outage, "journal", (BINDING, key), &body).await
    }
}

/// The same namespace holds the caps' spend objects (`spend:<route>`),
/// reached through the data centre's relay of the cap when `RELAYS` is
/// bound.
impl SpendLink for DoLink {
    fn spend(&self, body: SpendCall, inbox: SpendInbox) {
        let env = self.env.clone();
        let outage = Rc::clone(&self.outage);
        let (binding, name) = self.breaker(&spend_key(&body.route));
        self.background.spawn(async move {
            let target = (binding, name.as_str());
            let answer = call::<Tally>(&env, &outage, "spend", target, &body).await;
            inbox.deliver(&body.route, body.add, answer.ok());
        });
    }

    fn settle(&self, body: SettleCall, inbox: SpendInbox) {
        let env = self.env.clone();
        let outage = Rc::clone(&self.outage);
        let (binding, name) = self.breaker(&spend_key(&body.route));
        self.background.spawn(async move {
            let target = (binding, name.as_str());
            let answer = call::<Tally>(&env, &outage, "settle", target, &body).await;
            inbox.deliver(&body.route, body.add, answer.ok());
        });
    }

    async fn hold(&self, body: HoldCall) -> Result<HoldAnswer, LinkError> {
        let (binding, name) = self.breaker(&spend_key(&body.route));
        call(&self.env, &self.outage, "hold", (binding, &name), &body).await
    }
}

/// The same namespace holds the limited clients' objects (`client:<name>`),
/// reached directly: a client's reports are one call at a time per isolate.
impl ClientLink for DoLink {
    fn report(&self, body: ClientReport, inbox: ClientInbox) {
        let env = self.env.clone();
        let outage = Rc::clone(&self.outage);
        self.background.spawn(async move {
            let name = client_key(&body.client);
            let answer = call::<Used>(&env, &outage, "client", (BINDING, &name), &body).await;
            let now = worker::js_sys::Date::now() as u64;
            inbox.deliver(&body.client, now, answer.ok());
        });
    }
}
