//! The client's cost book: prices, each route's ordering and spend cap, and
//! what was spent (per provider and model, and per route and UTC day).
//!
//! A request's route is planned once, at the start of its walk: a spent
//! budget leaves only the entries under the cap's price (or refuses the
//! request), and `cheapest` reorders what is left. What each attempt cost is
//! booked when the walk ends (or its stream is dropped), from the usage its
//! provider reported.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use serde::Serialize;

use crate::chat::ChatRequest;
use crate::engine::client::Entry;
use crate::error::{Attempt, Error};
use crate::platform::UnixMillis;
use crate::policy::cheapest::{cheapest, expected_usage, Strategy};
use crate::policy::price::{Cost, Prices};
use crate::policy::spend::{day_end, utc_day, OverBudget, SpendCap, Tally};

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

/// Where a route's daily spending is kept beyond this client: the Worker's
/// fleet keeps it in a Durable Object, so a budget holds across isolates.
/// Both calls are synchronous: the spend known fleet-wide is a cached
/// view, and additions are sent in the background.
pub trait SpendLedger {
    /// What the fleet was last known to have spent on `route` (with this
    /// client's additions it had counted), if anything is known.
    fn fleet_spent(&self, route: &str, now: UnixMillis) -> Option<Tally>;
    /// Records `cost` spent on `route` at `now`.
    fn add(&self, route: &str, now: UnixMillis, cost: Cost);
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

/// The cost policy and what was spent.
#[derive(Default)]
pub(crate) struct CostBook {
    pub(crate) policy: CostPolicy,
    /// By provider, then model: looked up by `&str`, so booking an
    /// attempt allocates only for a model's first.
    totals: RefCell<BTreeMap<String, ModelTotals>>,
    spend: RefCell<BTreeMap<String, Tally>>,
    ledger: Option<Rc<dyn SpendLedger>>,
}

impl CostBook {
    pub(crate) fn new(policy: CostPolicy, ledger: Option<Rc<dyn SpendLedger>>) -> Self {
        CostBook {
            policy,
            ledger,
            ..CostBook::default()
        }
    }

    /// Whether there is anything to book: a price or a route setting.
    pub(crate) fn is_empty(&self) -> bool {
        self.policy.prices.is_empty() && self.policy.routes.is_empty()
    }

    /// What `route` spent today: the larger of this client's count and the
    /// fleet's last known one (each includes what the other has seen of
    /// this client's spending, so they are not added).
    pub(crate) fn spent(&self, route: &str, now: UnixMillis) -> Cost {
        let local = self.spend.borrow().get(route).copied().unwrap_or_default();
        let fleet = self.ledger.as_ref().and_then(|l| l.fleet_spent(route, now));
        fleet.map_or(local, |f| f.newest(local)).today(now)
    }

    /// The chain `route` serves `req` from: without a spent budget's
    /// excluded entries, in the route's strategy's order. Refused with
    /// [`Error::SpendCapReached`] when the budget is spent and no entry may
    /// serve.
    pub(crate) fn plan<'c>(
        &self,
        route: Option<&str>,
        chain: Cow<'c, [Entry]>,
        req: &ChatRequest,
        now: UnixMillis,
    ) -> Result<Cow<'c, [Entry]>, Error> {
        let Some((name, rc)) = route.and_then(|r| self.policy.routes.get_key_value(r)) else {
            return Ok(chain);
        };
        let prices = &self.policy.prices;
        let mut chain = chain;
        if let Some(cap) = rc.cap {
            let spent = self.spent(name, now);
            if spent >= cap.daily {
                let allowed: Vec<Entry> = chain
                    .iter()
                    .filter(|e| cap.over.admits(prices.get(&e.provider, &e.model)))
                    .cloned()
                    .collect();
                if allowed.is_empty() {
                    let resets_at = day_end(utc_day(now));
                    return Err(Error::SpendCapReached {
                        route: name.clone(),
                        budget: cap.daily.to_string(),
                        resets_at,
                        retry_after: Duration::from_millis(resets_at - now),
                        cheaper_only: matches!(cap.over, OverBudget::MaxPrice(_)),
                    });
                }
                chain = Cow::Owned(allowed);
            }
        }
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

    /// Books the cost of `attempts` of a request on `route`: each one's in
    /// its provider and model's total, and the sum in the route's spend.
    pub(crate) fn book(&self, route: Option<&str>, attempts: &[Attempt]) {
        let mut sum = None;
        let mut at = 0;
        {
            let mut totals = self.totals.borrow_mut();
            for a in attempts {
                let Some(cost) = self.policy.prices.attempt_cost(a) else {
                    continue;
                };
                at = at.max(a.started_at + crate::platform::millis(a.duration));
                sum = Some(cost.plus(sum.unwrap_or_default()));
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
        let (Some(cost), Some(route)) = (sum, route) else {
            return;
        };
        if self
            .policy
            .routes
            .get(route)
            .is_none_or(|r| r.cap.is_none())
        {
            return;
        }
        self.spend
            .borrow_mut()
            .entry(route.to_owned())
            .or_default()
            .add(at, cost);
        if let Some(ledger) = &self.ledger {
            ledger.add(route, at, cost);
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
