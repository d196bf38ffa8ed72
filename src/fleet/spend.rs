//! Fleet-wide spend caps, sans-IO: a cap's spending per UTC day and the
//! holds of its requests in flight, kept in one Durable Object per cap
//! (named `spend:<route>`, the route it is configured on), so that a daily
//! budget holds across every isolate. The object's side is
//! [`SpendBook`](super::spend_object::SpendBook).
//!
//! The isolate's [`FleetSpend`] is the client's [`SpendLedger`]. A hold is
//! the one awaited call: the object grants it only if what is booked and
//! held fleet-wide leaves room for it, so concurrent requests through many
//! isolates cannot all pass a budget that has room for one. The rest is
//! sent in the background: a request's settle (its holds released and its
//! cost booked), whose answer updates the isolate's view, and a refresh of
//! a view older than its time to live. When the object cannot be reached,
//! the client's own count decides (each isolate then holds the budget on
//! its own), and an amount whose call failed goes again with the next one,
//! by the old `/spend` call every version of the object reads; its holds
//! lapse at their expiry.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::{Rc, Weak};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::spend_object::{HoldAnswer, HoldCall, SettleCall};
use super::LinkError;
use crate::engine::cost::{FleetHold, SpendLedger};
use crate::platform::{millis, UnixMillis};
use crate::policy::price::Cost;
use crate::policy::spend::Tally;
use crate::provider::LocalFuture;

/// The name of `route`'s spend object.
pub fn spend_key(route: &str) -> String {
    format!("spend:{route}")
}

/// What an isolate sends a cap's spend object to book an amount
/// (`POST http://do/spend`): the protocol from before holds, which every
/// version of the object reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpendCall {
    /// The cap (its route's name).
    pub route: String,
    /// Picodollars spent since this isolate's last call (0: only asking).
    pub add: u64,
}

/// How an isolate reaches the spend objects.
#[allow(async_fn_in_trait)] // single-threaded by design; futures are !Send on wasm
pub trait SpendLink {
    /// Sends `call` in the background; the object's tally after it goes to
    /// `inbox` (nothing when the call fails).
    fn spend(&self, call: SpendCall, inbox: SpendInbox);
    /// Sends `call` in the background, like [`SpendLink::spend`].
    fn settle(&self, call: SettleCall, inbox: SpendInbox);
    /// Asks for a hold and waits for the answer.
    async fn hold(&self, call: HoldCall) -> Result<HoldAnswer, LinkError>;
}

/// Where a spend object's answers come back. Holds no strong reference.
#[derive(Clone)]
pub struct SpendInbox(Weak<RefCell<BTreeMap<String, Route>>>);

impl SpendInbox {
    /// Delivers the object's answer to a call that carried `sent`
    /// picodollars of this isolate's spending, or `None` when the call
    /// failed (its spending then goes again with the next call: counted
    /// twice at worst, never lost, if the object did count it).
    pub fn deliver(&self, route: &str, sent: u64, answer: Option<Tally>) {
        let Some(routes) = self.0.upgrade() else {
            return;
        };
        let mut routes = routes.borrow_mut();
        let Some(r) = routes.get_mut(route) else {
            return;
        };
        r.in_flight = r.in_flight.saturating_sub(sent);
        match answer {
            Some(tally) => r.see(tally),
            None => r.unsent = r.unsent.saturating_add(sent),
        }
    }
}

/// One cap's spending as this isolate knows it.
#[derive(Debug, Default)]
pub(crate) struct Route {
    /// The object's last answer.
    view: Option<Tally>,
    /// When the object was last asked.
    asked_at: Option<UnixMillis>,
    /// Picodollars in calls not answered yet.
    in_flight: u64,
    /// Picodollars spent here and not sent (a failed call's).
    unsent: u64,
}

impl Route {
    fn see(&mut self, tally: Tally) {
        self.view = Some(self.view.map_or(tally, |v| v.newest(tally)));
    }
}

/// The isolate's fleet-wide [`SpendLedger`].
pub struct FleetSpend<L: SpendLink> {
    link: L,
    ttl: Duration,
    /// Names this isolate's holds (`<holder>-<n>`).
    holder: String,
    next_hold: Cell<u64>,
    routes: Rc<RefCell<BTreeMap<String, Route>>>,
}

impl<L: SpendLink> FleetSpend<L> {
    /// A ledger over `link` for the isolate `holder` (its holds are named
    /// after it); a view is fresh for `ttl`.
    pub fn new(link: L, ttl: Duration, holder: impl Into<String>) -> Self {
        FleetSpend {
            link,
            ttl,
            holder: holder.into(),
            next_hold: Cell::new(1),
            routes: Rc::default(),
        }
    }

    /// Sends `add` more picodollars and whatever is unsent, releasing
    /// `holds`; with nothing to send, asks only when `ask`.
    fn send(&self, route: &str, now: UnixMillis, add: u64, holds: Vec<String>, ask: bool) {
        let inbox = SpendInbox(Rc::downgrade(&self.routes));
        let (add, unsent) = {
            let mut routes = self.routes.borrow_mut();
            let r = routes.entry(route.to_owned()).or_default();
            let unsent = std::mem::take(&mut r.unsent);
            if add == 0 && unsent == 0 && holds.is_empty() && !ask {
                return;
            }
            r.in_flight = r.in_flight.saturating_add(add).saturating_add(unsent);
            r.asked_at = Some(now);
            (add, unsent)
        };
        if holds.is_empty() {
            let add = add.saturating_add(unsent);
            let call = SpendCall {
                route: route.to_owned(),
                add,
            };
            return self.link.spend(call, inbox);
        }
        let call = SettleCall {
            route: route.to_owned(),
            holds,
            add,
        };
        self.link.settle(call, inbox.clone());
        // What failed before goes by the call every object reads.
        if unsent > 0 {
            let call = SpendCall {
                route: route.to_owned(),
                add: unsent,
            };
            self.link.spend(call, inbox);
        }
    }
}

impl<L: SpendLink> SpendLedger for FleetSpend<L> {
    fn fleet_spent(&self, route: &str, now: UnixMillis) -> Option<Tally> {
        let stale = self.routes.borrow().get(route).is_none_or(|r| {
            r.asked_at
                .is_none_or(|at| now.saturating_sub(at) >= millis(self.ttl))
        });
        self.send(route, now, 0, Vec::new(), stale);
        let routes = self.routes.borrow();
        let r = routes.get(route)?;
        let mut tally = r.view?;
        // This isolate's spending the view does not hold yet.
        tally.add(
            now,
            Cost::from_picodollars(r.in_flight.saturating_add(r.unsent)),
        );
        Some(tally)
    }

    fn hold<'a>(
        &'a self,
        route: &'a str,
        amount: Cost,
        budget: Cost,
        ttl: Duration,
        _now: UnixMillis,
    ) -> LocalFuture<'a, Option<FleetHold>> {
        let n = self.next_hold.get();
        self.next_hold.set(n.wrapping_add(1));
        let id = format!("{}-{n}", self.holder);
        let call = HoldCall {
            route: route.to_owned(),
            id: id.clone(),
            amount: amount.picodollars(),
            budget: budget.picodollars(),
            ttl_ms: millis(ttl),
            slice: None,
        };
        Box::pin(async move {
            let answer = self.link.hold(call).await.ok()?;
            let mut routes = self.routes.borrow_mut();
            let r = routes.entry(route.to_owned()).or_default();
            r.see(answer.standing.tally());
            Some(match answer.granted {
                true => FleetHold::Granted(id),
                false => FleetHold::Refused,
            })
        })
    }

    fn settle(&self, route: &str, holds: Vec<String>, at: UnixMillis, cost: Cost) {
        self.send(route, at, cost.picodollars(), holds, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::{ChatRequest, Message, Role};
    use crate::engine::client::Client;
    use crate::error::Error;
    use crate::fleet::fake_spend::FakeSpendObject;
    use crate::testing::{block_on, reply, FakePlatform};
    use crate::Config;
    use futures_util::future::join_all;
    use std::future::Future;
    use std::task::Poll;

    /// Noon, 2026-12-01 UTC.
    const NOON: UnixMillis = 1_796_126_400_000;

    /// 100 input tokens at $3 and 50 output at $15 per million: $0.00105,
    /// after a second.
    fn answer() -> crate::testing::Reply {
        let body = serde_json::json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
            "content": [{ "type": "text", "text": "ok" }], "stop_reason": "end_turn",
            "usage": { "input_tokens": 100, "output_tokens": 50 }
        });
        reply(200)
            .header("content-type", "application/json")
            .body(body.to_string())
            .delay(Duration::from_secs(1))
    }

    /// An isolate: a client whose `default` route may spend $0.002 a day,
    /// sharing its spending through `object`.
    fn isolate(p: &FakePlatform, object: &FakeSpendObject, name: &str) -> Client<FakePlatform> {
        let config = serde_json::json!({
            "providers": { "a": { "kind": "anthropic", "baseUrl": "https://a.test", "apiKey": "sk",
                "models": { "claude-x": { "inputPricePerMtok": 3, "outputPricePerMtok": 15 } } } },
            "routes": { "default": [{ "provider": "a", "model": "claude-x" }] },
            "retry": { "maxAttempts": 1 },
            "cost": { "routes": { "default": { "dailyBudgetUsd": 0.002 } } }
        });
        let ledger = FleetSpend::new(object.clone(), Duration::from_secs(1), name);
        Config::parse(&config.to_string())
            .unwrap()
            .client_builder(p.clone(), Vec::new(), &|_| None)
            .unwrap()
            .spend_ledger(Rc::new(ledger))
            .build()
    }

    /// "hi" with `max_tokens` 50: held at 1 input token and 50 output,
    /// $0.000753.
    fn req() -> ChatRequest {
        let mut req = ChatRequest::new(vec![Message::text(Role::User, "hi")]);
        req.max_tokens = Some(50);
        req
    }

    async fn ask(c: &Client<FakePlatform>) -> Result<(), Error> {
        c.chat(req()).await.map(|_| ())
    }

    fn is_capped(r: &Result<(), Error>) -> bool {
        matches!(r, Err(Error::SpendCapReached { .. }))
    }

    #[test]
    fn a_hold_is_fleet_wide_across_two_isolates() {
        let p = FakePlatform::new().at(NOON);
        let object = FakeSpendObject::new(&p);
        let (a, b) = (isolate(&p, &object, "a"), isolate(&p, &object, "b"));
        p.script("https://a.test", [answer(), answer(), answer()]);
        // Three at once: two holds of $0.000753 fit under $0.002, a third
        // does not. a's own count would let its second one go; the
        // object, which holds b's too, refuses it.
        let out = block_on(&p, join_all([ask(&a), ask(&b), ask(&a)]));
        assert!(out[0].is_ok() && out[1].is_ok(), "{out:?}");
        assert!(is_capped(&out[2]), "{:?}", out[2]);
        assert_eq!(p.requests_to("https://a.test"), 2);
        assert_eq!(
            object.held("default"),
            (1_506_000_000, 2),
            "settles not arrived"
        );
        object.pump();
        assert_eq!(object.held("default"), (0, 0), "settled");
        assert_eq!(
            object.tally("default"),
            Some(Tally {
                day: 20_788,
                spent: 2_100_000_000
            }),
            "both isolates' reported usage"
        );
        // Spent fleet-wide: refused before any hold, through either.
        assert!(is_capped(&block_on(&p, ask(&a))));
        assert!(is_capped(&block_on(&p, ask(&b))));
        assert_eq!(p.requests_to("https://a.test"), 2, "no call once spent");
        assert_eq!(b.spend()[0].spent_usd.to_string(), "0.0021");

        // A new UTC day, by the object's clock too.
        p.advance(Duration::from_millis(12 * 3600 * 1000));
        p.script("https://a.test", [answer()]);
        block_on(&p, ask(&a)).expect("a new day");
        object.pump();
        assert_eq!(object.tally("default").map(|t| t.day), Some(20_789));
    }

    #[test]
    fn an_unreachable_object_leaves_each_isolate_its_own_count() {
        let p = FakePlatform::new().at(NOON);
        let object = FakeSpendObject::new(&p);
        object.set_down(true);
        let a = isolate(&p, &object, "a");
        p.script("https://a.test", [answer(), answer(), answer()]);
        // Its own holds still count: of three at once, two fit.
        let out = block_on(&p, join_all([ask(&a), ask(&a), ask(&a)]));
        assert_eq!(out.iter().filter(|r| r.is_ok()).count(), 2, "{out:?}");
        assert_eq!(p.requests_to("https://a.test"), 2);
        object.pump();
        assert!(is_capped(&block_on(&p, ask(&a))), "its own count caps it");
        // Back again: what failed to go is sent with the next call.
        object.set_down(false);
        p.advance(Duration::from_secs(1));
        let _ = a.spend();
        object.pump();
        assert_eq!(
            object.tally("default").map(|t| t.spent),
            Some(2_100_000_000)
        );
    }

    /// Polls `fut` once: the request holds and is sent, and waits.
    fn start<F: Future>(p: &FakePlatform, fut: &mut std::pin::Pin<Box<F>>) {
        block_on(
            p,
            std::future::poll_fn(|cx| {
                assert!(fut.as_mut().poll(cx).is_pending());
                Poll::Ready(())
            }),
        );
    }

    #[test]
    fn a_cancelled_request_releases_and_a_dead_isolate_s_hold_lapses() {
        let p = FakePlatform::new().at(NOON);
        let object = FakeSpendObject::new(&p);
        let (a, b) = (isolate(&p, &object, "a"), isolate(&p, &object, "b"));
        p.script("https://a.test", [answer(), answer()]);
        // Cancelled in flight: its hold goes at once, fleet-wide too.
        let mut cancelled = Box::pin(ask(&a));
        start(&p, &mut cancelled);
        assert_eq!(object.held("default"), (753_000_000, 1));
        drop(cancelled);
        object.pump();
        assert_eq!(object.held("default"), (0, 0));

        // An isolate that dies with two requests in flight never settles:
        // their holds lapse one request deadline (60 s) and a margin
        // (60 s) after they were taken. (It has a clock of its own: its
        // requests' timers die with it.)
        let dying = FakePlatform::new().at(NOON);
        dying.script("https://a.test", [answer(), answer()]);
        let dead = isolate(&dying, &object, "dead");
        let mut first = Box::pin(ask(&dead));
        let mut second = Box::pin(ask(&dead));
        start(&dying, &mut first);
        start(&dying, &mut second);
        std::mem::forget(first);
        std::mem::forget(second);
        assert_eq!(object.held("default"), (1_506_000_000, 2));
        assert!(is_capped(&block_on(&p, ask(&b))), "held by the dead one");
        p.advance(Duration::from_secs(120));
        assert_eq!(object.held("default").1, 2, "not yet");
        p.advance(Duration::from_millis(1));
        block_on(&p, ask(&b)).expect("lapsed: the budget is free again");
        assert_eq!(object.held("default"), (753_000_000, 1), "b's own");
    }
}
