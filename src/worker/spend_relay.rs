//! A spend cap's relay in a data centre, hosted in the relay Durable Object
//! named `"<colo> spend:<route>"` ([`super::relay::FleetRelay`] hands it the
//! spend calls). It holds a [`SpendRelay`] in memory: isolates call it as
//! they would the cap's object (`POST http://do/hold`, `/settle`, `/spend`,
//! the same bodies and answers); it grants holds from its slice, counts
//! settles and bookings, passes on what it cannot answer, and renews its
//! slice at the object while anything is held, booked or asked here.
//!
//! A relay that is evicted loses what it booked since its last renewal (at
//! most a heartbeat of its data centre's spending, a renewal being sent at
//! least that often while anything is booked); its slice lapses at the
//! object, and its isolates' settles go to the object from then on.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use serde::Serialize;
use worker::wasm_bindgen_futures::spawn_local;
use worker::{Delay, Env, Response, Result};

use super::link::{call_object, BINDING};
use crate::fleet::{
    spend_key, HoldAnswer, HoldCall, HoldStep, LinkError, Outage, SettleCall, SpendCall,
    SpendRelay, Standing, OUTAGE_LOG_INTERVAL,
};
use crate::platform::UnixMillis;

/// How often the renewal loop looks whether a renewal is due (a slice that
/// ran short is renewed this soon).
const TICK: std::time::Duration = std::time::Duration::from_millis(250);

/// The spend side of a relay object.
pub(super) struct SpendHost {
    env: Env,
    relay: Rc<RefCell<SpendRelay>>,
    outage: Rc<RefCell<Outage>>,
    renewing: Rc<Cell<bool>>,
}

fn now() -> UnixMillis {
    worker::js_sys::Date::now() as UnixMillis
}

fn json(value: &impl Serialize) -> Result<Response> {
    let text = serde_json::to_string(value).map_err(|e| worker::Error::RustError(e.to_string()))?;
    let headers = worker::Headers::new();
    headers.set("content-type", "application/json")?;
    Ok(Response::ok(text)?.with_headers(headers))
}

/// Notes how a call to the object went in `outage`, and logs it when due.
fn heard(outage: &RefCell<Outage>, result: std::result::Result<(), &LinkError>) {
    let mut outage = outage.borrow_mut();
    let line = match result {
        Ok(()) => outage.answered(now()),
        Err(e) => outage.failed(now(), &e.0, OUTAGE_LOG_INTERVAL),
    };
    match (line, result.is_ok()) {
        (Some(line), true) => worker::console_log!("{}", line),
        (Some(line), false) => worker::console_warn!("{}", line),
        (None, _) => {}
    }
}

impl SpendHost {
    /// The spend side of a relay object in `env`; its slices are named
    /// after a random name of this instance.
    pub(super) fn new(env: Env) -> Self {
        let name = format!(
            "relay-{:08x}",
            (worker::js_sys::Math::random() * 4e9) as u64
        );
        SpendHost {
            env,
            relay: Rc::new(RefCell::new(SpendRelay::new(name))),
            outage: Rc::default(),
            renewing: Rc::default(),
        }
    }

    /// An isolate's `/hold`, `/settle` or `/spend`.
    pub(super) async fn fetch(&self, op: &str, text: &str) -> Result<Response> {
        let bad = || Response::error("bad request", 400);
        let answer = match op {
            "/hold" => {
                let Ok(call) = serde_json::from_str::<HoldCall>(text) else {
                    return bad();
                };
                self.first_call(&call.route);
                let step = self.relay.borrow_mut().hold(now(), &call);
                match step {
                    HoldStep::Answer(answer) => json(&answer),
                    HoldStep::Ask => self.pass::<HoldAnswer>("hold", &call.route, &call).await,
                }
            }
            "/settle" => {
                let Ok(call) = serde_json::from_str::<SettleCall>(text) else {
                    return bad();
                };
                self.first_call(&call.route);
                let step = self.relay.borrow_mut().settle(now(), call);
                match step {
                    Ok(standing) => json(&standing),
                    Err(call) => self.pass::<Standing>("settle", &call.route, &call).await,
                }
            }
            _ => {
                let Ok(call) = serde_json::from_str::<SpendCall>(text) else {
                    return bad();
                };
                self.first_call(&call.route);
                let step = self.relay.borrow_mut().spend(now(), call);
                match step {
                    Ok(standing) => json(&standing),
                    Err(call) => self.pass::<Standing>("spend", &call.route, &call).await,
                }
            }
        };
        self.renew();
        answer
    }

    /// The outage lines name the cap once its first call came.
    fn first_call(&self, route: &str) {
        let mut outage = self.outage.borrow_mut();
        if *outage == Outage::default() {
            *outage = Outage::of_relay(&spend_key(route));
        }
    }

    /// Passes an isolate's call on to the cap's object and answers with
    /// the object's answer, or 503 when it is out of reach (the isolate
    /// then counts on its own, as when its own call fails).
    async fn pass<T>(&self, op: &str, route: &str, call: &impl Serialize) -> Result<Response>
    where
        T: serde::de::DeserializeOwned + Serialize + AnswerStanding,
    {
        let key = spend_key(route);
        let answer = call_object::<T>(&self.env, (BINDING, &key), op, call).await;
        heard(&self.outage, answer.as_ref().map(|_| ()));
        match answer {
            Ok(a) => {
                self.relay.borrow_mut().saw(now(), a.standing());
                json(&a)
            }
            Err(_) => Response::error("the object is out of reach", 503),
        }
    }

    /// Keeps the renewal loop running while the relay has work: every
    /// [`TICK`] it sends the renewal that is due, until the relay is idle.
    fn renew(&self) {
        if self.renewing.replace(true) {
            return;
        }
        let env = self.env.clone();
        let relay = Rc::clone(&self.relay);
        let outage = Rc::clone(&self.outage);
        let renewing = Rc::clone(&self.renewing);
        spawn_local(async move {
            loop {
                let call = relay.borrow_mut().renewal(now());
                if let Some(call) = call {
                    let key = spend_key(&call.route);
                    let answer =
                        call_object::<HoldAnswer>(&env, (BINDING, &key), "hold", &call).await;
                    heard(&outage, answer.as_ref().map(|_| ()));
                    relay.borrow_mut().renewed(now(), answer.ok());
                }
                if relay.borrow().is_idle(now()) {
                    renewing.set(false);
                    return;
                }
                Delay::from(TICK).await;
            }
        });
    }
}

/// An object's answer, read for its standing.
trait AnswerStanding {
    fn standing(&self) -> Standing;
}

impl AnswerStanding for HoldAnswer {
    fn standing(&self) -> Standing {
        self.standing
    }
}

impl AnswerStanding for Standing {
    fn standing(&self) -> Standing {
        *self
    }
}
