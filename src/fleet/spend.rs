//! Fleet-wide spend caps, sans-IO: a route's spending per UTC day kept in
//! one Durable Object per route (named `spend:<route>`), so that a daily
//! budget holds across every isolate.
//!
//! The object folds additions into its [`Tally`] (a new UTC day, by its
//! clock, starts from nothing) and answers with it. The isolate's
//! [`FleetSpend`] is the client's [`SpendLedger`]: it decides from memory
//! (the last tally the object answered, plus what this isolate has sent
//! since that is not in it yet) and sends each request's cost in the
//! background, one call per request on a capped route, whose answer
//! updates the view. A view older than its time to live is refreshed in the
//! background while it keeps answering. When the object
//! cannot be reached, the client's own count still caps the route (each
//! isolate then holds the budget on its own).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::{Rc, Weak};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::engine::cost::SpendLedger;
use crate::platform::{millis, UnixMillis};
use crate::policy::price::Cost;
use crate::policy::spend::Tally;

/// The name of `route`'s spend object.
pub fn spend_key(route: &str) -> String {
    format!("spend:{route}")
}

/// What an isolate sends a route's spend object (`POST http://do/spend`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpendCall {
    /// The route.
    pub route: String,
    /// Picodollars spent since this isolate's last call (0: only asking).
    pub add: u64,
}

/// The object's side: `stored` (none yet: nothing spent) with `add`
/// picodollars spent at `now` folded in.
pub fn fold_spend(stored: Option<Tally>, now: UnixMillis, add: u64) -> Tally {
    let mut tally = stored.unwrap_or_default();
    tally.add(now, Cost::from_picodollars(add));
    tally
}

/// How an isolate reaches the spend objects.
pub trait SpendLink {
    /// Sends `call` in the background; the object's tally after it goes to
    /// `inbox` (nothing when the call fails).
    fn spend(&self, call: SpendCall, inbox: SpendInbox);
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
            Some(tally) => r.view = Some(r.view.map_or(tally, |v| v.newest(tally))),
            None => r.unsent = r.unsent.saturating_add(sent),
        }
    }
}

/// One route's spending as this isolate knows it.
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

/// The isolate's fleet-wide [`SpendLedger`].
pub struct FleetSpend<L: SpendLink> {
    link: L,
    ttl: Duration,
    routes: Rc<RefCell<BTreeMap<String, Route>>>,
}

impl<L: SpendLink> FleetSpend<L> {
    /// A ledger over `link`; a view is fresh for `ttl`.
    pub fn new(link: L, ttl: Duration) -> Self {
        FleetSpend {
            link,
            ttl,
            routes: Rc::default(),
        }
    }

    /// Sends `add` more picodollars and whatever is unsent; with nothing to
    /// send, asks only when `ask`.
    fn send(&self, route: &str, now: UnixMillis, add: u64, ask: bool) {
        let call = {
            let mut routes = self.routes.borrow_mut();
            let r = routes.entry(route.to_owned()).or_default();
            let add = add.saturating_add(std::mem::take(&mut r.unsent));
            if add == 0 && !ask {
                return;
            }
            r.in_flight = r.in_flight.saturating_add(add);
            r.asked_at = Some(now);
            SpendCall {
                route: route.to_owned(),
                add,
            }
        };
        self.link
            .spend(call, SpendInbox(Rc::downgrade(&self.routes)));
    }
}

impl<L: SpendLink> SpendLedger for FleetSpend<L> {
    fn fleet_spent(&self, route: &str, now: UnixMillis) -> Option<Tally> {
        let stale = self.routes.borrow().get(route).is_none_or(|r| {
            r.asked_at
                .is_none_or(|at| now.saturating_sub(at) >= millis(self.ttl))
        });
        self.send(route, now, 0, stale);
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

    fn add(&self, route: &str, now: UnixMillis, cost: Cost) {
        self.send(route, now, cost.picodollars(), false);
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

    /// Noon, 2026-12-01 UTC.
    const NOON: UnixMillis = 1_796_126_400_000;

    /// 100 input tokens at $3 and 50 output at $15 per million: $0.00105.
    fn answer() -> crate::testing::Reply {
        let body = serde_json::json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
            "content": [{ "type": "text", "text": "ok" }], "stop_reason": "end_turn",
            "usage": { "input_tokens": 100, "output_tokens": 50 }
        });
        reply(200)
            .header("content-type", "application/json")
            .body(body.to_string())
    }

    /// An isolate: a client whose `default` route may spend $0.0015 a day,
    /// sharing its spending through `object`.
    fn isolate(p: &FakePlatform, object: &FakeSpendObject) -> Client<FakePlatform> {
        let config = serde_json::json!({
            "providers": { "a": { "kind": "anthropic", "baseUrl": "https://a.test", "apiKey": "sk",
                "models": { "claude-x": { "inputPricePerMtok": 3, "outputPricePerMtok": 15 } } } },
            "routes": { "default": [{ "provider": "a", "model": "claude-x" }] },
            "retry": { "maxAttempts": 1 },
            "cost": { "routes": { "default": { "dailyBudgetUsd": 0.0015 } } }
        });
        let ledger = FleetSpend::new(object.clone(), Duration::from_secs(1));
        Config::parse(&config.to_string())
            .unwrap()
            .client_builder(p.clone(), Vec::new(), &|_| None)
            .unwrap()
            .spend_ledger(Rc::new(ledger))
            .build()
    }

    fn ask(p: &FakePlatform, c: &Client<FakePlatform>) -> Result<(), Error> {
        let req = ChatRequest::new(vec![Message::text(Role::User, "hi")]);
        block_on(p, c.chat(req)).map(|_| ())
    }

    #[test]
    fn the_budget_holds_across_two_isolates() {
        let p = FakePlatform::new().at(NOON);
        let object = FakeSpendObject::new(&p);
        let (a, b) = (isolate(&p, &object), isolate(&p, &object));
        p.script("https://a.test", [answer(), answer()]);
        // Each isolate spends $0.00105, under the budget on its own.
        ask(&p, &a).expect("a is under budget");
        ask(&p, &b).expect("b is under budget: the fleet had not heard of a yet");
        object.pump();
        assert_eq!(
            object.tally("default"),
            Some(Tally {
                day: 20_788,
                spent: 2_100_000_000
            }),
            "both isolates' spending, in picodollars"
        );
        assert_eq!(
            a.spend()[0].spent_usd.to_string(),
            "0.00105",
            "a's view is a's answer"
        );
        // Past the view's time to live, a asks again; until the answer
        // comes, the stale view decides.
        p.advance(Duration::from_secs(1));
        p.script("https://a.test", [answer()]);
        ask(&p, &a).expect("the stale view is still under budget");
        object.pump();
        let spent = a.spend();
        assert_eq!(spent[0].spent_usd.to_string(), "0.00315");
        assert!(spent[0].exhausted);
        let err = ask(&p, &a).expect_err("spent fleet-wide");
        assert!(matches!(err, Error::SpendCapReached { .. }), "{err:?}");
        // b's own call was answered after a's: it knows both already.
        assert_eq!(b.spend()[0].spent_usd.to_string(), "0.0021");
        assert!(matches!(ask(&p, &b), Err(Error::SpendCapReached { .. })));
        assert_eq!(p.requests_to("https://a.test"), 3, "no call once spent");

        // A new UTC day, by the object's clock too.
        p.advance(Duration::from_millis(12 * 3600 * 1000));
        p.script("https://a.test", [answer()]);
        ask(&p, &a).expect("a new day");
        object.pump();
        assert_eq!(object.tally("default").map(|t| t.day), Some(20_789));
    }

    #[test]
    fn an_unreachable_object_leaves_each_isolate_its_own_count() {
        let p = FakePlatform::new().at(NOON);
        let object = FakeSpendObject::new(&p);
        object.set_down(true);
        let a = isolate(&p, &object);
        p.script("https://a.test", [answer(), answer()]);
        ask(&p, &a).unwrap();
        object.pump();
        ask(&p, &a).unwrap();
        object.pump();
        assert!(
            matches!(ask(&p, &a), Err(Error::SpendCapReached { .. })),
            "the isolate's own count caps it"
        );
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

    #[test]
    fn the_object_folds_additions_by_its_own_utc_day() {
        let t = fold_spend(None, NOON, 5);
        assert_eq!(
            t,
            Tally {
                day: 20_788,
                spent: 5
            }
        );
        assert_eq!(fold_spend(Some(t), NOON + 1, 7).spent, 12);
        assert_eq!(fold_spend(Some(t), NOON + 12 * 3600 * 1000, 7).spent, 7);
        let stored = serde_json::to_string(&t).unwrap();
        assert_eq!(stored, r#"{"day":20788,"spent":5}"#);
        assert_eq!(spend_key("default"), "spend:default");
    }
}
