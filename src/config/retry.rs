//! The `retry` and `budget` sections (and an entry's `retry`), each checked
//! into its policy.

use serde::Deserialize;

use super::issues::Issues;
use crate::policy::backoff::RetryPolicy;
use crate::policy::budget::BudgetPolicy;

const MAX_ATTEMPTS: u32 = 10;

/// Retry settings; every field optional, defaults from [`RetryPolicy`].
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RetryConfig {
    /// Attempts per provider per request, the first included (1–10).
    pub(crate) max_attempts: Option<u32>,
    /// The first backoff cap.
    pub(crate) base_delay_ms: Option<u64>,
    /// The largest backoff and the longest Retry-After honoured.
    pub(crate) max_delay_ms: Option<u64>,
    /// The longest wait for a rate-limited entry while a later one can serve
    /// (last, and optional in the sequence form too).
    #[serde(default)]
    pub(crate) rate_limit_wait_ms: Option<u64>,
}

/// Retry budget settings; defaults from [`BudgetPolicy`].
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct BudgetConfig {
    /// Retry tokens earned per first attempt (0–1).
    pub(crate) ratio: Option<f64>,
    /// Retry tokens earned per second regardless of traffic.
    pub(crate) floor_per_sec: Option<f64>,
    /// The most tokens saved up.
    pub(crate) capacity: Option<f64>,
}

impl RetryConfig {
    /// The policy, over `base`.
    pub(crate) fn policy(&self, path: &str, base: RetryPolicy, issues: &mut Issues) -> RetryPolicy {
        let p = RetryPolicy {
            max_attempts: issues.count(
                path,
                "maxAttempts",
                self.max_attempts,
                base.max_attempts,
                MAX_ATTEMPTS,
            ),
            base_delay: issues.ms_at(path, "baseDelayMs", self.base_delay_ms, base.base_delay),
            max_delay: issues.ms_at(path, "maxDelayMs", self.max_delay_ms, base.max_delay),
            rate_limit_wait: issues.ms_at(
                path,
                "rateLimitWaitMs",
                self.rate_limit_wait_ms,
                base.rate_limit_wait,
            ),
        };
        if p.base_delay > p.max_delay {
            issues.add_at(path, "baseDelayMs", "must not exceed maxDelayMs");
        }
        p
    }
}

impl BudgetConfig {
    /// The policy.
    pub(crate) fn policy(&self, path: &str, issues: &mut Issues) -> BudgetPolicy {
        let d = BudgetPolicy::default();
        let capacity = match self.capacity {
            None => d.capacity,
            Some(c) if c.is_finite() && (0.0..=1e6).contains(&c) => c,
            Some(_) => {
                issues.add_at(path, "capacity", "must be between 0 and 1000000");
                d.capacity
            }
        };
        let floor_per_sec = match self.floor_per_sec {
            None => d.floor_per_sec,
            Some(c) if c.is_finite() && (0.0..=1e6).contains(&c) => c,
            Some(_) => {
                issues.add_at(path, "floorPerSec", "must be between 0 and 1000000");
                d.floor_per_sec
            }
        };
        BudgetPolicy {
            ratio: issues.fraction(path, "ratio", self.ratio, d.ratio, true),
            floor_per_sec,
            capacity,
        }
    }
}
