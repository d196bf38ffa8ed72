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

/// What a request's data point is made of, kept as the request ends and
/// made into a [`DataPoint`] only when a host takes it (a Worker without
/// the dataset never does): the log line's route and answering entry moved,
/// not copied.
#[derive(Debug)]
pub(super) struct PointSource {
    path: String,
    route: Option<String>,
    served_by: Option<String>,
    status: u16,
    latency_ms: u64,
    attempts: usize,
    tried: usize,
    cost: Option<Cost>,
}

impl PointSource {
    /// Takes what the point needs out of `log`, once its line is written.
    pub(super) fn of(log: &mut LogLine<'_>) -> PointSource {
        PointSource {
            path: log.path.to_owned(),
            route: log.route.take(),
            served_by: log.served_by.take(),
            status: log.status,
            latency_ms: log.latency_ms,
            attempts: log.attempts,
            tried: log.trail.len(),
            cost: log.cost.and_then(|b| b.total),
        }
    }
}

impl DataPoint {
    pub(super) fn of(log: PointSource) -> DataPoint {
        let route = log.route.unwrap_or_default();
        let (provider, model) = log
            .served_by
            .as_deref()
            .and_then(|s| s.split_once('/'))
            .map_or((String::new(), String::new()), |(p, m)| {
                (p.into(), m.into())
            });
        let cost = log.cost;
        let index = if route.is_empty() {
            log.path.clone()
        } else {
            route.clone()
        };
        let mut blobs = Vec::with_capacity(6);
        blobs.extend([log.path, route, provider, model, log.status.to_string()]);
        blobs.extend(cost.map(|c| c.to_string()));
        let mut doubles = Vec::with_capacity(5);
        doubles.extend([
            f64::from(log.status),
            log.latency_ms as f64,
            log.attempts as f64,
            log.tried as f64,
        ]);
        doubles.extend(cost.map(Cost::usd));
        DataPoint {
            index,
            blobs,
            doubles,
        }
    }
}
