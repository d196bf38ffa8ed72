//! One Analytics Engine data point per request, host-neutral: the Worker
//! writes it when an Analytics Engine dataset is bound as `ANALYTICS`.

use super::log::LogLine;
use crate::policy::price::Cost;

/// A request as an Analytics Engine data point. Blobs: path, route,
/// provider, model (the answering entry's, empty when none answered),
/// status as text, and when the cost is known the cost in US dollars as an
/// exact decimal. Doubles: status, latency in ms, attempts that made a call,
/// attempts in all (skipped entries included), and when the cost is known
/// the cost in dollars (no usage reported or no price: no blob6 and no
/// double5, never a zero). Index: the route (the path for requests without one).
#[derive(Debug, Clone, PartialEq)]
pub struct DataPoint {
    /// The sampling index (one).
    pub index: String,
    /// blob1 … blob5, and blob6 when the cost is known.
    pub blobs: Vec<String>,
    /// double1 … double4, and double5 when the cost is known.
    pub doubles: Vec<f64>,
}

impl DataPoint {
    pub(super) fn of(log: &LogLine<'_>) -> DataPoint {
        let route = log.route.clone().unwrap_or_default();
        let (provider, model) = log
            .served_by
            .as_deref()
            .and_then(|s| s.split_once('/'))
            .map_or((String::new(), String::new()), |(p, m)| {
                (p.into(), m.into())
            });
        let cost = log.cost.and_then(|b| b.total);
        DataPoint {
            index: if route.is_empty() {
                log.path.to_owned()
            } else {
                route.clone()
            },
            blobs: vec![
                log.path.to_owned(),
                route,
                provider,
                model,
                log.status.to_string(),
            ]
            .into_iter()
            .chain(cost.map(|c| c.to_string()))
            .collect(),
            doubles: vec![
                f64::from(log.status),
                log.latency_ms as f64,
                log.attempts as f64,
                log.trail.len() as f64,
            ]
            .into_iter()
            .chain(cost.map(Cost::usd))
            .collect(),
        }
    }
}
