//! The `breaker` section and each provider's `breakers` entry, checked into
//! a breaker policy.

use std::time::Duration;

use serde::Deserialize;

use super::issues::Issues;
use crate::policy::breaker::BreakerPolicy;

/// Breaker settings; defaults from [`BreakerPolicy`].
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct BreakerConfig {
    /// Consecutive failures that open it.
    pub(crate) failure_threshold: Option<u32>,
    /// Failure rate over the window that opens it, in (0, 1].
    pub(crate) failure_rate: Option<f64>,
    /// Verdicts in the sliding window.
    pub(crate) window: Option<u32>,
    /// Verdicts needed before the rate counts.
    pub(crate) minimum_calls: Option<u32>,
    /// The first opening's length.
    pub(crate) cooldown_ms: Option<u64>,
    /// The longest opening.
    pub(crate) max_cooldown_ms: Option<u64>,
    /// Probes at once in half-open.
    pub(crate) half_open_permits: Option<u32>,
    /// Probe successes that close it.
    pub(crate) success_threshold: Option<u32>,
}

impl BreakerConfig {
    /// The policy.
    pub(crate) fn policy(&self, path: &str, issues: &mut Issues) -> BreakerPolicy {
        let d = BreakerPolicy::default();
        let p = BreakerPolicy {
            failure_threshold: issues.count(
                path,
                "failureThreshold",
                self.failure_threshold,
                d.failure_threshold,
                10_000,
            ),
            failure_rate: issues.fraction(
                path,
                "failureRate",
                self.failure_rate,
                d.failure_rate,
                false,
            ),
            window: issues.count(path, "window", self.window, d.window, 10_000),
            minimum_calls: issues.count(
                path,
                "minimumCalls",
                self.minimum_calls,
                d.minimum_calls,
                10_000,
            ),
            cooldown: issues.ms_at(path, "cooldownMs", self.cooldown_ms, d.cooldown),
            max_cooldown: issues.ms_at(
                path,
                "maxCooldownMs",
                self.max_cooldown_ms,
                d.max_cooldown.max(
                    self.cooldown_ms
                        .map_or(d.max_cooldown, Duration::from_millis),
                ),
            ),
            half_open_permits: issues.count(
                path,
                "halfOpenPermits",
                self.half_open_permits,
                d.half_open_permits,
                1000,
            ),
            success_threshold: issues.count(
                path,
                "successThreshold",
                self.success_threshold,
                d.success_threshold,
                1000,
            ),
        };
        if p.minimum_calls > p.window {
            issues.add_at(path, "minimumCalls", "must not exceed window");
        }
        if p.cooldown > p.max_cooldown {
            issues.add_at(path, "cooldownMs", "must not exceed maxCooldownMs");
        }
        p
    }
}
