//! The configuration of cost: prices (on a provider's `models` table, or
//! under `cost.prices` for providers written in code) and per route its
//! ordering and daily budget.
//!
//! ```json
//! {
//!   "providers": { "cheap": { "kind": "openai", "models": { "gpt-4.1-mini":
//!       { "inputPricePerMtok": 0.4, "outputPricePerMtok": 1.6, "cachedInputPricePerMtok": 0.1 } } } },
//!   "cost": {
//!     "prices": { "local/llama": { "inputPerMtok": 0, "outputPerMtok": 0 } },
//!     "routes": { "default": { "strategy": "cheapest", "dailyBudgetUsd": 20,
//!                              "overBudget": { "maxPricePerMtok": 2 } } }
//!   }
//! }
//! ```

use std::collections::BTreeMap;

use serde::Deserialize;

use super::Issues;
use super::ProviderConfig;
use crate::engine::cost::{CostPolicy, RouteCost};
use crate::policy::cheapest::Strategy;
use crate::policy::price::{Cost, Price, Prices};
use crate::policy::spend::{OverBudget, SpendCap};

/// `cost`: prices for providers not configured under `providers`, and the
/// routes' cost settings.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct CostConfig {
    /// Prices by `provider/model`, for providers written in code (custom
    /// and JS providers), or over a provider's `models` table.
    #[serde(default)]
    pub(crate) prices: BTreeMap<String, PriceConfig>,
    /// Cost settings by route name.
    #[serde(default)]
    pub(crate) routes: BTreeMap<String, RouteCostConfig>,
}

/// A model's prices in US dollars per million tokens.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct PriceConfig {
    /// Input tokens.
    pub(crate) input_per_mtok: f64,
    /// Output tokens.
    pub(crate) output_per_mtok: f64,
    /// Input tokens read from the prompt cache (default: the input price).
    #[serde(default)]
    pub(crate) cached_input_per_mtok: Option<f64>,
    /// Input tokens written to the prompt cache (default: the input price).
    #[serde(default)]
    pub(crate) cache_write_per_mtok: Option<f64>,
}

/// How a route orders its entries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum StrategyConfig {
    /// As configured.
    #[default]
    Ordered,
    /// Cheapest expected cost for the request first.
    Cheapest,
}

/// What a route does once its daily budget is spent.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) enum OverBudgetConfig {
    /// `"reject"`: answer 429 until the UTC day ends.
    Reject,
    /// `{"maxPricePerMtok": 1.0}`: serve only from entries whose input and
    /// output prices are both at most this.
    MaxPricePerMtok(f64),
}

/// A route's cost settings.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RouteCostConfig {
    /// `"ordered"` (the default) or `"cheapest"`.
    #[serde(default)]
    pub(crate) strategy: StrategyConfig,
    /// What the route may spend per UTC day, in US dollars.
    #[serde(default)]
    pub(crate) daily_budget_usd: Option<f64>,
    /// What it does once that is spent (default `"reject"`).
    #[serde(default)]
    pub(crate) over_budget: Option<OverBudgetConfig>,
}

/// A price in dollars per million tokens, checked; the issue at `path`
/// when it is negative, not finite or beyond a million.
fn per_mtok(issues: &mut Issues, path: &str, usd: f64) -> u64 {
    Price::per_mtok(usd).unwrap_or_else(|| {
        issues.add(
            path,
            "must be a number from 0 to 1000000 (dollars per million tokens)",
        );
        0
    })
}

impl CostConfig {
    /// The cost policy: every price (each provider's `models` table, then
    /// `cost.prices` over it) and every route's settings. `known` tells a
    /// provider id routes may name; `routes` are the validated route names.
    pub(super) fn policy(
        &self,
        providers: &BTreeMap<String, ProviderConfig>,
        known: &dyn Fn(&str) -> bool,
        has_route: &dyn Fn(&str) -> bool,
        issues: &mut Issues,
    ) -> CostPolicy {
        let mut prices = Prices::default();
        for (id, cfg) in providers {
            for (model, m) in cfg.models() {
                let path = format!("providers.{id}.models.{model}");
                let price = match (m.input_price_per_mtok, m.output_price_per_mtok) {
                    (Some(i), Some(o)) => (i, o),
                    (None, None)
                        if m.cached_input_price_per_mtok.is_none()
                            && m.cache_write_price_per_mtok.is_none() =>
                    {
                        continue
                    }
                    _ => {
                        issues.add(
                            &path,
                            "a price needs both inputPricePerMtok and outputPricePerMtok",
                        );
                        continue;
                    }
                };
                // Negative and non-finite prices in a models table are the
                // provider's check's to report; only the upper bound is ours.
                let mut price_at = |key: &str, usd: f64| {
                    Price::per_mtok(usd).unwrap_or_else(|| {
                        if usd.is_finite() && usd >= 0.0 {
                            per_mtok(issues, &format!("{path}.{key}"), usd);
                        }
                        0
                    })
                };
                let p = Price {
                    input: price_at("inputPricePerMtok", price.0),
                    output: price_at("outputPricePerMtok", price.1),
                    cached_input: m
                        .cached_input_price_per_mtok
                        .map(|u| price_at("cachedInputPricePerMtok", u)),
                    cache_write: m
                        .cache_write_price_per_mtok
                        .map(|u| price_at("cacheWritePricePerMtok", u)),
                };
                prices.insert(id.clone(), model.clone(), p);
            }
        }
        for (name, p) in &self.prices {
            let path = format!("cost.prices.{name}");
            let Some((provider, model)) = name
                .split_once('/')
                .filter(|(p, m)| !p.is_empty() && !m.is_empty())
            else {
                issues.add(&path, "name a model as provider/model");
                continue;
            };
            if !known(provider) {
                issues.add(&path, format!("unknown provider \"{provider}\""));
            }
            let mut price_at =
                |key: &str, usd: f64| per_mtok(issues, &format!("{path}.{key}"), usd);
            let price = Price {
                input: price_at("inputPerMtok", p.input_per_mtok),
                output: price_at("outputPerMtok", p.output_per_mtok),
                cached_input: p
                    .cached_input_per_mtok
                    .map(|u| price_at("cachedInputPerMtok", u)),
                cache_write: p
                    .cache_write_per_mtok
                    .map(|u| price_at("cacheWritePerMtok", u)),
            };
            prices.insert(provider, model, price);
        }
        let mut routes = BTreeMap::new();
        for (name, r) in &self.routes {
            let path = format!("cost.routes.{name}");
            if !has_route(name) {
                issues.add(&path, format!("unknown route \"{name}\""));
            }
            let cap = match (r.daily_budget_usd, r.over_budget) {
                (Some(usd), over) => {
                    let daily = Cost::from_usd(usd).unwrap_or_else(|| {
                        issues.add(
                            format!("{path}.dailyBudgetUsd"),
                            "must be a non-negative number of dollars",
                        );
                        Cost::default()
                    });
                    let over = match over {
                        None | Some(OverBudgetConfig::Reject) => OverBudget::Reject,
                        Some(OverBudgetConfig::MaxPricePerMtok(usd)) => OverBudget::MaxPrice(
                            per_mtok(issues, &format!("{path}.overBudget.maxPricePerMtok"), usd),
                        ),
                    };
                    Some(SpendCap { daily, over })
                }
                (None, Some(_)) => {
                    issues.add(format!("{path}.overBudget"), "needs dailyBudgetUsd");
                    None
                }
                (None, None) => None,
            };
            let strategy = match r.strategy {
                StrategyConfig::Ordered => Strategy::Ordered,
                StrategyConfig::Cheapest => Strategy::Cheapest,
            };
            routes.insert(name.clone(), RouteCost { strategy, cap });
        }
        CostPolicy { prices, routes }
    }
}
