//! Configuration of hedged requests: `hedge`, by route name.
//!
//! ```json
//! "hedge": { "default": { "after": 800, "maxExtra": 1, "budget": 0.1 } }
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::Issues;
use crate::engine::hedge::{HedgeAfter, HedgePolicy};

/// One route's hedging.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct HedgeConfig {
    /// Milliseconds after the first attempt began, or `"p95"`: the waiting
    /// entry's recent p95.
    pub(crate) after: HedgeAfterConfig,
    /// Entries asked besides the first (default 1).
    pub(crate) max_extra: Option<u32>,
    /// The share of the route's requests that may be hedged (default 0.1).
    pub(crate) budget: Option<f64>,
}

/// `after`: a number of milliseconds or `"p95"`.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(untagged)]
pub(crate) enum HedgeAfterConfig {
    /// Milliseconds.
    Ms(u64),
    /// A named figure.
    Named(HedgeFigure),
}

/// The figures `after` may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub(crate) enum HedgeFigure {
    /// The entry's recent p95.
    #[serde(rename = "p95")]
    P95,
}

/// The default share: a hedge for one request in ten at most, so that an
/// outage making every first attempt slow adds a tenth to the load, not
/// as much again.
const DEFAULT_BUDGET: f64 = 0.1;

/// Validates `hedge` against the routes it names.
pub(crate) fn hedges(
    cfg: &BTreeMap<String, HedgeConfig>,
    is_route: &dyn Fn(&str) -> bool,
    issues: &mut Issues,
) -> BTreeMap<String, HedgePolicy> {
    let mut out = BTreeMap::new();
    for (route, h) in cfg {
        let path = format!("hedge.{route}");
        if !is_route(route) {
            issues.add(&path, format!("unknown route \"{route}\""));
        }
        let after = match h.after {
            HedgeAfterConfig::Named(HedgeFigure::P95) => HedgeAfter::P95,
            HedgeAfterConfig::Ms(ms) => {
                HedgeAfter::Fixed(issues.ms_at(&path, "after", Some(ms), Duration::from_secs(1)))
            }
        };
        let policy = HedgePolicy {
            after,
            max_extra: issues.count(&path, "maxExtra", h.max_extra, 1, 10),
            budget: issues.fraction(&path, "budget", h.budget, DEFAULT_BUDGET, false),
        };
        out.insert(route.clone(), policy);
    }
    out
}
