//! The relay Durable Object: one per model and data centre (named
//! `"<colo> <key>"`, so it is created, and stays, where its first caller
//! runs), between that data centre's isolates and the model's owner
//! ([`super::object::BreakerStore`]). It holds a [`Relay`] in memory, no
//! storage: a relay that is evicted starts again from the owner's view.
//! (A spend cap's relay stores what it must not lose.)
//!
//! Isolates call it as they would the owner (`POST http://do/view`,
//! `/report`, `/lease`, the same bodies and answers); it answers from its
//! copy, passes urgent batches and lease questions on, and keeps one watch
//! open on the owner (`/watch`, [`super::watch`]) while its isolates call.
//! A spend cap's relay (named `"<colo> spend:<route>"`) is the same class:
//! the spend calls go to [`super::spend_relay`].
//!
//! With `FLEET_FAULTS=on`, `POST http://do/fault {"mode"}` makes it fail
//! ([`super::fault`]).

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use futures_channel::oneshot;
use futures_util::future::{FutureExt, LocalBoxFuture, Shared};
use futures_util::StreamExt;
use worker::wasm_bindgen_futures::spawn_local;
use worker::{durable_object, Delay, DurableObject, Env, Request, Response, Result, State};

use super::fault::Faults;
use super::link::{call_object, json, post, BINDING};
use super::spend_relay::SpendHost;
use super::watch::WATCHERS;
use crate::engine::timeout::timeout;
use crate::fleet::{
    Call, LeaseAnswer, LeaseStep, Outage, Relay, View, HEARTBEAT, OUTAGE_LOG_INTERVAL,
};
use crate::platform::UnixMillis;

/// After a watch failed, how long the relay waits before it watches again.
const REWATCH: Duration = Duration::from_secs(1);

/// How long an isolate's urgent batch waits for the owner's answer before
/// the relay answers from its copy: well inside the isolate's own
/// [`CALL_TIMEOUT`](crate::fleet::CALL_TIMEOUT).
const ANSWER_WITHIN: Duration = Duration::from_secs(1);

/// The `FleetRelay` Durable Object class (with an alarm, which a spend
/// cap's relay sets while it keeps anything).
#[durable_object(alarm)]
pub struct FleetRelay {
    env: Env,
    inner: Rc<RefCell<Inner>>,
    /// A spend cap's relay (`"<colo> spend:<route>"`) takes the spend calls.
    spend: SpendHost,
    faults: Faults,
}

/// What the watch and the calls in flight share.
struct Inner {
    relay: Relay,
    /// The model this relay serves (set by its first call).
    key: Option<String>,
    /// The watch loop runs.
    watching: bool,
    /// The owner's first view, asked once for every caller that waits.
    first: Option<Shared<LocalBoxFuture<'static, Option<View>>>>,
    /// Whether the owner is out of reach, logged as the isolates log it
    /// of their own calls, naming the model: the relay's isolates reach
    /// it and say nothing.
    outage: Outage,
}

impl Inner {
    /// Notes how a call to the owner went, and logs it when that is due.
    fn heard(&mut self, failure: Option<&str>) {
        let now = now();
        match failure {
            None => {
                if let Some(line) = self.outage.answered(now) {
                    worker::console_log!("{}", line);
                }
            }
            Some(e) => {
                if let Some(line) = self.outage.failed(now, e, OUTAGE_LOG_INTERVAL) {
                    worker::console_warn!("{}", line);
                }
            }
        }
    }

    /// What the relay gathered, as the call that carries it to the owner.
    fn gathered(&mut self) -> Call {
        let key = self.key.clone().unwrap_or_default();
        self.relay.take().into_call(&key)
    }
}

fn now() -> UnixMillis {
    worker::js_sys::Date::now() as UnixMillis
}

impl DurableObject for FleetRelay {
    fn new(state: State, env: Env) -> Self {
        let relay = Relay::new().stagger(worker::js_sys::Math::random());
        FleetRelay {
            spend: SpendHost::new(env.clone(), state.storage()),
            env,
            inner: Rc::new(RefCell::new(Inner {
                relay,
                key: None,
                watching: false,
                first: None,
                outage: Outage::default(),
            })),
            faults: Faults::default(),
        }
    }

    async fn alarm(&self) -> Result<Response> {
        self.spend.alarm().await?;
        Response::empty()
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        let op = req.path();
        let text = req.text().await.ok();
        if let Some(answer) = self.faults.check(&self.env, &op, text.as_deref()).await {
            return answer;
        }
        if matches!(op.as_str(), "/hold" | "/settle" | "/spend") {
            return self
                .spend
                .fetch(&op, text.as_deref().unwrap_or_default())
                .await;
        }
        let Some(call) = text.and_then(|t| serde_json::from_str::<Call>(&t).ok()) else {
            return Response::error("bad request", 400);
        };
        {
            let mut inner = self.inner.borrow_mut();
            match &inner.key {
                None => {
                    inner.key = Some(call.key.clone());
                    inner.outage = Outage::of_relay(&call.key);
                }
                Some(key) if *key != call.key => {
                    return Response::error("a relay serves one model", 400)
                }
                Some(_) => {}
            }
        }
        let answer = match op.as_str() {
            "/view" => {
                let view = self.inner.borrow_mut().relay.view(now());
                self.answer_view(view, &call.key).await
            }
            "/report" => {
                let urgent = self
                    .inner
                    .borrow_mut()
                    .relay
                    .report(call.into_batch(), now());
                if urgent {
                    // The isolate that sent it gets the owner's answer, as
                    // it would calling the owner (a probe's verdict closes
                    // the breaker for it at once), unless the owner is slow
                    // to give one: then the copy, before the isolate's own
                    // call gives up.
                    let passed = self.pass_on();
                    let _ = timeout(Delay::from(ANSWER_WITHIN), passed).await;
                }
                let view = self.inner.borrow().relay.current(now());
                let key = self.key();
                self.answer_view(view, &key).await
            }
            "/lease" => self.lease(call).await,
            _ => return Response::error("not found", 404),
        };
        self.watch();
        answer
    }
}

impl FleetRelay {
    fn key(&self) -> String {
        self.inner.borrow().key.clone().unwrap_or_default()
    }

    /// Answers `view`, or, before the owner's first view, waits for it.
    async fn answer_view(&self, view: Option<View>, key: &str) -> Result<Response> {
        if let Some(v) = view {
            return json(&v);
        }
        let first = {
            let mut inner = self.inner.borrow_mut();
            let env = self.env.clone();
            let shared = Rc::clone(&self.inner);
            let body = Call {
                key: key.to_owned(),
                ..Call::default()
            };
            inner
                .first
                .get_or_insert_with(|| {
                    async move {
                        let answer =
                            call_object::<View>(&env, (BINDING, &body.key), "view", &body).await;
                        let mut inner = shared.borrow_mut();
                        inner.first = None;
                        match answer {
                            Ok(v) => {
                                inner.heard(None);
                                inner.relay.apply(v, now(), false);
                            }
                            Err(e) => inner.heard(Some(&e.0)),
                        }
                        inner.relay.current(now())
                    }
                    .boxed_local()
                    .shared()
                })
                .clone()
        };
        match first.await {
            Some(v) => json(&v),
            None => Response::error("the owner is out of reach", 503),
        }
    }

    /// An isolate's lease question: answered here, or asked of the owner.
    async fn lease(&self, call: Call) -> Result<Response> {
        let holder = call.holder.clone().unwrap_or_else(|| "unknown".into());
        let step = self.inner.borrow_mut().relay.lease(&holder, now());
        match step {
            LeaseStep::Answer(answer) => json(&answer),
            LeaseStep::Ask => {
                let asked =
                    call_object::<LeaseAnswer>(&self.env, (BINDING, &call.key), "lease", &call)
                        .await;
                let mut inner = self.inner.borrow_mut();
                match asked {
                    Ok(answer) => {
                        inner.heard(None);
                        inner.relay.leased(&holder, &answer, now());
                        json(&answer)
                    }
                    Err(e) => {
                        inner.heard(Some(&e.0));
                        inner.relay.lost();
                        Response::error("the owner is out of reach", 503)
                    }
                }
            }
        }
    }

    /// Sends what is gathered to the owner, in the background, and again
    /// while what gathers meanwhile is urgent; the receiver hears when the
    /// first call is answered.
    fn pass_on(&self) -> oneshot::Receiver<()> {
        let env = self.env.clone();
        let inner = Rc::clone(&self.inner);
        let (answered, receiver) = oneshot::channel();
        spawn_local(async move {
            let mut again = pass(&env, &inner).await;
            let _ = answered.send(());
            while again {
                again = pass(&env, &inner).await;
            }
        });
        receiver
    }

    /// Keeps one watch open on the owner while isolates call.
    fn watch(&self) {
        {
            let mut inner = self.inner.borrow_mut();
            if inner.watching {
                return;
            }
            inner.watching = true;
        }
        let env = self.env.clone();
        let inner = Rc::clone(&self.inner);
        spawn_local(async move {
            loop {
                let body = inner.borrow_mut().gathered();
                if let Err(e) = watch_once(&env, &inner, &body).await {
                    {
                        let mut i = inner.borrow_mut();
                        i.heard(Some(&e));
                        i.relay.lost();
                    }
                    Delay::from(REWATCH).await;
                }
                let mut i = inner.borrow_mut();
                if !i.relay.wants_watch(now()) {
                    i.watching = false;
                    return;
                }
            }
        });
    }
}

/// Sends what is gathered to the owner now; `true` when what gathered
/// meanwhile is urgent too and must go next.
async fn pass(env: &Env, inner: &RefCell<Inner>) -> bool {
    let body = inner.borrow_mut().gathered();
    let view = call_object::<View>(env, (BINDING, &body.key), "report", &body).await;
    let mut i = inner.borrow_mut();
    i.heard(view.as_ref().err().map(|e| e.0.as_str()));
    i.relay.passed(view.ok(), now())
}

/// One watch: the views the owner writes, applied as they come, for about
/// a heartbeat (shortened by a random share of a quarter of it, so that
/// relays do not call in step), when the relay ends it. An error when it
/// failed, or no view came in that time.
async fn watch_once(
    env: &Env,
    inner: &RefCell<Inner>,
    body: &Call,
) -> std::result::Result<(), String> {
    let heard = Cell::new(false);
    let read = async {
        let mut resp = post(env, (BINDING, &body.key), "watch", body)
            .await
            .map_err(|e| e.0)?;
        if resp.status_code() != 200 {
            return Err(format!("object answered {}", resp.status_code()));
        }
        let watchers = resp.headers().get(WATCHERS).ok().flatten();
        if let Some(n) = watchers.and_then(|n| n.parse::<u32>().ok()) {
            inner.borrow_mut().relay.watched_by(n);
        }
        let mut stream = resp.stream().map_err(|e| e.to_string())?;
        let mut buffer = Vec::new();
        while let Some(chunk) = stream.next().await {
            buffer.extend_from_slice(&chunk.map_err(|e| e.to_string())?);
            while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buffer.drain(..=end).collect();
                let view = serde_json::from_slice::<View>(&line)
                    .map_err(|e| format!("the object answered malformed JSON: {e}"))?;
                let mut i = inner.borrow_mut();
                if !heard.replace(true) {
                    // The owner answered when the watch began, not when
                    // the relay ends it.
                    i.heard(None);
                }
                i.relay.apply(view, now(), true);
            }
        }
        Ok::<(), String>(()) // the owner ended it
    };
    let spread = worker::js_sys::Math::random() * HEARTBEAT.as_millis() as f64 / 4.0;
    let hold = HEARTBEAT.saturating_sub(Duration::from_millis(spread as u64));
    match timeout(Delay::from(hold), read).await {
        Ok(Err(e)) => Err(e),
        _ if heard.get() => Ok(()),
        Ok(Ok(())) => Err("the watch ended without a view".into()),
        Err(_) => Err("object timed out".into()),
    }
}
