//! A spend cap's relay in a data centre, hosted in the relay Durable Object
//! named `"<colo> spend:<route>"` ([`super::relay::FleetRelay`] hands it the
//! spend calls). It holds a [`SpendRelay`] in memory: isolates call it as
//! they would the cap's object (`POST http://do/hold`, `/settle`, `/spend`,
//! the same bodies and answers); it grants holds from its slice, counts
//! settles and bookings, passes on what it cannot answer, and renews its
//! slice at the object while anything is held, booked or asked here.
//!
//! What it must not lose ([`Kept`]: its isolates' spending not yet at the
//! object, the renewal not answered, its slices) is written to the object's
//! SQL storage whenever it changes, and a relay that was evicted or
//! restarted starts from it: it sends that renewal again as it was (the
//! object books it once) and releases the slices once the holds granted
//! from them have lapsed. The holds it granted are not kept: their settles
//! go to the object, which books them.
//!
//! A slice lasts at the object until its relay releases it (or its day
//! ends), so while the relay keeps anything an alarm wakes it every
//! [`WAKE`]: evicted or restarted, it renews, books and releases whether or
//! not an isolate calls it again.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use futures_channel::oneshot;
use serde::Serialize;
use worker::wasm_bindgen_futures::spawn_local;
use worker::{Delay, Env, Response, Result, SqlStorage, Storage};

use super::link::{call, json, BINDING};
use crate::engine::timeout::timeout;
use crate::fleet::{
    spend_key, HoldAnswer, HoldCall, HoldStep, Kept, Outage, SettleCall, SpendCall, SpendRelay,
    Standing,
};
use crate::platform::UnixMillis;

/// How often the renewal loop looks whether a renewal is due (a slice that
/// ran short is renewed this soon).
const TICK: Duration = Duration::from_millis(250);

/// How long a hold waits for the renewal in flight before it is asked of
/// the object: well inside the isolate's own call timeout.
const WAIT_WITHIN: Duration = Duration::from_secs(1);

/// How soon the alarm wakes a relay that keeps anything, set again every
/// half of it while the renewal loop runs: an evicted relay renews within
/// this.
const WAKE: Duration = Duration::from_secs(30);

/// The spend side of a relay object.
pub(super) struct SpendHost {
    env: Env,
    relay: Rc<RefCell<SpendRelay>>,
    outage: Rc<RefCell<Outage>>,
    renewing: Rc<Cell<bool>>,
    /// Holds waiting for the renewal in flight to be answered.
    waiting: Rc<RefCell<Vec<oneshot::Sender<()>>>>,
    /// Where what the relay keeps is written.
    store: Rc<Store>,
}

/// What a renewal needs of the host (the loop's and the alarm's share).
struct Renewer {
    env: Env,
    relay: Rc<RefCell<SpendRelay>>,
    outage: Rc<RefCell<Outage>>,
    waiting: Rc<RefCell<Vec<oneshot::Sender<()>>>>,
    store: Rc<Store>,
}

impl Renewer {
    /// Sends the renewal due, if any, and tells the holds waiting for it;
    /// whether the relay is idle after it.
    async fn tick(&self) -> bool {
        let renewal = self.relay.borrow_mut().renewal(now());
        self.store.write(&self.relay.borrow());
        if let Some(renewal) = renewal {
            let key = spend_key(&renewal.route);
            let target = (BINDING, key.as_str());
            let answer =
                call::<HoldAnswer>(&self.env, &self.outage, "hold", target, &renewal).await;
            self.relay.borrow_mut().renewed(now(), answer.ok());
            self.store.write(&self.relay.borrow());
            for tell in self.waiting.borrow_mut().drain(..) {
                let _ = tell.send(());
            }
        }
        self.relay.borrow().is_idle(now())
    }
}

/// The relay's row in its object's SQL storage, and what was last written
/// there (`None`: not read yet); the object's alarm.
struct Store {
    sql: SqlStorage,
    storage: Storage,
    last: RefCell<Option<Kept>>,
}

impl Store {
    fn table(&self) -> Result<()> {
        self.sql.exec(
            "CREATE TABLE IF NOT EXISTS spend_relay (id INTEGER PRIMARY KEY, state TEXT NOT NULL)",
            None,
        )?;
        Ok(())
    }

    /// What an earlier instance kept, read once (nothing the second time).
    fn read(&self) -> Option<Kept> {
        if self.last.borrow().is_some() {
            return None;
        }
        let row = self.table().and_then(|()| {
            let cursor = self
                .sql
                .exec("SELECT state FROM spend_relay WHERE id = 1", None)?;
            cursor.raw().next().transpose()
        });
        let kept = match row.ok().flatten().as_deref() {
            Some([worker::SqlStorageValue::String(state)]) => serde_json::from_str(state).ok(),
            _ => None,
        };
        *self.last.borrow_mut() = Some(kept.clone().unwrap_or_default());
        kept
    }

    /// Writes what `relay` keeps, when it changed.
    fn write(&self, relay: &SpendRelay) {
        let kept = relay.kept();
        if self.last.borrow().as_ref() == Some(&kept) {
            return;
        }
        let Ok(json) = serde_json::to_string(&kept) else {
            return;
        };
        let written = self.table().and_then(|()| {
            self.sql.exec(
                "INSERT OR REPLACE INTO spend_relay (id, state) VALUES (1, ?)",
                vec![json.into()],
            )?;
            Ok(())
        });
        match written {
            Ok(()) => *self.last.borrow_mut() = Some(kept),
            Err(e) => worker::console_warn!("spend relay: its state could not be stored: {}", e),
        }
    }
}

fn now() -> UnixMillis {
    worker::js_sys::Date::now() as UnixMillis
}

impl SpendHost {
    /// The spend side of a relay object in `env`; its slices are named
    /// after a random name of this instance.
    pub(super) fn new(env: Env, storage: Storage) -> Self {
        let name = format!(
            "relay-{:08x}",
            (worker::js_sys::Math::random() * 4e9) as u64
        );
        SpendHost {
            env,
            store: Rc::new(Store {
                sql: storage.sql(),
                storage,
                last: RefCell::default(),
            }),
            relay: Rc::new(RefCell::new(SpendRelay::new(name))),
            outage: Rc::default(),
            renewing: Rc::default(),
            waiting: Rc::default(),
        }
    }

    /// An isolate's `/hold`, `/settle` or `/spend`.
    pub(super) async fn fetch(&self, op: &str, text: &str) -> Result<Response> {
        self.restore();
        let answer = self.step(op, text).await;
        self.store.write(&self.relay.borrow());
        self.renew();
        answer
    }

    /// The object's alarm: a relay evicted or restarted while it kept
    /// anything renews now (once, unless its loop runs), then keeps
    /// renewing until it is idle. A breaker relay sets no alarm.
    pub(super) async fn alarm(&self) -> Result<()> {
        self.restore();
        if !self.renewing.get() && !self.renewer().tick().await {
            self.renew();
        }
        Ok(())
    }

    /// Starts from what an earlier instance kept, the first time.
    fn restore(&self) {
        if let Some(kept) = self.store.read() {
            self.relay.borrow_mut().restore(kept, now());
        }
    }

    fn renewer(&self) -> Renewer {
        Renewer {
            env: self.env.clone(),
            relay: Rc::clone(&self.relay),
            outage: Rc::clone(&self.outage),
            waiting: Rc::clone(&self.waiting),
            store: Rc::clone(&self.store),
        }
    }

    async fn step(&self, op: &str, text: &str) -> Result<Response> {
        let bad = || Response::error("bad request", 400);
        match op {
            "/hold" => {
                let Ok(call) = serde_json::from_str::<HoldCall>(text) else {
                    return bad();
                };
                if !self.first_call(&call.route) {
                    return Response::error("a relay serves one cap", 400);
                }
                let mut step = self.relay.borrow_mut().hold(now(), &call);
                if step == HoldStep::Wait {
                    let (tell, told) = oneshot::channel();
                    self.waiting.borrow_mut().push(tell);
                    self.renew();
                    let _ = timeout(worker::Delay::from(WAIT_WITHIN), told).await;
                    step = self.relay.borrow_mut().hold_again(now(), &call);
                }
                match step {
                    HoldStep::Answer(answer) => json(&answer),
                    _ => self.pass::<HoldAnswer>("hold", &call.route, &call).await,
                }
            }
            "/settle" => {
                let Ok(call) = serde_json::from_str::<SettleCall>(text) else {
                    return bad();
                };
                if !self.first_call(&call.route) {
                    return Response::error("a relay serves one cap", 400);
                }
                let step = self.relay.borrow_mut().settle(now(), call);
                match step {
                    Ok((standing, rest)) => {
                        if let Some(rest) = rest {
                            // The holds the object granted: released there.
                            let _ = self.pass::<Standing>("settle", &rest.route, &rest).await;
                        }
                        json(&standing)
                    }
                    Err(call) => self.pass::<Standing>("settle", &call.route, &call).await,
                }
            }
            _ => {
                let Ok(call) = serde_json::from_str::<SpendCall>(text) else {
                    return bad();
                };
                if !self.first_call(&call.route) {
                    return Response::error("a relay serves one cap", 400);
                }
                let step = self.relay.borrow_mut().spend(now(), call);
                match step {
                    Ok(standing) => json(&standing),
                    Err(call) => self.pass::<Standing>("spend", &call.route, &call).await,
                }
            }
        }
    }

    /// Whether this relay serves `route`'s cap (the first call names it;
    /// the outage lines name it from then on).
    fn first_call(&self, route: &str) -> bool {
        if !self.relay.borrow().serves(route) {
            return false;
        }
        let mut outage = self.outage.borrow_mut();
        if *outage == Outage::default() {
            *outage = Outage::of_relay(&spend_key(route));
        }
        true
    }

    /// Passes an isolate's call on to the cap's object and answers with
    /// the object's answer, or 503 when it is out of reach (the isolate
    /// then counts on its own, as when its own call fails).
    async fn pass<T>(&self, op: &str, route: &str, body: &impl Serialize) -> Result<Response>
    where
        T: serde::de::DeserializeOwned + Serialize + AnswerStanding,
    {
        let key = spend_key(route);
        match call::<T>(&self.env, &self.outage, op, (BINDING, &key), body).await {
            Ok(a) => {
                self.relay.borrow_mut().saw(now(), a.standing());
                json(&a)
            }
            Err(_) => Response::error("the object is out of reach", 503),
        }
    }

    /// Keeps the renewal loop running while the relay has work: every
    /// [`TICK`] it sends the renewal that is due, until the relay is idle;
    /// meanwhile the alarm is set [`WAKE`] ahead, every half of it.
    fn renew(&self) {
        if self.renewing.replace(true) {
            return;
        }
        let renewer = self.renewer();
        let renewing = Rc::clone(&self.renewing);
        spawn_local(async move {
            let mut armed: Option<UnixMillis> = None;
            loop {
                if renewer.tick().await {
                    renewing.set(false);
                    return;
                }
                let half = WAKE.as_millis() as UnixMillis / 2;
                if armed.is_none_or(|at| now() >= at + half) {
                    armed = Some(now());
                    if let Err(e) = renewer.store.storage.set_alarm(WAKE).await {
                        worker::console_warn!("spend relay: its alarm could not be set: {}", e);
                    }
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
