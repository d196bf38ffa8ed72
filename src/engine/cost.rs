//! The client's cost book: prices, each route's ordering and spend cap, and
//! what was spent (per provider and model, and per cap and UTC day).
//!
//! A cap is configured on a route and counts what the route's entries
//! (provider and model) spend, however a request reaches them: the route,
//! another route sharing an entry, `provider/model`, the model's own name.
//!
//! A request's route is planned once, at the start of its walk: an entry a
//! spent cap counts against is left out unless the cap admits it past its
//! budget (or the request is refused), and `cheapest` reorders what is
//! left. Before an entry is called, what the request may cost on it (its
//! input estimated from its text, its output at `max_tokens`, priced) is
//! held on each of its caps, here and fleet-wide, or the entry is refused
//! when that does not fit. What each attempt cost is booked when the walk
//! ends (or its stream is dropped), from the usage its provider reported,
//! and the holds are settled with it.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use serde::Serialize;

use crate::chat::{ChatRequest, Usage};
use crate::engine::route::Entry;
use crate::error::{Attempt, Error};
use crate::platform::UnixMillis;
use crate::policy::cheapest::{cheapest, expected_usage, Strategy};
use crate::policy::price::{Cost, Prices};
use crate::policy::spend::{day_end, utc_day, OverBudget, SpendCap, Tally};
use crate::provider::LocalFuture;

/// A route's cost settings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RouteCost {
    /// How its entries are ordered.
    pub strategy: Strategy,
    /// Its daily budget, if any.
    pub cap: Option<SpendCap>,
}

/// Prices and the routes' cost settings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CostPolicy {
    /// Prices by provider and model.
    pub prices: Prices,
    /// Routes' cost settings, by route name.
    pub routes: BTreeMap<String, RouteCost>,
}

/// What the fleet answered a hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FleetHold {
    /// Held fleet-wide, under this id (named again when it is settled).
    Granted(String),
    /// What is booked and held fleet-wide leaves no room for it.
    Refused,
}

/// Where a spend cap's daily spending is kept beyond this client: the
/// Worker's fleet keeps it in a Durable Object, so a budget holds across
/// isolates. A cap is named by its route. Only [`SpendLedger::hold`] is
/// awaited: the spend known fleet-wide is a cached view, and settles are
/// sent in the background.
pub trait SpendLedger {
    /// What the fleet was last known to have booked on `cap` (with this
    /// client's settles it had counted), if anything is known.
    fn fleet_spent(&self, cap: &str, now: UnixMillis) -> Option<Tally>;
    /// Holds `amount` on `cap` until settled or for `ttl`, if what the
    /// fleet has booked and held leaves room for it under `budget`. `None`
    /// when the fleet cannot be reached (this client's count decides).
    fn hold<'a>(
        &'a self,
        cap: &'a str,
        amount: Cost,
        budget: Cost,
        ttl: Duration,
        now: UnixMillis,
    ) -> LocalFuture<'a, Option<FleetHold>>;
    /// Releases `holds` on `cap` and books `cost` spent at `at`, in one
    /// step.
    fn settle(&self, cap: &str, holds: Vec<String>, at: UnixMillis, cost: Cost);
}

/// A route's spend today, for `/health`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SpendHealth {
    /// The route.
    pub route: String,
    /// Its daily budget in dollars.
    pub budget_usd: Cost,
    /// What was spent today, as far as this client knows.
    pub spent_usd: Cost,
    /// Whether the budget is spent.
    pub exhausted: bool,
    /// When the day ends and the budget is whole again.
    pub resets_at: UnixMillis,
}

/// What one provider's model cost since this client started.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelCost {
    /// The provider id.
    pub provider: String,
    /// The model.
    pub model: String,
    /// Dollars spent, from reported usage.
    pub usd: Cost,
    /// Attempts with a cost.
    pub attempts: u64,
}

/// One provider's cost so far, by model: the dollars and the attempts.
type ModelTotals = BTreeMap<String, (Cost, u64)>;

/// The caps an entry counts against, by provider, then model.
type Covers = BTreeMap<String, BTreeMap<String, Vec<String>>>;

/// How long a hold outlives its request's deadline before the fleet lets
/// it lapse: a request that ends is settled at once; this only bounds
/// what a request whose isolate died holds.
pub(crate) const HOLD_MARGIN: Duration = Duration::from_secs(60);

/// The cost policy and what was spent.
#[derive(Default)]
pub(crate) struct CostBook {
    pub(crate) policy: CostPolicy,
    /// Every capped route's entries: a cap counts what they spend, however
    /// a request reached them.
    covers: Covers,
    /// By provider, then model: looked up by `&str`, so booking an
    /// attempt allocates only for a model's first.
    totals: RefCell<BTreeMap<String, ModelTotals>>,
    /// Booked, by cap.
    spend: RefCell<BTreeMap<String, Tally>>,
    /// Held by this client's requests in flight, by cap, in picodollars.
    held: RefCell<BTreeMap<String, u64>>,
    ledger: Option<Rc<dyn SpendLedger>>,
}

/// What one request holds on one cap until it ends: released when
/// dropped (a request that failed, was cancelled or was dropped), or
/// settled with the cost booked when its run books it.
pub(crate) struct Hold {
    book: Rc<CostBook>,
    cap: String,
    amount: Cost,
    /// The fleet's id for it, when the fleet holds it too.
    id: Option<String>,
    at: UnixMillis,
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.book.release(&self.cap, self.amount);
        if let (Some(id), Some(ledger)) = (self.id.take(), &self.book.ledger) {
            ledger.settle(&self.cap, vec![id], self.at, Cost::default());
        }
    }
}

impl CostBook {
    /// The book of `policy` over `routes` (every capped route's entries
    /// count against its cap).
    pub(crate) fn new(
        policy: CostPolicy,
        ledger: Option<Rc<dyn SpendLedger>>,
        routes: &BTreeMap<String, Vec<Entry>>,
    ) -> Self {
        let mut covers = Covers::new();
        for (name, rc) in &policy.routes {
            if rc.cap.is_none() {
                continue;
            }
            for e in routes.get(name).into_iter().flatten() {
                let caps = covers
                    .entry(e.provider.clone())
                    .or_default()
                    .entry(e.model.clone())
                    .or_default();
                if !caps.contains(name) {
                    caps.push(name.clone());
                }
            }
        }
        CostBook {
            policy,
            covers,
            ledger,
            ..CostBook::default()
        }
    }

    /// Whether there is anything to book: a price or a route setting.
    pub(crate) fn is_empty(&self) -> bool {
        self.policy.prices.is_empty() && self.policy.routes.is_empty()
    }

    /// Whether some cap counts what an entry spends.
    pub(crate) fn has_caps(&self) -> bool {
        !self.covers.is_empty()
    }

    /// The caps `provider`'s `model` counts against.
    fn caps_of(&self, provider: &str, model: &str) -> &[String] {
        self.covers
            .get(provider)
            .and_then(|m| m.get(model))
            .map_or(&[], Vec::as_slice)
    }

    /// What `cap` booked today: the larger of this client's count and the
    /// fleet's last known one (each includes what the other has seen of
    /// this client's spending, so they are not added).
    pub(crate) fn spent(&self, cap: &str, now: UnixMillis) -> Cost {
        let local = self.spend.borrow().get(cap).copied().unwrap_or_default();
        let fleet = self.ledger.as_ref().and_then(|l| l.fleet_spent(cap, now));
        fleet.map_or(local, |f| f.newest(local)).today(now)
    }

    /// What this client's requests in flight hold on `cap`.
    fn held(&self, cap: &str) -> Cost {
        Cost::from_picodollars(self.held.borrow().get(cap).copied().unwrap_or(0))
    }

    fn release(&self, cap: &str, amount: Cost) {
        if let Some(h) = self.held.borrow_mut().get_mut(cap) {
            *h = h.saturating_sub(amount.picodollars());
        }
    }

    /// The refusal of `cap`.
    fn refusal(&self, name: &str, cap: SpendCap, now: UnixMillis) -> Error {
        let resets_at = day_end(utc_day(now));
        Error::SpendCapReached {
            route: name.to_owned(),
            budget: cap.daily.to_string(),
            resets_at,
            retry_after: Duration::from_millis(resets_at - now),
            cheaper_only: matches!(cap.over, OverBudget::MaxPrice(_)),
        }
    }

    /// The first cap that keeps `e` out: one `e` counts against whose
    /// budget is spent and which does not admit `e` past it.
    fn keeps_out(&self, e: &Entry, now: UnixMillis) -> Option<(&str, SpendCap)> {
        let price = self.policy.prices.get(&e.provider, &e.model);
        self.caps_of(&e.provider, &e.model).iter().find_map(|name| {
            let cap = self.policy.routes.get(name)?.cap?;
            let out = self.spent(name, now) >= cap.daily && !cap.over.admits(price);
            out.then_some((name.as_str(), cap))
        })
    }

    /// The chain `route` serves `req` from: without the entries a spent
    /// cap keeps out (every cap the entry counts against, not only the
    /// route's own), in the route's strategy's order. Refused with
    /// [`Error::SpendCapReached`] when no entry is left.
    pub(crate) fn plan<'c>(
        &self,
        route: Option<&str>,
        chain: Cow<'c, [Entry]>,
        req: &ChatRequest,
        now: UnixMillis,
    ) -> Result<Cow<'c, [Entry]>, Error> {
        let prices = &self.policy.prices;
        let mut chain = chain;
        if !self.covers.is_empty() && chain.iter().any(|e| self.keeps_out(e, now).is_some()) {
            let mut refusal = None;
            let allowed: Vec<Entry> = chain
                .iter()
                .filter(|e| match self.keeps_out(e, now) {
                    Some((name, cap)) => {
                        refusal.get_or_insert_with(|| self.refusal(name, cap, now));
                        false
                    }
                    None => true,
                })
                .cloned()
                .collect();
            if allowed.is_empty() {
                if let Some(refusal) = refusal {
                    return Err(refusal);
                }
            }
            chain = Cow::Owned(allowed);
        }
        let Some(rc) = route.and_then(|r| self.policy.routes.get(r)) else {
            return Ok(chain);
        };
        if rc.strategy == Strategy::Cheapest && chain.len() > 1 {
            let pairs: Vec<(&str, &str)> = chain
                .iter()
                .map(|e| (e.provider.as_str(), e.model.as_str()))
                .collect();
            let order = cheapest(&pairs, prices, &expected_usage(req));
            if order.iter().enumerate().any(|(i, &j)| i != j) {
                let ordered = order.iter().map(|&i| chain[i].clone()).collect();
                chain = Cow::Owned(ordered);
            }
        }
        Ok(chain)
    }

    /// Holds on every cap `entry` counts against what a request of
    /// `usage` may cost on it, before it is called: refused with
    /// [`Error::SpendCapReached`] when what is booked and held (here, then
    /// fleet-wide) leaves no room for it. Entries a cap admits past its
    /// budget and unpriced ones hold nothing (the plan keeps the latter out
    /// once the budget is spent). The fleet lets a hold lapse after `ttl`.
    pub(crate) async fn hold(
        self: &Rc<Self>,
        entry: &Entry,
        usage: &Usage,
        now: UnixMillis,
        ttl: Duration,
    ) -> Result<Vec<Hold>, Error> {
        let mut holds = Vec::new();
        let price = self.policy.prices.get(&entry.provider, &entry.model);
        for name in self.caps_of(&entry.provider, &entry.model) {
            let Some(cap) = self.policy.routes.get(name).and_then(|r| r.cap) else {
                continue;
            };
            let Some(amount) = price
                .filter(|p| !cap.over.admits(Some(p)))
                .map(|p| p.cost(usage))
            else {
                continue;
            };
            let committed = self.spent(name, now).plus(self.held(name));
            if committed.plus(amount) > cap.daily {
                return Err(self.refusal(name, cap, now));
            }
            // Held here before the fleet is asked, so that this client's
            // other requests count it while the answer is on its way.
            *self.held.borrow_mut().entry(name.clone()).or_default() += amount.picodollars();
            let mut hold = Hold {
                book: Rc::clone(self),
                cap: name.clone(),
                amount,
                id: None,
                at: now,
            };
            if let Some(ledger) = &self.ledger {
                match ledger.hold(name, amount, cap.daily, ttl, now).await {
                    Some(FleetHold::Granted(id)) => hold.id = Some(id),
                    Some(FleetHold::Refused) => return Err(self.refusal(name, cap, now)),
                    // Out of reach: this client's own count decided.
                    None => {}
                }
            }
            holds.push(hold);
        }
        Ok(holds)
    }

    /// Books the cost of `attempts`: each one's in its provider and model's
    /// total, and in every cap its entry counts against, with `holds`
    /// settled (released, fleet-wide in the same call as the booking).
    pub(crate) fn book(&self, attempts: &[Attempt], holds: Vec<Hold>) {
        let mut caps: BTreeMap<String, (Cost, UnixMillis, Vec<String>)> = BTreeMap::new();
        {
            let mut totals = self.totals.borrow_mut();
            for a in attempts {
                let Some(cost) = self.policy.prices.attempt_cost(a) else {
                    continue;
                };
                let at = a.started_at + crate::platform::millis(a.duration);
                for cap in self.caps_of(&a.provider, &a.model) {
                    let c = caps.entry(cap.clone()).or_default();
                    c.0 = c.0.plus(cost);
                    c.1 = c.1.max(at);
                }
                let models = match totals.get_mut(&a.provider) {
                    Some(m) => m,
                    None => totals.entry(a.provider.clone()).or_default(),
                };
                let total = match models.get_mut(&a.model) {
                    Some(t) => t,
                    None => models.entry(a.model.clone()).or_default(),
                };
                *total = (total.0.plus(cost), total.1 + 1);
            }
        }
        for mut hold in holds {
            self.release(&hold.cap, std::mem::take(&mut hold.amount));
            let c = caps.entry(hold.cap.clone()).or_default();
            c.1 = c.1.max(hold.at);
            c.2.extend(hold.id.take());
        }
        for (cap, (cost, at, ids)) in caps {
            if cost > Cost::default() {
                self.spend
                    .borrow_mut()
                    .entry(cap.clone())
                    .or_default()
                    .add(at, cost);
            }
            if let Some(ledger) = &self.ledger {
                if cost > Cost::default() || !ids.is_empty() {
                    ledger.settle(&cap, ids, at, cost);
                }
            }
        }
    }

    /// Every model's cost so far, by provider and model.
    pub(crate) fn totals(&self) -> Vec<ModelCost> {
        self.totals
            .borrow()
            .iter()
            .flat_map(|(provider, models)| {
                models
                    .iter()
                    .map(move |(model, (usd, attempts))| ModelCost {
                        provider: provider.clone(),
                        model: model.clone(),
                        usd: *usd,
                        attempts: *attempts,
                    })
            })
            .collect()
    }

    /// Every capped route's spend today.
    pub(crate) fn spend_health(&self, now: UnixMillis) -> Vec<SpendHealth> {
        self.policy
            .routes
            .iter()
            .filter_map(|(route, rc)| {
                let cap = rc.cap?;
                let spent = self.spent(route, now);
                Some(SpendHealth {
                    route: route.clone(),
                    budget_usd: cap.daily,
                    spent_usd: spent,
                    exhausted: spent >= cap.daily,
                    resets_at: day_end(utc_day(now)),
                })
            })
            .collect()
    }
}
