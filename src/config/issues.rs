//! [`Issues`]: the problems found while a configuration is checked, and the
//! checks of a duration, a fraction and a count that record them.

use std::time::Duration;

use crate::issue::ConfigIssue;

const MAX_MS: u64 = 24 * 3600 * 1000;

/// Collects issues while walking a configuration.
#[derive(Debug, Default)]
pub(crate) struct Issues(pub(crate) Vec<ConfigIssue>);

impl Issues {
    /// Records a problem at `path`.
    pub(crate) fn add(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.0.push(ConfigIssue::new(path, message));
    }

    /// Records a problem at `path.field` (`field` alone at the top, `path`
    /// alone without a field): the path is written only for a problem.
    pub(super) fn add_at(&mut self, path: &str, field: &str, message: &str) {
        let at = match (path.is_empty(), field.is_empty()) {
            (true, _) => field.to_string(),
            (_, true) => path.to_string(),
            _ => format!("{path}.{field}"),
        };
        self.0.push(ConfigIssue::new(at, message));
    }

    /// A duration in ms at `path.field`, checked to be positive and below a day.
    pub(super) fn ms_at(
        &mut self,
        path: &str,
        field: &str,
        v: Option<u64>,
        default: Duration,
    ) -> Duration {
        match v {
            None => default,
            Some(0) => {
                self.add_at(path, field, "must be greater than 0");
                default
            }
            Some(ms) if ms > MAX_MS => {
                self.add_at(path, field, &format!("must be at most {MAX_MS} (one day)"));
                default
            }
            Some(ms) => Duration::from_millis(ms),
        }
    }

    /// A fraction, checked to lie in `(0, 1]` (or `[0, 1]` when `zero_ok`).
    pub(super) fn fraction(
        &mut self,
        path: &str,
        field: &str,
        v: Option<f64>,
        default: f64,
        zero_ok: bool,
    ) -> f64 {
        match v {
            None => default,
            Some(x) if x.is_finite() && x <= 1.0 && (x > 0.0 || (zero_ok && x == 0.0)) => x,
            Some(_) => {
                self.add_at(
                    path,
                    field,
                    if zero_ok {
                        "must be between 0 and 1"
                    } else {
                        "must be greater than 0 and at most 1"
                    },
                );
                default
            }
        }
    }

    /// A count, checked to lie in `[1, max]`.
    pub(super) fn count(
        &mut self,
        path: &str,
        field: &str,
        v: Option<u32>,
        default: u32,
        max: u32,
    ) -> u32 {
        match v {
            None => default,
            Some(n) if (1..=max).contains(&n) => n,
            Some(_) => {
                self.add_at(path, field, &format!("must be between 1 and {max}"));
                default
            }
        }
    }
}
