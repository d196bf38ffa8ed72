//! One Analytics Engine data point per request, host-neutral: the Worker
//! writes it when an Analytics Engine dataset is bound as `ANALYTICS`.

use super::log::LogLine;

/// A request as an Analytics Engine data point. Blobs: path, route,
/// provider, model (the answering entry's, empty when none answered),
/// status as text. Doubles: status, latency in ms, attempts that made a
/// call, attempts in all (skipped entries included). Index: the route (the
/// path for requests without one).
#[derive(Debug, Clone, PartialEq)]
pub struct DataPoint {
    /// The sampling index (one).
    pub index: String,
    /// blob1 … blob5.
    pub blobs: Vec<String>,
    /// double1 … double4.
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
            ],
            doubles: vec![
                f64::from(log.status),
                log.latency_ms as f64,
                log.attempts as f64,
                log.trail.len() as f64,
            ],
        }
    }
}
